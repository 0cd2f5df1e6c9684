"""Every example runs: each example script through the demo's servers, the host, the demo."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scriptbridge import Bridge, markers
from scriptbridge._demo import EXAMPLES, demo_bridge, payload_server

SCRIPTS = EXAMPLES / "scripts"
EXPECTED: dict[str, Any] = {
    "embedded_text.py": "embedded words",
    "fetch_reference.py": "Q3: revenue grew 12%, costs fell 3%.",
    "look_at_image.py": ["image/png", "image/png"],
    "never_reference.py": f"refused: {markers.PAYLOAD_NEVER}",
    "parallel_calls.py": 3,
    "standard_server.py": ["# install", "The guide: read it through resources/read."],
    "tool_error.py": "the peer failed on purpose",
    "write_report.py": 4,
}


@pytest.fixture
async def demo(tmp_path: pathlib.Path) -> AsyncIterator[tuple[Bridge, Any]]:
    with payload_server() as (base, hits):
        async with Bridge(tmp_path / "ws", fetch_allow=["127.0.0.1"]) as bridge:
            await demo_bridge(bridge, base)
            yield bridge, hits


def test_every_example_script_has_an_expectation() -> None:
    """No example script goes untested."""
    assert sorted(path.name for path in SCRIPTS.glob("*.py")) == sorted(EXPECTED)


async def test_every_example_script(demo: tuple[Bridge, Any]) -> None:
    """Each example script runs to its end with the value it promises, one after another
    through one bridge (as ``scriptbridge demo`` runs them); never is never fetched."""
    bridge, hits = demo
    for name in sorted(EXPECTED):
        result = await bridge.run((SCRIPTS / name).read_text())
        assert result.ok, (name, result.error)
        assert result.value == EXPECTED[name], name
        assert hits["/payroll.csv"] == 0, name
        if name == "write_report.py":
            (output,) = result.outputs
            assert (bridge.workspace.root / output).read_text().startswith("# Report")


def test_example_host_runs() -> None:
    """examples/host.py embeds a Bridge and prints the result as JSON."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "host.py")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ok"] and result["value"] == {"total": 9, "note": "embedded words"}


@pytest.mark.parametrize(
    ("example", "totals"), [("asyncio_host.py", [7, 2, 9]), ("sync_host.py", [3, 6, 2, 9])]
)
def test_example_asyncio_and_sync_hosts_run(example: str, totals: list[int]) -> None:
    """examples/asyncio_host.py (asyncio.gather over runs, an asyncio tool) and
    examples/sync_host.py (SyncBridge from a thread pool) print every run's result."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / example)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert [r["ok"] for r in results] == [True] * len(totals), results
    assert [r["value"] for r in results] == [
        {"total": total, "note": "embedded words"} for total in totals
    ]


def test_demo_command_reports_every_script() -> None:
    """`scriptbridge demo` runs every example and shows payroll.csv was never requested."""
    done = subprocess.run(
        [sys.executable, "-m", "scriptbridge._cli", "demo"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for name in EXPECTED:
        assert f"== {name} (ok," in done.stdout
    assert "/payroll.csv x0" in done.stdout
