"""End-to-end tests of the Bridge: real sandbox children, real tool servers, real payloads."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from loopback_http import LoopbackServer, body, stall, start_server

from sandbox._zygote import ChildExit
from scriptbridge import markers
from scriptbridge._limits import Limits, ScriptResult
from scriptbridge._mcp import McpServer
from scriptbridge._supervisor import Bridge, _Child, _Run
from scriptbridge._tools import python_tool

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEER = str(ROOT / "examples" / "peer.py")
HOSTILE_SERVER = str(ROOT / "tests" / "servers" / "hostile_server.py")


def script(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def descendants(pid: int) -> set[int]:
    """Live (non-zombie) descendants of ``pid``, read from /proc."""
    parents: dict[int, int] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


@pytest.fixture
async def payloads(nursery: trio.Nursery) -> LoopbackServer:
    server = await start_server(nursery)
    server.routes["/report.txt"] = body(b"quarterly numbers", content_type="text/plain")
    return server


@pytest.fixture
async def bridge(tmp_path: pathlib.Path) -> AsyncIterator[Bridge]:
    async with Bridge(tmp_path / "ws", fetch_allow=["127.0.0.1"]) as bridge:
        yield bridge


def reference(uri: str, **extra: Any) -> dict[str, Any]:
    return {
        "content": [
            {
                "type": "resource",
                "uri": uri,
                "name": "report.txt",
                "mimeType": "text/plain",
                **extra,
            }
        ]
    }


async def test_each_global(bridge: Bridge) -> None:
    """call_tool, tools.<name>, call_tools, inputs and print all work through the channel."""

    def add(a: int, b: int) -> int:
        return a + b

    bridge.add_tool(python_tool(add, name="math.add"))
    result = await bridge.run(
        script("""
        one = call_tool("math.add", {"a": 1, "b": 2})["data"]
        two = tools.math_add(a=inputs["x"], b=10)["data"]
        batch = [r["data"] for r in call_tools([("math.add", {"a": 1, "b": 1}),
                                                 ("math.add", {"a": 2, "b": 2})])]
        print("sums", one, two)
        [one, two, batch]
        """),
        inputs={"x": 5},
    )
    assert result.ok, result.error
    assert result.value == [3, 15, [2, 4]]
    assert result.stdout == "sums 3 15\n"
    assert result.tool_calls == 4
    assert result.isolation[0] == "restricted-python"


async def test_fetch_on_demand_and_read_text(bridge: Bridge, payloads: LoopbackServer) -> None:
    """A reference is fetched on demand into the run's refs/ and read back with read_text."""
    bridge.add_tool(python_tool(lambda: reference(payloads.url("/report.txt")), name="attach"))
    result = await bridge.run(
        script("""
        ref = call_tool("attach", {})["content"][0]
        path = fetch(ref)
        [path, read_text(path), ref["savedTo"]]
    """)
    )
    assert result.ok, result.error
    path, text, saved_before = result.value
    assert path.startswith("refs/ref_") and path.endswith(".txt")
    assert text == "quarterly numbers" and saved_before is None
    assert result.fetches == 1
    assert payloads.hits["/report.txt"] == 1


async def test_write_text_lands_in_the_runs_own_out(bridge: Bridge) -> None:
    """write_text writes under the run's own out/, listed in outputs; refs/ is gone after."""
    result = await bridge.run('write_text("out/report.md", "# done")\n')
    assert result.ok, result.error
    (output,) = result.outputs
    assert output.startswith("runs/") and output.endswith("/out/report.md")
    written = bridge.workspace.root / output
    assert written.read_text() == "# done"
    assert not (written.parent.parent / "refs").exists()


async def test_never_reference_from_a_real_peer(bridge: Bridge) -> None:
    """A never reference reaches the script as savedTo None with the reason; fetch refuses."""
    await bridge.add_server(McpServer(sys.executable, [PEER], name="peer"))
    result = await bridge.run(
        script("""
        ref = call_tool("peer.never_reference", {})["content"][0]
        try:
            fetch(ref)
            outcome = "fetched"
        except Unfetchable as exc:
            outcome = str(exc)
        [ref, outcome]
    """)
    )
    assert result.ok, result.error
    ref, outcome = result.value
    assert ref["savedTo"] is None and ref["unfetchable"] == markers.PAYLOAD_NEVER
    assert "uri" not in ref
    assert outcome == markers.PAYLOAD_NEVER
    assert "payroll" not in result.stdout and ref["name"] == "payroll.csv"


async def test_embedded_text_and_error_results_from_a_real_peer(bridge: Bridge) -> None:
    """An embedded resource reads as its text; an error result raises ToolError with its words."""
    await bridge.add_server(McpServer(sys.executable, [PEER], name="peer"))
    result = await bridge.run(
        script("""
        text = call_tool("peer.embedded_text", {})["content"][0]["text"]
        try:
            tools.peer_fail()
            failed = None
        except ToolError as exc:
            failed = str(exc)
        [text, failed]
    """)
    )
    assert result.ok, result.error
    assert result.value == ["embedded words", "the peer failed on purpose"]


async def test_never_landing_mid_fetch_aborts_it(
    bridge: Bridge, payloads: LoopbackServer, nursery: trio.Nursery
) -> None:
    """A never delivered while the script's fetch is in flight: Unfetchable, no file remains."""
    stalled = trio.Event()
    payloads.routes["/slow.txt"] = stall(b"x" * 1000, 1_000_000, stalled)
    url = payloads.url("/slow.txt")
    bridge.add_tool(python_tool(lambda: reference(url), name="attach"))

    async def withdraw() -> None:
        await stalled.wait()
        bridge.ingest(reference(url, disposition="never"), server="other")

    nursery.start_soon(withdraw)
    result = await bridge.run(
        script("""
        try:
            fetch(call_tool("attach", {})["content"][0])
            outcome = "fetched"
        except Unfetchable as exc:
            outcome = str(exc)
        outcome
    """)
    )
    assert result.ok, result.error
    assert result.value == markers.PAYLOAD_NEVER
    assert list((bridge.workspace.root / "refs").iterdir()) == []


@pytest.mark.parametrize(
    ("source", "limits", "kind"),
    [
        ("while True:\n    pass\n", Limits(wall_s=1.0, cpu_s=30), "WallTimeExceeded"),
        ("while True:\n    pass\n", Limits(wall_s=20, cpu_s=1), "CpuTimeExceeded"),
        ("x = 'a' * (512 * 2**20)\n", Limits(memory_mb=128), "MemoryExceeded"),
        ("while True:\n    print('x' * 100)\n", Limits(max_output_bytes=1000), "OutputExceeded"),
        ("while True:\n    call_tool('noop', {})\n", Limits(max_tool_calls=3), "ToolCallsExceeded"),
    ],
)
async def test_each_limit_gives_its_error(
    bridge: Bridge, source: str, limits: Limits, kind: str
) -> None:
    """Each limit ends the run with its own error type, and the bridge stays healthy."""
    bridge.add_tool(python_tool(lambda: "ok", name="noop"))
    result = await bridge.run(source, limits=limits)
    assert not result.ok
    assert result.error is not None and result.error.type == kind, result.error
    if kind == "OutputExceeded":
        assert len(result.stdout.encode()) <= 1000
    assert (await bridge.run("1 + 1\n")).value == 2


async def test_a_hundred_concurrent_runs_are_independent(bridge: Bridge) -> None:
    """100 runs at once each get their own inputs and value."""
    results: dict[int, ScriptResult] = {}

    async def one(n: int) -> None:
        results[n] = await bridge.run("inputs['n'] * 2\n", inputs={"n": n})

    async with trio.open_nursery() as nursery:
        for n in range(100):
            nursery.start_soon(one, n)
    assert {n: r.value for n, r in results.items()} == {n: n * 2 for n in range(100)}
    assert all(r.ok for r in results.values())


async def test_cancelling_a_run_leaves_no_process(bridge: Bridge) -> None:
    """Cancelling the caller kills and reaps the child before run returns."""
    assert bridge._zygote is not None
    zygote = bridge._zygote.pid
    with trio.move_on_after(1.0):
        await bridge.run("while True:\n    pass\n", limits=Limits(wall_s=30, cpu_s=30))
    assert descendants(zygote) == set()
    assert list((bridge.workspace.root / "runs").iterdir()) == []


async def test_tool_server_crash_is_a_tool_error_and_restarts(bridge: Bridge) -> None:
    """A server that crashes gives the script a ToolError; the next run's call works."""
    await bridge.add_server(McpServer(sys.executable, [HOSTILE_SERVER], name="flaky"))
    crashed = await bridge.run("tools.flaky_crash()\n")
    assert crashed.error is not None and crashed.error.type == "ToolError"
    again = await bridge.run("tools.flaky_echo(n=1)['content'][0]['text']\n")
    assert again.value == '{"n": 1}'


async def test_a_mark_after_the_fetch_unlinks_the_runs_copy(
    bridge: Bridge, payloads: LoopbackServer
) -> None:
    """A never landing after a script fetched a payload removes it from the run's refs/ too."""
    url = payloads.url("/report.txt")
    bridge.add_tool(python_tool(lambda: reference(url), name="attach"))
    bridge.add_tool(python_tool(lambda: reference(url, disposition="never"), name="withdraw"))
    result = await bridge.run(
        script("""
        path = fetch(tools.attach()["content"][0])
        before = read_text(path)
        after = tools.withdraw()["content"][0]
        try:
            read_text(path)
            still = "readable"
        except Exception as exc:
            still = "gone"
        [before, after["unfetchable"], still]
    """)
    )
    assert result.ok, result.error
    assert result.value == ["quarterly numbers", markers.PAYLOAD_NEVER, "gone"]
    assert list((bridge.workspace.root / "refs").iterdir()) == []


async def test_closing_the_bridge_leaves_nothing(tmp_path: pathlib.Path) -> None:
    """After the bridge exits no zygote, child, server or fd remains, and runs/ is empty."""
    before = descendants(os.getpid())
    fds_before = set(os.listdir("/proc/self/fd"))
    async with Bridge(tmp_path / "ws") as bridge:
        await bridge.add_server(McpServer(sys.executable, [PEER], name="peer"))
        assert (await bridge.run("tools.peer_text()['content'][0]['text']\n")).ok
        assert descendants(os.getpid()) - before
    assert descendants(os.getpid()) - before == set()
    assert list((tmp_path / "ws" / "runs").iterdir()) == []
    assert set(os.listdir("/proc/self/fd")) <= fds_before


# --- hostile children: real processes on the run's real pipes -------------------------------

HOSTILE_PRELUDE = """
import msgpack, os, struct, sys, time
out = int(sys.argv[1]); inp = int(sys.argv[2])
def frame(body):
    data = msgpack.packb(body)
    os.write(out, struct.pack(">I", len(data)) + data)
def ready():
    frame({"op": "ready", "protocol": 1, "pid": os.getpid(), "isolation": [], "skipped": []})
"""

HOSTILE_ACTS = {
    "garbage": "os.write(out, b'\\xff' * 64); time.sleep(30)",
    "huge_prefix": "os.write(out, struct.pack('>I', 4 * 2**30 - 1)); time.sleep(30)",
    "unknown_op": "ready(); frame({'op': 'launch', 'call_id': 1}); time.sleep(30)",
    "foreign_id": "ready(); os.read(inp, 65536); "
    "frame({'op': 'fetch', 'call_id': 1, 'ref_id': 'ref_000000000000'}); time.sleep(30)",
    "ready_twice": "ready(); ready(); time.sleep(30)",
    "silent_exit": "ready(); os.read(inp, 65536); sys.exit(3)",
}


class HostileChild(_Child):
    """A real process in a child's place, writing what a hostile sandbox would."""

    def __init__(self, act: str) -> None:
        child_r, self.to_child = os.pipe()
        self.from_child, child_w = os.pipe()
        code = HOSTILE_PRELUDE + HOSTILE_ACTS[act]
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, str(child_w), str(child_r)],
            pass_fds=(child_w, child_r),
        )
        os.close(child_r)
        os.close(child_w)
        self.pid = self.process.pid

    async def wait(self, timeout: float) -> ChildExit:
        try:
            code = await trio.to_thread.run_sync(self.process.wait, timeout)
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError from exc
        return ChildExit(self.pid, code, 0.0, 0)

    async def kill(self) -> None:
        self.process.kill()


class HostileBridge(Bridge):
    """A bridge whose next child is hostile while ``act`` is set, a real sandbox otherwise."""

    act: str | None = None

    async def _spawn(self, run: _Run) -> _Child:
        if self.act is None:
            return await super()._spawn(run)
        return HostileChild(self.act)


@pytest.mark.parametrize(
    ("act", "kind"),
    [
        ("garbage", "ProtocolViolation"),
        ("huge_prefix", "ProtocolViolation"),
        ("unknown_op", "ProtocolViolation"),
        ("foreign_id", "ProtocolViolation"),
        ("ready_twice", "ProtocolViolation"),
        ("silent_exit", "SandboxCrashed"),
    ],
)
async def test_hostile_child_ends_its_run_and_nothing_else(
    tmp_path: pathlib.Path, act: str, kind: str
) -> None:
    """A child that writes garbage, a 4 GiB prefix, an unknown op, a foreign id or exits
    silently ends its own run with the right error; the bridge stays healthy."""
    async with HostileBridge(tmp_path / "ws") as bridge:
        bridge.act = act
        with trio.fail_after(20):
            result = await bridge.run("1\n")
        assert result.error is not None and result.error.type == kind, result.error
        bridge.act = None
        assert (await bridge.run("2 + 2\n")).value == 4


async def test_progress_shows_running_scripts(bridge: Bridge) -> None:
    """progress() lists a running script with its tool calls so far, and nothing after."""
    entered, release = trio.Event(), trio.Event()

    async def wait_here() -> str:
        entered.set()
        await release.wait()
        return "done"

    bridge.add_tool(python_tool(wait_here))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bridge.run, "tools.wait_here()\n")
        await entered.wait()
        (running,) = bridge.progress()
        assert (running.tool_calls, running.fetches, running.fetching) == (1, 0, False)
        release.set()
    assert bridge.progress() == []


async def test_inputs_that_are_not_plain_data_are_refused(bridge: Bridge) -> None:
    """Inputs that can't cross the channel raise ValueError before any child starts."""
    with pytest.raises(ValueError, match="inputs must be plain data"):
        await bridge.run("1\n", inputs={"when": object()})
    assert bridge.progress() == []
