"""The security suite's table of blocked counts is printed at the end of a run however the run
is made: ``make test`` runs the whole tree in two workers, where only the top conftest is the
controller's (``tests/security/conftest.py`` is loaded by the workers alone). The run here is
given the tree as ``make test`` gives it, so the controller loads what it loads there, but
every test module but the security suite's is ignored: the workers collect one module, not
the tree, and print the same table."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from unprivileged import can_drop_to_user

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_whole_tree_in_two_workers_prints_the_table() -> None:
    environment = {key: value for key, value in os.environ.items() if key != "PYTEST_XDIST_WORKER"}
    suite = ROOT / "tests" / "security" / "test_security_suite.py"
    ignored = [
        f"--ignore={path.relative_to(ROOT)}"
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
        if path != suite
    ]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "tests", "-k", "environment", *ignored],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "sandbox security suite: blocked/run per category and configuration" in done.stdout
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("environment ")]
    as_user = ["4/4"] if can_drop_to_user() is None else ["-"]
    assert row.split()[1:] == ["4/4", "4/4", "4/4", *as_user], row
