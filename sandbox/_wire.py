"""The channel's messages as the child holds them: plain classes, no pydantic. No I/O.

The messages are defined, and validated, by :mod:`sandbox.protocol` (its pydantic models),
which the host uses: it validates everything a child sends, so the child needs no validator for
what it sends, and what it reads comes from the trusted host. Here each message the child uses
is a frozen class with the same name, the same fields (and defaults) and the same ``op``, which
:meth:`body` turns into the msgpack map the model would dump to; :func:`read_host_message` reads
a host message's body into these classes (its ``op``, its fields: nothing is checked beyond
what the child needs to act on it). ``tests/sandbox/test_sandbox_wire.py`` checks that the two
agree, field for field, default for default, both ways.

Holding no pydantic object keeps a child's pages its own: building, validating and dumping a
model touches many pages of pydantic's shared with the zygote, each copied on that first touch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, TypeVar

from .protocol._framing import DEFAULT_FRAME_LIMIT, ProtocolError, unpack_body

__all__ = [
    "CallFailed",
    "CallOk",
    "CallTool",
    "CallTools",
    "Carry",
    "CarryIn",
    "Done",
    "Fetch",
    "FetchResult",
    "HostMessage",
    "Output",
    "Ready",
    "RunError",
    "RunLimits",
    "SkippedLayer",
    "Start",
    "ToolCall",
    "ToolFailed",
    "ToolResult",
    "ToolResults",
    "read_host_message",
]


_W = TypeVar("_W", bound="_Wire")


class _Wire:
    """A message (``op``), an item of one (``kind``), or a part of one: its fields, in order."""

    __slots__ = ()
    op: ClassVar[str | None] = None
    kind: ClassVar[str | None] = None

    def body(self) -> dict[str, Any]:
        """The map this stands for on the wire, as the protocol's model dumps it."""
        body: dict[str, Any] = {}
        if self.op is not None:
            body["op"] = self.op
        if self.kind is not None:
            body["kind"] = self.kind
        for name in _field_names(type(self)):
            body[name] = _body(getattr(self, name))
        return body

    def model_copy(self: _W, *, update: dict[str, Any]) -> _W:
        """A copy with the fields of ``update`` replaced (as a pydantic model's)."""
        return dataclasses.replace(self, **update)  # type: ignore[type-var]


_FIELD_NAMES: Final[dict[type, tuple[str, ...]]] = {}


def _field_names(kind: type) -> tuple[str, ...]:
    """The fields of message class ``kind``, in order (read once per class: the zygote's
    warm-up reads those of the messages a run sends, before any fork)."""
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = tuple(item.name for item in dataclasses.fields(kind))
    return names


def _body(value: Any) -> Any:
    if isinstance(value, _Wire):
        return value.body()
    if type(value) is list and value and isinstance(value[0], _Wire):
        return [item.body() for item in value]
    return value


# child -> host


@dataclass(frozen=True, slots=True, kw_only=True)
class SkippedLayer(_Wire):
    """An isolation layer the child did not apply, and why."""

    layer: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Ready(_Wire):
    """The child's first message: isolated, waiting for ``start``."""

    op: ClassVar[str] = "ready"
    protocol: int
    pid: int
    isolation: list[str]
    skipped: list[SkippedLayer]


@dataclass(frozen=True, slots=True, kw_only=True)
class Output(_Wire):
    """Text the script printed."""

    op: ClassVar[str] = "output"
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall(_Wire):
    """One call of a batch."""

    name: str
    args: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallTool(_Wire):
    """Call one tool."""

    op: ClassVar[str] = "call_tool"
    call_id: int
    name: str
    args: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallTools(_Wire):
    """Call a batch of tools."""

    op: ClassVar[str] = "call_tools"
    call_id: int
    calls: list[ToolCall]


@dataclass(frozen=True, slots=True, kw_only=True)
class Fetch(_Wire):
    """Fetch a reference's payload."""

    op: ClassVar[str] = "fetch"
    call_id: int
    ref_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Carry(_Wire):
    """What a session's step carries to the next."""

    op: ClassVar[str] = "carry"
    globals: dict[str, Any] = field(default_factory=dict)
    definitions: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Done(_Wire):
    """The last message of a run that completed."""

    op: ClassVar[str] = "done"
    value: Any
    value_is_repr: bool = False
    not_plain: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunError(_Wire):
    """The last message of a run that failed (``phase``: setup, compile, run or limit)."""

    op: ClassVar[str] = "error"
    type: str
    message: str
    line: int | None = None
    phase: str


# host -> child


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimits(_Wire):
    """The limits the child keeps for one run."""

    max_output_bytes: int = 1_000_000
    max_tool_calls: int = 1000
    max_value_bytes: int = 100_000
    max_message_bytes: int = DEFAULT_FRAME_LIMIT
    max_out_bytes: int = 64 * 2**20
    max_out_files: int = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class CarryIn(_Wire):
    """What a session's earlier steps left."""

    globals: dict[str, Any] = field(default_factory=dict)
    definitions: list[str] = field(default_factory=list)
    max_bytes: int = 2**20


@dataclass(frozen=True, slots=True, kw_only=True)
class Start(_Wire):
    """The script and what it may use."""

    op: ClassVar[str] = "start"
    source: str
    inputs: dict[str, Any] = field(default_factory=dict)
    tools: list[str] = field(default_factory=list)
    parameters: dict[str, list[str]] = field(default_factory=dict)
    limits: RunLimits = field(default_factory=RunLimits)
    carry: CarryIn | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult(_Wire):
    """A tool's script view."""

    op: ClassVar[str] = "tool_result"
    call_id: int
    view: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFailed(_Wire):
    """A tool call that failed."""

    op: ClassVar[str] = "tool_error"
    call_id: int
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOk(_Wire):
    """One successful outcome of a batch."""

    kind: ClassVar[str] = "ok"
    view: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFailed(_Wire):
    """One failed outcome of a batch."""

    kind: ClassVar[str] = "error"
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResults(_Wire):
    """The outcomes of a batch, in call order."""

    op: ClassVar[str] = "tool_results"
    call_id: int
    results: list[CallOk | CallFailed]


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResult(_Wire):
    """Where a fetch saved its payload, or why it couldn't."""

    op: ClassVar[str] = "fetch_result"
    call_id: int
    saved_to: str | None = None
    unfetchable: str | None = None


HostMessage = Start | ToolResult | ToolFailed | ToolResults | FetchResult


def _outcome(body: dict[str, Any]) -> CallOk | CallFailed:
    if body.get("kind") == "ok":
        return CallOk(view=body["view"])
    if body.get("kind") == "error":
        return CallFailed(message=body["message"])
    raise ValueError(f"unknown outcome kind {body.get('kind')!r}")


def _start(body: dict[str, Any]) -> Start:
    limits, carry = body.get("limits"), body.get("carry")
    return Start(
        source=body["source"],
        inputs=body.get("inputs", {}),
        tools=body.get("tools", []),
        parameters=body.get("parameters", {}),
        limits=RunLimits() if limits is None else RunLimits(**limits),
        carry=None if carry is None else CarryIn(**carry),
    )


_READERS: Final[dict[str, Callable[[dict[str, Any]], HostMessage]]] = {
    "start": _start,
    "tool_result": lambda body: ToolResult(call_id=body["call_id"], view=body["view"]),
    "tool_error": lambda body: ToolFailed(call_id=body["call_id"], message=body["message"]),
    "tool_results": lambda body: ToolResults(
        call_id=body["call_id"], results=[_outcome(item) for item in body["results"]]
    ),
    "fetch_result": lambda body: FetchResult(
        call_id=body["call_id"],
        saved_to=body.get("saved_to"),
        unfetchable=body.get("unfetchable"),
    ),
}


def read_host_message(body: bytes) -> HostMessage:
    """The host message in frame ``body``, as the classes above.

    Raises:
        ProtocolError: the body is not msgpack, or not a host message (an unknown ``op``, a
            missing or unknown field).
    """
    data = unpack_body(body)
    if not isinstance(data, dict):
        raise ProtocolError("a host message is a map")
    op = data.get("op")
    reader = _READERS.get(op) if isinstance(op, str) else None
    if reader is None:
        raise ProtocolError(f"unknown host message {str(data.get('op'))[:40]!r}")
    try:
        message = reader(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ProtocolError(f"invalid {data['op']} from the host: {exc!r}"[:200]) from exc
    return message
