"""The whole error tree of scriptbridge. Every error it raises derives from one base::

    ScriptBridgeError(Exception)
    ├── ScriptRejected          raise_for_error: the compiler refused the script (syntax, a
    │                           forbidden construct)
    ├── ScriptFailed            raise_for_error: the script raised
    ├── LimitExceeded           raise_for_error: a limit ran out (wall time, CPU time, memory,
    │                           output, tool calls, disk quota); ``ending`` says which
    ├── SandboxCrashed          raise_for_error: the sandbox process died or could not start
    ├── ProtocolViolation       ChildChannel: the sandbox process sent a message that fails
    │                           validation (the supervisor ends that run with it);
    │                           raise_for_error
    ├── RunCancelled            raise_for_error: the bridge was closed while the run ran
    ├── WorkspacePathError      Workspace: a path it won't take (also a ValueError)
    ├── IsolationUnavailable    Bridge (opening): a layer named in ``require_isolation`` can't
    │                           be applied here; ``missing`` says which, why, and the remedy
    ├── ToolServerError         McpServer, Bridge.add_server: a tool server failed a request or
    │                           couldn't start (a failed tool call reaches the script as its
    │                           ``ToolError`` instead)
    └── FetchError              http_get: a payload's transfer broke (the connection, its TLS,
        │                       the server's HTTP); the fetcher answers ``Unfetchable``
        └── AddressRefused      PolicyBackend: the network policy refused an address, before
                                any byte went; the fetcher answers ``Unfetchable``

A bare ``ScriptBridgeError`` is raised by a ``Bridge`` used before it was opened.
``Bridge.run`` raises none of the run's endings: it returns a ``ScriptResult`` whose
``error.ending`` says how the run ended, and :meth:`ScriptResult.raise_for_error` raises the
matching class above, as httpx's ``raise_for_status`` does. The six that are a run's ending
(``ScriptRejected`` to ``RunCancelled``) carry ``result``: that ``ScriptResult``, or ``None``
when raised outside ``raise_for_error`` (a ``ProtocolViolation`` from the channel).
``Cancelled`` (the bridge closed under the run) raises :class:`RunCancelled`, never
``trio.Cancelled`` or ``asyncio.CancelledError``: those mean the *caller* is being cancelled.

Foreign errors (msgpack, pydantic, OS, the child package's ``sandbox.ZygoteError``) are
translated at the boundary with ``raise ... from exc`` or into a run's ending;
``trio.Cancelled`` always passes through untouched.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from sandbox.protocol import Ending

    from ._results import ScriptResult

__all__ = [
    "AddressRefused",
    "FetchError",
    "IsolationUnavailable",
    "LimitExceeded",
    "MissingLayer",
    "ProtocolViolation",
    "RunCancelled",
    "SandboxCrashed",
    "ScriptBridgeError",
    "ScriptFailed",
    "ScriptRejected",
    "ToolServerError",
    "WorkspacePathError",
]


class ScriptBridgeError(Exception):
    """The base of every error scriptbridge raises."""


class _RunEndingError(ScriptBridgeError):
    """An error that is also how a run can end: it carries the run's ``result`` when
    :meth:`ScriptResult.raise_for_error` raised it, and ``None`` otherwise."""

    def __init__(self, message: str, *, result: ScriptResult | None = None) -> None:
        super().__init__(message)
        self.result = result


class ScriptRejected(_RunEndingError):
    """The restricted compiler refused the script. ``result.error.type`` says how
    (``SyntaxError``, ``CompileError``)."""


class ScriptFailed(_RunEndingError):
    """The script raised an exception inside the sandbox; ``result.error.type`` is its class
    name."""


class LimitExceeded(_RunEndingError):
    """A run hit one of its limits; ``ending`` is which (one of ``sandbox.protocol.LIMITS``,
    e.g. ``Ending.WallTimeExceeded``).

    Raises:
        ValueError: on creation, when ``ending`` isn't a limit.
    """

    def __init__(self, message: str, *, ending: Ending, result: ScriptResult | None = None) -> None:
        if not ending.is_limit:
            raise ValueError(f"{ending} is not a limit")
        super().__init__(message, result=result)
        self.ending = ending


class SandboxCrashed(_RunEndingError):
    """The sandbox process died, or could not be started."""


class ProtocolViolation(_RunEndingError):
    """The sandbox process sent a malformed, oversized, out-of-order or unknown message."""


class RunCancelled(_RunEndingError):
    """The bridge was closed while the run ran (the run's ending ``Cancelled``). Not a
    cancellation of the caller: the caller's own code was not cancelled."""


class FetchError(ScriptBridgeError):
    """A reference's payload could not be fetched: the transfer broke. The fetcher catches it
    and answers with ``scriptbridge.Unfetchable`` instead."""


class MissingLayer(NamedTuple):
    """An isolation layer this machine doesn't apply: its name, why, and what would apply it."""

    layer: str
    reason: str
    remedy: str


class IsolationUnavailable(ScriptBridgeError):
    """Opening a bridge whose ``require_isolation`` names layers this machine can't apply.

    Attributes:
        missing: each such layer, why it can't apply, and what would make it apply.
    """

    def __init__(self, message: str, missing: list[MissingLayer]) -> None:
        super().__init__(message)
        self.missing = missing


class WorkspacePathError(ScriptBridgeError, ValueError):
    """A path is not one the workspace takes: absolute, with ``..``, or resolving outside it."""


class ToolServerError(ScriptBridgeError):
    """A tool server failed a request: it errored, timed out, exited or isn't running."""


class AddressRefused(FetchError):
    """A connection was refused by the network policy before any byte was sent.

    ``host`` is the host as the URL names it, ``address`` the first refused address, and
    ``label`` says what kind of address it is (``"a loopback address"``), for building a reason.
    """

    def __init__(
        self, host: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address, label: str
    ) -> None:
        super().__init__(f"{host} resolves to {address}, {label}")
        self.host = host
        self.address = address
        self.label = label
