"""Fixtures shared by several test modules: a registry, a workspace, a loopback HTTP server, a
bridge (``bridge_options`` overridden where a module's bridge needs more than the defaults);
the security suite's table at the end of a run (``security_table``); and Hypothesis's
settings for the suite: no deadline per example, which a busy machine would race (a property
states what must hold, not how fast)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import settings
from loopback_http import LoopbackServer, start_server
from security_table import pytest_terminal_summary  # noqa: F401  (a hook: the table, at the end)

from scriptbridge import Bridge, ReferenceRegistry, Workspace

settings.register_profile("scriptbridge", deadline=None)
settings.load_profile("scriptbridge")


@pytest.fixture
def reg() -> ReferenceRegistry:
    """A fresh reference registry."""
    return ReferenceRegistry()


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """A fresh workspace under the test's temporary directory."""
    return Workspace(tmp_path / "ws")


@pytest.fixture
async def server(nursery: trio.Nursery) -> LoopbackServer:
    """A loopback HTTP server on 127.0.0.1, running in the test's nursery."""
    return await start_server(nursery)


@pytest.fixture
def bridge_options() -> dict[str, Any]:
    """Keyword arguments of the ``bridge`` fixture's Bridge (a module overrides it)."""
    return {}


@pytest.fixture
async def bridge(tmp_path: Path, bridge_options: dict[str, Any]) -> AsyncIterator[Bridge]:
    """A Bridge on a workspace under the test's temporary directory, open for the test."""
    async with Bridge(tmp_path / "ws", **bridge_options) as opened:
        yield opened
