"""One child's conversation: :func:`serve` sends ``ready``, reads ``start``, runs the script
and sends ``done`` or ``error`` last.

Everything here runs inside the sandbox child, after isolation, over the channel of
:mod:`sandbox.protocol`. The script is compiled by :mod:`sandbox._compile` and run with the
globals of a :class:`~sandbox._session.Session`, which streams its output and answers its tool
calls and fetches through the host. Everything a script raises is reported as data (a
``RunError`` of phase ``run``); a limit the session enforced is reported as the session saw it.

A value that is not plain data (or holds an int outside 64 bits, a non-``str`` dict key, is
nested too deep, or too large for one frame) is sent as its ``repr`` cut to
``limits.max_value_bytes`` characters, with ``value_is_repr`` set (:meth:`Session.finish`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ._blocking_channel import BlockingChannel
from ._carry import carry_in, carry_out, send_carry
from ._compile import compile_script, script_line
from ._dialect import ScriptReturn
from ._session import HostGone, LimitExceeded, Session
from ._values import cut, describe
from ._wire import Ready, RunError, SkippedLayer, Start
from .protocol import LAYER_NAMES, PROTOCOL_VERSION, Layer, ProtocolError

__all__ = ["run", "serve"]


def run(
    session: Session,
    source: str,
    *,
    restricted: bool,
    namespace: dict[str, Any] | None = None,
) -> RunError | tuple[Any]:
    """Compile ``source`` and run it in ``session``'s globals (or in ``namespace``, globals
    the session made); return the error, or a 1-tuple of the value of its last expression
    (``None`` without one).

    Raises:
        HostGone: the channel broke; nothing more can be reported.
    """
    compiled = compile_script(source, restricted=restricted)
    if isinstance(compiled, RunError):
        return compiled
    body, tail, session.awaiting = compiled
    if namespace is None:
        namespace = session.script_globals(audited=restricted)
    try:
        exec(body, namespace)
        value = None if tail is None else eval(tail, namespace)
    except ScriptReturn as returned:  # a top-level return: its value is the run's
        value = returned.value
    except LimitExceeded as exc:
        if session.limit_error is not None:  # the session's own stop, read as it recorded it
            return session.limit_error.model_copy(update={"line": script_line(exc)})
        return RunError(type="RuntimeError", message=describe(exc), line=None, phase="run")
    except HostGone:
        raise
    except MemoryError as exc:
        return RunError(
            type="MemoryExceeded",
            message="the script ran out of memory",
            line=script_line(exc),
            phase="limit",
        )
    except BaseException as exc:  # everything a script can raise is reported, as data
        return RunError(
            type=cut(type(exc).__name__, 200) or "Exception",
            message=describe(exc),
            line=script_line(exc),
            phase="run",
        )
    return (value,)


def serve(
    channel: BlockingChannel,
    *,
    pid: int | None = None,
    applied: Sequence[Layer],
    skipped: Sequence[SkippedLayer],
    restricted: bool,
    end: Callable[[int], NoReturn] | None = None,
    idle: Callable[[], None] | None = None,
) -> int:
    """Run one child's conversation to the end and return its exit status.

    Sends ``ready`` (with ``restricted-python`` added to ``applied`` when ``restricted``),
    waits for ``start``, runs the script and sends ``done`` or ``error``. Returns 0 when the
    conversation ended normally (including a script that failed, which is reported as data),
    2 when the host sent something invalid, and 3 when the host went away mid-run. Never
    raises for anything a script does; nothing is left buffered when it returns.

    With ``end`` (the child passes ``os._exit``), ``end(status)`` is called instead of
    returning once the script has run, right after the last message and before anything of
    the script's is released: no finalizer of the script's (a suspended generator's
    ``finally``) runs after ``done``, and the host sees the exit as soon as it could.

    ``ready`` gives ``pid`` (the pid the host knows this child by), or ``os.getpid()`` when it
    is not given; a child in a PID namespace of its own is pid 1 there.

    ``idle`` (the child passes its priming, :func:`sandbox._warm.prime`) is called once
    ``ready`` is sent, if no byte of ``start`` is waiting yet: work that makes the run faster,
    done while the child would wait, and skipped when the host is already waiting on it.
    """
    layers = set(applied) | ({"restricted-python"} if restricted else set())
    missing = [] if restricted else [SkippedLayer(layer="restricted-python", reason="disabled")]
    ready = Ready(
        protocol=PROTOCOL_VERSION,
        pid=os.getpid() if pid is None else pid,
        isolation=[layer for layer in LAYER_NAMES if layer in layers],
        skipped=[*missing, *skipped],
    )
    try:
        channel.send(ready)
        if idle is not None and not channel.waiting():
            idle()
        start = channel.receive_host()
    except ProtocolError:
        return 2
    except OSError:
        return 3
    if start is None:
        return 3
    if not isinstance(start, Start):
        return 2
    channel.limit = start.limits.max_message_bytes
    session = Session(channel, start)
    try:
        outcome = _run_step(channel, session, start, restricted=restricted)
    except HostGone:
        return 3
    session.finish(outcome)
    status = 3 if isinstance(session.stopped, HostGone) else 0
    if end is not None:
        end(status)  # ``outcome`` (the script's value) is still held here: nothing is freed
    return status


def _run_step(
    channel: BlockingChannel, session: Session, start: Start, *, restricted: bool
) -> RunError | tuple[Any]:
    """:func:`run` the script; for a session's step (``start.carry``), with what carried in
    bound first and, when the script completed, what carries out sent (:mod:`sandbox._carry`).

    Raises:
        HostGone: the channel broke.
    """
    if start.carry is None:
        return run(session, start.source, restricted=restricted)
    carried = carry_in(session, start.carry, restricted=restricted)
    outcome = run(session, start.source, restricted=restricted, namespace=carried.namespace)
    if isinstance(outcome, tuple) and session.stopped is None and session.limit_error is None:
        # failing, the host sees done without a carry, or nothing: the step carries nothing
        with contextlib.suppress(OSError, ProtocolError, MemoryError):
            send_carry(channel, carry_out(carried, start.source))
    return outcome
