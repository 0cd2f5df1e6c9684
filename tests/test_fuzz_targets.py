"""Every fuzz target (``fuzz/``) still builds, starts and runs: a few seconds of each.

Each target runs as ``make fuzz`` runs it, as a process of its own over its seed corpus, but
without the sanitizer build (the normal install's compiled loop), then at most :data:`RUNS`
mutated inputs from a fixed seed, within :data:`SECONDS` seconds: the same inputs every time,
so CI fails only when a target no longer imports what it fuzzes, or its seeds (and those few
mutations) now break its invariant, never on a new input drawn by chance. ``make fuzz``
(``SECURITY.md``) is the long run.

atheris comes with the test extra. Without it this module fails, unless
``SCRIPTBRIDGE_NO_FUZZ=1`` says to skip it (a platform with no atheris wheel).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scriptbridge import _render

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ["content_loop", "render", "frames", "mcp_stdio", "canonical"]
SECONDS = 2
RUNS = 2000
"""Mutated inputs a target runs in CI at most (after its seeds), from a fixed seed."""


def test_every_target_is_run() -> None:
    """The list here is the targets in ``fuzz/`` and the ones ``make fuzz`` runs."""
    found = sorted(path.stem for path in (ROOT / "fuzz").glob("[!_]*.py") if path.stem != "run")
    assert found == sorted(TARGETS)
    tree = ast.parse((ROOT / "fuzz" / "run.py").read_text())
    runs = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(name, ast.Name) and name.id == "TARGETS" for name in node.targets)
    ]
    assert runs == [tuple(TARGETS)]


@pytest.mark.parametrize("target", TARGETS)
def test_target_runs(target: str, tmp_path: Path) -> None:
    """The target reads its seed corpus and runs mutated inputs for a few seconds, finding
    nothing."""
    if importlib.util.find_spec("atheris") is None:
        if os.environ.get("SCRIPTBRIDGE_NO_FUZZ") == "1":
            pytest.skip("atheris is not installed and SCRIPTBRIDGE_NO_FUZZ=1")
        pytest.fail(
            "atheris is not installed (pip install -e '.[test]'; SCRIPTBRIDGE_NO_FUZZ=1 skips)"
        )
    if target == "content_loop" and _render._compiled_read_blocks is None:
        if os.environ.get("SCRIPTBRIDGE_PURE_PYTHON"):
            pytest.skip("SCRIPTBRIDGE_PURE_PYTHON: no compiled loop to compare")
        pytest.fail("scriptbridge._fastcontent is not built (python hatch_build.py builds it)")
    seeds = ROOT / "fuzz" / "corpus" / target
    assert any(seeds.iterdir()), f"no seeds in {seeds}"
    env = {k: v for k, v in os.environ.items() if k != "SCRIPTBRIDGE_FUZZ_NATIVE"}
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "fuzz" / f"{target}.py"),
            f"-max_total_time={SECONDS}",
            f"-runs={RUNS}",  # with the seed, the same inputs every time: CI checks the
            "-seed=1",  # targets build and hold on their seeds; finding is make fuzz's job
            f"-artifact_prefix={tmp_path}/",
            "-timeout=20",
            str(tmp_path),  # what the run learns goes here, not into the seeds
            str(seeds),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    log = done.stdout + done.stderr
    tail = "\n".join(line for line in log.splitlines() if "Instrumenting" not in line)[-4000:]
    assert done.returncode == 0, tail
    executed = re.search(r"Done (\d+) runs", log)
    assert executed is not None and int(executed.group(1)) > 0, tail
    assert not list(tmp_path.glob("crash-*")), tail
