"""The child's messages (:mod:`sandbox._wire`) against the protocol's models, which the host
validates with: the same fields and defaults, and bodies each side reads as the other meant."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
import pytest
from pydantic import BaseModel

from sandbox import _wire, protocol
from sandbox.protocol import encode_frame, parse_child_message

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
