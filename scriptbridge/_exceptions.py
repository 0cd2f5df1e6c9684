"""The whole error tree of scriptbridge. Every error it raises derives from one base::

    ScriptBridgeError(Exception)
    ├── ScriptRejected          the compiler refused the script (syntax, a forbidden construct)
    ├── ScriptFailed            the script raised
    ├── LimitExceeded           wall time, CPU time, memory, output, tool calls or the
    │                           disk quota ran out
    ├── SandboxCrashed          the sandbox process died or could not start
    ├── ProtocolViolation       the sandbox process sent a message that fails validation
    ├── WorkspacePathError      a path the workspace won't take (also a ValueError)
    └── FetchError              a payload could not be fetched (the fetcher answers with
        │                       ``Unfetchable`` instead wherever a caller can take an answer)
        └── AddressRefused      the network policy refused an address, before any byte went

Foreign errors (msgpack, pydantic, OS) are translated at the boundary with ``raise ... from
exc``; ``trio.Cancelled`` always passes through untouched.
"""

from __future__ import annotations

import ipaddress

__all__ = [
    "AddressRefused",
    "FetchError",
    "LimitExceeded",
    "ProtocolViolation",
    "SandboxCrashed",
    "ScriptBridgeError",
    "ScriptFailed",
    "ScriptRejected",
    "WorkspacePathError",
]


class ScriptBridgeError(Exception):
    """The base of every error scriptbridge raises."""


class ScriptRejected(ScriptBridgeError):
    """The restricted compiler refused the script."""


class ScriptFailed(ScriptBridgeError):
    """The script raised an exception inside the sandbox."""


class LimitExceeded(ScriptBridgeError):
    """A run hit one of its limits."""


class SandboxCrashed(ScriptBridgeError):
    """The sandbox process died, or could not be started."""


class ProtocolViolation(ScriptBridgeError):
    """The sandbox process sent a malformed, oversized, out-of-order or unknown message."""


class FetchError(ScriptBridgeError):
    """A reference's payload could not be fetched."""


class WorkspacePathError(ScriptBridgeError, ValueError):
    """A path is not one the workspace takes: absolute, with ``..``, or resolving outside it."""


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
