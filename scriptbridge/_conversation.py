"""The conversation with one child: ``ready``, ``start``, then its requests until it is done.

:func:`converse` speaks the channel of :mod:`sandbox.protocol` with a child over a
:class:`~scriptbridge._channel.ChildChannel` (which validates every message before it is acted
on) and answers its requests through :class:`~scriptbridge._run_services.RunServices`.
Guarantees:

- The first message must be ``ready`` at this protocol's version (or the child's own setup
  failure, which is a ``SandboxCrashed``); a request is acted on only with the call id that is
  due (1, 2, ...); anything else ends the run with ``ProtocolViolation``.
- Printed output is kept within ``Limits.max_output_bytes`` and tool calls are counted against
  ``Limits.max_tool_calls``; passing either ends the run with its own error type.
- An answer too large for a frame is answered as a failure of the same shape; a batch whose
  failures don't fit either ends the run with ``ToolCallsExceeded``.
- A ``carry`` is accepted only in a session's step (``start.carry`` set), once, within the
  step's bound (:meth:`~scriptbridge._run_state.RunState.keep_carry`), and such a step must send
  one before ``done``; anything else is a ``ProtocolViolation``.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import trio

from sandbox.protocol import (
    PROTOCOL_VERSION,
    CallFailed,
    CallOk,
    CallTool,
    CallTools,
    Carry,
    Done,
    Ending,
    Fetch,
    FetchResult,
    Output,
    ProtocolError,
    Ready,
    RunError,
    RunLimits,
    Start,
    ToolFailed,
    ToolResults,
)

from ._channel import ChildChannel
from ._exceptions import ProtocolViolation
from ._isolation_policy import unmet
from ._launcher import Child
from ._results import ScriptError, error_from_child, value_note
from ._run_services import RunServices
from ._run_state import RunEnded, RunState
from ._spares import READY_TIMEOUT_S

__all__ = ["NO_ENDING", "converse", "serve_child", "start_message", "tool_reply"]

log = logging.getLogger("scriptbridge.supervisor")

NO_ENDING: Final = object()
"""What a conversation returns when the child closed its channel without done or error."""


async def serve_child(
    run: RunState, child: Child, start: Start, services: RunServices
) -> tuple[Any, ScriptError | None]:
    """Converse with ``child`` within the run's wall time and cancel scope; returns (value,
    error), the error saying which limit or violation ended the run, or ``Cancelled`` when
    the bridge closed."""
    limits = run.limits
    if child.channel is None:
        child.channel = ChildChannel(
            child.from_child, child.to_child, limit=limits.max_message_bytes
        )
    child.channel.limit = limits.max_message_bytes
    value: Any = NO_ENDING
    error: ScriptError | None = None
    with run.scope, trio.move_on_after(limits.wall_s) as wall:
        try:
            value, error = await converse(run, child.channel, child.ready, start, services)
        except ProtocolViolation as exc:
            error = ScriptError(ending=Ending.ProtocolViolation, message=str(exc))
        except RunEnded as exc:
            error = ScriptError(ending=exc.ending, message=exc.message)
    if run.scope.cancelled_caught and run.closing:
        error = ScriptError(ending=Ending.Cancelled, message="the bridge was closed")
    elif wall.cancelled_caught:
        error = ScriptError(
            ending=Ending.WallTimeExceeded,
            message=f"the script ran past its {limits.wall_s:g} s wall time",
        )
    return value, error


async def converse(
    run: RunState,
    channel: ChildChannel,
    ready: Ready | None,
    start: Start,
    services: RunServices,
) -> tuple[Any, ScriptError | None]:
    """Serve the child until it says it is done; returns (value, error), or (``NO_ENDING``,
    None) when it closed its channel without a word (its exit status then tells why).

    ``ready`` is the child's ``ready`` when it was read ahead (a spare's); otherwise the
    child's first message is read here. Raises ``RunEnded`` or ``ProtocolViolation``.
    """
    first = ready if ready is not None else await _first_message(channel)
    if first is None:
        return NO_ENDING, None
    _check_ready(run, first)
    try:
        await channel.send(start)
    except ProtocolError as exc:
        raise RunEnded(Ending.ProtocolViolation, f"the run's start message: {exc}") from exc
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        raise RunEnded(Ending.SandboxCrashed, "the sandbox closed its channel") from exc
    while True:
        message = await channel.receive()
        call_id = getattr(message, "call_id", None)
        if call_id is not None:  # a request: acted on only with the id that is due
            if call_id != run.next_call_id:
                raise ProtocolViolation(f"call id {call_id} where {run.next_call_id} was due")
            run.next_call_id += 1
        match message:
            case None:
                return NO_ENDING, None
            case Output(text=text):
                run.print(text)
            case CallTool(call_id=call_id, name=name, args=args):
                run.count_calls(1)
                ok, answer = await services.call(name, args)
                await _answer(channel, tool_reply(call_id, ok, answer), call_id)
            case CallTools(call_id=call_id, calls=calls):
                run.count_calls(len(calls))
                outcomes = await services.call_batch([(c.name, c.args) for c in calls])
                batch = {"op": "tool_results", "call_id": call_id, "results": outcomes}
                await _answer(channel, batch, call_id)
            case Fetch(call_id=call_id, ref_id=ref_id):
                await _answer(channel, await services.fetch(call_id, ref_id), call_id)
            case Carry() as carry:
                run.keep_carry(carry)
            case Done(value=value, not_plain=why):
                if run.carry_in is not None and run.carry_out is None:
                    raise ProtocolViolation("a session's step was done without its carry")
                run.ended_cleanly = True
                run.value_note = None if why is None else value_note(why)
                return value, None
            case RunError() as failed:
                run.ended_cleanly = True
                return None, error_from_child(failed)
            case Ready():
                raise ProtocolViolation("the child sent ready twice")
            case _:
                raise ProtocolViolation(f"unexpected message {_op(message)}")


def tool_reply(call_id: int, ok: bool, answer: Any) -> dict[str, Any] | ToolFailed:
    """The answer to one tool call: its script view, or the failure's reason.

    A view is the renderer's (:func:`~scriptbridge._render.render_for_script`): plain data
    within the protocol's bounds by construction, so its message is the body itself, packed
    with nothing validated or copied (what comes from the child is validated, not what the
    host made); ``tests/sandbox/test_sandbox_protocol.py`` checks these bodies parse as the
    messages they stand for.
    """
    if ok:
        return {"op": "tool_result", "call_id": call_id, "view": answer}
    return ToolFailed(call_id=call_id, message=answer)


def start_message(
    run: RunState,
    source: str,
    inputs: dict[str, Any],
    tools: list[str],
    parameters: dict[str, list[str]] | None = None,
) -> Start:
    """The ``start`` of a run: its script, inputs, tool names (and their argument names) and
    the limits the child keeps."""
    limits = run.limits
    return Start(
        source=source,
        inputs=inputs,
        tools=tools,
        parameters=parameters or {},
        limits=RunLimits(
            max_output_bytes=limits.max_output_bytes,
            max_tool_calls=limits.max_tool_calls,
            max_message_bytes=limits.max_message_bytes,
            max_out_bytes=limits.max_out_bytes,
            max_out_files=limits.max_out_files,
        ),
        carry=run.carry_in,
    )


async def _first_message(channel: ChildChannel) -> object:
    with trio.move_on_after(READY_TIMEOUT_S) as ready_wait:
        first = await channel.receive()
    if ready_wait.cancelled_caught:
        raise RunEnded(Ending.SandboxCrashed, "the sandbox didn't report ready in time")
    return first


def _check_ready(run: RunState, first: object) -> None:
    """Check the child's first message is a ``ready`` of this protocol; keep its layers."""
    if isinstance(first, RunError) and first.phase == "setup":
        raise RunEnded(Ending.SandboxCrashed, error_from_child(first).message)
    if not isinstance(first, Ready):
        raise ProtocolViolation(f"expected ready first, got {_op(first)}")
    if first.protocol != PROTOCOL_VERSION:
        raise ProtocolViolation(f"the child speaks protocol {first.protocol}")
    run.isolation = list(first.isolation)
    for skipped in first.skipped:
        log.info("run %s: layer %s skipped: %s", run.id, skipped.layer, skipped.reason)
    refused = unmet(first, run.required)
    if refused is not None:
        raise RunEnded(Ending.SandboxCrashed, refused)


async def _answer(channel: ChildChannel, reply: Any, call_id: int) -> None:
    """Answer the child; an answer too large for a frame is answered as a failure."""
    try:
        try:
            await channel.send(reply)
        except ProtocolError:
            reason = f"its answer is larger than this run's {channel.limit}-byte message limit"
            if isinstance(reply, FetchResult):
                await channel.send(FetchResult(call_id=call_id, unfetchable=reason))
            elif isinstance(reply, dict) and reply.get("op") == "tool_results":
                failed: list[CallOk | CallFailed] = [
                    CallFailed(message=reason) for _ in reply["results"]
                ]
                await channel.send(ToolResults(call_id=call_id, results=failed))
            else:
                await channel.send(ToolFailed(call_id=call_id, message=reason))
    except ProtocolError as exc:  # even its failures don't fit: a batch too large to answer
        raise RunEnded(
            Ending.ToolCallsExceeded,
            "the script's batch of tool calls can't be answered, even as failures, within "
            f"this run's {channel.limit}-byte message limit",
        ) from exc
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the child is gone; its exit status tells why


def _op(message: object) -> str:
    return getattr(message, "op", type(message).__name__)
