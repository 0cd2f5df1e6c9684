"""What a run gives back: how it ended (``Ending``), ``ScriptError``'s pairing of ``type`` and
``ending``, the reading of a child's ``RunError``, and ``raise_for_error`` for every ending."""

from __future__ import annotations

import asyncio
import json

import pytest
import trio
from pydantic import ValidationError

import sandbox.protocol
import scriptbridge
from sandbox.protocol import RunError
from scriptbridge import (
    Ending,
    LimitExceeded,
    Limits,
    ProtocolViolation,
    RunCancelled,
    SandboxCrashed,
    ScriptBridgeError,
    ScriptError,
    ScriptFailed,
    ScriptRejected,
    ScriptResult,
)
from scriptbridge._results import error_from_child
from scriptbridge._supervisor import Bridge

LIMITS = {
    Ending.WallTimeExceeded,
    Ending.CpuTimeExceeded,
    Ending.MemoryExceeded,
    Ending.OutputExceeded,
    Ending.ToolCallsExceeded,
    Ending.DiskQuotaExceeded,
}

RAISES: dict[Ending, type[ScriptBridgeError]] = {
    Ending.ScriptRejected: ScriptRejected,
    Ending.ScriptFailed: ScriptFailed,
    Ending.SandboxCrashed: SandboxCrashed,
    Ending.ProtocolViolation: ProtocolViolation,
    Ending.Cancelled: RunCancelled,
    **{limit: LimitExceeded for limit in LIMITS},
}


def failed(ending: Ending, *, type: str | None = None, line: int | None = 7) -> ScriptResult:
    given = {} if type is None else {"type": type}
    error = ScriptError(ending=ending, message="it went wrong", line=line, **given)
    return ScriptResult(ok=False, error=error)


# --- Ending ------------------------------------------------------------------------------------


def test_the_endings_are_todays_strings_and_one_enum_on_both_sides() -> None:
    """Ending's values are the strings error.type has always had; host and child share it."""
    assert {ending.value for ending in Ending} == {
        "ScriptRejected",
        "ScriptFailed",
        "WallTimeExceeded",
        "CpuTimeExceeded",
        "MemoryExceeded",
        "OutputExceeded",
        "ToolCallsExceeded",
        "DiskQuotaExceeded",
        "SandboxCrashed",
        "ProtocolViolation",
        "Cancelled",
    }
    assert all(ending == ending.value for ending in Ending)
    assert scriptbridge.Ending is sandbox.protocol.Ending


def test_only_the_true_limits_are_limits() -> None:
    """The six limits are limits; a crash, a protocol violation and a cancel are not."""
    assert {ending for ending in Ending if ending.is_limit} == LIMITS
    from sandbox._endings import LIMITS as CHILD_LIMITS

    assert CHILD_LIMITS == LIMITS


# --- ScriptError ---------------------------------------------------------------------------------


def test_a_host_ending_gives_its_own_name_as_type() -> None:
    """For every ending but ScriptRejected/ScriptFailed, type is the ending's value."""
    for ending in set(Ending) - {Ending.ScriptRejected, Ending.ScriptFailed}:
        assert ScriptError(ending=ending, message="m").type == ending.value
        assert ScriptError(ending=ending, type=ending.value, message="m").type == ending.value
        with pytest.raises(ValidationError, match="type"):
            ScriptError(ending=ending, type="ValueError", message="m")


def test_a_script_ending_keeps_the_exceptions_name() -> None:
    """ScriptFailed and ScriptRejected carry the exception's class name, which they need."""
    assert ScriptError(ending=Ending.ScriptFailed, type="ValueError", message="m").type == (
        "ValueError"
    )
    assert ScriptError(ending="ScriptRejected", type="SyntaxError", message="m").ending is (
        Ending.ScriptRejected
    )
    for ending in (Ending.ScriptFailed, Ending.ScriptRejected):
        with pytest.raises(ValidationError, match="type"):
            ScriptError(ending=ending, message="m")


def test_an_error_needs_its_ending() -> None:
    """``ending`` is required, and must be one of the endings."""
    with pytest.raises(ValidationError, match="ending"):
        ScriptError(type="ValueError", message="m")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="ending"):
        ScriptError(ending="Exploded", type="ValueError", message="m")  # type: ignore[arg-type]


def test_an_error_serializes_its_ending_as_a_string_and_back() -> None:
    """JSON carries ``ending`` as its string, and the model reads it back equal."""
    result = failed(Ending.ScriptFailed, type="KeyError")
    data = json.loads(result.model_dump_json())
    assert data["error"] == {
        "ending": "ScriptFailed",
        "type": "KeyError",
        "message": "it went wrong",
        "line": 7,
    }
    assert ScriptResult.model_validate_json(result.model_dump_json()) == result


def test_ok_is_true_exactly_when_there_is_no_error() -> None:
    """A result can't be ok with an error, nor failed without one."""
    error = ScriptError(ending=Ending.Cancelled, message="m")
    with pytest.raises(ValidationError, match="ok"):
        ScriptResult(ok=True, error=error)
    with pytest.raises(ValidationError, match="ok"):
        ScriptResult(ok=False)


# --- a child's RunError -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "kind", "ending", "type"),
    [
        ("compile", "SyntaxError", Ending.ScriptRejected, "SyntaxError"),
        ("compile", "CompileError", Ending.ScriptRejected, "CompileError"),
        ("compile", "IndentationError", Ending.ScriptRejected, "IndentationError"),
        ("run", "ValueError", Ending.ScriptFailed, "ValueError"),
        ("run", "SyntaxError", Ending.ScriptFailed, "SyntaxError"),
        ("limit", "OutputExceeded", Ending.OutputExceeded, "OutputExceeded"),
        ("limit", "ToolCallsExceeded", Ending.ToolCallsExceeded, "ToolCallsExceeded"),
        ("limit", "DiskQuotaExceeded", Ending.DiskQuotaExceeded, "DiskQuotaExceeded"),
        ("limit", "MemoryExceeded", Ending.MemoryExceeded, "MemoryExceeded"),
        ("run", "OutputExceeded", Ending.ScriptFailed, "OutputExceeded"),
        ("run", "Cancelled", Ending.ScriptFailed, "Cancelled"),
        ("run", "ScriptRejected", Ending.ScriptFailed, "ScriptRejected"),
        ("compile", "OutputExceeded", Ending.ScriptRejected, "OutputExceeded"),
        ("setup", "SandboxSetupFailed", Ending.SandboxCrashed, "SandboxCrashed"),
    ],
)
def test_a_childs_error_is_read_by_its_phase_and_type(
    phase: str, kind: str, ending: Ending, type: str
) -> None:
    """compile: rejected; limit: the limit it names; run: failed, whatever its type is named;
    setup: the sandbox crashed."""
    sent = RunError(type=kind, message="what\nhappened", line=3, phase=phase)  # type: ignore[arg-type]
    error = error_from_child(sent)
    assert (error.ending, error.type) == (ending, type)
    if phase == "setup":
        assert (error.message, error.line) == ("couldn't start: what", None)
    else:
        assert (error.message, error.line) == ("what\nhappened", 3)


# --- raise_for_error ---------------------------------------------------------------------------


def test_an_ok_result_is_returned() -> None:
    """raise_for_error returns the very result when it is ok."""
    result = ScriptResult(ok=True, value=3)
    assert result.raise_for_error() is result


@pytest.mark.parametrize("ending", list(Ending))
def test_each_ending_raises_its_exception(ending: Ending) -> None:
    """Every ending raises its own class, carrying the result, with type, message and line."""
    kind = "ValueError" if ending in (Ending.ScriptFailed, Ending.ScriptRejected) else None
    result = failed(ending, type=kind)
    with pytest.raises(RAISES[ending]) as caught:
        result.raise_for_error()
    assert type(caught.value) is RAISES[ending]
    assert caught.value.result is result
    assert str(caught.value) == f"{kind or ending.value}: it went wrong (line 7)"
    if isinstance(caught.value, LimitExceeded):
        assert caught.value.ending is ending


def test_a_message_without_a_line_leaves_it_out() -> None:
    """An error without a line gives ``type: message``."""
    with pytest.raises(SandboxCrashed, match=r"^SandboxCrashed: it went wrong$"):
        failed(Ending.SandboxCrashed, line=None).raise_for_error()


def test_cancelled_is_not_a_cancellation() -> None:
    """A run the bridge closed raises RunCancelled, a ScriptBridgeError, never a cancellation."""
    assert issubclass(RunCancelled, ScriptBridgeError)
    assert not issubclass(RunCancelled, (trio.Cancelled, asyncio.CancelledError))


# --- real runs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "limits", "ending", "kind", "raises"),
    [
        ("x = 1\nraise ValueError('no')\n", None, Ending.ScriptFailed, "ValueError", ScriptFailed),
        ("x = (\n", None, Ending.ScriptRejected, "SyntaxError", ScriptRejected),
        (
            "while True:\n    pass\n",
            Limits(wall_s=0.5, cpu_s=30),
            Ending.WallTimeExceeded,
            "WallTimeExceeded",
            LimitExceeded,
        ),
        (
            "while True:\n    print('x' * 100)\n",
            Limits(max_output_bytes=1000),
            Ending.OutputExceeded,
            "OutputExceeded",
            LimitExceeded,
        ),
    ],
)
async def test_a_real_run_raises_for_how_it_ended(
    bridge: Bridge,
    source: str,
    limits: Limits | None,
    ending: Ending,
    kind: str,
    raises: type[ScriptBridgeError],
) -> None:
    """A real run's error carries its ending, and raise_for_error raises the matching class."""
    result = await bridge.run(source, limits=limits)
    assert result.error is not None and (result.error.ending, result.error.type) == (
        ending,
        kind,
    ), result.error
    with pytest.raises(raises, match=f"^{kind}: ") as caught:
        result.raise_for_error()
    assert caught.value.result is result
    if ending is Ending.ScriptFailed:
        assert str(caught.value) == "ValueError: no (line 2)"
    assert (await bridge.run("1 + 1\n")).raise_for_error().value == 2


@pytest.mark.parametrize("name", ["WallTimeExceeded", "OutputExceeded", "MemoryExceeded"])
async def test_a_scripts_own_exception_named_like_a_limit_is_its_failure(
    bridge: Bridge, name: str
) -> None:
    """A script can name its exception class after a limit; what it raised is still its own
    failure, never a limit (the child says which of its errors are limits)."""
    result = await bridge.run(f"class {name}(Exception):\n    pass\nraise {name}('mine')\n")
    assert result.error is not None
    assert (result.error.ending, result.error.type) == (Ending.ScriptFailed, name), result.error
    with pytest.raises(ScriptFailed):
        result.raise_for_error()


def test_only_a_limit_may_be_sent_as_one() -> None:
    """A RunError of the limit phase must name a limit; a run-phase one is the script's."""
    with pytest.raises(ValidationError):
        RunError(type="ValueError", message="", phase="limit")
    assert error_from_child(RunError(type="MemoryExceeded", message="", phase="run")).ending is (
        Ending.ScriptFailed
    )
