"""Fixtures for the sandbox tests: one warm zygote per session, a fresh workspace per test."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox import ZygoteProcess
from sandbox.testing import RunRecord, run_script


@pytest.fixture(scope="session")
def zygote() -> Iterator[ZygoteProcess]:
    """A zygote shared by the session's tests; stopped (with its children) at the end."""
    with ZygoteProcess.start() as process:
        yield process


@pytest.fixture
def private_zygote() -> Iterator[ZygoteProcess]:
    """A zygote of this test's own, for tests that stop or kill it."""
    process = ZygoteProcess.start()
    try:
        yield process
    finally:
        process.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace with ``refs/note.txt`` ("hello refs") and an empty ``out/``."""
    root = tmp_path / "ws"
    (root / "refs").mkdir(parents=True)
    (root / "out").mkdir()
    (root / "refs" / "note.txt").write_text("hello refs")
    for path in (root, root / "refs"):
        os.chmod(path, 0o755)
    return root


@pytest.fixture
def run(zygote: ZygoteProcess, workspace: Path) -> Callable[..., RunRecord]:
    """Run a script in a fresh child in ``workspace``; keyword arguments go to run_script."""

    def runner(source: str, **kwargs: Any) -> RunRecord:
        kwargs.setdefault("workspace", workspace)
        kwargs.setdefault("timeout", 20.0)
        return run_script(zygote.client, source, **kwargs)

    return runner
