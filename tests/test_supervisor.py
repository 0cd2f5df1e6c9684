"""End-to-end tests of the Bridge: real sandbox children, real tool servers, real payloads."""

from __future__ import annotations

import os
import pathlib
import sys
import textwrap
from typing import Any

import pytest
import trio
from hostile_children import (
    ChildEnd,
    HostileLauncher,
    PipeChild,
    ProcessChild,
    frame,
    ready_body,
)
from loopback_http import LoopbackServer, body, stall, start_server
from processes import descendants, only_spares_left, process_state
from spare_children import spares_ready

from scriptbridge import markers
from scriptbridge._launcher import ZygoteLauncher
from scriptbridge._limits import Limits
from scriptbridge._mcp import McpServer
from scriptbridge._results import ScriptResult
from scriptbridge._run_state import RunEnded, RunState
from scriptbridge._supervisor import Bridge
from scriptbridge._tools import python_tool

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEER = str(ROOT / "examples" / "peer.py")
HOSTILE_SERVER = str(ROOT / "tests" / "servers" / "hostile_server.py")


def script(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


@pytest.fixture
async def payloads(nursery: trio.Nursery) -> LoopbackServer:
    server = await start_server(nursery)
    server.routes["/report.txt"] = body(b"quarterly numbers", content_type="text/plain")
    return server


@pytest.fixture
def bridge_options() -> dict[str, Any]:
    """The ``bridge`` fixture's Bridge may fetch from the loopback payload server."""
    return {"fetch_allow": ["127.0.0.1"]}


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
    """Cancelling the caller kills and reaps the child before run returns: its pid is gone
    from /proc then; the zygote holds nothing but spares, and runs/ is empty."""
    child = (await spares_ready(bridge))[0]  # the spare the run takes
    running = trio.Event()

    async def started() -> str:
        running.set()
        return "running"

    async def endless() -> None:  # the default limits, a spare's (a wall time of 30 s)
        await bridge.run("tools.started()\nwhile True:\n    pass\n")

    bridge.add_tool(python_tool(started))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(endless)
        await running.wait()
        nursery.cancel_scope.cancel()
    assert process_state(child) is None, "run returned before its child was reaped"
    await only_spares_left(bridge)
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
        except FileNotFoundError:
            still = "gone"
        [before, after["unfetchable"], still]
    """)
    )
    assert result.ok, result.error  # any other error fails the script
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
    launcher = HostileLauncher()
    async with Bridge(tmp_path / "ws", launcher=launcher) as bridge:
        with trio.fail_after(20), launcher.hostile(lambda: ProcessChild(act)):
            result = await bridge.run("1\n")
        assert result.error is not None and result.error.type == kind, result.error
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


@pytest.mark.parametrize(
    ("act", "message"),
    [
        ("exit_before_ready", "status 3"),
        ("realtime_signal", "signal 40"),
    ],
)
async def test_a_child_that_dies_without_a_word_is_a_crash(
    tmp_path: pathlib.Path, act: str, message: str
) -> None:
    """A child that exits before ready, or dies by a signal that has no name (a real-time one),
    ends its run as SandboxCrashed with its exit status; run doesn't raise."""
    launcher = HostileLauncher()
    async with Bridge(tmp_path / "ws", launcher=launcher) as bridge:
        with trio.fail_after(20), launcher.hostile(lambda: ProcessChild(act)):
            result = await bridge.run("1\n")
        assert result.error is not None and result.error.type == "SandboxCrashed", result.error
        assert message in result.error.message


async def test_a_child_that_couldnt_set_up_is_a_crash(
    tmp_path: pathlib.Path, nursery: trio.Nursery
) -> None:
    """A child whose first message is a setup error (isolation failed) ends its run as
    SandboxCrashed with the child's reason, not as a protocol violation."""

    async def act(end: ChildEnd) -> int:
        await end.send({"op": "error", "type": "SandboxSetupFailed", "message": "no landlock",
                        "phase": "setup"})  # fmt: skip
        return 71

    launcher = HostileLauncher()
    async with Bridge(tmp_path / "ws", launcher=launcher) as bridge:
        with trio.fail_after(20), launcher.hostile(lambda: PipeChild(nursery, act)):
            result = await bridge.run("1\n")
    assert result.error is not None and result.error.type == "SandboxCrashed", result.error
    assert "no landlock" in result.error.message


@pytest.mark.parametrize("call_ids", [[7], [1, 1], [1, 3]])
async def test_call_ids_out_of_sequence_are_violations(
    tmp_path: pathlib.Path, nursery: trio.Nursery, call_ids: list[int]
) -> None:
    """A request whose call id isn't the next one due (1, 2, ...) ends the run with
    ProtocolViolation before the tool is called."""
    called: list[int] = []

    async def count() -> str:
        called.append(1)
        return "ok"

    async def act(end: ChildEnd) -> int:
        await end.send(ready_body())
        await end.receive()  # start
        for call_id in call_ids:
            await end.send({"op": "call_tool", "call_id": call_id, "name": "count", "args": {}})
            if await end.receive() is None:
                break
        await end.close_output()
        await end.host_closed.wait()
        return 0

    launcher = HostileLauncher()
    async with Bridge(tmp_path / "ws", launcher=launcher) as bridge:
        bridge.add_tool(python_tool(count))
        with trio.fail_after(20), launcher.hostile(lambda: PipeChild(nursery, act)):
            result = await bridge.run("1\n")
    assert result.error is not None and result.error.type == "ProtocolViolation", result.error
    assert len(called) == len(call_ids) - 1


async def test_empty_output_frames_hold_no_host_memory(
    tmp_path: pathlib.Path, nursery: trio.Nursery
) -> None:
    """A flood of empty output messages keeps no entry per message on the host: what a run
    holds of its output is bounded by max_output_bytes, not by the number of frames."""
    flood = frame({"op": "output", "text": ""}) * 20_000

    async def act(end: ChildEnd) -> int:
        await end.send(ready_body())
        await end.receive()  # start
        await end.write(flood + frame({"op": "output", "text": "x"}))
        await end.send({"op": "done", "value": 1})
        await end.host_closed.wait()
        return 0

    launcher = HostileLauncher()
    async with Bridge(tmp_path / "ws", launcher=launcher) as bridge:
        with trio.fail_after(20), launcher.hostile(lambda: PipeChild(nursery, act)):
            result = await bridge.run("1\n")
    assert result.ok and result.stdout == "x", result


def test_empty_output_keeps_no_entry() -> None:
    """What a run keeps of its printed output grows with the text, never with the number of
    (empty) messages; past max_output_bytes the run ends with what fits kept."""
    run = RunState(id="r", limits=Limits(max_output_bytes=4))
    most = 0
    for _ in range(20_000):
        run.print("")
        most = max(most, len(run.stdout))
    run.print("x")
    assert most == 0 and run.stdout == ["x"]
    with pytest.raises(RunEnded) as ended:
        run.print("yyyy")
    assert ended.value.ending == "OutputExceeded" and "".join(run.stdout) == "xyyy"


async def test_a_tool_view_too_large_for_the_channel_is_a_tool_error(bridge: Bridge) -> None:
    """A tool result whose script view holds more values than a message may carry gives the
    script a ToolError (alone or in a batch); run doesn't raise."""
    wide = {f"k{n}": n for n in range(500_001)}
    bridge.add_tool(python_tool(lambda: {"content": [], "structuredContent": wide}, name="wide"))
    result = await bridge.run(
        script("""
        failures = []
        for attempt in (lambda: call_tool("wide", {}), lambda: call_tools([("wide", {})])):
            try:
                attempt()
            except ToolError as exc:
                failures.append(str(exc))
        failures
    """)
    )
    assert result.ok, result.error
    assert len(result.value) == 2
    assert all("more than 1000000 values" in text for text in result.value)


async def test_a_batch_whose_failures_dont_fit_a_message_ends_the_run(bridge: Bridge) -> None:
    """A batch whose answers, even as failures, can't fit the message limit ends the run with
    ToolCallsExceeded; run doesn't raise, and the next run works."""
    bridge.add_tool(python_tool(lambda: "x" * 100, name="hundred"))
    result = await bridge.run(
        "call_tools([('hundred', {})] * 40)\n", limits=Limits(max_message_bytes=1024)
    )
    assert result.error is not None and result.error.type == "ToolCallsExceeded", result.error
    assert "1024-byte message limit" in result.error.message
    assert (await bridge.run("2 + 2\n")).value == 4


# --- the disk quota: what a run may leave in its out/ -----------------------------------------

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="the quota layer mounts: root only")


def left_on_disk(bridge: Bridge) -> tuple[int, int]:
    """(bytes of file contents, files and directories) under every runs/<id>/out/ on disk,
    never following a symlink."""
    size = entries = 0
    for out in (bridge.workspace.root / "runs").glob("*/out"):
        for directory, dirs, files in os.walk(out):
            for name in dirs + files:
                entries += 1
                info = os.lstat(os.path.join(directory, name))
                size += info.st_size if name in files else 0
    return size, entries


async def test_many_small_files_past_the_quota_end_the_run(bridge: Bridge) -> None:
    """A run that writes more files than max_out_files (1,000 by default) ends with
    DiskQuotaExceeded, and no more than the quota is left on disk."""
    result = await bridge.run("for i in range(1500):\n    write_text(f'out/f{i}.txt', 'x')\n")
    assert result.error is not None and result.error.type == "DiskQuotaExceeded", result.error
    assert "1000" in result.error.message
    size, entries = left_on_disk(bridge)
    assert 0 < entries <= 1000 and size <= 1000
    assert len(result.outputs) == entries


async def test_one_file_past_the_quota_ends_the_run(bridge: Bridge) -> None:
    """A run that writes one file larger than max_out_bytes (64 MiB by default) ends with
    DiskQuotaExceeded, and the disk holds no more than the quota."""
    result = await bridge.run("write_text('out/big.bin', 'x' * (64 * 2 ** 20 + 1))\n")
    assert result.error is not None and result.error.type == "DiskQuotaExceeded", result.error
    size, entries = left_on_disk(bridge)
    assert size <= 64 * 2**20 and entries <= 1


async def test_a_run_within_the_quota_keeps_its_outputs(bridge: Bridge) -> None:
    """A run that stays within its quota, exactly at both limits, ends well and keeps every
    file it wrote, replacing a file counting its new size only."""
    limits = Limits(max_out_bytes=30, max_out_files=4)
    result = await bridge.run(
        script("""
        write_text("out/a.txt", "x" * 20)
        write_text("out/a.txt", "y" * 10)
        write_text("out/sub/b.txt", "z" * 10)
        write_text("out/sub/c.txt", "w" * 10)
        "fine"
        """),
        limits=limits,
    )
    assert result.ok, result.error
    kept = [path.split("/out/")[1] for path in result.outputs]
    assert kept == ["a.txt", "sub/b.txt", "sub/c.txt"]
    assert (bridge.workspace.root / result.outputs[0]).read_text() == "y" * 10
    assert left_on_disk(bridge) == (30, 4)


@pytest.mark.parametrize(
    ("source", "passed"),
    [
        ("for i in range(4):\n    write_text(f'out/{i}.txt', 'x' * 300)\n", "1000 bytes"),
        ("write_text('out/a/b/c/d/e/f.txt', 'x')\n", "5 files"),
        ("for i in range(6):\n    write_text(f'out/{i}.txt', '')\n", "5 files"),
    ],
)
async def test_a_small_custom_quota(bridge: Bridge, source: str, passed: str) -> None:
    """A run's own small Limits(max_out_bytes, max_out_files) bounds bytes over several files,
    nested directories and empty files alike; the disk keeps no more than that quota."""
    result = await bridge.run(source, limits=Limits(max_out_bytes=1000, max_out_files=5))
    assert result.error is not None and result.error.type == "DiskQuotaExceeded", result.error
    assert passed in result.error.message
    size, entries = left_on_disk(bridge)
    assert size <= 1000 and entries <= 5


async def test_the_quota_cant_be_caught(bridge: Bridge) -> None:
    """Catching the refused write doesn't let a script go on writing: the stop is sticky."""
    result = await bridge.run(
        script("""
        for i in range(10):
            try:
                write_text(f"out/{i}.txt", "x" * 400)
            except BaseException:
                pass
        "went on"
        """),
        limits=Limits(max_out_bytes=1000),
    )
    assert result.error is not None and result.error.type == "DiskQuotaExceeded", result.error
    assert left_on_disk(bridge)[0] <= 1000


@ROOT_ONLY
async def test_the_quota_mount_is_out_of_the_hosts_sight(bridge: Bridge) -> None:
    """While a run runs, its out/ is a size- and inode-limited tmpfs in the zygote's own mount
    namespace, absent from the host's; once run returns it is gone there too, and what the
    script wrote is on the disk."""
    assert isinstance(bridge.launcher, ZygoteLauncher) and bridge.launcher.zygote_pid is not None
    zygote = bridge.launcher.zygote_pid
    seen: dict[str, list[str]] = {}

    def mounts(pid: int | str) -> list[str]:
        with open(f"/proc/{pid}/mountinfo") as table:
            return [line for line in table if str(bridge.workspace.root) in line]

    def look() -> str:
        seen["host"], seen["zygote"] = mounts("self"), mounts(zygote)
        return "looked"

    bridge.add_tool(python_tool(look))
    result = await bridge.run("write_text('out/a.txt', 'kept')\ntools.look()\n")
    assert result.ok, result.error
    assert "quota" in result.isolation
    assert seen["host"] == []
    (mount,) = [line for line in seen["zygote"] if "/runs/" in line]
    assert " tmpfs " in mount and "nr_inodes=1002" in mount
    assert [line for line in mounts(zygote) if "/runs/" in line] == []
    (output,) = result.outputs
    assert (bridge.workspace.root / output).read_text() == "kept"


@pytest.mark.parametrize(("files", "passes"), [(5, True), (3, False)])
async def test_what_no_quota_layer_bounded_is_bounded_by_the_host(
    tmp_path: pathlib.Path, nursery: trio.Nursery, files: int, passes: bool
) -> None:
    """A child no quota layer bounded (a machine without root) that leaves more than its
    quota in out/ and says done ends with DiskQuotaExceeded, and none of its out/ is kept; one
    within the quota keeps its files, and a symlink it left is never listed."""

    async def act(end: ChildEnd) -> int:
        await end.send(ready_body())
        await end.receive()  # start
        (out,) = (tmp_path / "ws" / "runs").glob("*/out")
        for n in range(files):
            (out / f"{n}.txt").write_text("x")
        (out / "link").symlink_to("/etc/passwd")
        await end.send({"op": "done", "value": 1})
        await end.host_closed.wait()
        return 0

    launcher = HostileLauncher()
    async with Bridge(tmp_path / "ws", launcher=launcher) as bridge:
        with trio.fail_after(20), launcher.hostile(lambda: PipeChild(nursery, act)):
            result = await bridge.run("1\n", limits=Limits(max_out_files=files + 1 - passes))
    if passes:
        assert result.error is not None and result.error.type == "DiskQuotaExceeded", result
        assert result.outputs == [] and list((tmp_path / "ws" / "runs").iterdir()) == []
    else:
        assert result.ok, result.error
        assert [path.rsplit("/", 1)[1] for path in result.outputs] == ["0.txt", "1.txt", "2.txt"]


async def test_a_run_offers_only_the_tools_it_was_given(bridge: Bridge) -> None:
    """run(tools=[...]) offers only those tools to that run (others are no tool of its); a name
    not offered raises ValueError before any child starts."""
    bridge.add_tool(python_tool(lambda: 1, name="one"))
    bridge.add_tool(python_tool(lambda: 2, name="two"))
    with pytest.raises(ValueError, match="'three'"):
        await bridge.run("1\n", tools=["one", "three"])
    source = script("""
        first = call_tool('one', {})['data']
        try:
            call_tool('two', {})
            second = 'called'
        except ToolError as exc:
            second = str(exc)
        try:
            tools.two()
            third = 'called'
        except AttributeError:
            third = 'none'
        [first, second, third]
    """)
    result = await bridge.run(source, tools=["one"])
    assert result.ok, result.error
    assert result.value == [1, "no tool is named 'two'", "none"]
    assert (await bridge.run("call_tool('two', {})['data']\n")).value == 2
