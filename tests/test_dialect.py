"""The async dialect models are taught, through a real bridge: ``await`` on tool calls,
``asyncio.gather`` as one concurrent batch, ``asyncio.sleep`` within the wall time, a top-level
``return``, and ``async def``; the same scripts without ``await`` keep working."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
import trio

from scriptbridge import Bridge, Limits, python_tool


def script(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


async def test_the_fastmcp_style_script_runs(bridge: Bridge) -> None:
    """await call_tool, asyncio.gather over five calls, an async def, asyncio.sleep, and a
    top-level return that is the run's value (the batch's concurrency: the next test)."""

    async def lookup(n: int) -> int:
        await trio.sleep(0)
        return n * 10

    bridge.add_tool(python_tool(lookup))
    source = script("""
        import asyncio
        first = await call_tool("lookup", {"n": 0})
        results = await asyncio.gather(*[tools.lookup(n=i) for i in range(1, 6)])
        async def doubled(n):
            r = await tools.lookup(n=n)
            return r["data"] * 2
        late = await doubled(7)
        await asyncio.sleep(0.01)
        return {"first": first["data"], "gathered": [r["data"] for r in results], "late": late}
    """)
    result = await bridge.run(source)
    assert result.ok, result.error
    assert result.value == {"first": 0, "gathered": [10, 20, 30, 40, 50], "late": 140}
    assert result.tool_calls == 7


async def test_gathered_calls_are_one_batch(bridge: Bridge) -> None:
    """The calls of one gather are in flight together: each waits until all five are."""
    arrived = 0
    everyone = trio.Event()

    async def wait_for_all(n: int) -> int:
        nonlocal arrived
        arrived += 1
        if arrived == 5:
            everyone.set()
        with trio.fail_after(10):
            await everyone.wait()
        return n

    bridge.add_tool(python_tool(wait_for_all))
    source = (
        "import asyncio\nrs = await asyncio.gather(*[tools.wait_for_all(n=i) for i in range(5)])\n"
    )
    result = await bridge.run(source + "[r['data'] for r in rs]\n")
    assert result.ok, result.error
    assert result.value == [0, 1, 2, 3, 4]


async def test_a_failed_call_of_a_gather(bridge: Bridge) -> None:
    """A failed call raises its ToolError from gather, or is the ToolError in the list with
    return_exceptions=True."""

    def maybe(n: int) -> int:
        if n == 1:
            raise ValueError("not one")
        return n

    bridge.add_tool(python_tool(maybe))
    source = script("""
        import asyncio
        try:
            await asyncio.gather(tools.maybe(n=0), tools.maybe(n=1))
            raised = "no"
        except ToolError as exc:
            raised = str(exc)
        kept = await asyncio.gather(tools.maybe(n=2), tools.maybe(n=1), return_exceptions=True)
        return [raised, kept[0]["data"], isinstance(kept[1], ToolError), str(kept[1])]
    """)
    result = await bridge.run(source)
    assert result.ok, result.error
    assert result.value == ["ValueError: not one", 2, True, "ValueError: not one"]


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("x = 1\nif x:\n    return 'early'\n'late'\n", "early"),
        ("return\n", None),
        ("for i in range(3):\n    if i == 2:\n        return i\n", 2),
        ("def f():\n    return 3\nreturn f() + 1\n", 4),
        ("class C:\n    def m(self):\n        return 5\nreturn C().m()\n", 5),
        ("r = call_tool('echo', {'v': 1})\nr['data']\n", 1),  # no await: called at once
        ("return (await call_tool('echo', {'v': 2}))['data']\n", 2),
        ("async def f():\n    return 6\nimport asyncio\nreturn asyncio.run(f())\n", 6),
    ],
)
async def test_returns_and_plain_scripts(bridge: Bridge, source: str, value: Any) -> None:
    """A top-level return anywhere at the top level ends the script with its value; returns in
    functions are theirs; a script without await calls its tools at once, as always."""
    bridge.add_tool(python_tool(lambda v: v, name="echo"))
    result = await bridge.run(source)
    assert result.ok, result.error
    assert result.value == value


async def test_an_unawaited_call_says_to_await_it(bridge: Bridge) -> None:
    """In a script that uses await, a tool call not awaited is pending: using it says so."""
    bridge.add_tool(python_tool(lambda v: v, name="echo"))
    result = await bridge.run(
        "x = call_tool('echo', {'v': 1})\nawait call_tool('echo', {'v': 2})\nx['data']\n"
    )
    assert result.error is not None and result.error.type == "TypeError"
    assert "await it first" in result.error.message


async def test_sleep_is_bounded_by_the_wall_time(bridge: Bridge) -> None:
    """asyncio.sleep can't outlive the run's wall time."""
    result = await bridge.run(
        "import asyncio\nawait asyncio.sleep(60)\n", limits=Limits(wall_s=0.5, cpu_s=10)
    )
    assert result.error is not None and result.error.type == "WallTimeExceeded"


async def test_async_for_and_with_stay_refused(bridge: Bridge) -> None:
    """The dialect is await, async def and return: async for and async with don't compile."""
    for source in ("async def f(x):\n    async for i in x:\n        pass\n",
                   "async def f(x):\n    async with x:\n        pass\n"):  # fmt: skip
        result = await bridge.run(source)
        assert result.error is not None and result.error.ending == "ScriptRejected", source


async def test_a_call_never_awaited_is_named_in_the_output(bridge: Bridge) -> None:
    """As Python warns of a coroutine never awaited, a tool call a dialect script never awaits
    is not made, and the run's output says so (naming the tool)."""
    bridge.add_tool(python_tool(lambda v: v, name="echo"))
    source = "r = await call_tool('echo', {'v': 1})\ntools.echo(v=2)\nreturn r['data']\n"
    result = await bridge.run(source)
    assert result.ok and result.value == 1 and result.tool_calls == 1, result
    assert "never awaited" in result.stdout and "'echo'" in result.stdout, result.stdout
