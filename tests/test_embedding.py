"""One end-to-end suite of ``Bridge`` under trio, asyncio and uvloop, and ``SyncBridge`` from many
threads: tools (a host's coroutine tool awaiting its own loop's primitive), MCP servers, fetch
from a real loopback HTTP server, never references, limits, cancellation, many runs at once.

Each scenario is written once against anyio, which runs it under each loop; the bridge under
test is the real one (its trio side in the host's run under trio, in its own thread under
asyncio and uvloop), with real children, servers and HTTP.
"""

from __future__ import annotations

import asyncio
import pathlib
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest
import trio
from processes import only_spares_left

from scriptbridge import Bridge, Limits, ScriptBridgeError, SyncBridge, markers, python_tool
from scriptbridge._demo import demo_bridge, payload_server
from scriptbridge._launcher import ZygoteLauncher

BACKENDS = ["trio", "asyncio", "uvloop"]
"""uvloop: asyncio's API on libuv's loop, which many asyncio hosts (uvicorn's) run on."""
ASYNCIO = {"asyncio", "uvloop"}

Scenario = Callable[[Bridge, str], Awaitable[None]]


@pytest.fixture(scope="module")
def payloads() -> Iterator[str]:
    with payload_server() as (base, _hits):
        yield base


def run_under(backend: str, scenario: Scenario, workspace: pathlib.Path, base: str) -> None:
    """Open a bridge with the demo's servers under ``backend`` and run ``scenario`` in it."""

    async def main() -> None:
        if backend == "uvloop":  # not asyncio's own loop under another name
            assert type(asyncio.get_running_loop()).__module__.startswith("uvloop")
        async with Bridge(workspace, fetch_allow=["127.0.0.1"]) as bridge:
            if scenario in NEEDS_SERVERS:
                await demo_bridge(bridge, base)
            with anyio.fail_after(60):
                await scenario(bridge, backend)

    if backend == "uvloop":
        anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})
    else:
        anyio.run(main, backend=backend)


def host_event(backend: str) -> tuple[Callable[[], None], Callable[[], Awaitable[bool]]]:
    """An event of the host's own loop (asyncio's under asyncio), as (set, wait)."""
    event: Any = asyncio.Event() if backend in ASYNCIO else trio.Event()

    async def wait() -> bool:
        await event.wait()
        return True

    return event.set, wait


async def tools_of_both_kinds(bridge: Bridge, backend: str) -> None:
    """A sync tool runs in a worker thread, a coroutine tool on the host's own loop: it awaits
    a primitive of that loop that another host task sets."""
    set_event, wait_event = host_event(backend)
    seen: list[str] = []

    async def waits(n: int) -> dict[str, Any]:
        if backend in ASYNCIO:
            asyncio.get_running_loop()  # raises unless this runs on the host's asyncio loop
        seen.append(anyio.get_current_task().name)
        await wait_event()
        return {"n": n * 2}

    bridge.add_tool(python_tool(waits))
    bridge.add_tool(python_tool(lambda word: word.upper(), name="shout"))
    async with anyio.create_task_group() as group:
        group.start_soon(_set_when, seen, set_event)
        result = await bridge.run(
            "a = tools.waits(n=21)['data']['n']\nb = call_tool('shout', {'word': 'hi'})\n"
            "[a, b['content'][0]['text']]\n"
        )
    assert result.ok, result.error
    assert result.value == [42, "HI"]


async def _set_when(seen: list[str], set_event: Callable[[], None]) -> None:
    while not seen:
        await anyio.sleep(0.01)
    set_event()


async def servers_fetch_and_never(bridge: Bridge, backend: str) -> None:
    """An MCP server's reference is fetched over HTTP and read; a never one stays unfetchable."""
    result = await bridge.run(
        "ref = call_tool('peer.reference', {})['content'][1]\n"
        "text = read_text(fetch(ref))\n"
        "never = call_tool('peer.never_reference', {})['content'][0]\n"
        "try:\n    fetch(never)\n    why = 'fetched'\nexcept Unfetchable as exc:\n"
        "    why = str(exc)\n"
        "[text, never['savedTo'], 'uri' in never, why]\n"
    )
    assert result.ok, result.error
    assert result.value == [
        "Q3: revenue grew 12%, costs fell 3%.",
        None,
        False,
        markers.PAYLOAD_NEVER,
    ]
    assert result.fetches == 1


async def limits_hold(bridge: Bridge, backend: str) -> None:
    """Each limit ends its run with its own ending, as under trio."""
    wall = await bridge.run("while True:\n    pass\n", limits=Limits(wall_s=0.5, cpu_s=30))
    printed = await bridge.run(
        "while True:\n    print('x' * 100)\n", limits=Limits(max_output_bytes=500)
    )
    assert wall.error is not None and wall.error.type == "WallTimeExceeded"
    assert printed.error is not None and printed.error.type == "OutputExceeded"


async def cancelled_by_the_host(bridge: Bridge, backend: str) -> None:
    """Cancelling the host's call kills and reaps the child before the cancellation goes on
    (long before the run's wall time of 30 s); nothing but spares is left."""
    assert isinstance(bridge.launcher, ZygoteLauncher)
    started = time.monotonic()
    with anyio.move_on_after(0.5) as scope:
        await bridge.run("while True:\n    pass\n", limits=Limits(wall_s=30, cpu_s=30))
    assert scope.cancelled_caught and time.monotonic() - started < 15, "ran to its wall time"
    assert bridge.progress() == []
    await only_spares_left(bridge)


async def many_at_once(bridge: Bridge, backend: str) -> None:
    """Many runs at once each get their own child and their own answer."""
    results: dict[int, Any] = {}

    async def one(n: int) -> None:
        results[n] = await bridge.run("inputs['n'] * 2\n", inputs={"n": n})

    async with anyio.create_task_group() as group:
        for n in range(20):
            group.start_soon(one, n)
    assert {n: r.value for n, r in results.items()} == {n: n * 2 for n in range(20)}


async def output_as_it_comes(bridge: Bridge, backend: str) -> None:
    """``on_output`` hears what a script prints while it runs, in order, on the host's loop,
    all of it joining to the result's stdout; ``label`` names the run in ``progress()``."""
    heard: list[str] = []
    labels: list[str | None] = []

    def hear(text: str) -> None:
        if backend in ASYNCIO:
            asyncio.get_running_loop()  # raises unless this runs on the host's asyncio loop
        heard.append(text)
        labels.extend(run.label for run in bridge.progress())

    def noisy(text: str) -> None:
        raise RuntimeError("a host callback that fails is logged, not fatal")

    set_event, wait_event = host_event(backend)

    async def gate() -> bool:
        return await wait_event()

    bridge.add_tool(python_tool(gate))
    async with anyio.create_task_group() as group:
        group.start_soon(_set_when, heard, set_event)
        result = await bridge.run(
            "print('first')\ntools.gate()\nprint('second', end='')\n1\n",
            label="call-7",
            on_output=hear,
        )
    assert result.ok, result.error
    assert "".join(heard) == result.stdout == "first\nsecond"
    assert heard[0] == "first\n"  # heard before the tool call returned: while it ran
    assert labels and set(labels) == {"call-7"}, labels
    failing = await bridge.run("print('x')\n2\n", on_output=noisy)
    assert failing.ok and failing.value == 2 and failing.stdout == "x\n"


async def a_waiting_tool_ends_with_its_run(bridge: Bridge, backend: str) -> None:
    """A coroutine tool awaiting the host's loop when its run's wall time runs out is
    cancelled there (it hears the cancellation as its own loop's kind); one that raises gives
    the script a ToolError naming what it raised."""
    _set_event, wait_event = host_event(backend)
    heard: list[str] = []

    async def stalls() -> bool:
        try:
            return await wait_event()
        except anyio.get_cancelled_exc_class():
            heard.append("cancelled")
            raise

    async def fails() -> None:
        raise ValueError("no such thing")

    bridge.add_tool(python_tool(stalls))
    bridge.add_tool(python_tool(fails))
    failed = await bridge.run(
        "try:\n    tools.fails()\nexcept ToolError as exc:\n    reason = str(exc)\nreason\n"
    )
    assert failed.ok, failed.error
    assert "no such thing" in failed.value
    started = time.monotonic()
    stalled = await bridge.run("tools.stalls()\n", limits=Limits(wall_s=0.5, cpu_s=30))
    assert stalled.error is not None and stalled.error.type == "WallTimeExceeded"
    assert time.monotonic() - started < 20, "the waiting tool held its run past its wall time"
    with anyio.fail_after(20):
        while not heard:
            await anyio.sleep(0.01)
    assert heard == ["cancelled"]


NEEDS_SERVERS = {servers_fetch_and_never}

SCENARIOS = [
    tools_of_both_kinds,
    servers_fetch_and_never,
    limits_hold,
    cancelled_by_the_host,
    many_at_once,
    output_as_it_comes,
    a_waiting_tool_ends_with_its_run,
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_bridge_end_to_end(
    backend: str, scenario: Scenario, tmp_path: pathlib.Path, payloads: str
) -> None:
    run_under(backend, scenario, tmp_path / "ws", payloads)


def test_wait_for_under_asyncio_kills_the_run(tmp_path: pathlib.Path) -> None:
    """asyncio.wait_for on an endless script raises TimeoutError long before the run's wall
    time and leaves no child behind."""

    async def main() -> None:
        async with Bridge(tmp_path / "ws") as bridge:
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(
                    bridge.run("while True:\n    pass\n", limits=Limits(wall_s=30, cpu_s=30)),
                    0.5,
                )
            assert time.monotonic() - started < 15, "ran to its wall time (30 s)"
            await only_spares_left(bridge)

    asyncio.run(main())


def test_a_bridge_outside_any_loop_says_so(tmp_path: pathlib.Path) -> None:
    """Opened with no event loop at all, or under a loop it doesn't support, a Bridge raises
    ScriptBridgeError with a one-line reason."""
    bridge = Bridge(tmp_path / "ws")
    with pytest.raises(ScriptBridgeError, match="SyncBridge"):
        bridge.__aenter__().send(None)
    with pytest.raises(ScriptBridgeError, match="open the Bridge"):
        bridge.run("1\n").send(None)


def test_sync_bridge_from_eight_threads(tmp_path: pathlib.Path) -> None:
    """A SyncBridge serves runs from 8 threads at once; each gets its own child and answer."""
    results: dict[int, Any] = {}
    with SyncBridge(tmp_path / "ws", limits=Limits(wall_s=30)) as bridge:
        bridge.add_tool(python_tool(lambda n: n + 1, name="inc"))

        def one(n: int) -> None:
            results[n] = bridge.run(
                "call_tool('inc', {'n': inputs['n']})['data']\n", inputs={"n": n}
            )

        threads = [threading.Thread(target=one, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert bridge.tool_names == ["inc"]
        assert [spec.name for spec in bridge.tool_specs()] == ["inc"]
        assert "def inc(" in bridge.tool_stubs()
    assert {n: (r.ok, r.value) for n, r in results.items()} == {n: (True, n + 1) for n in range(8)}
    with pytest.raises(ScriptBridgeError, match="open the SyncBridge"):
        bridge.run("1\n")
