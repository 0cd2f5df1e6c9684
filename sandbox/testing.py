"""A small blocking host that drives one sandbox child over its real pipes.

This is a test double, shipped with the package like httpx's ``MockTransport``: the tests, the
security suite and the start-up benchmark use it in place of the trio supervisor. It speaks the
whole protocol of :mod:`sandbox.protocol` from the host's side, answers tool calls from plain
Python callables and fetches from one callable, and enforces a wall-clock deadline and the
output cap itself (as the real host must: the child is not trusted to police itself).

It is not the production host: it handles one run at a time and never touches the registry.
"""

from __future__ import annotations

import logging
import os
import select
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._blocking_channel import BlockingChannel
from ._launcher import ZygoteClient
from .protocol import (
    CallFailed,
    CallOk,
    CallTool,
    CallTools,
    ChildExit,
    ChildLimits,
    ChildMessage,
    Done,
    Fetch,
    FetchResult,
    FrameDecoder,
    Layer,
    Output,
    ProtocolError,
    Ready,
    RunError,
    RunLimits,
    Start,
    ToolFailed,
    ToolResult,
    ToolResults,
    parse_child_message,
)

__all__ = ["RunRecord", "run_script"]

_LOG = logging.getLogger(__name__)

ToolFunction = Callable[[dict[str, Any]], Any]
FetchFunction = Callable[[str], str]


@dataclass
class RunRecord:
    """Everything one run showed the host.

    ``host_error`` names what the host itself stopped the run for (``WallTimeExceeded``,
    ``OutputExceeded``, ``ProtocolViolation``, or ``DiskQuotaExceeded`` when the zygote found
    that the run passed its disk quota), if anything.
    """

    ready: Ready | None = None
    output: str = ""
    final: Done | RunError | None = None
    exit: ChildExit | None = None
    requests: list[ChildMessage] = field(default_factory=list)
    host_error: str | None = None
    started_at: float = 0.0
    ready_at: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the child sent ``done`` and the host saw nothing wrong."""
        return isinstance(self.final, Done) and self.host_error is None

    @property
    def value(self) -> Any:
        """The script's value (``None`` unless the run is :attr:`ok`)."""
        return self.final.value if isinstance(self.final, Done) and self.ok else None

    @property
    def error_type(self) -> str | None:
        """The failure's name: the host's own, the child's error type, ``SandboxCrashed`` when
        the child died without a last message, or ``None`` for a successful run."""
        if self.host_error is not None:
            return self.host_error
        if isinstance(self.final, RunError):
            return self.final.type
        if self.final is None:
            return "SandboxCrashed"
        return None

    @property
    def isolation(self) -> list[str]:
        """The layers the child reported in force."""
        return list(self.ready.isolation) if self.ready is not None else []


def _answer(
    message: ChildMessage,
    tools: Mapping[str, ToolFunction],
    fetch: FetchFunction | None,
) -> ToolResult | ToolFailed | ToolResults | FetchResult | None:
    if isinstance(message, CallTool):
        try:
            return ToolResult(
                call_id=message.call_id, view=_call(tools, message.name, message.args)
            )
        except Exception as exc:
            return ToolFailed(call_id=message.call_id, message=str(exc))
    if isinstance(message, CallTools):
        outcomes: list[CallOk | CallFailed] = []
        for call in message.calls:
            try:
                outcomes.append(CallOk(view=_call(tools, call.name, call.args)))
            except Exception as exc:
                outcomes.append(CallFailed(message=str(exc)))
        return ToolResults(call_id=message.call_id, results=outcomes)
    if isinstance(message, Fetch):
        if fetch is None:
            return FetchResult(call_id=message.call_id, unfetchable="fetching is not set up")
        try:
            return FetchResult(call_id=message.call_id, saved_to=fetch(message.ref_id))
        except Exception as exc:
            return FetchResult(call_id=message.call_id, unfetchable=str(exc))
    return None


def _call(tools: Mapping[str, ToolFunction], name: str, args: dict[str, Any]) -> Any:
    if name not in tools:
        raise LookupError(f"no tool named {name!r}")
    return tools[name](args)


def run_script(
    client: ZygoteClient,
    source: str,
    *,
    workspace: str | os.PathLike[str],
    tools: Mapping[str, ToolFunction] | None = None,
    fetch: FetchFunction | None = None,
    inputs: dict[str, Any] | None = None,
    limits: ChildLimits | None = None,
    run_limits: RunLimits | None = None,
    disable: Collection[Layer] = (),
    timeout: float = 30.0,
) -> RunRecord:
    """Run ``source`` in a fresh child and return what the host saw.

    When this returns, the child has exited and been reaped, and both pipe ends are closed.
    A child still running at ``timeout`` (wall clock), or past the output cap, is killed.
    """
    tools = dict(tools or {})
    run_limits = run_limits or RunLimits()
    record = RunRecord(started_at=time.monotonic())
    child = client.spawn(workspace, limits, disable=disable)
    channel = BlockingChannel(child.from_child, child.to_child, limit=run_limits.max_message_bytes)
    decoder = FrameDecoder(limit=run_limits.max_message_bytes)
    deadline = record.started_at + timeout
    next_call = 1
    output_bytes = 0
    pending: list[bytes] = []
    finished = False
    try:
        while not finished:
            while not pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    record.host_error = "WallTimeExceeded"
                    return record
                readable, _, _ = select.select([child.from_child], [], [], remaining)
                if not readable:
                    continue
                chunk = os.read(child.from_child, 65536)
                if not chunk:
                    return record  # the child died without its last message
                pending.extend(decoder.feed(chunk))
            message = parse_child_message(pending.pop(0))
            if record.ready is None:
                if not isinstance(message, Ready):
                    if isinstance(message, RunError):  # the child could not set up
                        record.final = message
                        finished = True
                        continue
                    record.host_error = "ProtocolViolation"
                    return record
                record.ready = message
                record.ready_at = time.monotonic()
                for skipped in message.skipped:
                    _LOG.info("sandbox layer %s skipped: %s", skipped.layer, skipped.reason)
                channel.send(
                    Start(source=source, inputs=inputs or {}, tools=list(tools), limits=run_limits)
                )
                continue
            if isinstance(message, Output):
                output_bytes += len(message.text.encode("utf-8"))
                if output_bytes > run_limits.max_output_bytes:
                    record.host_error = "OutputExceeded"
                    return record
                record.output += message.text
                continue
            if isinstance(message, Done | RunError):
                record.final = message
                finished = True
                continue
            if isinstance(message, Ready) or getattr(message, "call_id", None) != next_call:
                record.host_error = "ProtocolViolation"
                return record
            next_call += 1
            record.requests.append(message)
            answer = _answer(message, tools, fetch)
            if answer is not None:
                channel.send(answer)
    except ProtocolError:
        record.host_error = "ProtocolViolation"
        return record
    except OSError:
        return record
    finally:
        os.close(child.to_child)
        os.close(child.from_child)
        if not finished:
            client.kill(child.pid)
        try:
            record.exit = client.wait(child.pid, timeout=max(deadline - time.monotonic(), 5.0))
        except TimeoutError:
            record.host_error = record.host_error or "WallTimeExceeded"
            client.kill(child.pid)
            record.exit = client.wait(child.pid)
        if record.exit.quota_exceeded is not None:
            record.host_error = record.host_error or "DiskQuotaExceeded"
    return record
