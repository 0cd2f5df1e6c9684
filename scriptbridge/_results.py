"""What a run gives back: ``ScriptResult``, and ``ScriptError`` for how a run that did not
finish ended, as pydantic models; the reading of a child's ``RunError`` into a ``ScriptError``.

Every run that did not finish has one :class:`~sandbox.protocol.Ending`, the enum the child and
the host share; :meth:`ScriptResult.raise_for_error` turns it into the matching exception of
:mod:`scriptbridge._exceptions`. Nothing here does I/O.
"""

from __future__ import annotations

import base64
from typing import Any, Final, Self, assert_never

from pydantic import BaseModel, ConfigDict, Field, field_serializer, model_validator

from sandbox.protocol import Ending, RunError

from ._exceptions import (
    LimitExceeded,
    ProtocolViolation,
    RunCancelled,
    SandboxCrashed,
    ScriptFailed,
    ScriptRejected,
)
from .markers import one_line, well_formed

__all__ = ["ScriptError", "ScriptResult", "error_from_child", "json_safe", "value_note"]


_SCRIPT_ENDINGS: Final = frozenset({Ending.ScriptRejected, Ending.ScriptFailed})
_HOST_ENDING_NAMES: Final = frozenset(e.value for e in Ending if e not in _SCRIPT_ENDINGS)


def json_safe(value: Any) -> Any:
    """``value`` as JSON can carry it: every string well formed (a lone surrogate becomes
    U+FFFD), ``bytes`` as ``{"$bytes": "<base64>"}``, tuples as lists, dict keys as strings.
    Plain data from a child is at most 100 deep; anything nested deeper (a host's own value)
    is cut to its ``repr``."""

    def convert(item: Any, depth: int) -> Any:
        if isinstance(item, str):
            return well_formed(item)
        if isinstance(item, (bytes, bytearray)):
            return {"$bytes": base64.b64encode(item).decode("ascii")}
        if depth > 200:
            return well_formed(repr(item)[:1000])
        if isinstance(item, dict):
            return {well_formed(str(k)): convert(v, depth + 1) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [convert(child, depth + 1) for child in item]
        return item

    return convert(value, 0)


class ScriptError(BaseModel):
    """Why a run did not finish: the script's exception, or what stopped it.

    Attributes:
        ending: how the run ended (JSON carries it as its string, e.g. ``"ScriptFailed"``).
        type: for ``ScriptFailed`` and ``ScriptRejected``, the exception's class name
            (``"ValueError"``, ``"ToolError"``; ``"SyntaxError"`` or ``"CompileError"`` for a
            refused script); for every other ending, exactly ``ending.value``
            (``"WallTimeExceeded"``), which is also its default there.
        message: what happened, in words.
        line: the script line the error points at, when known.

    The pairing of ``type`` and ``ending`` is checked on creation (``ValidationError``
    otherwise): a script ending needs the exception's name, any other ending is its own name.
    """

    model_config = ConfigDict(frozen=True)

    ending: Ending
    type: str = ""
    message: str
    line: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _type_of_a_host_ending(cls, data: Any) -> Any:
        if isinstance(data, dict) and "type" not in data:
            ending = data.get("ending")
            if ending in _HOST_ENDING_NAMES:
                return {**data, "type": str(ending)}
        return data

    @model_validator(mode="after")
    def _type_pairs_with_ending(self) -> Self:
        if self.ending in _SCRIPT_ENDINGS:
            if not self.type:
                raise ValueError(f"a {self.ending} error's type is the exception's class name")
        elif self.type != self.ending.value:
            raise ValueError(f"a {self.ending} error's type is {self.ending.value!r}")
        return self

    @field_serializer("type", "message", when_used="json")
    def _well_formed(self, text: str) -> str:
        return well_formed(text)


class ScriptResult(BaseModel):
    """The outcome of one run.

    Attributes:
        ok: the script ran to its end; ``True`` exactly when ``error`` is ``None`` (checked
            on creation).
        value: the value of its last expression statement, as plain data (a ``repr`` when it
            wasn't plain data).
        stdout: what it printed (capped at ``Limits.max_output_bytes``).
        error: why it didn't finish, or ``None``.
        tool_calls: tool calls it made.
        fetches: reference payloads it fetched.
        duration_s: seconds from request to result.
        isolation: the isolation layers that were in force, in the order applied.
        outputs: the files the script left in its ``out/``, relative to the workspace
            (``runs/<run-id>/out/report.md``); each run has an ``out/`` of its own.
        dropped: for a step of a session (:meth:`Bridge.session`), the globals that could not
            carry over to its next step (a generator, a lambda, a value past the bound...);
            empty for a lone run and for a step that failed (which carries nothing new).
        value_note: ``None`` when ``value`` is the script's value as plain data (sets,
            frozensets and tuples come back as lists); else why it isn't (the value wasn't
            plain data, naming its type, or was too large to send) and that ``value`` is its
            ``repr``, with what to return instead. The run is still ``ok``.

    A result always serializes to JSON (``model_dump_json``, ``model_dump(mode="json")``):
    every string is made well formed (a lone surrogate, from a file name that isn't UTF-8 say,
    becomes U+FFFD) and ``bytes`` in ``value`` become ``{"$bytes": "<base64>"}``. In Python
    (``result.value``, ``model_dump()``) bytes stay bytes.
    """

    model_config = ConfigDict(frozen=True)

    ok: bool
    value: object = None
    stdout: str = ""
    error: ScriptError | None = None
    tool_calls: int = 0
    fetches: int = 0
    duration_s: float = 0.0
    isolation: list[str] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)
    value_note: str | None = None

    @model_validator(mode="after")
    def _ok_without_error(self) -> Self:
        if self.ok != (self.error is None):
            raise ValueError("ok is True exactly when there is no error")
        return self

    def raise_for_error(self) -> Self:
        """Return this result when it is ``ok``; otherwise raise the exception of its ending.

        Returns:
            This very result, when ``ok``.

        Raises:
            ScriptRejected: ``ScriptRejected`` (the compiler refused the script).
            ScriptFailed: ``ScriptFailed`` (the script raised).
            LimitExceeded: one of the six limits; its ``ending`` says which.
            SandboxCrashed: ``SandboxCrashed``.
            ProtocolViolation: ``ProtocolViolation``.
            RunCancelled: ``Cancelled`` (the bridge was closed while the run ran); never
                ``trio.Cancelled`` or ``asyncio.CancelledError``.

        Each exception's ``result`` is this result, and its message is
        ``"<type>: <message>"``, followed by ``" (line <line>)"`` when the line is known.
        """
        error = self.error
        if error is None:
            return self
        text = f"{error.type}: {error.message}"
        if error.line is not None:
            text += f" (line {error.line})"
        ending = error.ending
        match ending:
            case Ending.ScriptRejected:
                raise ScriptRejected(text, result=self)
            case Ending.ScriptFailed:
                raise ScriptFailed(text, result=self)
            case (
                Ending.WallTimeExceeded
                | Ending.CpuTimeExceeded
                | Ending.MemoryExceeded
                | Ending.OutputExceeded
                | Ending.ToolCallsExceeded
                | Ending.DiskQuotaExceeded
            ):
                raise LimitExceeded(text, ending=ending, result=self)
            case Ending.SandboxCrashed:
                raise SandboxCrashed(text, result=self)
            case Ending.ProtocolViolation:
                raise ProtocolViolation(text, result=self)
            case Ending.Cancelled:
                raise RunCancelled(text, result=self)
            case _:
                assert_never(ending)

    @field_serializer("value", when_used="json")
    def _json_value(self, value: Any) -> Any:
        return json_safe(value)

    @field_serializer("stdout", when_used="json")
    def _well_formed(self, text: str) -> str:
        return well_formed(text)

    @field_serializer("outputs", "isolation", "dropped", when_used="json")
    def _well_formed_list(self, texts: list[str]) -> list[str]:
        return [well_formed(text) for text in texts]


def value_note(why: str) -> str:
    """``ScriptResult.value_note`` for a value the child sent as its repr, for ``why``."""
    if why.startswith("more than"):
        return (
            f"the script's value was too large to send ({why}), so `value` is its repr, cut: "
            "return less, or write it to out/ (Limits.max_message_bytes)"
        )
    return (
        f"the script's value isn't plain data ({why}), so `value` is its repr: return a dict, "
        "list, str, int, float, bool, bytes or None (sets and tuples become lists)"
    )


def error_from_child(error: RunError) -> ScriptError:
    """The ``ScriptError`` a child's ``RunError`` stands for, read by its phase and type.

    - ``compile``: ``ScriptRejected``, with the child's type (``SyntaxError``, ...).
    - ``run``: ``ScriptFailed`` with its type, whatever the script named its exception.
    - ``limit``: the limit its type names (the child enforces output, tool calls, the disk
      quota and memory itself; the message is refused unless its type is a limit).
    - ``setup``: ``SandboxCrashed``: the child couldn't start; the message is
      ``"couldn't start: "`` and the first line of the child's reason, without a line.

    Never raises: whatever a validated ``RunError`` holds gives a valid ``ScriptError``.
    """
    match error.phase:
        case "compile":
            ending = Ending.ScriptRejected
        case "run":
            ending = Ending.ScriptFailed
        case "limit":
            ending = Ending(error.type)  # the message's own check: it names a limit
        case "setup":
            reason = one_line(error.message)
            return ScriptError(ending=Ending.SandboxCrashed, message=f"couldn't start: {reason}")
        case _:
            assert_never(error.phase)
    if ending in _SCRIPT_ENDINGS:
        return ScriptError(ending=ending, type=error.type, message=error.message, line=error.line)
    return ScriptError(ending=ending, message=error.message, line=error.line)
