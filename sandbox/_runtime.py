"""Compile one script, run it with the script globals of API.md, and report the outcome.

Everything here runs inside the sandbox child, after isolation, over the channel of
:mod:`sandbox.protocol`. :func:`serve` is the whole life of a child: it sends ``ready``, reads
``start``, compiles and runs the script, streams its output, answers its tool calls and fetches
through the host, and sends ``done`` or ``error`` last.

Choices made where the spec is silent (documented here, tested in ``tests/sandbox``):

- The run's value is the value of the script's *last statement* when that statement is an
  expression statement; otherwise ``None``. It is compiled separately in ``eval`` mode and
  evaluated in the same globals, after the rest of the script.
- A value that is not plain data (or holds an int outside 64 bits, a non-``str`` dict key, is
  nested too deep, or too large for one frame) is sent as its ``repr`` cut to
  ``limits.max_value_bytes`` characters, with ``value_is_repr`` set.
- ``print`` output is buffered and sent as ``output`` messages once 8 KiB are pending, 50 ms
  after the previous send, before every tool call and fetch, and at the end. Past
  ``limits.max_output_bytes`` the allowed prefix is sent and the run stops with
  ``OutputExceeded``; a script cannot catch its way past a limit (the stop is sticky).
- ``call_tools`` returns the views in call order; if any call failed it raises ``ToolError``
  with the first failed call's message (the others' results are then not returned).
- File paths are workspace-relative, ``/``-separated, without ``..``; reads are allowed under
  ``refs/`` and ``out/``, writes under ``out/`` only (parents are created); the resolved path
  must stay in that directory, and the last component is never followed if it is a symlink.
- ``write_text`` keeps the run's disk quota: it counts what the run has left in ``out/`` so
  far (the bytes of every file it wrote, a replaced file counting its new size only, and
  every file and directory it made, parents included) and refuses, before making anything,
  the write that would pass ``limits.max_out_bytes`` or ``limits.max_out_files``; the run then
  stops with ``DiskQuotaExceeded`` (sticky, like ``OutputExceeded``). A write the OS refuses
  for want of room (``ENOSPC``, ``EDQUOT``: the ``quota`` layer's tmpfs is full) stops it the
  same way. A file past the file-size rlimit still fails with ``OSError`` (``EFBIG``).
- Every string sent to the host is made well formed (a lone surrogate becomes U+FFFD).
- The boundary: everything a script hands the script API (``call_tool`` and ``call_tools``
  names and arguments, ``fetch``'s reference, ``read_text``/``read_bytes``/``write_text``'s path
  and text, ``print``'s ``sep`` and ``end``) is converted to exact builtin types (:func:`exact_str`,
  :func:`to_plain`) before any trusted code looks at it, through the builtin types' own slots:
  a ``str`` subclass becomes a plain ``str`` without any of its methods being called, and any
  other type is refused with ``TypeError``. No method of a script's object ever steers a
  check. (``print`` still calls ``str()`` on what it prints, as ``print`` does; the text it
  gets back is read as an exact ``str``.) ``inputs`` is the run's own plain dict.
- ``name <op>= value`` compiles to a native in-place operation, where RestrictedPython would
  call an ``_inplacevar_`` hook that could only apply the same operator (see :class:`_Policy`).
  Augmented assignment of attributes and items is refused, as RestrictedPython does.
"""

from __future__ import annotations

import ast
import contextlib
import errno
import os
import re
import sys
import time
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NoReturn

from RestrictedPython.compile import compile_restricted_eval, compile_restricted_exec
from RestrictedPython.transformer import RestrictingNodeTransformer

from . import _guards
from ._endings import Ending
from .protocol import (
    LAYER_NAMES,
    MAX_DATA_DEPTH,
    MAX_DATA_NODES,
    PROTOCOL_VERSION,
    BlockingChannel,
    CallFailed,
    CallOk,
    CallTool,
    CallTools,
    Done,
    Fetch,
    FetchResult,
    Layer,
    Output,
    ProtocolError,
    Ready,
    RunError,
    RunLimits,
    SkippedLayer,
    Start,
    ToolCall,
    ToolFailed,
    ToolResult,
    ToolResults,
    encode_frame,
    parse_host_message,
)

__all__ = [
    "SCRIPT_FILENAME",
    "ToolError",
    "Unfetchable",
    "exact_list",
    "exact_str",
    "serve",
    "to_plain",
    "warm_up",
    "well_formed",
]

SCRIPT_FILENAME: Final = "<script>"
_MESSAGE_CHARS: Final = 4000
_FLUSH_BYTES: Final = 8192
_FLUSH_SECONDS: Final = 0.05
_LINE_PREFIX: Final = re.compile(r"^Line (\d+):")


class ToolError(Exception):
    """Raised in a script when a tool call fails; its message is the error's text."""


class Unfetchable(Exception):
    """Raised in a script by ``fetch`` when a payload can't be fetched; the message is the reason
    of the host's answer (``scriptbridge.Unfetchable``, an outcome, not this exception)."""


class _LimitExceeded(BaseException):
    """A limit the child enforces itself; a BaseException so ``except Exception`` skips it."""

    def __init__(self, ending: Ending, message: str) -> None:
        super().__init__(message)
        self.ending = ending


class _HostGone(BaseException):
    """The channel broke (host closed it, or sent something invalid): stop without reporting."""


class NotPlainError(TypeError):
    """A value is not plain data (see :func:`to_plain`)."""


# --------------------------------------------------------------------------------------------
# Plain data


def well_formed(text: str) -> str:
    """Return ``text`` as an exact ``str`` with every lone surrogate replaced by U+FFFD (other
    text unchanged); a ``str`` subclass is read through ``str``'s own slot."""
    if type(text) is not str:
        text = str.__str__(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def exact_str(value: Any, what: str) -> str:
    """Return ``value`` as an exact ``str`` without calling any method of the script's.

    A ``str`` subclass is copied through ``str``'s own slot (``str.__str__``), so no override
    of ``split``, ``__eq__``, ``startswith`` ... ever runs.

    Raises:
        TypeError: ``value`` is not a ``str``; the message names ``what``.
    """
    cls = type(value)
    if cls is str:
        return value  # type: ignore[no-any-return]
    if issubclass(cls, str):
        return str.__str__(value)
    raise TypeError(f"{what} must be a str, not {cls.__name__}")


def exact_list(value: Any, what: str) -> list[Any]:
    """Return the items of a ``list`` or ``tuple`` (or a subclass of either) as a new exact
    ``list``, read through the builtin type's own iterator (no override runs).

    Raises:
        TypeError: ``value`` is neither; the message names ``what``.
    """
    cls = type(value)
    if issubclass(cls, list):
        return list(list.__iter__(value))
    if issubclass(cls, tuple):
        return list(tuple.__iter__(value))
    raise TypeError(f"{what} must be a list or tuple, not {cls.__name__}")


def to_plain(
    value: Any, *, max_depth: int = MAX_DATA_DEPTH, max_nodes: int = MAX_DATA_NODES
) -> Any:
    """Return a plain-data copy of ``value`` (see :data:`sandbox.protocol.PlainData`), made of
    exact builtin types.

    Tuples become lists, ``bytearray`` becomes ``bytes``, subclasses of ``dict``/``list``/
    ``tuple``/``str``/``bytes``/``int``/``float`` become the base type, each read through the
    base type's own slots and iterators (types are taken from ``type()``, never from a
    ``__class__`` an object claims), so no method of the script's runs; strings are made well
    formed.

    Raises:
        NotPlainError: some value has another type, an int is outside 64 bits, a dict key is not
            a ``str``, or the bounds are passed.
    """
    nodes = 0

    def convert(item: Any, depth: int) -> Any:
        nonlocal nodes
        nodes += 1
        if nodes > max_nodes:
            raise NotPlainError(f"more than {max_nodes} values")
        if item is None or item is True or item is False:
            return item
        cls = type(item)
        if issubclass(cls, int):
            number = int.__int__(item)
            if not -(2**63) <= number < 2**64:
                raise NotPlainError("an int outside 64 bits")
            return number
        if issubclass(cls, float):
            return float.__float__(item)
        if issubclass(cls, str):
            return well_formed(str.__str__(item))
        if issubclass(cls, (bytes, bytearray)):
            return bytes(memoryview(item))
        if depth >= max_depth:
            raise NotPlainError(f"nested deeper than {max_depth}")
        if issubclass(cls, list):
            return [convert(child, depth + 1) for child in list.__iter__(item)]
        if issubclass(cls, tuple):
            return [convert(child, depth + 1) for child in tuple.__iter__(item)]
        if issubclass(cls, dict):
            converted: dict[str, Any] = {}
            for key, child in dict.items(item):
                if not issubclass(type(key), str):
                    raise NotPlainError(f"a {type(key).__name__} dict key")
                converted[well_formed(str.__str__(key))] = convert(child, depth + 1)
            return converted
        raise NotPlainError(f"a {cls.__name__}")

    return convert(value, 0)


def _cut(text: str, limit: int) -> str:
    text = well_formed(text)
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:  # a script's __str__ may raise anything
        text = f"<{type(exc).__name__} with an unprintable message>"
    return _cut(text, _MESSAGE_CHARS)


def _script_line(exc: BaseException) -> int | None:
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == SCRIPT_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


# --------------------------------------------------------------------------------------------
# The session: the script's globals, over the channel


@_guards.open_namespace
class _ToolsNamespace:
    """``tools.<name>``: one callable per tool, names with ``.`` and ``-`` turned into ``_``."""

    __slots__ = ("_ambiguous", "_callables")
    _ambiguous: dict[str, list[str]]
    _callables: dict[str, Callable[..., Any]]

    def __init__(self, session: _Session, names: Sequence[str]) -> None:
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

    def __getattr__(self, attribute: str) -> Callable[..., Any]:
        try:
            return self._callables[attribute]
        except KeyError:
            pass
        if attribute in self._ambiguous:
            names = " or ".join(repr(n) for n in self._ambiguous[attribute])
            raise AttributeError(f"tools.{attribute} is ambiguous: use call_tool({names}, ...)")
        raise AttributeError(f"no tool is named like {attribute!r}")

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise TypeError("tools is read-only")

    def __repr__(self) -> str:
        return f"<tools: {', '.join(sorted(self._callables))}>"


class _PrintCollector:
    """The object RestrictedPython's rewritten ``print(...)`` calls (``_print._call_print``)."""

    def __init__(self, session: _Session) -> None:
        self._session = session
        self._text: list[str] = []

    def _call_print(self, *objects: Any, **kwargs: Any) -> None:
        text = self._session.print_text(objects, kwargs)
        if text is not None:
            self._text.append(text)

    def __call__(self) -> str:
        """The script's ``printed``: what this scope printed so far."""
        return "".join(self._text)


class _Session:
    """One run's state: limits, counters, the output buffer, and the channel."""

    def __init__(self, channel: BlockingChannel, start: Start) -> None:
        self._channel = channel
        self._limits: RunLimits = start.limits
        self._tool_names = list(start.tools)
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
        self.stopped: BaseException | None = None  # a _LimitExceeded or _HostGone, sticky
        self.limit_error: RunError | None = None  # what stopped a run, as the session saw it

    # -- globals -------------------------------------------------------------------------------

    def script_globals(self, *, audited: bool = True) -> dict[str, Any]:
        """Return the script's globals: hooks, builtins and the names API.md lists.

        ``audited=False`` (the language layer off only) gives imports the unaudited proxies.
        """
        namespace: dict[str, Any] = {
            "__builtins__": _guards.safe_builtins(self.print_function, audited=audited),
            "__name__": _guards.SCRIPT_MODULE,
            "__metaclass__": type,
            "_print_": lambda _getattr=None: _PrintCollector(self),
            "_print": _PrintCollector(self),
            **_guards.guard_hooks(),
            "call_tool": self.call_tool,
            "call_tools": self.call_tools,
            "tools": _ToolsNamespace(self, self._tool_names),
            "fetch": self.fetch,
            "read_text": self.read_text,
            "read_bytes": self.read_bytes,
            "write_text": self.write_text,
            "inputs": self._inputs,
            "ToolError": ToolError,
            "Unfetchable": Unfetchable,
        }
        return namespace

    def _check(self) -> None:
        if self.stopped is not None:
            raise self.stopped

    def _stop(self, exc: BaseException) -> NoReturn:
        if self.stopped is None:
            self.stopped = exc
            if isinstance(exc, _LimitExceeded):  # kept apart: a script may hold the exception
                self.limit_error = RunError(
                    type=exc.ending.value, message=str(exc), line=None, phase="run"
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
            _LimitExceeded: the cap is passed; the allowed prefix is queued and flushed.
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
                _LimitExceeded(
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
            self._stop(_HostGone("the host closed the channel"))

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
            self._stop(_HostGone("the host closed the channel"))
        try:
            reply = self._channel.receive_host()
        except (OSError, ProtocolError) as exc:
            self._stop(_HostGone(f"the host's reply was unreadable: {exc}"))
        if reply is None:
            self._stop(_HostGone("the host closed the channel"))
        if not isinstance(reply, expected) or getattr(reply, "call_id", None) != call_id:
            self._stop(_HostGone(f"unexpected {reply.op} from the host for call {call_id}"))
        return reply

    def _count_calls(self, count: int) -> None:
        self._check()
        if self._tool_calls + count > self._limits.max_tool_calls:
            self._stop(
                _LimitExceeded(
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
        """The script's ``call_tool(name, args=None, **kwargs)``: the tool's script view.

        Raises ``ToolError`` with the host's message when the call failed.
        """
        tool, plain = self._arguments(name, args, kwargs)
        self._count_calls(1)
        reply = self._request(
            lambda call_id: CallTool(call_id=call_id, name=tool, args=plain),
            (ToolResult, ToolFailed),
        )
        if isinstance(reply, ToolFailed):
            raise ToolError(reply.message)
        return reply.view

    def tool_caller(self, name: str) -> Callable[..., Any]:
        """Return the callable behind ``tools.<name>``."""

        def call(args: Any = None, /, **kwargs: Any) -> Any:
            return self.call_tool(name, args, **kwargs)

        call.__name__ = call.__qualname__ = name.replace(".", "_").replace("-", "_")
        return call

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
        if not batch:
            return []
        self._count_calls(len(batch))
        reply = self._request(
            lambda call_id: CallTools(call_id=call_id, calls=batch), (ToolResults,)
        )
        if len(reply.results) != len(batch):
            self._stop(_HostGone("the host answered a batch with the wrong number of results"))
        for outcome in reply.results:
            if isinstance(outcome, CallFailed):
                raise ToolError(outcome.message)
        return [outcome.view for outcome in reply.results]

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

    def _resolve(self, path: Any, *, write: bool) -> str:
        path = exact_str(path, "a path")
        allowed = ("out",) if write else ("refs", "out")
        rule = "write under out/" if write else "read under refs/ and out/"
        parts = [part for part in path.split("/") if part not in ("", ".")]
        if (
            "\x00" in path
            or path.startswith("/")
            or ".." in parts
            or len(parts) < 2
            or parts[0] not in allowed
        ):
            raise PermissionError(f"{path!r}: scripts may only {rule} (workspace-relative)")
        relative = "/".join(parts)
        real = os.path.realpath(relative)
        if not real.startswith(os.path.join(self._workspace, parts[0]) + os.sep):
            raise PermissionError(f"{path!r} resolves outside {parts[0]}/")
        return relative

    def read_bytes(self, path: Any) -> bytes:
        """The script's ``read_bytes(path)``; raises ``OSError`` subclasses as ``open`` does."""
        self._check()
        relative = self._resolve(path, write=False)
        fd = os.open(relative, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

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
        relative = self._resolve(path, write=True)
        parent = os.path.dirname(relative)
        known = self._out_sizes.get(relative)
        missing = _missing_directories(parent)
        entries = self._out_entries + missing + (known is None)
        size = self._out_bytes - (known or 0) + len(data)
        if entries > self._limits.max_out_files:
            self._stop_for_disk(f"more than {self._limits.max_out_files} files and directories")
        if size > self._limits.max_out_bytes:
            self._stop_for_disk(f"more than {self._limits.max_out_bytes} bytes")
        try:
            _make_directories(parent, missing)
            self._resolve(relative, write=True)  # the parents made or found must stay in out/
            fd = os.open(
                relative,
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
            )
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                self._stop_for_disk(f"more than it has room for ({exc.strerror})")
            raise
        self._out_sizes[relative] = len(data)
        self._out_bytes = size
        self._out_entries = entries

    def _stop_for_disk(self, what: str) -> NoReturn:
        self._stop(_LimitExceeded(Ending.DiskQuotaExceeded, f"the script's out/ would hold {what}"))

    # -- the end -------------------------------------------------------------------------------

    def finish(self, outcome: RunError | tuple[Any]) -> None:
        """Flush output and send the last message: ``outcome`` as an error, or ``done``."""
        if isinstance(self.stopped, _HostGone):
            return
        if self.limit_error is not None:
            outcome = self.limit_error
        try:
            self.flush()
        except (_LimitExceeded, _HostGone):
            return
        if isinstance(outcome, RunError):
            self._send_last(outcome)
            return
        self._send_last(self._done(outcome[0]))

    def _done(self, value: Any) -> Done:
        limit = min(self._limits.max_value_bytes, self._limits.max_message_bytes // 4 - 256)
        try:
            plain = to_plain(value)
        except NotPlainError:
            pass
        else:
            done = Done(value=plain)
            try:
                encode_frame(done, limit=self._limits.max_message_bytes)
            except ProtocolError:
                pass
            else:
                return done
        try:
            text = repr(value)
        except BaseException:  # a script's __repr__ may raise anything
            text = f"<{type(value).__name__} object>"
        return Done(value=_cut(text, max(limit, 64)), value_is_repr=True)

    def _send_last(self, message: Any) -> None:
        with contextlib.suppress(OSError, ProtocolError):
            self._channel.send(message)


def _missing_directories(parent: str) -> int:
    """How many directories of ``parent`` (a resolved path under ``out/``) don't exist yet."""
    parts = parent.split("/")
    missing = 0
    while len(parts) > 1 and not os.path.lexists("/".join(parts)):
        missing += 1
        parts.pop()
    return missing


def _make_directories(parent: str, missing: int) -> None:
    """Make the last ``missing`` directories of ``parent``, outermost first, one ``mkdir`` each
    (iteratively: ``os.makedirs`` recurses once per level, and a path may be a thousand deep).
    One made meanwhile counts as made."""
    parts = parent.split("/")
    for end in range(len(parts) - missing + 1, len(parts) + 1):
        with contextlib.suppress(FileExistsError):
            os.mkdir("/".join(parts[:end]), 0o755)


# --------------------------------------------------------------------------------------------
# Compile and run


class _Policy(RestrictingNodeTransformer):
    """RestrictedPython's policy with one rewrite left out: ``name <op>= value`` stays a native
    in-place operation instead of becoming ``name = _inplacevar_("<op>=", name, value)``.

    That hook could only apply the same operator (it checked nothing else, and no longer
    exists), so the behaviour is the same, but a loop's ``total += i`` no longer costs a
    Python call per iteration. Every check still runs: the target name and the value are
    visited as before, and augmented assignment of attributes and items is still refused.
    """

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        if isinstance(node.target, ast.Name):
            return self.node_contents_visit(node)
        return super().visit_AugAssign(node)


def _compile_error(errors: Sequence[str]) -> RunError:
    line = None
    for error in errors:
        match = _LINE_PREFIX.match(error)
        if match:
            line = int(match.group(1))
            break
    kind = "SyntaxError" if any("SyntaxError" in error for error in errors) else "CompileError"
    return RunError(
        type=kind, message=_cut("\n".join(errors), _MESSAGE_CHARS), line=line, phase="compile"
    )


def compile_script(
    source: str, *, restricted: bool
) -> tuple[types.CodeType, types.CodeType | None] | RunError:
    """Compile ``source`` into (body, last expression or ``None``), or return the errors.

    With ``restricted`` the RestrictedPython policy applies to both parts; without it the
    plain compiler is used (the security suite's "language layer off" mode). Never raises for
    a bad script: syntax and policy errors come back as a ``RunError`` of phase ``compile``.
    """
    try:
        tree = ast.parse(source, SCRIPT_FILENAME, "exec")
    except SyntaxError as exc:
        return RunError(
            type=type(exc).__name__,
            message=_cut(exc.msg or str(exc), _MESSAGE_CHARS),
            line=exc.lineno,
            phase="compile",
        )
    except (ValueError, RecursionError, MemoryError) as exc:
        return RunError(type="SyntaxError", message=_describe(exc), line=None, phase="compile")
    last: ast.Expression | None = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        final = tree.body.pop()
        assert isinstance(final, ast.Expr)
        last = ast.Expression(body=final.value)
    try:
        if not restricted:
            body = compile(tree, SCRIPT_FILENAME, "exec", dont_inherit=True)
            tail = None if last is None else compile(last, SCRIPT_FILENAME, "eval")
            return body, tail
        result = compile_restricted_exec(tree, filename=SCRIPT_FILENAME, policy=_Policy)
        errors = list(result.errors)
        tail_result = (
            None if last is None else compile_restricted_eval(last, SCRIPT_FILENAME, policy=_Policy)
        )
        if tail_result is not None:
            errors.extend(tail_result.errors)
        if errors or result.code is None:
            return _compile_error(errors or ["the script could not be compiled"])
        return result.code, None if tail_result is None else tail_result.code
    except SyntaxError as exc:  # the compiler's own late checks
        return RunError(
            type="SyntaxError", message=_describe(exc), line=exc.lineno, phase="compile"
        )
    except (ValueError, TypeError, RecursionError, MemoryError) as exc:
        return RunError(type="CompileError", message=_describe(exc), line=None, phase="compile")


def _run(session: _Session, source: str, *, restricted: bool) -> RunError | tuple[Any]:
    compiled = compile_script(source, restricted=restricted)
    if isinstance(compiled, RunError):
        return compiled
    body, tail = compiled
    namespace = session.script_globals(audited=restricted)
    try:
        exec(body, namespace)
        value = None if tail is None else eval(tail, namespace)
    except _LimitExceeded as exc:
        if session.limit_error is not None:  # the session's own stop, read as it recorded it
            return session.limit_error.model_copy(update={"line": _script_line(exc)})
        return RunError(type="RuntimeError", message=_describe(exc), line=None, phase="run")
    except _HostGone:
        raise
    except MemoryError as exc:
        return RunError(
            type="MemoryExceeded",
            message="the script ran out of memory",
            line=_script_line(exc),
            phase="run",
        )
    except BaseException as exc:  # everything a script can raise is reported, as data
        return RunError(
            type=_cut(type(exc).__name__, 200) or "Exception",
            message=_describe(exc),
            line=_script_line(exc),
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
    session = _Session(channel, start)
    try:
        outcome = _run(session, start.source, restricted=restricted)
    except _HostGone:
        return 3
    session.finish(outcome)
    status = 3 if isinstance(session.stopped, _HostGone) else 0
    if end is not None:
        end(status)  # ``outcome`` (the script's value) is still held here: nothing is freed
    return status


# --------------------------------------------------------------------------------------------
# Priming (in a fresh child, before it reports ready)

_PRIME_SCRIPT: Final = (
    "values = [1, 'a', {'k': 2.0}]\nfor v in values:\n    last = v\n{'n': len(values)}\n"
)


def prime() -> None:
    """Go once through what every run does, without I/O, in a child before it says ``ready``.

    A forked child's first touch of each page it shares with the zygote copies that page; a
    run then pays for hundreds of such copies between ``start`` and ``done``. Parsing a
    ``start``, compiling and running a tiny script in its own throwaway globals, and encoding a
    ``done`` here copies most of those pages while the child is still a spare, off the
    request path. Trusted code only; nothing of it is visible to the run's script (its globals
    are built afresh). Never raises.
    """
    try:
        start = parse_host_message(encode_frame(Start(source=_PRIME_SCRIPT))[4:])
        assert isinstance(start, Start)
        session = _Session(BlockingChannel(-1, -1), start)
        outcome = _run(session, start.source, restricted=True)
        if isinstance(outcome, tuple):
            encode_frame(session._done(outcome[0]))
    except Exception:  # pragma: no cover - priming is only an optimisation
        pass


# --------------------------------------------------------------------------------------------
# Warm-up (in the zygote, before any fork)

_WARM_UP_SCRIPT: Final = """
import json, math, re, datetime, collections, itertools, functools, statistics, random
import string, textwrap, base64, hashlib, decimal, fractions, heapq, bisect, difflib, time
from datetime import datetime as moment
stamp = moment.strptime("2024-01-02 03:04", "%Y-%m-%d %H:%M")
now = datetime.datetime.now().isoformat() + stamp.strftime("%A %d %B %Y %H:%M")
digests = [hashlib.sha256(b"x").hexdigest(), hashlib.md5(b"x").hexdigest(),
           hashlib.sha3_256(b"").hexdigest(), hashlib.blake2b(b"").hexdigest()]
print("warm", json.dumps({"a": [1, 2]}), f"{math.pi:.2f}", sep="|")
view = call_tool("warm.up", {"a": 1})
views = call_tools([("warm.up", {}), ("warm.up", {"b": [1, 2]})])
path = fetch({"type": "reference", "id": "ref_warm"})
try:
    tools.warm_up()
except ToolError as exc:
    failed = str(exc)
for first, second in [(1, 2)]:
    total = first + second
counter = collections.Counter("abcab").most_common(1)
number = decimal.Decimal("1.1") + 1 + fractions.Fraction(1, 3).numerator
mean = statistics.mean([1, 2, 3]) + statistics.median([1, 2]) + statistics.stdev([1, 2])
text = textwrap.fill("a b c", 2) + "".join(difflib.unified_diff(["a"], ["b"]))
text += re.sub("a+", "b", "aaa") + base64.b64encode(b"x").decode() + string.ascii_letters
heap = [3, 1]
heapq.heapify(heap)
bisect.insort(heap, 2)
ticks = time.monotonic() + random.random()
joined = list(itertools.chain([1], [2])) + [functools.reduce(lambda a, b: a + b, [1, 2])]
class Thing:
    def __init__(self):
        self.value = 1
thing = Thing()
thing.value = thing.value + 1
{"value": [1, (2, 3)], "bytes": b"x", "printed": printed}
"""


def warm_up() -> None:
    """Run one complete conversation in-process over real pipes, with canned host replies.

    Imports and exercises everything a child needs (the compiler, the hooks, every allowlisted
    module, the protocol both ways, codecs, ``strptime`` and the local time zone), so that a
    forked child never has to read a file it cannot reach once isolated. Never raises: a
    failure only leaves the child colder, and is reported on stderr.
    """
    import codecs

    codec_names = (
        "ascii",
        "latin-1",
        "utf-16",
        "utf-32",
        "utf-8-sig",
        "cp1252",
        "iso8859-15",
        "idna",
    )
    for name in codec_names:
        codecs.lookup(name)
    replies = [
        Start(source=_WARM_UP_SCRIPT, tools=["warm.up"], inputs={"q": "x"}),
        ToolResult(call_id=1, view={"content": [], "data": None, "isError": False}),
        ToolResults(call_id=2, results=[CallOk(view={}), CallOk(view={"b": b"\0"})]),
        FetchResult(call_id=3, saved_to="refs/ref_warm.txt"),
        ToolFailed(call_id=4, message="warm"),
    ]
    host_read, child_write = os.pipe()
    child_read, host_write = os.pipe()
    try:
        for message in replies:
            os.write(host_write, encode_frame(message))
        status = serve(
            BlockingChannel(child_read, child_write), applied=[], skipped=[], restricted=True
        )
        os.close(child_write)
        child_write = -1
        received = BlockingChannel(host_read, host_read)
        last: object = None
        while (received_message := received.receive_child()) is not None:
            last = received_message
        compile_script("x = (", restricted=True)
        compile_script("x._y", restricted=True)
        if status != 0 or not isinstance(last, Done):
            print(f"sandbox warm-up ended with {status}: {last!r}", file=sys.stderr)
    except Exception as exc:  # pragma: no cover - only a broken installation gets here
        print(f"sandbox warm-up failed: {exc!r}", file=sys.stderr)
    finally:
        for fd in (host_read, child_write, child_read, host_write):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
