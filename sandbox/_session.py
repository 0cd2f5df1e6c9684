"""The session: one run's script API over the channel, and its limits.

:class:`Session` builds the script's globals (:meth:`Session.script_globals`: the hooks, the
builtins and the names API.md lists) and serves them: ``print`` through :class:`PrintCollector`,
``tools.<name>`` through :class:`ToolsNamespace`, tool calls and fetches as requests to the host,
files through :mod:`sandbox._files`. What it guarantees where the spec is silent (tested in
``tests/sandbox``):

- ``print`` output is buffered and sent as ``output`` messages once 8 KiB are pending, 50 ms
  after the previous send, before every tool call and fetch, and at the end. Past
  ``limits.max_output_bytes`` the allowed prefix is sent and the run stops with
  ``OutputExceeded``; a script cannot catch its way past a limit (the stop is sticky).
- ``call_tools`` returns the views in call order; if any call failed it raises ``ToolError``
  with the first failed call's message (the others' results are then not returned).
- ``write_text`` keeps the run's disk quota: it counts what the run has left in ``out/`` so
  far (the bytes of every file it wrote, a replaced file counting its new size only, and
  every file and directory it made, parents included) and refuses, before making anything,
  the write that would pass ``limits.max_out_bytes`` or ``limits.max_out_files``; the run then
  stops with ``DiskQuotaExceeded`` (sticky, like ``OutputExceeded``). A write the OS refuses
  for want of room (``ENOSPC``, ``EDQUOT``: the ``quota`` layer's tmpfs is full) stops it the
  same way. A file past the file-size rlimit still fails with ``OSError`` (``EFBIG``).
- What a script hands the API is read as exact builtin types first (:mod:`sandbox._values`);
  ``print`` still calls ``str()`` on what it prints, as ``print`` does, and reads the text it
  gets back as an exact ``str``. ``inputs`` is the run's own plain dict.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NoReturn

from . import _dialect, _files, _guards, _hints
from ._blocking_channel import BlockingChannel
from ._endings import Ending
from ._values import NotPlainError, cut, exact_list, exact_str, to_plain, well_formed
from ._wire import (
    CallFailed,
    CallTool,
    CallTools,
    Done,
    Fetch,
    FetchResult,
    Output,
    RunError,
    RunLimits,
    Start,
    ToolCall,
    ToolFailed,
    ToolResult,
    ToolResults,
)
from .protocol import ProtocolError, encode_frame
from .protocol._names import DESCRIBE_TOOL, MAX_QUERY_CHARS, SEARCH_TOOLS

__all__ = [
    "HostGone",
    "LimitExceeded",
    "PrintCollector",
    "Session",
    "ToolError",
    "ToolsNamespace",
    "Unfetchable",
]

_FLUSH_BYTES: Final = 8192
_FLUSH_SECONDS: Final = 0.05


_MAX_PENDING_NOTED: Final = 10_000
"""Pending calls a run keeps track of, to name those never awaited at its end."""


class ToolError(Exception):
    """Raised in a script when a tool call fails; its message is the error's text."""


class Unfetchable(Exception):
    """Raised in a script by ``fetch`` when a payload can't be fetched; the message is the reason
    of the host's answer (``scriptbridge.Unfetchable``, an outcome, not this exception)."""


class LimitExceeded(BaseException):
    """A limit the child enforces itself; a BaseException so ``except Exception`` skips it."""

    def __init__(self, ending: Ending, message: str) -> None:
        super().__init__(message)
        self.ending = ending


class HostGone(BaseException):
    """The channel broke (host closed it, or sent something invalid): stop without reporting."""


@_guards.open_namespace
class ToolsNamespace:
    """``tools.<name>``: one callable per tool, names with ``.`` and ``-`` turned into ``_``;
    and ``tools.search(query)`` and ``tools.describe(name)``, which find tools (a tool whose
    name would be ``search`` or ``describe`` is reached with ``call_tool``)."""

    __slots__ = ("_ambiguous", "_callables", "_session")
    _ambiguous: dict[str, list[str]]
    _callables: dict[str, Callable[..., Any]]
    _session: Session

    def search(self, query: Any) -> list[str]:
        """The stubs of the tools matching ``query`` best (words of what they do), best
        first: how each is called, and what it does."""
        words = exact_str(query, "tools.search's query")[:MAX_QUERY_CHARS]
        found: list[str] = self._session.call_now(SEARCH_TOOLS, {"query": words})["data"]
        return found

    def describe(self, name: Any) -> str:
        """The stub of the tool ``name`` (as ``call_tool`` takes it, or as ``tools.<name>``)."""
        tool = exact_str(name, "tools.describe's name")
        stub: str = self._session.call_now(DESCRIBE_TOOL, {"name": tool})["data"]
        return stub

    def __init__(self, session: Session, names: Sequence[str]) -> None:
        by_attribute: dict[str, list[str]] = {}
        for name in names:
            by_attribute.setdefault(name.replace(".", "_").replace("-", "_"), []).append(name)
        callables = {
            attribute: session.tool_caller(owners[0])
            for attribute, owners in by_attribute.items()
            if len(owners) == 1
        }
        ambiguous = {a: o for a, o in by_attribute.items() if len(o) > 1}
        object.__setattr__(self, "_callables", callables)
        object.__setattr__(self, "_ambiguous", ambiguous)
        object.__setattr__(self, "_session", session)

    def __getattr__(self, attribute: str) -> Callable[..., Any]:
        try:
            return self._callables[attribute]
        except KeyError:
            pass
        if attribute in self._ambiguous:
            names = " or ".join(repr(n) for n in self._ambiguous[attribute])
            raise AttributeError(f"tools.{attribute} is ambiguous: use call_tool({names}, ...)")
        said = f"no tool is named like {attribute!r}"
        near = _hints.closest(attribute, [*self._callables, *self._ambiguous])
        if near:
            said += f" (the closest: {', '.join(f'tools.{name}' for name in near)})"
        raise AttributeError(said)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise TypeError("tools is read-only")

    def __repr__(self) -> str:
        return f"<tools: {', '.join(sorted(self._callables))}>"


class PrintCollector:
    """The object RestrictedPython's rewritten ``print(...)`` calls (``_print._call_print``)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._text: list[str] = []

    def _call_print(self, *objects: Any, **kwargs: Any) -> None:
        text = self._session.print_text(objects, kwargs)
        if text is not None:
            self._text.append(text)

    def __call__(self) -> str:
        """The script's ``printed``: what this scope printed so far."""
        return "".join(self._text)


class Session:
    """One run's state: limits, counters, the output buffer, and the channel."""

    def __init__(self, channel: BlockingChannel, start: Start) -> None:
        self._channel = channel
        self._limits: RunLimits = start.limits
        self._tool_names = list(start.tools)
        self._parameters = {
            name: [p for p in names if type(p) is str]
            for name, names in dict(start.parameters).items()
            if type(name) is str and type(names) is list
        }  # the host's (trusted), read as plain lists of names all the same
        self._inputs = dict(start.inputs)
        self._workspace = os.getcwd()
        self._next_call_id = 1
        self._tool_calls = 0
        self._output_bytes = 0
        self._pending: list[str] = []
        self._pending_bytes = 0
        self._last_flush = time.monotonic()
        self._out_sizes: dict[str, int] = {}  # every file write_text wrote: its size now
        self._out_bytes = 0  # their sum
        self._out_entries = 0  # files and directories write_text made in out/
        self.stopped: BaseException | None = None  # a LimitExceeded or HostGone, sticky
        self.limit_error: RunError | None = None  # what stopped a run, as the session saw it
        self.awaiting = False  # the script uses await: tool calls are pending until awaited
        self.pending_calls: list[_dialect.PendingCall] = []  # the pending calls made, in order

    # -- globals -------------------------------------------------------------------------------

    def script_globals(self, *, audited: bool = True) -> dict[str, Any]:
        """Return the script's globals: hooks, builtins and the names API.md lists.

        ``audited=False`` (the language layer off only) gives imports the unaudited proxies.
        """
        namespace: dict[str, Any] = {
            "__builtins__": _guards.safe_builtins(
                self.print_function,
                audited=audited,
                extra_modules={"asyncio": _dialect.asyncio_proxy(self)},
            ),
            "__name__": _guards.SCRIPT_MODULE,
            "__metaclass__": type,
            "_print_": lambda _getattr=None: PrintCollector(self),
            "_print": PrintCollector(self),
            **_guards.guard_hooks(),
            "_await_": _dialect.script_await,
            "_return_": _dialect.script_return,
            "call_tool": self.call_tool,
            "call_tools": self.call_tools,
            "tools": ToolsNamespace(self, self._tool_names),
            "fetch": self.fetch,
            "read_text": self.read_text,
            "read_bytes": self.read_bytes,
            "write_text": self.write_text,
            "inputs": self._inputs,
            "ToolError": ToolError,
            "Unfetchable": Unfetchable,
        }
        return namespace

    refusing: str | None = None
    """While set (a session's carried definitions re-run, :mod:`sandbox._carry`), every call
    that would reach the host or the files (tool calls, fetches, reads, writes, prints) raises
    ``RuntimeError`` with this reason instead."""

    def _check(self) -> None:
        if self.stopped is not None:
            raise self.stopped
        if self.refusing is not None:
            raise RuntimeError(self.refusing)

    def _stop(self, exc: BaseException) -> NoReturn:
        if self.stopped is None:
            self.stopped = exc
            if isinstance(exc, LimitExceeded):  # kept apart: a script may hold the exception
                self.limit_error = RunError(
                    type=exc.ending.value, message=str(exc), line=None, phase="limit"
                )
        raise self.stopped

    # -- output --------------------------------------------------------------------------------

    def print_function(
        self, *objects: Any, sep: Any = " ", end: Any = "\n", file: Any = None, flush: Any = False
    ) -> None:
        """The script's ``print`` (also behind RestrictedPython's ``_print``)."""
        self.print_text(objects, {"sep": sep, "end": end, "file": file})

    def print_text(self, objects: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
        """Format like ``print`` and stream it; returns the text, or ``None`` if it went to a
        ``file=`` object of the script's (whose ``write`` is called through the guard)."""
        self._check()
        unknown = set(kwargs) - {"sep", "end", "file", "flush"}
        if unknown:
            raise TypeError(f"print() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        sep = kwargs.get("sep")
        end = kwargs.get("end")
        sep = " " if sep is None else exact_str(sep, "print() sep")
        end = "\n" if end is None else exact_str(end, "print() end")
        text = sep.join([exact_str(str(obj), "str() of a printed value") for obj in objects]) + end
        target = kwargs.get("file")
        if target is not None:
            _guards.guarded_getattr(target, "write")(text)
            return None
        self.emit(text)
        return text

    def emit(self, text: str) -> None:
        """Queue ``text`` for the host, within the output cap.

        Raises:
            LimitExceeded: the cap is passed; the allowed prefix is queued and flushed.
        """
        self._check()
        data = well_formed(text).encode("utf-8")
        room = self._limits.max_output_bytes - self._output_bytes
        if len(data) > room:
            allowed = data[: max(room, 0)].decode("utf-8", "ignore")
            if allowed:
                self._queue(allowed, len(allowed.encode("utf-8")))
            self.flush()
            self._stop(
                LimitExceeded(
                    Ending.OutputExceeded,
                    f"the script printed more than {self._limits.max_output_bytes} bytes",
                )
            )
        self._queue(data.decode("utf-8"), len(data))
        now = time.monotonic()
        if self._pending_bytes >= _FLUSH_BYTES or now - self._last_flush >= _FLUSH_SECONDS:
            self.flush()

    def _queue(self, text: str, size: int) -> None:
        self._pending.append(text)
        self._pending_bytes += size
        self._output_bytes += size

    def flush(self) -> None:
        """Send queued output, in frames within the message limit."""
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        self._last_flush = time.monotonic()
        step = max(self._limits.max_message_bytes // 4 - 64, 1)
        for offset in range(0, len(text), step):
            self._send(Output(text=text[offset : offset + step]))

    def _send(self, message: Any) -> None:
        try:
            self._channel.send(message)
        except OSError:
            self._stop(HostGone("the host closed the channel"))

    # -- requests ------------------------------------------------------------------------------

    def _request(self, build: Callable[[int], Any], expected: tuple[type, ...]) -> Any:
        self._check()
        self.flush()
        call_id = self._next_call_id
        self._next_call_id += 1
        message = build(call_id)
        try:
            self._channel.send(message)
        except ProtocolError as exc:
            raise ValueError(f"the request is too large to send: {exc}") from None
        except OSError:
            self._stop(HostGone("the host closed the channel"))
        try:
            reply = self._channel.receive_host()
        except (OSError, ProtocolError) as exc:
            self._stop(HostGone(f"the host's reply was unreadable: {exc}"))
        if reply is None:
            self._stop(HostGone("the host closed the channel"))
        if not isinstance(reply, expected) or getattr(reply, "call_id", None) != call_id:
            self._stop(HostGone(f"unexpected {reply.op} from the host for call {call_id}"))
        return reply

    def _count_calls(self, count: int) -> None:
        self._check()
        if self._tool_calls + count > self._limits.max_tool_calls:
            self._stop(
                LimitExceeded(
                    Ending.ToolCallsExceeded,
                    f"the script made more than {self._limits.max_tool_calls} tool calls",
                )
            )
        self._tool_calls += count

    @staticmethod
    def _arguments(name: Any, args: Any, kwargs: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        tool = exact_str(name, "a tool name")
        if args is not None and kwargs:
            raise TypeError("pass tool arguments as one dict or as keywords, not both")
        merged = kwargs if args is None else args
        if not issubclass(type(merged), dict):
            raise TypeError("tool arguments must be a dict")
        try:
            plain = to_plain(merged)
        except NotPlainError as exc:
            raise TypeError(f"tool arguments must be plain data: found {exc}") from None
        return tool, plain

    def call_tool(self, name: Any, args: Any = None, /, **kwargs: Any) -> Any:
        """The script's ``call_tool(name, args=None, **kwargs)``: the tool's script view, or,
        in a script that uses ``await``, the pending call ``await`` makes
        (:mod:`sandbox._dialect`).

        Raises ``ToolError`` with the host's message when the call failed.
        """
        tool, plain = self._arguments(name, args, kwargs)
        if self.awaiting:
            call = _dialect.pending(self, tool, plain)
            if len(self.pending_calls) < _MAX_PENDING_NOTED:
                self.pending_calls.append(call)
            return call
        return self.call_now(tool, plain)

    def call_now(self, tool: str, plain: dict[str, Any]) -> Any:
        """Make one tool call of checked arguments; its script view, or ``ToolError``."""
        self._count_calls(1)
        reply = self._request(
            lambda call_id: CallTool(call_id=call_id, name=tool, args=plain),
            (ToolResult, ToolFailed),
        )
        if isinstance(reply, ToolFailed):
            raise ToolError(reply.message)
        return reply.view

    def tool_caller(self, name: str) -> Callable[..., Any]:
        """Return the callable behind ``tools.<name>``: keywords, or one dict of arguments,
        or positionals bound to the tool's arguments in its schema's order
        (:meth:`_bound`)."""
        attribute = name.replace(".", "_").replace("-", "_")

        def call(*args: Any, **kwargs: Any) -> Any:
            if not args:
                return self.call_tool(name, None, **kwargs)
            if len(args) == 1 and not kwargs and issubclass(type(args[0]), dict):
                return self.call_tool(name, args[0])  # a dict is the arguments, as ever
            return self.call_tool(name, self._bound(attribute, name, args, kwargs))

        call.__name__ = call.__qualname__ = attribute
        return call

    def _bound(
        self, attribute: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """``args`` bound to the first of tool ``name``'s arguments, in its schema's order,
        with ``kwargs``; ``TypeError`` showing the keywords to use when that can't be done
        (the tool names no arguments, or fewer than were given, or one is given twice)."""
        parameters = self._parameters.get(name, [])
        keywords = ", ".join(f"{parameter}=..." for parameter in parameters)
        if len(args) > len(parameters):
            takes = f"{len(parameters)} positional" if parameters else "no positional"
            given = f"{len(args)} {'was' if len(args) == 1 else 'were'} given"
            raise TypeError(
                f"tools.{attribute}() takes {takes} arguments but {given}: "
                f"call it as tools.{attribute}({keywords})"
            )
        bound = dict(zip(parameters, args, strict=False))  # args may be fewer
        for key in kwargs:
            if key in bound:
                raise TypeError(f"tools.{attribute}() got multiple values for argument {key!r}")
        bound.update(kwargs)
        return bound

    def call_tools(self, calls: Any) -> list[Any]:
        """The script's ``call_tools([(name, args), ...])``: views in call order, one request.

        Raises ``ToolError`` with the first failed call's message if any call failed.
        """
        batch: list[ToolCall] = []
        for item in exact_list(calls, "call_tools' argument"):
            pair = exact_list(item, "each call of call_tools")
            if len(pair) != 2:
                raise TypeError("call_tools takes a list of (name, args) pairs")
            tool, plain = self._arguments(pair[0], pair[1], {})
            batch.append(ToolCall(name=tool, args=plain))
        outcomes = self.call_batch([(call.name, call.args) for call in batch])
        for outcome in outcomes:
            if isinstance(outcome, ToolError):
                raise outcome
        return outcomes

    def call_batch(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[Any]:
        """Make checked calls as one concurrent batch; each call's view, or its ToolError."""
        if not calls:
            return []
        batch = [ToolCall(name=name, args=args) for name, args in calls]
        self._count_calls(len(batch))
        reply = self._request(
            lambda call_id: CallTools(call_id=call_id, calls=batch), (ToolResults,)
        )
        if len(reply.results) != len(batch):
            self._stop(HostGone("the host answered a batch with the wrong number of results"))
        return [
            ToolError(outcome.message) if isinstance(outcome, CallFailed) else outcome.view
            for outcome in reply.results
        ]

    def fetch(self, reference: Any) -> str:
        """The script's ``fetch(block_or_id)``: the workspace path of the saved payload.

        Raises ``Unfetchable`` with the host's reason, or ``TypeError`` for a wrong argument.
        """
        if issubclass(type(reference), dict):
            ref_id = dict.get(reference, "id")
            if ref_id is None:
                reason = dict.get(reference, "unfetchable")
                if issubclass(type(reason), str):
                    raise Unfetchable(exact_str(reason, "a reason"))
                raise Unfetchable("this reference has no id")
        else:
            ref_id = reference
        if not issubclass(type(ref_id), str) or not str.__len__(ref_id):
            raise TypeError("fetch takes a reference block or a reference id string")
        ident = well_formed(ref_id)
        reply: FetchResult = self._request(
            lambda call_id: Fetch(call_id=call_id, ref_id=ident), (FetchResult,)
        )
        if reply.unfetchable is not None:
            raise Unfetchable(reply.unfetchable)
        assert reply.saved_to is not None
        return reply.saved_to

    # -- files ---------------------------------------------------------------------------------

    def read_bytes(self, path: Any) -> bytes:
        """The script's ``read_bytes(path)``; raises ``OSError`` subclasses as ``open`` does."""
        self._check()
        return _files.read_bytes(_files.resolve(self._workspace, path, write=False))

    def read_text(self, path: Any) -> str:
        """The script's ``read_text(path)``: the file decoded as UTF-8 (strict)."""
        return self.read_bytes(path).decode("utf-8")

    def write_text(self, path: Any, text: Any) -> None:
        """The script's ``write_text(path, text)``: writes UTF-8 under ``out/``, creating
        parent directories; replaces the file if it exists.

        A write that would pass the run's disk quota (module doc) makes nothing and stops the
        run with ``DiskQuotaExceeded``; so does one the OS refuses for want of room.
        """
        self._check()
        data = exact_str(text, "write_text's text").encode("utf-8")
        relative = _files.resolve(self._workspace, path, write=True)
        parent = os.path.dirname(relative)
        known = self._out_sizes.get(relative)
        missing = _files.missing_directories(parent)
        entries = self._out_entries + missing + (known is None)
        size = self._out_bytes - (known or 0) + len(data)
        if entries > self._limits.max_out_files:
            self._stop_for_disk(f"more than {self._limits.max_out_files} files and directories")
        if size > self._limits.max_out_bytes:
            self._stop_for_disk(f"more than {self._limits.max_out_bytes} bytes")
        try:
            _files.make_directories(parent, missing)
            # the parents made or found must stay in out/
            _files.resolve(self._workspace, relative, write=True)
            _files.write_bytes(relative, data)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                self._stop_for_disk(f"more than it has room for ({exc.strerror})")
            raise
        self._out_sizes[relative] = len(data)
        self._out_bytes = size
        self._out_entries = entries

    def _stop_for_disk(self, what: str) -> NoReturn:
        self._stop(LimitExceeded(Ending.DiskQuotaExceeded, f"the script's out/ would hold {what}"))

    # -- the end -------------------------------------------------------------------------------

    def finish(self, outcome: RunError | tuple[Any]) -> None:
        """Flush output and send the last message: ``outcome`` as an error, or ``done``."""
        if isinstance(self.stopped, HostGone):
            return
        if self.limit_error is not None:
            outcome = self.limit_error
        try:
            self._note_never_awaited()
            self.flush()
        except (LimitExceeded, HostGone):
            return
        if isinstance(outcome, RunError):
            self._send_last(outcome)
            return
        self._send_last(self._done(outcome[0]))

    def _note_never_awaited(self) -> None:
        """Say which tool calls the script made pending and never awaited (they were never
        made), as Python warns of a coroutine never awaited."""
        names = [call.tool_name for call in self.pending_calls if not call.claimed]
        self.pending_calls.clear()
        if names:
            listed = ", ".join(repr(name) for name in sorted(set(names)))
            self.emit(
                f"note: {len(names)} tool call(s) never awaited, so never made: {listed} "
                "(in a script that uses await, await each call)\n"
            )

    def _done(self, value: Any) -> Done:
        """``done`` with the script's value: plain data as it is; else its ``repr``, cut,
        with why it isn't sent as it is (``not_plain``)."""
        limit = min(self._limits.max_value_bytes, self._limits.max_message_bytes // 4 - 256)
        try:
            plain = to_plain(value)
        except NotPlainError as exc:
            why = str(exc)
        else:
            done = Done(value=plain)
            try:
                encode_frame(done, limit=self._limits.max_message_bytes)
            except ProtocolError:
                why = f"more than the {self._limits.max_message_bytes} bytes a message may carry"
            else:
                return done
        try:
            text = repr(value)
        except BaseException:  # a script's __repr__ may raise anything
            text = f"<{type(value).__name__} object>"
        return Done(value=cut(text, max(limit, 64)), value_is_repr=True, not_plain=cut(why, 200))

    def _send_last(self, message: Any) -> None:
        with contextlib.suppress(OSError, ProtocolError):
            self._channel.send(message)
