"""One bad tool server doesn't stop ``serve``: it starts with the others, says which failed
and why (stderr and ``run_python``'s description), and tries it again until it comes up.

The real command over stdio, with real servers: the hostile test server, and a second one
that exits with status 3 ("boom: not yet") the first time it is started.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from serving import Raw

HOSTILE = str(Path(__file__).resolve().parent / "servers" / "hostile_server.py")

FLAKY = """
import os, sys
marker = sys.argv[1]
if not os.path.exists(marker):
    open(marker, "w").close()
    print("boom: not yet", file=sys.stderr, flush=True)
    sys.exit(3)
os.execv(sys.executable, [sys.executable, sys.argv[2]])
"""


def description(raw: Raw, rid: str) -> str:
    """run_python's description as ``tools/list`` shows it now."""
    raw.send({"id": rid, "method": "tools/list"})
    tools = raw.receive(rid)["result"]["tools"]
    (run_python,) = [tool for tool in tools if tool["name"] == "run_python"]
    return str(run_python["description"])


def test_a_server_that_fails_to_start_is_named_and_tried_again(tmp_path: Path) -> None:
    """serve starts with the good server; the failed one is on stderr and in run_python's
    description with its exit status and last words; a later try starts it, and its tools
    are then offered."""
    flaky = tmp_path / "flaky.py"
    flaky.write_text(FLAKY)
    marker = tmp_path / "started-once"
    good = f"good={sys.executable} {HOSTILE}"
    bad = f"flaky={sys.executable} {flaky} {marker} {HOSTILE}"
    raw = Raw("--mcp", good, "--mcp", bad, "--workspace", str(tmp_path / "ws"))
    try:
        raw.initialize()
        first = description(raw, "list-1")
        assert "good.echo" in first
        assert "server 'flaky' isn't available now" in first
        assert "exited with status 3" in first and "boom: not yet" in first
        deadline = time.monotonic() + 60
        said = first
        while "flaky.echo" not in said:
            assert time.monotonic() < deadline, said
            time.sleep(0.2)
            said = description(raw, f"list-{time.monotonic()}")
        assert "isn't available" not in said
        raw.call("run", "run_python", {"code": "call_tool('flaky.echo', {'x': 1})['content']"})
        answer = raw.receive("run")
        assert answer["result"]["isError"] is False, answer
        raw.stdin.close()  # serve ends when its client goes
        raw.process.wait(timeout=60)
        assert raw.process.stderr is not None
        text = raw.process.stderr.read().decode()
    finally:
        if raw.process.poll() is None:
            raw.process.kill()
            raw.process.wait()
    assert "server 'flaky' exited with status 3 before it answered initialize" in text
    assert "trying again in 1 s" in text
    assert "server 'flaky' started on a later try" in text
