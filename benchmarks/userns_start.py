"""What the user namespace costs a child's start: a zygote started as root against one started
as an ordinary user, in the same run, sampled in turn.

Run (as root, which can start the second zygote as another user) with::

    .venv/bin/python benchmarks/userns_start.py [--runs N]

Both zygotes give every layer; root's from its capabilities, the ordinary user's through user
namespaces (its own at start, and one per child, where the child takes its uid and drops its
capabilities: ``sandbox/_isolation/_userns.py``), and its children make their network
namespace themselves (root's zygote makes the next child's between requests). Printed per
zygote: p50/p95 of spawn request -> ``ready`` (fork and isolation), and of spawn request -> the
script's first instruction; then the ratios of the p50s, user over root.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from unprivileged import hand_to_user, start_zygote_as_user, user_directory  # noqa: E402

from sandbox import ZygoteProcess  # noqa: E402
from sandbox.testing import run_script  # noqa: E402

SCRIPT = "import time\ntime.monotonic()"


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def workspace_in(base: Path) -> Path:
    """A run's workspace under ``base``."""
    workspace = base / "ws"
    (workspace / "refs").mkdir(parents=True)
    (workspace / "out").mkdir()
    os.chmod(workspace, 0o755)
    return workspace


def sample(zygote: ZygoteProcess, workspace: Path) -> tuple[float, float, list[str]]:
    """One run: (spawn -> ready, spawn -> first instruction) in seconds, and its layers."""
    record = run_script(zygote.client, SCRIPT, workspace=workspace)
    assert record.ok, record.final
    return (
        record.ready_at - record.started_at,
        float(record.value) - record.started_at,
        record.isolation,
    )


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: the second zygote is started as an ordinary user")
    root_base = Path(tempfile.mkdtemp(prefix="sb-bench-root-"))
    user_base = user_directory()
    try:
        root_ws = workspace_in(root_base)
        user_ws = workspace_in(user_base)
        hand_to_user(user_base)
        with ZygoteProcess.start() as root, start_zygote_as_user() as user:
            zygotes = {"root": (root, root_ws), "user": (user, user_ws)}
            for zygote, workspace in zygotes.values():
                for _ in range(10):
                    sample(zygote, workspace)
            ready: dict[str, list[float]] = {name: [] for name in zygotes}
            first: dict[str, list[float]] = {name: [] for name in zygotes}
            layers: dict[str, list[str]] = {}
            for _ in range(args.runs):
                for name, (zygote, workspace) in zygotes.items():
                    to_ready, to_first, layers[name] = sample(zygote, workspace)
                    ready[name].append(to_ready)
                    first[name].append(to_first)
                    time.sleep(0.002)  # let the zygote make the next namespace, as between runs
    finally:
        shutil.rmtree(root_base, ignore_errors=True)
        shutil.rmtree(user_base, ignore_errors=True)

    def ms(values: list[float]) -> str:
        p50, p95 = percentile(values, 0.5) * 1e3, percentile(values, 0.95) * 1e3
        return f"p50 {p50:6.2f} ms  p95 {p95:6.2f} ms"

    print(f"a child's start, {args.runs} runs each, sampled in turn")
    for name in ("root", "user"):
        print(f"  {name:4}: layers {', '.join(layers[name])}")
        print(f"        spawn -> ready              {ms(ready[name])}")
        print(f"        spawn -> first instruction  {ms(first[name])}")
    for label, values in (("ready", ready), ("first instruction", first)):
        ratio = percentile(values["user"], 0.5) / percentile(values["root"], 0.5)
        print(f"  user / root, p50 to {label}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
