"""A tool server's stdio, read bounded and raw: the stdio transport under :mod:`._mcp`.

The ``mcp`` SDK's ``stdio_client`` (2.3) can't be used as it is: it decodes the server's stdout
with ``errors="strict"``, so one line of invalid UTF-8 raises out of its reader task and breaks
the connection for good; it joins every chunk onto the unfinished line (``buffer + chunk``), so
a long line costs time quadratic in its length and memory without bound; and it logs each
malformed line with a full traceback. This module keeps the SDK's stream contract (it yields
the pair of ``SessionMessage`` streams that ``JSONRPCDispatcher`` reads and writes, as every SDK
transport does), its message models and parser (``mcp_types.jsonrpc_message_adapter``), its
environment policy (``get_default_environment``) and its process-tree kill
(``terminate_posix_process_tree``), and replaces only the reading.

Guarantees:

- Each line of stdout costs time linear in its length, and at most ``max_line_bytes`` of it is
  held: a longer line is dropped as it streams past (:class:`LineSplitter`).
- A line that is too long, isn't UTF-8, isn't JSON or isn't a JSON-RPC message is dropped with
  one warning (no traceback) on ``scriptbridge.mcp.<server>``; the connection goes on.
- The server's stderr goes to logging (``INFO`` on ``scriptbridge.mcp.<server>``, one record a
  line, control characters escaped, cut to :data:`STDERR_SHOWN_CHARS`), never to the host's
  own stdout or stderr, unless an ``errlog`` file is given.
- When stdout ends (the server exited, crashed or closed it) the read stream ends, so every
  request in flight fails at once; a failed write to stdin ends the connection the same way.
- What the process did is kept in a :class:`ProcessWatch`, when one is given, for the words of
  a failure: how it exited, the last :data:`STDERR_TAIL_LINES` lines of its stderr (each cut to
  :data:`STDERR_TAIL_CHARS`), and how many stdout lines weren't MCP messages.
- When the context exits, however it exits, the server process has been stopped: the messages
  already handed to the transport are written (within :data:`FLUSH_S`), stdin is closed and
  the server given :data:`EXIT_GRACE_S` to exit (:data:`ENDED_GRACE_S` when its stdout had
  already ended), then
  its process group is sent SIGTERM and, after the SDK's grace, SIGKILL.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Final, TextIO

import anyio
import mcp_types
from anyio.abc import Process
from mcp.client._transport import TransportStreams
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from sandbox.protocol import DEFAULT_FRAME_LIMIT

__all__ = [
    "MAX_LINE_BYTES",
    "LineSplitter",
    "ProcessWatch",
    "server_logger",
    "shown",
    "stdio_transport",
]

MAX_LINE_BYTES: Final = DEFAULT_FRAME_LIMIT
"""The default bound on one line a server writes: the channel's frame limit (16 MiB)."""
STDERR_LINE_BYTES: Final = 64 * 2**10
"""A stderr line longer than this is logged as its length only."""
STDERR_SHOWN_CHARS: Final = 2000
EXIT_GRACE_S: Final = 2.0
ENDED_GRACE_S: Final = 0.2
"""The grace of a server whose stdout had already ended: most are exiting (a command closes
its stdout just before), and their own exit status is then what is reported."""
FLUSH_S: Final = 0.5
KILL_GRACE_S: Final = 2.0
REAP_S: Final = 2.0
READ_CHUNK: Final = 1 << 16
STDERR_TAIL_LINES: Final = 5
STDERR_TAIL_CHARS: Final = 300


class ProcessWatch:
    """What a stdio server's process did, for the words of its failure: how it exited, the
    last lines of its stderr, and how many lines of its stdout weren't MCP messages. Made on
    the loop that runs the transport."""

    def __init__(self) -> None:
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self.not_mcp = 0
        self.returncode: int | None = None
        self.ended = anyio.Event()
        """Set once the process has exited and its stderr was read to its end (or a grace
        after the exit passed)."""

    async def wait_ended(self, within_s: float) -> bool:
        """Wait until the process has exited (at most ``within_s``); whether it had."""
        with anyio.move_on_after(within_s):
            await self.ended.wait()
        return self.returncode is not None

    def exit(self) -> str:
        """How it exited, in words (``exited with status 3``, ``was killed by SIGSEGV``)."""
        code = self.returncode
        if code is None:
            return "closed its stdout"
        if code >= 0:
            return f"exited with status {code}"
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"

    def last_words(self) -> str:
        """The last lines of its stderr, joined (empty when it said nothing)."""
        return " | ".join(self.stderr_tail)


Streams = TransportStreams
"""The (read, write) pair of message streams every SDK transport yields."""


def server_logger(name: str) -> logging.Logger:
    """The logger of server ``name``: ``scriptbridge.mcp.<name>``."""
    return logging.getLogger(f"scriptbridge.mcp.{name}")


def shown(text: str, limit: int = STDERR_SHOWN_CHARS) -> str:
    """``text`` cut to ``limit`` characters, every non-printable character escaped as ``repr``
    escapes it (a server's words may reach a terminal through a log handler)."""
    cut = text[:limit]
    if not cut.isprintable():
        cut = "".join(c if c.isprintable() else repr(c)[1:-1] for c in cut)
    return cut + ("..." if len(text) > limit else "")


class LineSplitter:
    """Splits a byte stream into lines of at most ``max_bytes`` (sans-I/O).

    :meth:`feed` looks at each byte once and keeps at most ``max_bytes`` of an unfinished line:
    past that the line is dropped as it streams in, and reported by its length when it ends.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._line = bytearray()
        self._dropped = 0
        """Bytes of the current line dropped so far for its length (0: none)."""

    def feed(self, data: bytes) -> Iterator[bytes | int]:
        """Each line that ``data`` ends: its bytes (no newline), or the length of a line that was
        too long, as an ``int``."""
        view = memoryview(data)
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            piece = view[start:end]
            if self._dropped:
                yield self._dropped + len(piece)
            elif len(self._line) + len(piece) > self.max_bytes:
                yield len(self._line) + len(piece)
            else:
                self._line += piece
                yield bytes(self._line)
            self._line.clear()
            self._dropped = 0
            start = end + 1
        rest = view[start:]
        if self._dropped:
            self._dropped += len(rest)
        elif len(self._line) + len(rest) > self.max_bytes:
            self._dropped = len(self._line) + len(rest)
            self._line.clear()
        else:
            self._line += rest


def parse_line(line: bytes) -> SessionMessage | str:
    """One line as a JSON-RPC message, or why it isn't one (a short reason)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"isn't UTF-8 (byte {exc.start})"
    if not text.strip():
        return "is blank"
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        kinds = {error["type"] for error in exc.errors()}
        if "json_invalid" in kinds:
            return "isn't JSON"
        return "isn't a JSON-RPC message"
    return SessionMessage(message)


@asynccontextmanager
async def stdio_transport(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    *,
    name: str,
    max_line_bytes: int = MAX_LINE_BYTES,
    errlog: TextIO | None = None,
    watch: ProcessWatch | None = None,
) -> AsyncIterator[Streams]:
    """Start ``command`` and yield its (read, write) message streams (module doc); what its
    process does goes into ``watch``, when given.

    Raises ``OSError`` when it can't be started.
    """
    log = server_logger(name)
    process = await anyio.open_process(
        [command, *args],
        env=get_default_environment() | dict(env or {}),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog if errlog is not None else subprocess.PIPE,
        start_new_session=True,
    )
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    stdout_ended = anyio.Event()
    writer_done = anyio.Event()

    async def read_stdout() -> None:
        assert process.stdout is not None
        splitter = LineSplitter(max_line_bytes)
        try:
            async with read_send:
                with suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
                    while True:
                        for line in splitter.feed(await process.stdout.receive(READ_CHUNK)):
                            if isinstance(line, int):
                                if watch is not None:
                                    watch.not_mcp += 1
                                log.warning(
                                    "server %r: dropped a line of %d bytes "
                                    "(lines are bounded to %d bytes)",
                                    name,
                                    line,
                                    max_line_bytes,
                                )
                                continue
                            parsed = parse_line(line)
                            if isinstance(parsed, str):
                                if watch is not None:
                                    watch.not_mcp += 1
                                log.warning(
                                    "server %r: dropped a line that %s (%d bytes)",
                                    name,
                                    parsed,
                                    len(line),
                                )
                                continue
                            await read_send.send(parsed)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the reader of messages is gone: the connection is closing
        finally:
            stdout_ended.set()

    stderr_ended = anyio.Event()

    async def read_stderr() -> None:
        assert process.stderr is not None
        splitter = LineSplitter(STDERR_LINE_BYTES)
        try:
            with suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
                while True:
                    for line in splitter.feed(await process.stderr.receive(READ_CHUNK)):
                        if isinstance(line, int):
                            text = f"(a line of {line} bytes, not shown)"
                            log.info("server %r stderr: %s", name, text)
                        else:
                            text = shown(line.decode("utf-8", "replace").rstrip("\r"))
                            log.info("server %r stderr: %s", name, text)
                        if watch is not None:
                            watch.stderr_tail.append(shown(text, STDERR_TAIL_CHARS))
        finally:
            stderr_ended.set()

    async def wait_exit(watch: ProcessWatch) -> None:
        await process.wait()
        watch.returncode = process.returncode
        with anyio.move_on_after(FLUSH_S):  # what it printed as it died is read to its end
            await stderr_ended.wait()
        watch.ended.set()

    async def write_stdin(cancel: anyio.CancelScope) -> None:
        assert process.stdin is not None
        try:
            async with write_receive:
                async for message in write_receive:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    # A message taken is written whole, whatever cancels the connection meanwhile
                    # (no lost courtesy cancel at close, no half a line); a server that stops
                    # reading can't hold it: closing its stdin (``_stop``) ends the write.
                    with anyio.CancelScope(shield=True):
                        await process.stdin.send(data.encode() + b"\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            log.warning("server %r: couldn't write to its stdin: %s", name, exc)
            cancel.cancel()  # a connection that can't send is over
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_stdout)
        if process.stderr is not None:
            tasks.start_soon(read_stderr)
        else:
            stderr_ended.set()
        if watch is not None:
            tasks.start_soon(wait_exit, watch)
        tasks.start_soon(write_stdin, tasks.cancel_scope)
        try:
            yield read_receive, write_send
        finally:
            with anyio.CancelScope(shield=True):
                write_send.close()
                with anyio.move_on_after(FLUSH_S):  # what was handed over still goes out
                    await writer_done.wait()
                read_receive.close()
                grace = ENDED_GRACE_S if stdout_ended.is_set() else EXIT_GRACE_S
                await _stop(process, grace)
            tasks.cancel_scope.cancel()


async def _stop(process: Process, grace_s: float) -> None:
    """Close ``process``'s stdin, give it ``grace_s`` to exit, then stop its process group."""
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    if not await _exited(process, grace_s):
        if sys.platform != "win32":
            await terminate_posix_process_tree(process, KILL_GRACE_S)
        else:  # pragma: no cover - the sandbox is Linux-only; kept for a plain kill
            process.kill()
        await _exited(process, REAP_S)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.aclose()


async def _exited(process: Process, within_s: float) -> bool:
    """Whether ``process`` exited (and was reaped) within ``within_s``."""
    with anyio.move_on_after(within_s):
        await process.wait()
        return True
    return process.returncode is not None
