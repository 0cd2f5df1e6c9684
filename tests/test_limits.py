"""Limits and results: defaults and validation."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from sandbox.protocol import Ending
from scriptbridge._limits import Limits
from scriptbridge._results import ScriptError, ScriptResult


def test_the_disk_quota_defaults() -> None:
    """A run may leave 64 MiB in at most 1,000 files and directories by default."""
    limits = Limits()
    assert (limits.max_out_bytes, limits.max_out_files) == (64 * 2**20, 1000)
    assert Ending.DiskQuotaExceeded.is_limit


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


def test_a_bytes_value_serializes_to_json_in_a_declared_form() -> None:
    """Bytes anywhere in a value serialize as ``{"$bytes": "<base64>"}``; Python keeps bytes."""
    result = ScriptResult(ok=True, value={"blob": b"\xff\x00", "list": [b"", "text"]})
    assert json.loads(result.model_dump_json())["value"] == {
        "blob": {"$bytes": "/wA="},
        "list": [{"$bytes": ""}, "text"],
    }
    assert result.model_dump()["value"]["blob"] == b"\xff\x00"


def test_every_string_of_a_result_leaves_well_formed() -> None:
    """Lone surrogates in a value, output, error or file name become U+FFFD in JSON."""
    result = ScriptResult(
        ok=False,
        value={"\udcff": "a\ud800"},
        stdout="x\udc80",
        error=ScriptError(ending=Ending.ScriptFailed, type="E\udcff", message="m\ud800"),
        outputs=["runs/r/out/\udcff.txt"],
    )
    text = result.model_dump_json()
    text.encode("utf-8")  # raises on a lone surrogate
    data = json.loads(text)
    assert data["value"] == {"\ufffd": "a\ufffd"} and data["outputs"] == ["runs/r/out/\ufffd.txt"]
