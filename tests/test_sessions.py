"""End-to-end tests of sessions (``Bridge.session``, ``SyncBridge.session``): each step runs in a
fresh child, starting from the plain globals and the definitions earlier successful steps left.
Real bridge, real children, a real loopback HTTP server for payloads."""

from __future__ import annotations

import pathlib
import textwrap
from typing import Any

import anyio
import pytest
import trio
from hostile_children import ChildEnd, HostileLauncher, PipeChild, ready_body
from loopback_http import LoopbackServer, body

from scriptbridge import Bridge, ScriptBridgeError, ScriptResult, SyncBridge, markers, python_tool


def script(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def ok(result: ScriptResult) -> ScriptResult:
    assert result.ok, result.error
    return result


def link(uri: str) -> dict[str, Any]:
    return {"content": [{"type": "resource_link", "uri": uri, "name": "report.txt"}]}


def never(uri: str) -> dict[str, Any]:
    return {"content": [{"type": "resource", "uri": uri, "disposition": "never"}]}


@pytest.fixture
def bridge_options() -> dict[str, Any]:
    """The ``bridge`` fixture's Bridge may fetch from the loopback payload server."""
    return {"fetch_allow": ["127.0.0.1"]}


def counter(bridge: Bridge) -> list[int]:
    """Offer a tool ``count`` that counts its calls; returns the list it appends to."""
    calls: list[int] = []

    def count() -> dict[str, int]:
        calls.append(1)
        return {"calls": len(calls)}

    bridge.add_tool(python_tool(count))
    return calls


async def test_a_variable_function_class_and_import_reach_a_later_step(bridge: Bridge) -> None:
    """What step 1 defines (a variable, a function, a class, an import) is used in step 3,
    with step 2 doing something else."""
    async with bridge.session() as session:
        first = ok(
            await session.run(
                script("""
                import math
                from statistics import mean
                count = 3
                def area(r):
                    return round(math.pi * r * r, 2)
                class Box:
                    size = 2
                    def __init__(self, n):
                        self.n = n
                    def total(self):
                        return self.n * self.size
                """)
            )
        )
        assert first.dropped == []
        ok(await session.run("print('something else')\n"))
        third = ok(
            await session.run("[count, area(1), Box(count).total(), math.sqrt(16), mean([1, 3])]\n")
        )
    assert third.value == [3, 3.14, 6, 4.0, 2]


async def test_a_tool_call_is_never_made_again(bridge: Bridge) -> None:
    """A tool call of step 1 isn't made by later steps: not one beside an import on its line,
    nor one in a class body, a decorator or a default (those definitions are dropped when they
    re-run, every effect refused); a function that calls the tool calls it only when called."""
    calls = counter(bridge)
    async with bridge.session() as session:
        ok(
            await session.run(
                script("""
                import json; n = tools.count()["data"]["calls"]
                def again():
                    return tools.count()["data"]["calls"]
                class Eager:
                    seen = tools.count()["data"]["calls"]
                def noisy(f):
                    print("decorating")
                    return f
                @noisy
                def decorated():
                    return 1
                def defaulted(x=tools.count()):
                    return x
                """)
            )
        )
        assert len(calls) == 3
        second = ok(await session.run("[n, json.dumps(n)]\n"))
        assert second.value == [1, "1"] and second.tool_calls == 0 and len(calls) == 3
        assert sorted(second.dropped) == ["Eager", "decorated", "defaulted"]
        assert second.stdout == ""
        third = ok(await session.run("again()\n"))
    assert third.value == 4 and third.tool_calls == 1 and len(calls) == 4


async def test_references_stay_fetchable_and_never_stays_never(
    bridge: Bridge, server: LoopbackServer
) -> None:
    """A reference step 1 was given is fetched in step 2; one marked never (from the start, or
    between the steps) stays unfetchable; no other session or run may fetch the session's."""
    server.routes["/report.txt"] = body(b"quarterly numbers", content_type="text/plain")
    server.routes["/later.txt"] = body(b"withdrawn", content_type="text/plain")
    bridge.add_tool(python_tool(lambda: link(server.url("/report.txt")), name="attach"))
    bridge.add_tool(python_tool(lambda: link(server.url("/later.txt")), name="later"))
    bridge.add_tool(python_tool(lambda: never(server.url("/secret.txt")), name="secret"))
    async with bridge.session() as session:
        ok(
            await session.run(
                script("""
                ref = tools.attach()["content"][0]
                later = tools.later()["content"][0]
                hidden = tools.secret()["content"][0]
                """)
            )
        )
        bridge.ingest(never(server.url("/later.txt")), server=None)
        second = ok(
            await session.run(
                script("""
                def refused(block):
                    try:
                        fetch(block)
                        return "fetched"
                    except Unfetchable as exc:
                        return str(exc)
                [read_text(fetch(ref)), hidden["savedTo"], refused(hidden), refused(later)]
                """)
            )
        )
        assert second.value == [
            "quarterly numbers",
            None,
            markers.PAYLOAD_NEVER,
            markers.PAYLOAD_NEVER,
        ]
        ids = ok(await session.run("ref['id']\n")).value
        async with bridge.session() as other:
            stranger = await other.run(f"fetch({ids!r})\n")
        outside = await bridge.run(f"fetch({ids!r})\n")
    for result in (stranger, outside):
        assert result.error is not None and result.error.type == "ProtocolViolation"
    assert server.hits["/report.txt"] == 1
    assert server.hits["/later.txt"] == 0 and server.hits["/secret.txt"] == 0


async def test_what_cannot_carry_over_is_dropped(bridge: Bridge) -> None:
    """A generator, a module proxy in a variable, a lambda, an exception and a value past the
    bound are named in ``dropped``; plain values and definitions around them carry."""
    async with bridge.session() as session:
        first = ok(
            await session.run(
                script("""
                import json
                gen = (i for i in range(3))
                alias = json
                square = lambda x: x * x
                problem = ValueError("no")
                big = "x" * 2_000_000
                kept = {"a": [1, 2.5, None, b"raw"]}
                """)
            )
        )
        assert sorted(first.dropped) == ["alias", "big", "gen", "problem", "square"]
        assert first.model_dump(mode="json")["dropped"] == first.dropped
        second = ok(
            await session.run(
                script("""
                missing = []
                reads = {"gen": lambda: gen, "alias": lambda: alias, "square": lambda: square,
                         "problem": lambda: problem, "big": lambda: big}
                for name, read in reads.items():
                    try:
                        read()
                    except NameError:
                        missing.append(name)
                [missing, kept, json.dumps([1])]
                """)
            )
        )
    assert second.value == [
        ["gen", "alias", "square", "problem", "big"],
        {"a": [1, 2.5, None, b"raw"]},
        "[1]",
    ]


async def test_two_sessions_at_once_never_see_each_other(bridge: Bridge) -> None:
    """Two sessions stepping at the same time each see only their own globals and definitions."""
    seen: dict[str, Any] = {}

    async def one(name: str) -> None:
        async with bridge.session() as session:
            ok(await session.run(f"who = {name!r}\ndef mine():\n    return {name!r}\n"))
            await trio.sleep(0)
            seen[name] = ok(
                await session.run(
                    "try:\n    theirs = other\nexcept NameError:\n    theirs = None\n"
                    f"other = {name!r}\n[who, mine(), theirs]\n"
                )
            ).value

    async with trio.open_nursery() as nursery:
        nursery.start_soon(one, "a")
        nursery.start_soon(one, "b")
    assert seen == {"a": ["a", "a", None], "b": ["b", "b", None]}


async def test_a_failed_step_carries_nothing_new(bridge: Bridge) -> None:
    """A step that raises keeps none of its globals or definitions; the session goes on from
    the last successful step."""
    async with bridge.session() as session:
        ok(await session.run("x = 1\n"))
        failed = await session.run("x = 2\ndef f():\n    return 1\nraise ValueError('no')\n")
        assert failed.error is not None and failed.error.type == "ValueError"
        assert failed.dropped == []
        third = ok(
            await session.run(
                "try:\n    f()\n    has_f = True\nexcept NameError:\n    has_f = False\n"
                "[x, has_f]\n"
            )
        )
    assert third.value == [1, False]


async def test_steps_of_one_session_run_one_at_a_time(bridge: Bridge) -> None:
    """A second step of a session started while one runs waits for it, then starts from it."""
    gate = trio.Event()

    async def wait() -> str:
        await gate.wait()
        return "opened"

    bridge.add_tool(python_tool(wait))
    results: list[Any] = []
    async with bridge.session() as session:

        async def step(source: str) -> None:
            results.append(ok(await session.run(source)).value)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(step, "x = tools.wait()['content'][0]['text']\nx\n")
            while not bridge.progress():
                await trio.sleep(0.01)
            nursery.start_soon(step, "x + '!'\n")
            lock = session._state.lock  # type: ignore[union-attr]
            with trio.fail_after(30):  # the second step waits for the first, or runs beside it
                while lock.statistics().tasks_waiting == 0 and len(bridge.progress()) < 2:
                    await trio.sleep(0.01)
            assert len(bridge.progress()) == 1 and results == []
            gate.set()
    assert results == ["opened", "opened!"]


async def test_a_closed_session_refuses_steps(bridge: Bridge) -> None:
    """A step after the session's block ended raises ScriptBridgeError; an unknown tool name
    is refused when the session opens."""
    async with bridge.session() as session:
        pass
    with pytest.raises(ScriptBridgeError):
        await session.run("1\n")
    with pytest.raises(ValueError):
        async with bridge.session(tools=["nope"]):
            pass


def test_a_session_under_asyncio(tmp_path: pathlib.Path) -> None:
    """Under asyncio a session carries state across steps as under trio."""

    async def main() -> list[Any]:
        async with Bridge(tmp_path / "ws") as bridge:
            calls = counter(bridge)
            async with bridge.session(tools=["count"]) as session:
                ok(await session.run("def twice(n):\n    return 2 * n\nk = tools.count()\n"))
                value = ok(await session.run("[twice(21), k['data']]\n")).value
            assert len(calls) == 1
            return [value]

    assert anyio.run(main, backend="asyncio") == [[42, {"calls": 1}]]


def test_a_sync_bridge_session(tmp_path: pathlib.Path) -> None:
    """``SyncBridge.session`` is a sync context manager whose steps carry state."""
    with SyncBridge(tmp_path / "ws") as bridge:
        with bridge.session() as session:
            ok(session.run("import re\nwords = ['a1', 'b22']\n"))
            result = ok(session.run("[re.sub('[0-9]', '', w) for w in words]\n"))
        with pytest.raises(ScriptBridgeError):
            session.run("1\n")
    assert result.value == ["a", "b"]


LEFT = script("""
left = []
for name, read in [("x", lambda: x), ("y", lambda: y)]:
    try:
        read()
        left.append(name)
    except NameError:
        pass
[left, [1, 2].count(2)]
""")


async def hostile_step(tmp_path: pathlib.Path, nursery: trio.Nursery, carry: Any) -> ScriptResult:
    """A session's step whose child sends ``carry`` (a message body, or None) before done."""

    async def act(end: ChildEnd) -> int:
        await end.send(ready_body())
        await end.receive()  # start
        if carry is not None:
            await end.send(carry)
        await end.send({"op": "done", "value": 1})
        await end.host_closed.wait()
        return 0

    launcher = HostileLauncher()
    async with (
        Bridge(tmp_path / "ws", launcher=launcher) as bridge,
        bridge.session() as session,
    ):
        with trio.fail_after(20), launcher.hostile(lambda: PipeChild(nursery, act)):
            result = await session.run("1\n")
        after = ok(await session.run(LEFT))
    assert after.value == [[], 1]  # nothing of the hostile step carried, the hooks intact
    return result


@pytest.mark.parametrize(
    "carry",
    [
        None,  # done without a carry
        {"op": "carry", "globals": {"_getattr_": 1}, "definitions": [], "dropped": []},
        {"op": "carry", "globals": {"x": "a" * (2**20)}, "definitions": [], "dropped": []},
        {"op": "carry", "globals": {}, "definitions": ["y = 1"] * 1001, "dropped": []},
    ],
    ids=["missing", "hook-name", "past-the-bound", "too-many"],
)
async def test_a_hostile_childs_carry_is_refused(
    tmp_path: pathlib.Path, nursery: trio.Nursery, carry: Any
) -> None:
    """A step's child that sends no carry, a name a script can't bind, a carry past the bound,
    or too many definitions ends its step with ProtocolViolation; the session carries none of
    it and goes on."""
    result = await hostile_step(tmp_path, nursery, carry)
    assert result.error is not None and result.error.type == "ProtocolViolation", result.error


async def test_a_carry_in_a_lone_run_is_a_violation(
    tmp_path: pathlib.Path, nursery: trio.Nursery
) -> None:
    """A child of a run that isn't a session's step may not send a carry."""

    async def act(end: ChildEnd) -> int:
        await end.send(ready_body())
        await end.receive()  # start
        await end.send({"op": "carry", "globals": {}, "definitions": [], "dropped": []})
        await end.send({"op": "done", "value": 1})
        await end.host_closed.wait()
        return 0

    launcher = HostileLauncher()
    async with Bridge(tmp_path / "ws", launcher=launcher) as bridge:
        with trio.fail_after(20), launcher.hostile(lambda: PipeChild(nursery, act)):
            result = await bridge.run("1\n")
    assert result.error is not None and result.error.type == "ProtocolViolation", result.error


async def test_an_async_def_of_the_dialect_carries_over(bridge: Bridge) -> None:
    """An async def a dialect step made is called by later steps, awaited or not, and inside
    asyncio.gather beside a tool call."""
    bridge.add_tool(python_tool(lambda n: n + 1, name="inc"))
    async with bridge.session() as session:
        first = await session.run(
            "import asyncio\nasync def twice(n):\n    a = await tools.inc(n=n)\n"
            "    return a['data'] * 2\nbase = await twice(1)\nreturn base\n"
        )
        plain = await session.run("twice(base)\n")
        gathered = await session.run(
            "rs = await asyncio.gather(twice(1), tools.inc(n=5))\nreturn [rs[0], rs[1]['data']]\n"
        )
    assert (first.value, plain.value, gathered.value) == (4, 10, [4, 6]), (first, plain, gathered)
