"""Fuzzing the channel: a hostile child against the real supervisor, frame decoder and channel.

The child is a :class:`~hostile_children.PipeChild`: two real pipes whose far ends the test
writes, so thousands of runs go through the real ``Bridge.run``, the real ``ChildChannel`` and
the real conversation without an interpreter per run. Every example runs on one
:class:`~hostile_children.HostileLauncher` (its runs outside the example get real sandbox
children) from a Hypothesis worker thread, while real sandboxed runs go on beside it; each test
checks at its end that those runs all finished right.

For every stream a hostile child can write, the run must end as an independent model of the
protocol says (:func:`expected_outcomes`): served correctly (its value, its printed text, a
well-formed answer to every request it made), or with ``ProtocolViolation``, or with
``SandboxCrashed`` when the child just exits, or with the limit it passed; ``run`` never
raises. The one freedom the model allows: valid frames that arrive in the same read as a bad
length prefix may be dropped unread, since the decoder refuses the prefix as soon as it sees it.

Budget: about 2,100 examples by default (a few seconds). ``SCRIPTBRIDGE_FUZZ_EXAMPLES=N`` runs
about ``N`` in all, spread over the tests in the same proportions.
"""

from __future__ import annotations

import itertools
import os
import pathlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack
import pytest
import trio
from hostile_children import ChildEnd, HostileLauncher, PipeChild, frame, raw_act, ready_body
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from loopback_http import LoopbackServer, body, start_server

from sandbox.protocol import (
    LAYER_NAMES,
    CallTool,
    CallTools,
    Done,
    Fetch,
    FetchResult,
    FrameDecoder,
    HostMessage,
    Output,
    ProtocolError,
    Ready,
    RunError,
    Start,
    ToolFailed,
    ToolResult,
    ToolResults,
    parse_child_message,
)
from scriptbridge import Bridge, ProtocolViolation
from scriptbridge._channel import READ_CHUNK, ChildChannel
from scriptbridge._limits import Limits
from scriptbridge._results import ScriptResult
from scriptbridge._tools import python_tool

EXAMPLES = {"streams": 300, "open-pipe": 150, "served": 100, "decoder": 800, "channel": 650}
"""Each Hypothesis test's examples in a default run (``make test``); set
``SCRIPTBRIDGE_FUZZ_EXAMPLES`` to a total for a deeper run."""
DEFAULT_TOTAL = sum(EXAMPLES.values())


def budget(default: int) -> int:
    """This test's share of ``SCRIPTBRIDGE_FUZZ_EXAMPLES`` (its default when unset)."""
    total = int(os.environ.get("SCRIPTBRIDGE_FUZZ_EXAMPLES", "0") or 0)
    return max(default, total * default // DEFAULT_TOTAL)


def fuzz(test: str) -> Callable[[Any], Any]:
    """Settings for the Hypothesis test named ``test`` in :data:`EXAMPLES`."""
    return settings(
        max_examples=budget(EXAMPLES[test]),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


LIMIT = 2048
"""The frame limit of fuzzed runs: small, so frames over it are cheap to write."""

LIMITS = Limits(wall_s=20, max_output_bytes=64, max_tool_calls=6, max_message_bytes=LIMIT)
SOURCE = "the script a hostile child never runs\n"
TOOLS = ("attach", "echo", "fail")

# --- strategies -------------------------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
KEYS = TEXT.filter(lambda key: key != "type")  # no dict of the data reads as a block
PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | TEXT
    | st.binary(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
ARGS = st.dictionaries(KEYS, PLAIN, max_size=3)
NAMES = st.sampled_from([*TOOLS, "nope", "x" * 512]) | TEXT
ANY = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | TEXT
    | st.binary(max_size=4)
    | st.lists(TEXT)
)


def message(op: str, call_id: int = 1) -> st.SearchStrategy[dict[str, Any]]:
    """A valid child message body of ``op`` (with ``call_id`` where it has one)."""
    match op:
        case "ready":
            return st.builds(
                lambda isolation, skipped: ready_body(isolation=isolation, skipped=skipped),
                st.lists(st.sampled_from(LAYER_NAMES), max_size=3, unique=True),
                st.lists(
                    st.fixed_dictionaries({"layer": st.sampled_from(LAYER_NAMES), "reason": TEXT}),
                    max_size=2,
                ),
            )
        case "output":
            return st.fixed_dictionaries(
                {"op": st.just("output"), "text": TEXT | st.sampled_from(["", "x" * 80])}
            )
        case "call_tool":
            return st.fixed_dictionaries(
                {"op": st.just(op), "call_id": st.just(call_id), "name": NAMES, "args": ARGS}
            )
        case "call_tools":
            calls = st.lists(st.fixed_dictionaries({"name": NAMES, "args": ARGS}), max_size=4)
            return st.fixed_dictionaries(
                {"op": st.just(op), "call_id": st.just(call_id), "calls": calls}
            )
        case "fetch":
            ref_ids = st.sampled_from(["ref_000000000000", "x" * 512]) | TEXT.filter(bool)
            return st.fixed_dictionaries(
                {"op": st.just(op), "call_id": st.just(call_id), "ref_id": ref_ids}
            )
        case "done":
            return st.fixed_dictionaries(
                {"op": st.just("done"), "value": PLAIN}, optional={"value_is_repr": st.booleans()}
            )
        case _:
            return st.fixed_dictionaries(
                {
                    "op": st.just("error"),
                    "type": st.sampled_from(["ValueError", "ToolError", "SandboxSetupFailed"]),
                    "message": TEXT,
                    "phase": st.sampled_from(["setup", "compile", "run"]),
                },
                optional={"line": st.none() | st.integers(0, 10**6)},
            )


OPS = ["ready", "output", "call_tool", "call_tools", "fetch", "done", "error"]
_MESSAGES = {op: message(op) for op in OPS}
WEIGHTED_OPS = ["output"] * 4 + ["call_tool"] * 3 + ["call_tools"] * 2 + OPS


MUTATIONS = st.sampled_from(["drop", "add", "retype", "op", "not-a-map"])
EXTRA_KEYS = st.sampled_from(["extra", "op2", "pid"])
HOST_OPS = st.sampled_from(
    ["start", "tool_result", "tool_error", "tool_results", "fetch_result", "launch", "", "READY"]
)


def index(draw: st.DrawFn, size: int) -> int:
    return draw(st.integers(0, size - 1))


def mutated(draw: st.DrawFn, body: dict[str, Any]) -> Any:
    """``body`` with one field dropped, added or retyped, its op changed, or not a map at all."""
    keys = sorted(body)
    match draw(MUTATIONS):
        case "drop":
            gone = keys[index(draw, len(keys))]
            return {k: v for k, v in body.items() if k != gone}
        case "add":
            return body | {draw(EXTRA_KEYS): draw(ANY)}
        case "retype":
            return body | {keys[index(draw, len(keys))]: draw(ANY)}
        case "op":
            return body | {"op": draw(HOST_OPS | ANY)}
        case _:
            return [[body], list(body), 7, "ready", None][index(draw, 5)]


# Bodies no validator should take: an extension type, a string that isn't UTF-8, an int map
# key, nesting past any depth bound, an array announcing 4G items, two objects in one body.
HOSTILE_BODIES = [
    msgpack.packb({"op": "output", "text": msgpack.ExtType(1, b"x")}),
    b"\x82\xa2op\xa6output\xa4text\xa3\xed\xa0\x80",
    msgpack.packb({1: 2}),
    b"\x91" * 300 + b"\xc0",
    b"\xdd\xff\xff\xff\xff",
    msgpack.packb({"op": "output", "text": "a"}) + b"\xc0",
    b"\xc1",
]


ENCODINGS = st.sampled_from(["true"] * 6 + ["cut", "trail", "flip", "prefix"])
LYING_PREFIXES = st.sampled_from([0, LIMIT, LIMIT + 1, 2**31, 2**32 - 1])


def encoded(draw: st.DrawFn, data: Any) -> bytes:
    """One frame of ``data``: mostly true, sometimes with a body or prefix that lies."""
    packed: bytes = msgpack.packb(data, use_bin_type=draw(st.booleans()))
    match draw(ENCODINGS):
        case "true":
            return frame(data)
        case "cut":
            packed = packed[: index(draw, len(packed))]
        case "trail":
            packed += draw(st.binary(min_size=1, max_size=4))
        case "flip":
            at = index(draw, len(packed))
            packed = (
                packed[:at] + bytes([packed[at] ^ draw(st.integers(1, 255))]) + packed[at + 1 :]
            )
        case _:
            if draw(st.booleans()):
                length = draw(LYING_PREFIXES)
            else:
                length = max(len(packed) + draw(st.integers(-3, 3)), 0)
            return length.to_bytes(4, "big") + packed
    return len(packed).to_bytes(4, "big") + packed


KINDS = st.sampled_from(["message"] * 6 + ["mutated", "hostile", "flood", "raw"])
ANY_MESSAGE = st.sampled_from(WEIGHTED_OPS).flatmap(lambda op: _MESSAGES[op])
HOSTILE_FRAMES = st.sampled_from(HOSTILE_BODIES)
FLOOD_FRAMES = st.sampled_from(
    [frame({"op": "output", "text": "x"}), frame({"op": "output", "text": ""})]
)


@st.composite
def conversations(draw: st.DrawFn, *, framed_only: bool = False) -> bytes:
    """What a hostile child writes: mostly a plausible conversation (a ready first, call ids
    in sequence) with mutations, wrong orders, floods, foreign bytes and a cut end."""
    pieces: list[bytes] = []
    if draw(st.integers(0, 9)) < 8:
        pieces.append(frame(draw(_MESSAGES["ready"])))
    due = 1
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(KINDS)
        if kind == "raw" and framed_only:
            kind = "hostile"
        body_ = dict(draw(ANY_MESSAGE))
        if "call_id" in body_:
            wrong = draw(st.integers(0, 19)) == 0
            body_["call_id"] = draw(st.sampled_from([0, 2, 2**53 + 1, due + 1])) if wrong else due
            due += kind == "message"
        match kind:
            case "message":
                pieces.append(frame(body_) if framed_only else encoded(draw, body_))
            case "mutated":
                pieces.append(frame(mutated(draw, body_)))
            case "hostile":
                packed = draw(HOSTILE_FRAMES)
                pieces.append(len(packed).to_bytes(4, "big") + packed)
            case "flood":
                pieces.append(draw(FLOOD_FRAMES) * draw(st.integers(2, 3000)))
            case _:
                pieces.append(draw(st.binary(max_size=12)))
    if draw(st.booleans()):
        pieces = draw(st.permutations(pieces))
    stream = b"".join(pieces)
    if not framed_only and draw(st.integers(0, 5)) == 0:
        stream = stream[: draw(st.integers(0, len(stream)))]
    return stream


# --- the model the supervisor is checked against ----------------------------------------------


@dataclass
class Outcome:
    """How a run must end, and the answers its child must have received, in order."""

    kind: str
    """``"ok"``, an error type, or ``"waiting"`` (the host must still be waiting)."""
    value: Any = None
    stdout: str = ""
    tool_calls: int = 0
    answers: list[tuple[str, int, list[str]]] = field(default_factory=list)
    """(op, call_id, kinds of a batch's outcomes) for each request the host served."""
    started: bool = False


def split_frames(stream: bytes, limit: int) -> tuple[list[bytes], str]:
    """The bodies of the whole frames ``stream`` starts with, and how it goes on after them:
    ``"end"`` (nothing), ``"cut"`` (part of a frame), ``"bad-prefix"`` (0 or over the limit)."""
    bodies: list[bytes] = []
    at = 0
    while True:
        rest = len(stream) - at
        if rest == 0:
            return bodies, "end"
        if rest < 4:
            return bodies, "cut"
        length = int.from_bytes(stream[at : at + 4], "big")
        if length == 0 or length > limit:
            return bodies, "bad-prefix"
        if rest - 4 < length:
            return bodies, "cut"
        bodies.append(stream[at + 4 : at + 4 + length])
        at += 4 + length


def serves(name: str, args: dict[str, Any]) -> bool:
    """Whether the harness's tools answer this call with a view (``fail``, an unknown name, or
    ``attach`` given an argument it doesn't take answer with an error)."""
    return name == "echo" or (name == "attach" and not args)


def simulate(
    bodies: list[bytes], after: str, limits: Limits, *, cut_anywhere: bool = False
) -> list[Outcome]:
    """The protocol's rules, restated: how the host must end a run whose child sent these
    bodies, then ``after`` (``"eof"``, ``"violation"`` or ``"hang"``). With ``cut_anywhere``,
    also every ending where a violation came right after any of the bodies (one pass)."""
    out = Outcome("waiting")
    endings: list[Outcome] = []
    used = 0
    due = 1

    def ended(kind: str) -> list[Outcome]:
        out.kind = kind
        return [*endings, out]

    for raw in bodies:
        if cut_anywhere:
            cut = Outcome("ProtocolViolation", None, out.stdout, out.tool_calls, [], out.started)
            cut.answers = list(out.answers)
            if not endings or endings[-1] != cut:
                endings.append(cut)
        try:
            msg = parse_child_message(raw)
        except ProtocolError:
            return ended("ProtocolViolation")
        if not out.started:
            if isinstance(msg, RunError) and msg.phase == "setup":
                return ended("SandboxCrashed")
            if not isinstance(msg, Ready) or msg.protocol != 1:
                return ended("ProtocolViolation")
            out.started = True
            continue
        call_id = getattr(msg, "call_id", None)
        if call_id is not None:
            if call_id != due:
                return ended("ProtocolViolation")
            due += 1
        match msg:
            case Ready():
                return ended("ProtocolViolation")
            case Output(text=text):
                data = text.encode()
                if len(data) > limits.max_output_bytes - used:
                    room = max(limits.max_output_bytes - used, 0)
                    out.stdout += data[:room].decode("utf-8", "ignore")
                    return ended("OutputExceeded")
                out.stdout += text
                used += len(data)
            case CallTool(name=name, args=args):
                out.tool_calls += 1
                if out.tool_calls > limits.max_tool_calls:
                    return ended("ToolCallsExceeded")
                op = "tool_result" if serves(name, args) else "tool_error"
                out.answers.append((op, msg.call_id, []))
            case CallTools(calls=calls):
                out.tool_calls += len(calls)
                if out.tool_calls > limits.max_tool_calls:
                    return ended("ToolCallsExceeded")
                kinds = ["ok" if serves(c.name, c.args) else "error" for c in calls]
                out.answers.append(("tool_results", msg.call_id, kinds))
            case Fetch():
                return ended("ProtocolViolation")  # no stream can know an id it was given
            case Done(value=value):
                out.value = value
                return ended("ok")
            case RunError(phase="setup"):
                return ended("SandboxCrashed")  # a setup failure after ready: it couldn't start
            case RunError(type=kind):
                return ended(kind)
    if after == "hang":
        return [*endings, out]
    return ended("SandboxCrashed" if after == "eof" else "ProtocolViolation")


def expected_outcomes(stream: bytes, limits: Limits, *, hang: bool = False) -> list[Outcome]:
    """Every ending the host may give ``stream`` (see the module doc for the one freedom)."""
    bodies, rest = split_frames(stream, limits.max_message_bytes)
    if rest == "bad-prefix":
        return simulate(bodies, "violation", limits, cut_anywhere=True)
    if rest == "cut":
        return simulate(bodies, "hang" if hang else "violation", limits)
    return simulate(bodies, "hang" if hang else "eof", limits)


def packed(value: Any) -> bytes:
    """A value as msgpack, so NaN compares equal to itself."""
    return bytes(msgpack.packb(value, use_bin_type=True))


def answers_of(received: list[HostMessage]) -> list[tuple[str, int, list[str]]]:
    found: list[tuple[str, int, list[str]]] = []
    for reply in received:
        match reply:
            case ToolResult() | ToolFailed() | FetchResult():
                found.append((reply.op, reply.call_id, []))
            case ToolResults(results=results):
                found.append((reply.op, reply.call_id, [r.kind for r in results]))
    return found


def matches(result: ScriptResult, received: list[HostMessage], want: Outcome) -> bool:
    """Whether a run ended as ``want`` says and its child was answered as ``want`` says.

    A child that said done is answered in full; one the host killed (after a violation, or
    when it closed its stream without an ending) may die before it read every answer sent."""
    kind = "ok" if result.ok else (result.error.type if result.error else "?")
    if kind != want.kind or result.stdout != want.stdout or result.tool_calls != want.tool_calls:
        return False
    answers = answers_of(received)
    if kind == "ok":
        return answers == want.answers and packed(result.value) == packed(want.value)
    return answers == want.answers[: len(answers)]


def check_run(result: ScriptResult, end: ChildEnd, wants: list[Outcome]) -> None:
    """The run ended as one of ``wants`` allows, and every answer was a valid message."""
    assert not end.problems, end.problems
    assert any(matches(result, end.received, want) for want in wants), (result, wants)
    if end.received:
        start = end.received[0]
        assert isinstance(start, Start) and start.source == SOURCE
        assert start.tools == sorted(TOOLS) and start.limits.max_message_bytes == LIMIT


# --- the harness --------------------------------------------------------------------------------


async def echo(**args: Any) -> dict[str, Any]:
    return {"args": args}


async def fail() -> None:
    raise RuntimeError("the tool failed on purpose")


@dataclass
class Harness:
    """One bridge, a nursery for pipe children, a payload server, and real runs beside them."""

    bridge: Bridge
    launcher: HostileLauncher
    children: trio.Nursery
    payloads: LoopbackServer
    stop: trio.Event = field(default_factory=trio.Event)
    idle: trio.Event = field(default_factory=trio.Event)
    """Set once the real runs beside the fuzzing have stopped."""
    beside: list[tuple[int, ScriptResult]] = field(default_factory=list)

    async def run_with(self, act: Any, limits: Limits = LIMITS) -> tuple[ScriptResult, ChildEnd]:
        """One run whose child is a pipe child doing ``act``; returns once it has exited."""
        made: list[PipeChild] = []

        def child() -> PipeChild:
            made.append(PipeChild(self.children, act))
            return made[-1]

        with self.launcher.hostile(child), trio.fail_after(2 * limits.wall_s + 20):
            result = await self.bridge.run(SOURCE, limits=limits)
            await made[0].exited.wait()
        return result, made[0].end

    async def run_raw(self, stream: bytes, *, hang: bool = False) -> tuple[ScriptResult, ChildEnd]:
        return await self.run_with(raw_act(stream, hang=hang))

    async def real_runs_beside(self) -> None:
        """Real sandboxed runs, one after another, until :attr:`stop` is set."""
        n = 0
        while not self.stop.is_set():
            self.beside.append((n, await self.bridge.run("inputs['n'] * 2\n", inputs={"n": n})))
            n += 1

    async def examples(self, check: Callable[[], None]) -> None:
        """Run a Hypothesis test in a worker thread (its examples come back here to run), then
        check that the real runs beside it all finished right."""
        await trio.to_thread.run_sync(check)
        self.stop.set()
        await self.idle.wait()
        assert self.beside, "no real run finished beside the fuzzing"
        assert all(r.ok and r.value == n * 2 for n, r in self.beside), self.beside


@pytest.fixture
async def harness(tmp_path: pathlib.Path, nursery: trio.Nursery) -> AsyncIterator[Harness]:
    payloads = await start_server(nursery)
    payloads.routes["/p.txt"] = body(b"payload", content_type="text/plain")

    def attach() -> dict[str, Any]:
        return {"content": [{"type": "resource_link", "uri": payloads.url("/p.txt")}]}

    launcher = HostileLauncher()
    async with Bridge(tmp_path / "ws", fetch_allow=["127.0.0.1"], launcher=launcher) as bridge:
        for tool in (echo, fail, attach):
            bridge.add_tool(python_tool(tool))
        async with trio.open_nursery() as children:
            harness = Harness(bridge, launcher, children, payloads)

            async def beside() -> None:
                try:
                    await harness.real_runs_beside()
                finally:
                    harness.idle.set()

            children.start_soon(beside)
            yield harness
            harness.stop.set()
    assert list((tmp_path / "ws" / "runs").iterdir()) == []


# --- the supervisor against hostile streams -----------------------------------------------------


async def test_hostile_streams_end_their_run_as_the_protocol_says(harness: Harness) -> None:
    """Every stream a child can write (mutated and foreign frames, wrong orders, floods, cut
    ends) ends its run as the protocol model says, with valid answers; run never raises."""

    @fuzz("streams")
    @given(conversations())
    def check(stream: bytes) -> None:
        result, end = trio.from_thread.run(harness.run_raw, stream)
        check_run(result, end, expected_outcomes(stream, LIMITS))

    await harness.examples(check)


async def test_violations_are_seen_without_waiting_for_the_stream_to_end(
    harness: Harness,
) -> None:
    """A child that keeps its pipe open gets its run ended as soon as what it sent decides it
    (a violation, an ending, a limit), never left waiting for bytes that won't come."""

    @fuzz("open-pipe")
    @given(conversations(framed_only=True), st.data())
    def check(stream: bytes, data: st.DataObject) -> None:
        decider = data.draw(
            st.sampled_from(
                [
                    (2**32 - 1).to_bytes(4, "big"),
                    (LIMIT + 1).to_bytes(4, "big") + b"x" * 10,
                    frame({"op": "launch"}),
                    frame({"op": "done", "value": 1}),
                    frame({"op": "output", "text": "y" * 100}),
                    frame(ready_body()),
                ]
            )
        )
        stream += decider
        wants = expected_outcomes(stream, LIMITS, hang=True)
        assume(all(want.kind != "waiting" for want in wants))
        result, end = trio.from_thread.run(lambda: harness.run_raw(stream, hang=True))
        check_run(result, end, wants)

    await harness.examples(check)


@st.composite
def plans(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """A well-behaved script's requests: prints, calls, batches and fetches of given ids."""
    steps: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(0, 5))):
        match draw(st.sampled_from(["print", "call", "batch", "attach-and-fetch"])):
            case "print":
                steps.append(("print", draw(TEXT)))
            case "call":
                steps.append(
                    ("call", (draw(st.sampled_from(["echo", "fail", "nope"])), draw(ARGS)))
                )
            case "batch":
                calls = st.tuples(st.sampled_from(["echo", "fail"]), ARGS)
                steps.append(("batch", draw(st.lists(calls, max_size=3))))
            case _:
                steps.append(("attach-and-fetch", None))
    return steps


class _Unexpected(Exception):
    """A well-behaved child got an answer it can't go on from."""


def well_behaved(steps: list[tuple[str, Any]], value: Any, problems: list[str]) -> Any:
    """An act that follows the protocol to the letter, checking every answer it gets."""

    async def act(end: ChildEnd) -> int:
        due = 1

        async def ask(body_: dict[str, Any], want: type) -> Any:
            nonlocal due
            await end.send(body_ | {"call_id": due})
            reply = await end.receive()
            if not isinstance(reply, want) or reply.call_id != due:
                problems.append(f"asked {body_['op']} {due}, got {reply!r}")
                raise _Unexpected
            due += 1
            return reply

        try:
            await end.send(ready_body())
            start = await end.receive()
            if not isinstance(start, Start) or start.limits.max_message_bytes != LIMIT:
                problems.append(f"expected start, got {start!r}")
                raise _Unexpected
            for step, arg in steps:
                match step:
                    case "print":
                        await end.send({"op": "output", "text": arg})
                    case "call":
                        name, args = arg
                        want = ToolResult if name == "echo" else ToolFailed
                        reply = await ask({"op": "call_tool", "name": name, "args": args}, want)
                        if name == "echo" and packed(reply.view["data"]) != packed({"args": args}):
                            problems.append(f"echo of {args!r} came back as {reply.view!r}")
                    case "batch":
                        calls = [{"name": name, "args": args} for name, args in arg]
                        reply = await ask({"op": "call_tools", "calls": calls}, ToolResults)
                        kinds = [r.kind for r in reply.results]
                        if kinds != ["ok" if name == "echo" else "error" for name, _ in arg]:
                            problems.append(f"batch {arg!r} answered {kinds}")
                    case _:
                        attach = {"op": "call_tool", "name": "attach", "args": {}}
                        ref_id = (await ask(attach, ToolResult)).view["content"][0]["id"]
                        fetched = await ask({"op": "fetch", "ref_id": ref_id}, FetchResult)
                        if fetched.saved_to != f"refs/{ref_id}.txt":
                            problems.append(f"fetch of {ref_id} answered {fetched!r}")
            await end.send({"op": "done", "value": value})
        except _Unexpected:
            return 1
        await end.host_closed.wait()
        return 0

    return act


async def test_well_behaved_children_are_served_correctly(harness: Harness) -> None:
    """A child that follows the protocol gets every answer right (echoed views, batch
    outcomes in order, fetches of the ids it was given) and its run ends with its value."""
    limits = LIMITS.model_copy(update={"max_output_bytes": 10_000, "max_tool_calls": 100})

    @fuzz("served")
    @given(plans(), PLAIN)
    def check(steps: list[tuple[str, Any]], value: Any) -> None:
        problems: list[str] = []
        act = well_behaved(steps, value, problems)
        result, end = trio.from_thread.run(harness.run_with, act, limits)
        assert not problems and not end.problems, (problems, end.problems)
        assert result.ok, result.error
        assert packed(result.value) == packed(value)
        assert result.stdout == "".join(arg for step, arg in steps if step == "print")
        fetches = sum(step == "attach-and-fetch" for step, _ in steps)
        assert result.fetches == fetches
        calls = sum(1 if s in ("call", "attach-and-fetch") else len(a) if s == "batch" else 0
                    for s, a in steps)  # fmt: skip
        assert result.tool_calls == calls

    await harness.examples(check)


async def test_ids_given_to_another_run_are_violations(harness: Harness) -> None:
    """A child that fetches a reference id given to another run, running or ended, ends its
    own run with ProtocolViolation; the run it was given to still fetches it."""
    got_id = trio.Event()
    go_on = trio.Event()
    given: list[str] = []

    async def owner(end: ChildEnd) -> int:
        await end.send(ready_body())
        await end.receive()
        await end.send({"op": "call_tool", "call_id": 1, "name": "attach", "args": {}})
        reply = await end.receive()
        assert isinstance(reply, ToolResult)
        given.append(reply.view["content"][0]["id"])
        got_id.set()
        await go_on.wait()
        await end.send({"op": "fetch", "call_id": 2, "ref_id": given[0]})
        fetched = await end.receive()
        await end.send({"op": "done", "value": getattr(fetched, "saved_to", None)})
        await end.host_closed.wait()
        return 0

    def thief() -> bytes:
        return frame(ready_body()) + frame({"op": "fetch", "call_id": 1, "ref_id": given[0]})

    async with trio.open_nursery() as nursery:
        outcome: list[ScriptResult] = []

        async def run_owner() -> None:
            outcome.append((await harness.run_with(owner))[0])

        nursery.start_soon(run_owner)
        await got_id.wait()
        during, _ = await harness.run_raw(thief(), hang=True)
        go_on.set()
    after, _ = await harness.run_raw(thief(), hang=True)
    for result in (during, after):
        assert result.error is not None and result.error.type == "ProtocolViolation", result
    assert outcome[0].ok and outcome[0].value == f"refs/{given[0]}.txt", outcome
    harness.stop.set()


async def test_a_flood_of_small_frames_leaves_other_runs_unaffected(harness: Harness) -> None:
    """Four children flooding the host with 40,000 tiny frames each end as their limits say,
    while real runs beside them finish with the right values."""
    flood = frame(ready_body()) + frame({"op": "output", "text": "x"}) * 40_000
    empty = frame(ready_body()) + frame({"op": "output", "text": ""}) * 40_000
    # a wall time no busy machine reaches: each must end by its output limit or its stream
    limits = LIMITS.model_copy(update={"max_output_bytes": 30_000, "wall_s": 120})
    results: list[ScriptResult] = []

    async def flooder(stream: bytes) -> None:
        results.append((await harness.run_with(raw_act(stream), limits))[0])

    async with trio.open_nursery() as nursery:
        for stream in (flood, flood, empty, empty):
            nursery.start_soon(flooder, stream)
    kinds = sorted(r.error.type for r in results if r.error is not None)
    assert kinds == ["OutputExceeded", "OutputExceeded", "SandboxCrashed", "SandboxCrashed"]
    harness.stop.set()
    await harness.idle.wait()
    assert harness.beside and all(r.ok and r.value == n * 2 for n, r in harness.beside)


# --- the decoder and the channel on their own ---------------------------------------------------


@st.composite
def split(draw: st.DrawFn, stream: bytes) -> list[bytes]:
    """``stream`` cut into pieces at arbitrary points."""
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    bounds = [0, *cuts, len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


@fuzz("decoder")
@given(conversations(), st.data())
def test_the_decoder_never_holds_more_than_one_frame(stream: bytes, data: st.DataObject) -> None:
    """Fed in any pieces, the decoder returns exactly the stream's whole frames, refuses a bad
    prefix as soon as its 4 bytes arrive, and holds at most one frame's prefix and body
    within the limit after every feed."""
    bodies, rest = split_frames(stream, LIMIT)
    decoder = FrameDecoder(limit=LIMIT)
    seen: list[bytes] = []
    fed = 0
    for piece in data.draw(split(stream)):
        try:
            seen += decoder.feed(piece)
        except ProtocolError:
            assert rest == "bad-prefix"
            consumed = sum(4 + len(b) for b in bodies) + 4
            assert fed < consumed <= fed + len(piece)  # at the piece with the prefix's 4th byte
            with pytest.raises(ProtocolError):
                decoder.feed(b"")
            return
        fed += len(piece)
        held = decoder.buffered
        assert held < 4 if decoder._need is None else held < decoder._need <= LIMIT
    assert seen == bodies and rest != "bad-prefix"
    assert decoder.at_boundary == (rest == "end")


@fuzz("channel")
@given(conversations(), st.data())
async def test_the_channel_yields_validated_messages_in_order(
    stream: bytes, data: st.DataObject
) -> None:
    """Written into a real pipe in any pieces, a stream comes out of ChildChannel as its valid
    messages in order, then None at a clean end or ProtocolViolation, with the decoder never
    holding more than one frame."""
    pieces = data.draw(split(stream))
    bodies, rest = split_frames(stream, LIMIT)
    valid: list[Any] = []
    invalid = False
    for raw in bodies:
        try:
            valid.append(parse_child_message(raw))
        except ProtocolError:
            invalid = True
            break
    host_r, child_w = os.pipe()
    child_r, host_w = os.pipe()
    channel = ChildChannel(host_r, host_w, limit=LIMIT)
    writer = trio.lowlevel.FdStream(child_w)
    got: list[Any] = []
    ending: str = "none"

    async def write() -> None:
        for piece in pieces:
            await writer.send_all(piece)
        await writer.aclose()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write)
            try:
                while (message_ := await channel.receive()) is not None:
                    got.append(message_)
                    held = channel._decoder.buffered + sum(map(len, channel._bodies))
                    assert held <= LIMIT + 4 + READ_CHUNK
                ending = "end"
            except ProtocolViolation:
                ending = "violation"
                nursery.cancel_scope.cancel()
    await channel.aclose()
    await writer.aclose()
    os.close(child_r)
    assert ending == ("end" if rest == "end" and not invalid else "violation")
    # Compared by repr: a float NaN in a message's data is never == itself.
    if rest == "bad-prefix":  # frames read with the bad prefix may go unread
        assert list(map(repr, got)) == list(map(repr, valid[: len(got)]))
    else:
        assert list(map(repr, got)) == list(map(repr, valid))


def test_the_fuzz_budget_reaches_two_thousand() -> None:
    """A default run of this harness tries at least 2,000 examples."""
    assert DEFAULT_TOTAL >= 2000
