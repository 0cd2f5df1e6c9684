"""The zygote's own protocol: requests from a host to its fork server, and the replies. No I/O.

Host and zygote are both trusted; the protocol still validates every datagram on both ends.
Each request and each reply is one small msgpack map in one ``SOCK_SEQPACKET`` datagram of at
most :data:`DATAGRAM` bytes; a ``spawn`` carries the child's two channel ends as
``SCM_RIGHTS``. A host with an event loop drives the socket itself with the pair
:func:`encode_request` / :func:`read_reply`; the blocking client and the fork server use the
models below directly (:mod:`sandbox._launcher`, :mod:`sandbox._zygote`).

Requests: ``spawn{req_id, workspace, limits, disable}``, ``wait{req_id, pid}``,
``kill{req_id, pid, signal}``. Replies: ``hello{pid, layers}`` once at start, then per request
``spawned{req_id, pid}`` or ``failed{req_id, message}``, ``exited{req_id, pid, returncode,
cpu_s, max_rss_kb, quota_exceeded}``, ``signalled{req_id, delivered}``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Collection
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeAlias

import msgpack
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from ._names import DATAGRAM, ChildExit, Layer, ZygoteError

__all__ = [
    "DATAGRAM",
    "REPLIES",
    "REQUESTS",
    "ChildExit",
    "ChildLimits",
    "Exited",
    "Failed",
    "Hello",
    "Kill",
    "LayerState",
    "Signalled",
    "Spawn",
    "Spawned",
    "Wait",
    "ZygoteError",
    "ZygoteReply",
    "child_exit",
    "encode_request",
    "pack",
    "read_reply",
    "unpack",
]


class ChildLimits(BaseModel):
    """OS limits of one child, applied before the script is read (the ``rlimits`` layer).

    Attributes:
        cpu_s: CPU seconds (rounded up); ``SIGXCPU`` kills the child there, ``SIGKILL`` one
            second later (only the ``SIGKILL`` in a PID namespace of its own, where the child
            ignores ``SIGXCPU``).
        memory_mb: address space the script may add to what the forked child already maps
            (about 40 MiB of the zygote's imports, shared copy-on-write); an allocation past
            it raises ``MemoryError`` (reported as ``MemoryExceeded``).
        max_file_bytes: largest file the child may write; a write past it fails with
            ``EFBIG``.
        max_open_files: the ``RLIMIT_NOFILE`` of the child (its own 5 fds included).
        max_out_bytes: bytes of file contents the run may leave in ``out/`` (the ``quota``
            layer, :mod:`sandbox._quota`); ``RLIMIT_FSIZE`` is at most one byte past it.
        max_out_files: files and directories the run may leave in ``out/`` (``quota``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    cpu_s: Annotated[float, Field(gt=0, le=86_400)] = 10.0
    memory_mb: Annotated[int, Field(ge=16, le=1 << 20)] = 256
    max_file_bytes: Annotated[int, Field(ge=0, le=1 << 50)] = 64 * 2**20
    max_open_files: Annotated[int, Field(ge=16, le=65_536)] = 64
    max_out_bytes: Annotated[int, Field(ge=0, le=1 << 50)] = 64 * 2**20
    max_out_files: Annotated[int, Field(ge=0, le=10**7)] = 1000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


_ReqId = Annotated[int, Field(ge=1)]


class Spawn(_Model):
    """Fork a child for one run in ``workspace``; sent with the child's two channel ends."""

    op: Literal["spawn"] = "spawn"
    req_id: _ReqId
    workspace: Annotated[str, Field(min_length=1, max_length=4096)]
    limits: ChildLimits
    disable: list[Layer] = Field(default_factory=list)


class Wait(_Model):
    """Answer with ``exited`` once child ``pid`` has been reaped."""

    op: Literal["wait"] = "wait"
    req_id: _ReqId
    pid: int


class Kill(_Model):
    """Send ``signal`` to child ``pid`` by its pidfd; answered by ``signalled``."""

    op: Literal["kill"] = "kill"
    req_id: _ReqId
    pid: int
    signal: Annotated[int, Field(ge=1, le=64)] = int(signal.SIGKILL)


class LayerState(_Model):
    """Whether the zygote's children get one layer, how, or why not (its probe at start)."""

    layer: Layer
    available: bool
    reason: Annotated[str, Field(max_length=2000)] | None = None
    mechanism: Annotated[str, Field(max_length=2000)] | None = None
    remedy: Annotated[str, Field(max_length=2000)] | None = None


class Hello(_Model):
    """The zygote's first datagram: it is warm and serves requests; ``layers`` are what its
    children get (a child forked and isolated as they are, at its start)."""

    op: Literal["hello"] = "hello"
    pid: int
    layers: Annotated[list[LayerState], Field(max_length=32)] = []


class Spawned(_Model):
    """The child of request ``req_id`` was forked as ``pid``.

    The datagram carries the child's pidfd (``SCM_RIGHTS``) and, when ``out``, then the fd of
    the tmpfs on its ``out/`` (the ``quota`` layer's mount): the requester may kill the child
    and look at what its ``out/`` holds without asking the zygote. A requester that reads the
    datagram without room for fds gets none (the kernel closes them).
    """

    op: Literal["spawned"] = "spawned"
    req_id: _ReqId
    pid: int
    out: bool = False


class Failed(_Model):
    """Request ``req_id`` was refused; ``message`` says why."""

    op: Literal["failed"] = "failed"
    req_id: _ReqId
    message: str


class Exited(_Model):
    """Child ``pid`` was reaped: how it ended (:class:`ChildExit`)."""

    op: Literal["exited"] = "exited"
    req_id: _ReqId
    pid: int
    returncode: int
    cpu_s: float
    max_rss_kb: int
    quota_exceeded: str | None = None


class Signalled(_Model):
    """Whether the signal of request ``req_id`` was delivered."""

    op: Literal["signalled"] = "signalled"
    req_id: _ReqId
    delivered: bool


_Request: TypeAlias = Annotated[Spawn | Wait | Kill, Field(discriminator="op")]
_Reply: TypeAlias = Annotated[
    Hello | Spawned | Failed | Exited | Signalled, Field(discriminator="op")
]
REQUESTS: TypeAdapter[_Request] = TypeAdapter(_Request)
"""Validates one request datagram (after :func:`unpack`)."""
REPLIES: TypeAdapter[_Reply] = TypeAdapter(_Reply)
"""Validates one reply datagram (after :func:`unpack`)."""


def pack(message: BaseModel) -> bytes:
    """One datagram holding ``message``."""
    return msgpack.packb(message.model_dump(mode="python"), use_bin_type=True)  # type: ignore[no-any-return]


def unpack(adapter: TypeAdapter[Any], data: bytes) -> Any:
    """The message in datagram ``data``, validated by ``adapter``.

    Raises:
        ZygoteError: it is not msgpack, or not a message ``adapter`` accepts.
    """
    try:
        return adapter.validate_python(msgpack.unpackb(data, raw=False, strict_map_key=True))
    except (ValueError, TypeError, msgpack.UnpackException, ValidationError) as exc:
        raise ZygoteError(f"malformed zygote message: {exc}") from exc


def child_exit(reply: Exited) -> ChildExit:
    """The :class:`ChildExit` an ``exited`` reply reports."""
    return ChildExit(
        reply.pid, reply.returncode, reply.cpu_s, reply.max_rss_kb, reply.quota_exceeded
    )


# --------------------------------------------------------------------------------------------
# Sans-I/O requests and replies (for a host that drives the socket itself)


@dataclass(frozen=True)
class ZygoteReply:
    """One reply read from the zygote's socket by :func:`read_reply`.

    Attributes:
        op: ``spawned`` (``pid`` is the new child), ``failed`` (``message`` says why),
            ``exited`` (``exit`` says how the child ended), ``signalled`` (``delivered``), or
            ``hello`` (sent once at start; ``req_id`` is ``None``).
        req_id: the request this answers.
        out: of ``spawned``: its datagram carries the tmpfs fd after the pidfd (``Spawned``).
    """

    op: str
    req_id: int | None
    pid: int | None = None
    message: str | None = None
    exit: ChildExit | None = None
    delivered: bool = False
    out: bool = False


def encode_request(
    op: Literal["spawn", "wait", "kill"],
    req_id: int,
    *,
    pid: int = 0,
    workspace: str | os.PathLike[str] = "",
    limits: ChildLimits | None = None,
    disable: Collection[Layer] = (),
    sig: int = signal.SIGKILL,
) -> bytes:
    """One request datagram, validated as the zygote will validate it.

    A ``spawn`` needs ``workspace`` (made absolute here) and must be sent with the child's two
    pipe ends (its read end of host -> child, then its write end of child -> host) attached as
    ``SCM_RIGHTS``; ``wait`` and ``kill`` need ``pid``. Each ``req_id`` must be unique per
    socket and at least 1.

    Raises:
        ValueError: a field is out of range (pydantic's ``ValidationError``).
    """
    request: _Model
    if op == "spawn":
        request = Spawn(
            req_id=req_id,
            workspace=os.path.abspath(os.fspath(workspace)),
            limits=limits or ChildLimits(),
            disable=sorted(set(disable)),
        )
    elif op == "wait":
        request = Wait(req_id=req_id, pid=pid)
    else:
        request = Kill(req_id=req_id, pid=pid, signal=int(sig))
    return pack(request)


def read_reply(data: bytes) -> ZygoteReply:
    """Validate one datagram from the zygote and return it as a :class:`ZygoteReply`.

    Raises:
        ZygoteError: it is not a reply of the zygote's protocol (an empty datagram means the
            zygote closed its end).
    """
    if not data:
        raise ZygoteError("the zygote exited")
    reply = unpack(REPLIES, data)
    if isinstance(reply, Hello):
        return ZygoteReply("hello", None, pid=reply.pid)
    if isinstance(reply, Spawned):
        return ZygoteReply("spawned", reply.req_id, pid=reply.pid, out=reply.out)
    if isinstance(reply, Failed):
        return ZygoteReply("failed", reply.req_id, message=reply.message)
    if isinstance(reply, Exited):
        status = child_exit(reply)
        return ZygoteReply("exited", reply.req_id, pid=reply.pid, exit=status)
    assert isinstance(reply, Signalled)
    return ZygoteReply("signalled", reply.req_id, delivered=reply.delivered)
