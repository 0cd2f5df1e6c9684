"""The channel's messages between the host and one sandbox child, and their parsers. No I/O.

Each message is a pydantic model whose ``op`` names it. A frame body (:mod:`._framing`) is
validated by :func:`parse_child_message` or :func:`parse_host_message`: unknown ops, unknown
fields, wrong types and out-of-range values are refused with :class:`ProtocolError`. Payload
fields are :data:`~sandbox.protocol.PlainData`.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, TypeAlias

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from .._endings import LIMITS
from ._framing import DEFAULT_FRAME_LIMIT, MAX_FRAME, ProtocolError, unpack_body
from ._names import (
    CARRY_MAX_BYTES,
    CARRY_MAX_DEFINITIONS,
    CARRY_MAX_NAMES,
    LAYER_NAMES,
    MAX_PARAMETERS,
    PROTOCOL_VERSION,
    Layer,
    carry_bytes,
)
from ._plain import check_plain

__all__ = [
    "CARRY_MAX_BYTES",
    "CARRY_MAX_DEFINITIONS",
    "CARRY_MAX_NAMES",
    "LAYER_NAMES",
    "PROTOCOL_VERSION",
    "CallFailed",
    "CallOk",
    "CallTool",
    "CallTools",
    "Carry",
    "CarryIn",
    "ChildMessage",
    "Done",
    "Fetch",
    "FetchResult",
    "HostMessage",
    "Layer",
    "Output",
    "PlainData",
    "Ready",
    "RunError",
    "RunLimits",
    "SkippedLayer",
    "Start",
    "ToolCall",
    "ToolFailed",
    "ToolResult",
    "ToolResults",
    "carry_bytes",
    "parse_child_message",
    "parse_host_message",
]

_LIMIT_NAMES: Final = frozenset(limit.value for limit in LIMITS)

PlainData: TypeAlias = Annotated[Any, AfterValidator(check_plain)]
"""Any value that :func:`~sandbox.protocol.check_plain` accepts."""

_Name = Annotated[str, Field(min_length=1, max_length=512)]
_Parameter = Annotated[str, Field(min_length=1, max_length=128)]
_CallId = Annotated[int, Field(ge=1, le=2**53)]
_Count = Annotated[int, Field(ge=0, le=2**53)]


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SkippedLayer(_Message):
    """An isolation layer the child did not apply, and why (never skipped silently)."""

    layer: Layer
    reason: str


class RunLimits(_Message):
    """Limits the child enforces on itself for one run (the host enforces them too).

    Attributes:
        max_output_bytes: UTF-8 bytes of printed text the child streams before it stops the
            script with ``OutputExceeded``.
        max_tool_calls: tool calls (a batch counts each call) before ``ToolCallsExceeded``.
        max_value_bytes: bound on the script's value: a repr is cut to this many characters,
            and a plain value whose frame would pass the frame limit is sent as its cut repr.
        max_message_bytes: the frame limit for every message after ``start``, both ways.
        max_out_bytes: bytes of file contents ``write_text`` lets the run leave in ``out/``
            before it stops the script with ``DiskQuotaExceeded``.
        max_out_files: files and directories ``write_text`` lets the run leave in ``out/``
            before ``DiskQuotaExceeded``.
    """

    max_output_bytes: Annotated[int, Field(ge=0, le=2**40)] = 1_000_000
    max_tool_calls: Annotated[int, Field(ge=0, le=2**40)] = 1000
    max_value_bytes: Annotated[int, Field(ge=64, le=MAX_FRAME)] = 100_000
    max_message_bytes: Annotated[int, Field(ge=1024, le=MAX_FRAME)] = DEFAULT_FRAME_LIMIT
    max_out_bytes: Annotated[int, Field(ge=0, le=2**40)] = 64 * 2**20
    max_out_files: Annotated[int, Field(ge=0, le=10**6)] = 1000


def _script_name(name: str) -> str:
    if not name.isidentifier() or name.startswith("_"):
        raise ValueError(f"{name[:40]!r} is not a name a script can bind")
    return name


_ScriptName = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_script_name)]
"""A global of a script: an identifier not starting with ``_`` (the hooks' names do)."""

_Definitions = Annotated[
    list[Annotated[str, Field(max_length=CARRY_MAX_BYTES)]],
    Field(max_length=CARRY_MAX_DEFINITIONS),
]
_Globals = Annotated[dict[_ScriptName, PlainData], Field(max_length=CARRY_MAX_NAMES)]


class CarryIn(_Message):
    """In ``start`` of a session's step: what its earlier successful steps left.

    Attributes:
        globals: plain values to bind as globals before the script runs.
        definitions: sources of top-level ``def``, ``class`` and ``import`` statements, re-run
            in order (every effect refused) before the script, between two bindings of
            ``globals`` (so a definition may read a carried value, and a value bound later
            than a stale definition of its name wins).
        max_bytes: the bound of what this step may carry out (:func:`carry_bytes`).
    """

    globals: _Globals = Field(default_factory=dict)
    definitions: _Definitions = Field(default_factory=list)
    max_bytes: Annotated[int, Field(ge=0, le=CARRY_MAX_BYTES)] = CARRY_MAX_BYTES


# child -> host


class Carry(_Message):
    """Child -> host, in a session's step only, at most once, right before ``done``: what
    carries to the session's next step (a step that fails sends none).

    ``globals`` and ``definitions`` are as in :class:`CarryIn`, within its ``max_bytes``;
    ``dropped`` names the globals that could not carry (not plain data, past the bound, a
    definition that failed to re-run), at most :data:`CARRY_MAX_NAMES` of them.
    """

    op: Literal["carry"] = "carry"
    globals: _Globals = Field(default_factory=dict)
    definitions: _Definitions = Field(default_factory=list)
    dropped: Annotated[list[_ScriptName], Field(max_length=CARRY_MAX_NAMES)] = Field(
        default_factory=list
    )


class Ready(_Message):
    """Child -> host, first message: isolation is in force and the child awaits ``start``.

    ``pid`` is the child's pid as the host numbers it (in a PID namespace of its own the
    child is pid 1). ``isolation`` lists the layers in force, in the order applied; ``skipped``
    names every layer that was not applied with the reason. ``restricted-python`` is listed
    here when the script will be compiled by the restricted compiler.
    """

    op: Literal["ready"] = "ready"
    protocol: int
    pid: int
    isolation: list[Layer]
    skipped: list[SkippedLayer]


class ToolCall(_Message):
    """One call of a batch: a tool name as the host registered it, and its arguments."""

    name: _Name
    args: dict[str, PlainData]


class CallTool(_Message):
    """Child -> host: call one tool; the child blocks for ``tool_result`` or ``tool_error``."""

    op: Literal["call_tool"] = "call_tool"
    call_id: _CallId
    name: _Name
    args: dict[str, PlainData]


class CallTools(_Message):
    """Child -> host: call a batch of tools concurrently; answered by one ``tool_results``."""

    op: Literal["call_tools"] = "call_tools"
    call_id: _CallId
    calls: Annotated[list[ToolCall], Field(max_length=10_000)]


class Fetch(_Message):
    """Child -> host: fetch the payload of reference ``ref_id``; answered by ``fetch_result``."""

    op: Literal["fetch"] = "fetch"
    call_id: _CallId
    ref_id: _Name


class Output(_Message):
    """Child -> host: text the script printed, streamed in order (well-formed UTF-8)."""

    op: Literal["output"] = "output"
    text: str


class Done(_Message):
    """Child -> host, last message of a run that completed.

    ``value`` is the value of the script's last expression statement (``None`` if the script
    did not end with one). When that value was not plain data, or too large, ``value`` is its
    ``repr`` cut to ``max_value_bytes`` characters, ``value_is_repr`` is true and ``not_plain``
    says why (``a Foo``, ``more than N bytes``).
    """

    op: Literal["done"] = "done"
    value: PlainData
    value_is_repr: bool = False
    not_plain: Annotated[str, Field(max_length=500)] | None = None


class RunError(_Message):
    """Child -> host, last message of a run that failed.

    Attributes:
        type: the exception's class name (``SyntaxError``, ``CompileError``, ``KeyError``...),
            or, in the ``limit`` phase, the limit the child enforced itself (an
            :class:`Ending` that is a limit: ``OutputExceeded``, ``ToolCallsExceeded``,
            ``DiskQuotaExceeded``, ``MemoryExceeded``); or ``SandboxSetupFailed`` when the
            child could not start.
        message: human-readable text, cut to a bound.
        line: the script line the error points at, when known.
        phase: ``setup`` (before the script was read), ``compile``, ``run`` (the script
            raised: whatever its exception is named, it is the script's failure) or ``limit``
            (the child stopped the script at one of its limits).
    """

    op: Literal["error"] = "error"
    type: _Name
    message: str
    line: Annotated[int, Field(ge=0)] | None = None
    phase: Literal["setup", "compile", "run", "limit"]

    @model_validator(mode="after")
    def _a_limit_names_one(self) -> RunError:
        if self.phase == "limit" and self.type not in _LIMIT_NAMES:
            raise ValueError(f"{self.type!r} is not a limit")
        return self


# host -> child


class Start(_Message):
    """Host -> child, once, in answer to ``ready``: the script and what it may use.

    ``tools`` lists the tool names the script may call (``tools.<name>`` is derived from it);
    ``parameters`` the names of each one's arguments in its schema's order, where it has some
    (``tools.<name>(a, b)`` binds positionals to them).
    ``carry`` is set for a step of a session (what its earlier steps left, possibly nothing)
    and ``None`` for a lone run; only a step answers with a :class:`Carry`.
    """

    op: Literal["start"] = "start"
    source: str
    inputs: dict[str, PlainData] = Field(default_factory=dict)
    tools: list[_Name] = Field(default_factory=list)
    parameters: dict[_Name, Annotated[list[_Parameter], Field(max_length=MAX_PARAMETERS)]] = (
        Field(default_factory=dict)
    )
    limits: RunLimits = Field(default_factory=RunLimits)
    carry: CarryIn | None = None


class ToolResult(_Message):
    """Host -> child: the script view (SPEC 6.1) of a tool's result for ``call_id``."""

    op: Literal["tool_result"] = "tool_result"
    call_id: _CallId
    view: PlainData


class ToolFailed(_Message):
    """Host -> child: the call ``call_id`` failed; the script sees ``ToolError(message)``."""

    op: Literal["tool_error"] = "tool_error"
    call_id: _CallId
    message: str


class CallOk(_Message):
    """One successful outcome in ``tool_results``."""

    kind: Literal["ok"] = "ok"
    view: PlainData


class CallFailed(_Message):
    """One failed outcome in ``tool_results``."""

    kind: Literal["error"] = "error"
    message: str


class ToolResults(_Message):
    """Host -> child: the outcomes of a ``call_tools`` batch, one per call, in call order."""

    op: Literal["tool_results"] = "tool_results"
    call_id: _CallId
    results: list[Annotated[CallOk | CallFailed, Field(discriminator="kind")]]


class FetchResult(_Message):
    """Host -> child: exactly one of ``saved_to`` (a workspace path under ``refs/``) or
    ``unfetchable`` (the reason, raised in the script as ``Unfetchable``)."""

    op: Literal["fetch_result"] = "fetch_result"
    call_id: _CallId
    saved_to: str | None = None
    unfetchable: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> FetchResult:
        if (self.saved_to is None) == (self.unfetchable is None):
            raise ValueError("exactly one of saved_to and unfetchable must be set")
        if self.saved_to is not None and not self.saved_to.startswith("refs/"):
            raise ValueError("saved_to must be a path under refs/")
        return self


ChildMessage: TypeAlias = Annotated[
    Ready | CallTool | CallTools | Fetch | Output | Carry | Done | RunError,
    Field(discriminator="op"),
]
HostMessage: TypeAlias = Annotated[
    Start | ToolResult | ToolFailed | ToolResults | FetchResult, Field(discriminator="op")
]

_CHILD_ADAPTER: TypeAdapter[ChildMessage] = TypeAdapter(ChildMessage)
_HOST_ADAPTER: TypeAdapter[HostMessage] = TypeAdapter(HostMessage)


def parse_child_message(body: bytes) -> ChildMessage:
    """Validate one frame body sent by a child and return the message.

    Raises:
        ProtocolError: the body is not msgpack, or not a valid child message.
    """
    data = unpack_body(body)
    try:
        return _CHILD_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise ProtocolError(f"invalid message from the child: {_summary(exc)}") from exc


def parse_host_message(body: bytes) -> HostMessage:
    """Validate one frame body sent by the host and return the message.

    Raises:
        ProtocolError: the body is not msgpack, or not a valid host message.
    """
    data = unpack_body(body)
    try:
        return _HOST_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise ProtocolError(f"invalid message from the host: {_summary(exc)}") from exc


def _summary(exc: ValidationError) -> str:
    first = exc.errors(include_url=False, include_input=False)[:3]
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or '<body>'}: {error['msg']}"
        for error in first
    )
