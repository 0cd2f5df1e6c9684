"""The async dialect models are taught (``await call_tool(...)``, ``asyncio.gather``, a top-level
``return``), run without any coroutine, event loop or thread.

The compiler (:mod:`sandbox._compile`) rewrites the dialect into plain calls: ``await x`` becomes
``_await_(x)``, an ``async def`` a ``def``, and a ``return`` at the top level of the script
``raise _return_(value)``. Nothing a script can write makes a coroutine object, so no frame of
one (``cr_frame``, ``cr_await``) and no event loop exist to reach.

In a script that uses ``await``, ``call_tool(...)`` and ``tools.x(...)`` give a
:class:`PendingCall` instead of calling at once; ``await`` makes the call, and
``asyncio.gather(...)`` makes all the pending calls it is given in one concurrent batch (as
``call_tools`` does). A script without ``await`` calls as it always has. ``import asyncio``
gives :data:`ASYNCIO`, a module proxy with three names: ``gather``, ``sleep`` (bounded by the
run's wall time, which the host keeps) and ``run`` (which returns what it is given, already
run). Every guard and limit applies as to any call: these are the session's own functions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, NoReturn

from ._guards import ModuleProxy

if TYPE_CHECKING:
    from ._session import Session

__all__ = [
    "ASYNCIO",
    "PendingCall",
    "ScriptReturn",
    "asyncio_proxy",
    "pending",
    "script_await",
    "script_return",
]

_AWAIT_FIRST: Final = "a tool call in a script that uses await gives an awaitable: await it first"


_ISSUER: Final = object()
"""Only the session makes pending calls: a script that gets the class can't make one."""


class PendingCall:
    """A tool call not made yet: ``await`` makes it (once), ``asyncio.gather`` batches it."""

    __slots__ = ("_args", "_done", "_name", "_session")
    _session: Session
    _name: str
    _args: dict[str, Any]
    _done: bool

    def __init__(self, issuer: object, session: Session, name: str, args: dict[str, Any]) -> None:
        if issuer is not _ISSUER:
            raise TypeError("pending tool calls are made by call_tool")
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_args", args)
        object.__setattr__(self, "_done", False)

    @property
    def tool_name(self) -> str:
        return self._name

    @property
    def claimed(self) -> bool:
        return self._done

    def claim(self) -> tuple[str, dict[str, Any]]:
        """Take the call to make it; a call is made at most once."""
        if self._done:
            raise RuntimeError("this tool call was awaited already")
        object.__setattr__(self, "_done", True)
        return self._name, self._args

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise TypeError("a pending tool call is read-only")

    def __getitem__(self, key: Any) -> NoReturn:
        raise TypeError(_AWAIT_FIRST)

    def __iter__(self) -> NoReturn:
        raise TypeError(_AWAIT_FIRST)

    def __repr__(self) -> str:
        return f"<pending call of {self._name!r}>"


class ScriptReturn(BaseException):
    """A top-level ``return`` of the script: its value is the run's value."""

    def __init__(self, value: Any) -> None:
        super().__init__("return")
        self.value = value


def pending(session: Session, name: str, args: dict[str, Any]) -> PendingCall:
    """A pending call of tool ``name`` with ``args`` (plain data), for ``session``."""
    return PendingCall(_ISSUER, session, name, args)


def script_return(value: Any = None) -> ScriptReturn:
    """What a top-level ``return value`` raises (the compiler's rewrite)."""
    return ScriptReturn(value)


def script_await(value: Any) -> Any:
    """``await value``: make a pending tool call; anything else is its own result (a value of
    a rewritten ``async def``, ``asyncio.sleep``'s, a fetched path)."""
    if type(value) is PendingCall:
        name, args = value.claim()
        return value._session.call_now(name, args)
    return value


def gather(session: Session) -> Callable[..., list[Any]]:
    """``asyncio.gather`` for ``session``: every pending call given is made in one batch."""

    def script_gather(*awaitables: Any, return_exceptions: Any = False) -> list[Any]:
        """Wait for every awaitable given; pending tool calls are made as one concurrent
        batch. Returns their results in order; a failed call raises its ``ToolError`` (or is
        its ``ToolError`` in the list, with ``return_exceptions=True``)."""
        pending = [item for item in awaitables if type(item) is PendingCall]
        calls = [item.claim() for item in pending]
        outcomes = iter(session.call_batch(calls))
        results: list[Any] = []
        for item in awaitables:
            if type(item) is PendingCall:
                outcome = next(outcomes)
                if isinstance(outcome, BaseException) and return_exceptions is not True:
                    raise outcome
                results.append(outcome)
            else:
                results.append(item)
        return results

    return script_gather


def script_sleep(delay: Any, result: Any = None) -> Any:
    """``asyncio.sleep(delay, result=None)``: sleep (bounded by the run's wall time), then give
    ``result``."""
    if type(delay) not in (int, float) or not math.isfinite(delay) or delay < 0:
        raise ValueError("asyncio.sleep takes a finite number of seconds, at least 0")
    time.sleep(delay)
    return result


def script_run(value: Any) -> Any:
    """``asyncio.run(main())``: the dialect's ``main()`` has already run; this gives its result."""
    return script_await(value)


def asyncio_proxy(session: Session) -> ModuleProxy:
    """The ``asyncio`` a script of ``session`` imports: ``gather``, ``sleep`` and ``run``."""
    return ModuleProxy(
        "asyncio", {"gather": gather(session), "sleep": script_sleep, "run": script_run}
    )


ASYNCIO: Final[Sequence[str]] = ("gather", "run", "sleep")
"""The names of the script's ``asyncio``."""
