"""The child's messages (:mod:`sandbox._wire`) and the zygote's requests
(:mod:`sandbox._zygote_wire`) against the protocol's models, which the host validates with: the
same fields, bounds and defaults, and bodies each side reads as the other meant."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
import pytest
from pydantic import BaseModel, ValidationError

from sandbox import _wire, protocol
from sandbox._zygote_wire import LIMIT_BOUNDS, ChildLimits, read_request
from sandbox.protocol import ZygoteError, _zygote_messages, encode_frame, parse_child_message

PAIRS = [
    (getattr(_wire, name), getattr(protocol, name))
    for name in _wire.__all__
    if name not in ("HostMessage", "read_host_message")
]


def plain(value: Any) -> Any:
    """A default as data: a message default as the map it stands for."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="python")
    return value.body() if hasattr(value, "body") else value


def fields_of(model: type[BaseModel]) -> dict[str, Any]:
    """A model's fields (``op`` and ``kind`` aside) and their defaults (``...`` for none)."""
    found = {}
    for name, info in model.model_fields.items():
        if name in ("op", "kind"):
            continue
        if info.default_factory is not None:
            found[name] = plain(info.default_factory())  # type: ignore[call-arg]
        else:
            found[name] = ... if info.is_required() else info.default
    return found


def defaults_of(light: type) -> dict[str, Any]:
    found = {}
    for item in dataclasses.fields(light):
        if item.default_factory is not dataclasses.MISSING:
            found[item.name] = plain(item.default_factory())
        elif item.default is not dataclasses.MISSING:
            found[item.name] = item.default
        else:
            found[item.name] = ...
    return found


@pytest.mark.parametrize(("light", "model"), PAIRS, ids=[light.__name__ for light, _ in PAIRS])
def test_each_message_has_the_models_fields_and_defaults(light: type, model: type) -> None:
    """Field for field, default for default, op for op, the child's class is the model."""
    assert defaults_of(light) == fields_of(model)
    for tag in ("op", "kind"):
        if tag in model.model_fields:
            assert getattr(light, tag) == model.model_fields[tag].default


CHILD_SENDS = [
    _wire.Ready(
        protocol=1,
        pid=7,
        isolation=["rlimits"],
        skipped=[_wire.SkippedLayer(layer="uid", reason="x")],
    ),
    _wire.Output(text="hi"),
    _wire.CallTool(call_id=1, name="docs.search", args={"q": [1, b"\0"]}),
    _wire.CallTools(
        call_id=2,
        calls=[_wire.ToolCall(name="a", args={}), _wire.ToolCall(name="b", args={"x": 1})],
    ),
    _wire.Fetch(call_id=3, ref_id="ref_1"),
    _wire.Carry(globals={"x": 1}, definitions=["def f(): pass"], dropped=["y"]),
    _wire.Done(value={"k": [1.5, None]}),
    _wire.Done(value="<x>", value_is_repr=True),
    _wire.RunError(type="OutputExceeded", message="m", line=3, phase="limit"),
    _wire.RunError(type="SandboxSetupFailed", message="m", phase="setup"),
]


@pytest.mark.parametrize("message", CHILD_SENDS, ids=lambda message: type(message).__name__)
def test_what_the_child_sends_is_the_message_the_host_validates(message: Any) -> None:
    """Every message the child builds reads, on the host, as the model with the same fields."""
    parsed = parse_child_message(encode_frame(message)[4:])
    assert type(parsed).__name__ == type(message).__name__
    assert parsed.model_dump(mode="python") == message.body()


HOST_SENDS = [
    protocol.Start(source="1"),
    protocol.Start(
        source="x",
        inputs={"q": "a"},
        tools=["t"],
        limits=protocol.RunLimits(max_output_bytes=5),
        carry=protocol.CarryIn(globals={"a": 1}, definitions=["import json"], max_bytes=10),
    ),
    protocol.ToolResult(call_id=1, view={"content": []}),
    protocol.ToolFailed(call_id=2, message="no"),
    protocol.ToolResults(
        call_id=3, results=[protocol.CallOk(view=1), protocol.CallFailed(message="e")]
    ),
    protocol.FetchResult(call_id=4, saved_to="refs/a"),
    protocol.FetchResult(call_id=5, unfetchable="gone"),
]


@pytest.mark.parametrize("message", HOST_SENDS, ids=lambda message: type(message).__name__)
def test_what_the_host_sends_is_what_the_child_reads(message: BaseModel) -> None:
    """Every host message reads, in the child, as its class with the same fields."""
    read = _wire.read_host_message(encode_frame(message)[4:])
    assert type(read).__name__ == type(message).__name__
    assert read.body() == message.model_dump(mode="python")


@pytest.mark.parametrize(
    "body",
    [
        [1, 2],
        {"op": "nope"},
        {"op": "start"},
        {"op": "tool_result", "call_id": 1},
        {"op": "tool_results", "call_id": 1, "results": [{"kind": "maybe"}]},
        {"op": "start", "source": "", "limits": {"max_tool_calls": 1, "what": 2}},
    ],
)
def test_the_child_refuses_what_is_no_host_message(body: Any) -> None:
    """An unknown op, a missing field or an unknown one is a ``ProtocolError``."""
    with pytest.raises(protocol.ProtocolError):
        _wire.read_host_message(msgpack.packb(body))


def bounds_of(info: Any) -> tuple[float | None, float | None, bool]:
    """A model field's lowest and highest value, and whether the lowest is allowed."""
    low: float | None = None
    high: float | None = None
    low_allowed = True
    for item in info.metadata:
        if getattr(item, "gt", None) is not None:
            low, low_allowed = item.gt, False
        if getattr(item, "ge", None) is not None:
            low = item.ge
        if getattr(item, "le", None) is not None:
            high = item.le
    return low, high, low_allowed


def test_the_zygotes_limits_have_the_models_bounds_and_defaults() -> None:
    """The OS limits the zygote checks by hand are the model's: same names, types, bounds and
    defaults."""
    model = protocol.ChildLimits.model_fields
    assert set(LIMIT_BOUNDS) == set(model)
    for name, (kind, low, high, low_allowed, default) in LIMIT_BOUNDS.items():
        assert model[name].annotation is kind, name
        assert bounds_of(model[name]) == (low, high, low_allowed), name
        assert model[name].default == default, name
    assert defaults_of(ChildLimits) == fields_of(protocol.ChildLimits)


def spawn(**changes: Any) -> dict[str, Any]:
    body = msgpack.unpackb(protocol.encode_request("spawn", 1, workspace="/w"))
    for key, value in changes.items():
        if key.startswith("limits."):
            body["limits"][key.split(".", 1)[1]] = value
        else:
            body[key] = value
    return body


REQUESTS = [
    msgpack.unpackb(protocol.encode_request("spawn", 3, workspace="/w", disable=["seccomp"])),
    msgpack.unpackb(protocol.encode_request("wait", 4, pid=10)),
    msgpack.unpackb(protocol.encode_request("kill", 5, pid=10, sig=15)),
    {"op": "kill", "req_id": 1, "pid": 3},
    {"op": "spawn", "req_id": 1, "workspace": "/w", "limits": {}},
    spawn(**{"limits.cpu_s": 2}),
    spawn(**{"limits.cpu_s": 0.0}),
    spawn(**{"limits.cpu_s": 86_400.5}),
    spawn(**{"limits.cpu_s": "1"}),
    spawn(**{"limits.memory_mb": 15}),
    spawn(**{"limits.memory_mb": 16}),
    spawn(**{"limits.memory_mb": True}),
    spawn(**{"limits.memory_mb": 16.0}),
    spawn(**{"limits.max_open_files": 65_537}),
    spawn(**{"limits.max_out_files": -1}),
    spawn(**{"limits.surprise": 1}),
    spawn(req_id=0),
    spawn(workspace=""),
    spawn(workspace="x" * 4097),
    spawn(disable=["nope"]),
    spawn(disable="seccomp"),
    spawn(extra=1),
    {"op": "spawn", "req_id": 1, "limits": {}},
    {"op": "wait", "req_id": 1, "pid": "1"},
    {"op": "kill", "req_id": 1, "pid": 1, "signal": 65},
    {"op": "kill", "req_id": 1, "pid": 1, "signal": 0},
    {"op": "fork", "req_id": 1},
    [1],
]


@pytest.mark.parametrize("body", REQUESTS)
def test_the_zygote_takes_the_requests_the_models_take(body: Any) -> None:
    """A request the zygote reads by hand is one the models accept, and it refuses the rest,
    with the same fields."""
    try:
        expected = _zygote_messages.REQUESTS.validate_python(body)
    except ValidationError:
        with pytest.raises(ZygoteError):
            read_request(msgpack.packb(body))
        return
    got = read_request(msgpack.packb(body))
    dumped = expected.model_dump(mode="python")
    dumped.pop("op")
    assert dataclasses.asdict(got) == dumped
