"""The whole error tree of scriptbridge. Every error it raises derives from one base::

    ScriptBridgeError(Exception)
    ├── ScriptRejected          the compiler refused the script (syntax, a forbidden construct)
    ├── ScriptFailed            the script raised
    ├── LimitExceeded           wall time, CPU time, memory, output or tool calls ran out
    ├── SandboxCrashed          the sandbox process died or could not start
    ├── ProtocolViolation       the sandbox process sent a message that fails validation
    └── FetchError              a payload could not be fetched (the fetcher answers with
                                ``Unfetchable`` instead wherever a caller can take an answer)

Foreign errors (msgpack, pydantic, OS) are translated at the boundary with ``raise ... from
exc``; ``trio.Cancelled`` always passes through untouched.
"""

from __future__ import annotations

__all__ = [
    "FetchError",
    "LimitExceeded",
    "ProtocolViolation",
    "SandboxCrashed",
    "ScriptBridgeError",
    "ScriptFailed",
    "ScriptRejected",
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
