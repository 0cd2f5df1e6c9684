"""Fixtures for the security suite, and the tags on its attack runs that the table of blocked
counts (``tests/security_table.py``) is made from."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from unprivileged import can_drop_to_user, start_zygote_as_user

from sandbox import ZygoteProcess


@pytest.fixture(scope="session")
def security_zygote() -> Iterator[ZygoteProcess]:
    """A zygote for the whole suite, started as the tests run; stopped (with its children)
    at the end."""
    with ZygoteProcess.start() as process:
        yield process


@pytest.fixture(scope="session")
def user_zygote() -> Iterator[ZygoteProcess]:
    """A zygote for the whole suite started as an ordinary user (:mod:`unprivileged`);
    skipped where the tests can't start one."""
    reason = can_drop_to_user()
    if reason is not None:
        pytest.skip(reason)
    with start_zygote_as_user() as process:
        yield process


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tag every attack run with its category and name, so even a skipped one is counted."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        case = params.get("case")
        if case is not None and hasattr(case, "category"):
            item.user_properties.append(("security_category", case.category))
            item.user_properties.append(("security_case", case.name))
            mode = (
                params["mode"]
                if params.get("host", "tests") == "tests"
                else f"{params['mode']}@user"
            )
            item.user_properties.append(("security_mode", mode))
