"""The zygote's requests as the fork server reads them: checked by hand, no pydantic. No I/O.

The requests are defined by :mod:`sandbox.protocol._zygote_messages` (pydantic models, the
host's: it builds and validates requests with them, and validates every reply). The zygote
checks each request against the same bounds before it acts on it (:func:`read_request`) and
holds it in the plain classes below; ``tests/sandbox/test_sandbox_wire.py`` holds the bounds,
defaults and verdicts to the models'. Replies are packed from plain maps of the models' fields
(:func:`pack_reply`), which the host validates.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import msgpack

from .protocol import LAYER_NAMES, ZygoteError

__all__ = ["LIMIT_BOUNDS", "ChildLimits", "Kill", "Spawn", "Wait", "pack_reply", "read_request"]

LIMIT_BOUNDS: Final[dict[str, tuple[type, float, float, bool, float]]] = {
    "cpu_s": (float, 0, 86_400, False, 10.0),
    "memory_mb": (int, 16, 1 << 20, True, 256),
    "max_file_bytes": (int, 0, 1 << 50, True, 64 * 2**20),
    "max_open_files": (int, 16, 65_536, True, 64),
    "max_out_bytes": (int, 0, 1 << 50, True, 64 * 2**20),
    "max_out_files": (int, 0, 10**7, True, 1000),
}
"""Each OS limit: its type, its lowest and highest value, whether the lowest is allowed, and
its default (those of :class:`sandbox.protocol.ChildLimits`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildLimits:
    """OS limits of one child (:class:`sandbox.protocol.ChildLimits` documents each)."""

    cpu_s: float = 10.0
    memory_mb: int = 256
    max_file_bytes: int = 64 * 2**20
    max_open_files: int = 64
    max_out_bytes: int = 64 * 2**20
    max_out_files: int = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class Spawn:
    """Fork a child for one run in ``workspace``."""

    req_id: int
    workspace: str
    limits: ChildLimits
    disable: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Wait:
    """Answer once child ``pid`` has been reaped."""

    req_id: int
    pid: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Kill:
    """Send ``signal`` to child ``pid``."""

    req_id: int
    pid: int
    signal: int = int(signal.SIGKILL)


def _int(value: Any, what: str, low: int | None = None, high: int | None = None) -> int:
    if type(value) is not int:
        raise ValueError(f"{what} must be an int")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{what} is out of range")
    return value


def _fields(body: dict[str, Any], op: str, known: set[str]) -> None:
    extra = set(body) - known - {"op"}
    if extra:
        raise ValueError(f"unknown fields of {op}: {sorted(extra)[:3]}")


def _limits(body: Any) -> ChildLimits:
    if not isinstance(body, dict):
        raise ValueError("limits must be a map")
    _fields(body, "limits", set(LIMIT_BOUNDS))
    values: dict[str, Any] = {}
    for name, (kind, low, high, low_allowed, default) in LIMIT_BOUNDS.items():
        value: Any = body.get(name, default)
        if kind is float and type(value) is int:
            value = float(value)
        if type(value) is not kind or not isinstance(value, int | float):
            raise ValueError(f"limits.{name} must be a {kind.__name__}")
        if not (low <= value if low_allowed else low < value) or value > high:
            raise ValueError(f"limits.{name} is out of range")
        values[name] = value
    return ChildLimits(**values)


def _spawn(body: dict[str, Any]) -> Spawn:
    _fields(body, "spawn", {"req_id", "workspace", "limits", "disable"})
    workspace = body["workspace"]
    if type(workspace) is not str or not 1 <= len(workspace) <= 4096:
        raise ValueError("workspace must be a path of 1 to 4096 characters")
    disable = body.get("disable", [])
    if type(disable) is not list or any(layer not in LAYER_NAMES for layer in disable):
        raise ValueError("disable must list layers")
    return Spawn(
        req_id=_int(body["req_id"], "req_id", 1),
        workspace=workspace,
        limits=_limits(body["limits"]),
        disable=list(disable),
    )


def _wait(body: dict[str, Any]) -> Wait:
    _fields(body, "wait", {"req_id", "pid"})
    return Wait(req_id=_int(body["req_id"], "req_id", 1), pid=_int(body["pid"], "pid"))


def _kill(body: dict[str, Any]) -> Kill:
    _fields(body, "kill", {"req_id", "pid", "signal"})
    return Kill(
        req_id=_int(body["req_id"], "req_id", 1),
        pid=_int(body["pid"], "pid"),
        signal=_int(body.get("signal", int(signal.SIGKILL)), "signal", 1, 64),
    )


_READERS: Final[dict[str, Callable[[dict[str, Any]], Spawn | Wait | Kill]]] = {
    "spawn": _spawn,
    "wait": _wait,
    "kill": _kill,
}


def read_request(data: bytes) -> Spawn | Wait | Kill:
    """The request in datagram ``data``, checked as the host's models would check it.

    Raises:
        ZygoteError: it is not msgpack, or not a request (an unknown op, a missing, unknown,
            mistyped or out-of-range field).
    """
    try:
        body = msgpack.unpackb(data, raw=False, strict_map_key=True)
        if not isinstance(body, dict):
            raise ValueError("a request is a map")
        op = body.get("op")
        reader = _READERS.get(op) if isinstance(op, str) else None
        if reader is None:
            raise ValueError(f"unknown request {str(op)[:40]!r}")
        request = reader(body)
    except (ValueError, TypeError, KeyError, msgpack.UnpackException) as exc:
        raise ZygoteError(f"malformed zygote message: {exc!r}"[:300]) from exc
    return request


def pack_reply(op: str, **fields: Any) -> bytes:
    """One reply datagram: ``op`` and ``fields``, as the reply model of that op dumps them."""
    return msgpack.packb({"op": op, **fields}, use_bin_type=True)  # type: ignore[no-any-return]
