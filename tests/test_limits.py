"""Limits and results: defaults and validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scriptbridge._limits import LIMIT_ERRORS, Limits


def test_the_disk_quota_defaults() -> None:
    """A run may leave 64 MiB in at most 1,000 files and directories by default."""
    limits = Limits()
    assert (limits.max_out_bytes, limits.max_out_files) == (64 * 2**20, 1000)
    assert "DiskQuotaExceeded" in LIMIT_ERRORS


@pytest.mark.parametrize(
    "fields",
    [
        {"max_out_bytes": -1},
        {"max_out_bytes": 2**41},
        {"max_out_files": -1},
        {"max_out_files": 10**7},
        {"max_out_files": 1.5},
    ],
)
def test_the_disk_quota_is_validated(fields: dict[str, object]) -> None:
    """A negative, absurd or non-integer quota is refused when the Limits are made."""
    with pytest.raises(ValidationError):
        Limits(**fields)  # type: ignore[arg-type]
