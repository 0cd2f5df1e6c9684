"""One HTTP/1.1 ``GET`` under the network policy, its body read straight off the connection.

:func:`http_get` connects through :class:`~._policy_backend.PolicyBackend` (every address is checked
before it is connected to), speaks TLS for ``https`` (certificates and host names verified
against certifi's roots, as httpx does by default, ALPN ``http/1.1``), sends one ``GET`` with
``Connection: close`` and ``Accept-Encoding: identity``, and gives the response once its head
has arrived. h11 writes the request and parses and polices the head: its size (h11 refuses one
it holds 16 KiB of unfinished, see :data:`HEAD_READ_SIZE`), its status line, one
``Content-Length``, the framing of the body.

A body with a ``Content-Length`` and no ``Transfer-Encoding`` (what a payload server sends) is
read straight from the connection, never past its length, and handed out as the bytes each read
returned, with no copy of its own (``benchmarks/fetch.py`` measures it against ``curl``). Any
other body (chunked, or up to the connection's end) is framed by h11.

SPEC section 5 names httpx for ``http``/``https``. This module keeps httpx's own parts (its URL
parses and joins every link and redirect, httpcore's trio backend connects, h11 speaks HTTP)
and leaves out only its client, whose body path the fetcher's throughput goal rules out.

A connection that fails, a TLS handshake that fails, bytes h11 refuses and a body that ends
before its length all raise a bare :class:`~scriptbridge.FetchError`; the network policy's
:class:`~scriptbridge.AddressRefused` (a ``FetchError`` too) passes through as itself, and so
does ``trio.Cancelled``. Nothing is retried and no redirect is followed: the
caller decides (:class:`~._fetcher.ReferenceFetcher` does both). The connection is closed when
the ``async with`` block is left, however it is left.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import certifi
import h11
import httpcore
import httpx
import trio

from ._exceptions import FetchError
from ._policy_backend import PolicyBackend

__all__ = ["HEAD_READ_SIZE", "READ_SIZE", "TLS_READ_SIZE", "HttpResponse", "http_get"]

USER_AGENT: Final = "scriptbridge"

READ_SIZE: Final = 1 << 20
"""Bytes asked per read over plain http (a body is received into one buffer this large, reused
from read to read): per-read costs are then paid once a MiB, not once every 64 KiB."""

HEAD_READ_SIZE: Final = 1 << 16
"""Bytes asked per read of a response head. h11 refuses a head it holds 16 KiB of without its
end, so a head longer than one such read is always refused."""

TLS_READ_SIZE: Final = 1 << 16
"""Bytes asked per read over TLS, which hands out at most one record (16 KiB) a read anyway.
Asked for 1 MiB, each read had malloc map (and the kernel fault in and zero) fresh pages for a
buffer cut down to one record: ~29,000 page faults per 100 MiB, slower than httpx's client."""

_TRANSPORT_ERRORS: Final = (
    httpcore.NetworkError,
    httpcore.TimeoutException,
    httpcore.ProtocolError,
    ssl.SSLError,
    OSError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    h11.ProtocolError,
)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The TLS settings of every https fetch (made once: loading the roots takes milliseconds)."""
    context = ssl.create_default_context()
    context.load_verify_locations(certifi.where())
    context.set_alpn_protocols(["http/1.1"])
    return context


class HttpResponse:
    """A response whose head has arrived: :attr:`status`, :meth:`header` and :meth:`body`."""

    def __init__(
        self,
        status: int,
        headers: list[tuple[bytes, bytes]],
        connection: h11.Connection,
        stream: httpcore.AsyncNetworkStream,
        socket: trio.socket.SocketType | None,
    ) -> None:
        self.status: Final = status
        self._headers = headers
        self._connection = connection
        self._stream = stream
        self._socket = socket  # the connection's own socket, when nothing (TLS) is over it
        self._read_size = READ_SIZE if socket is not None else TLS_READ_SIZE

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (any case), or ``None``. Decoded as ASCII, else
        UTF-8, else Latin-1, as httpx decodes headers."""
        wanted = name.lower().encode("ascii")
        for key, value in self._headers:
            if key == wanted:
                for encoding in ("ascii", "utf-8"):
                    try:
                        return value.decode(encoding)
                    except UnicodeDecodeError:
                        continue
                return value.decode("latin-1")
        return None

    async def body(self) -> AsyncIterator[bytes | bytearray | memoryview]:
        """The body's bytes, in pieces of at most :data:`READ_SIZE` (:data:`TLS_READ_SIZE` over
        TLS), exactly as its framing says: never a byte past a ``Content-Length``.

        Over plain http, a body read straight off the connection is received into one buffer
        that each piece is a view of, and that the next piece overwrites: use a piece (or copy
        it) before asking for the next. (A fresh 1 MiB ``bytes`` per read costs the kernel
        faulting in and zeroing 256 new pages each time, about as much as hashing the bytes.)

        Raises:
            FetchError: the body broke off before its end, or its framing is bad.
        """
        length = self._direct_length()
        received = 0
        while True:  # what h11 holds already (all of a body it frames)
            event = _next_event(self._connection)
            if event is h11.NEED_DATA:
                if length is not None:
                    break
                _receive(self._connection, await _read(self._stream, self._read_size))
            elif isinstance(event, h11.Data):
                received += len(event.data)
                yield event.data
            elif isinstance(event, h11.EndOfMessage):
                return
            else:
                raise FetchError(f"unexpected {type(event).__name__} in a response body")
        assert length is not None
        if self._socket is not None and received < length:  # the rest, straight into a buffer
            view = memoryview(bytearray(min(READ_SIZE, length - received)))
            while received < length:
                count = await _recv_into(self._socket, view[: length - received])
                if count == 0:
                    raise FetchError(f"the body ended {length - received} bytes before its length")
                received += count
                yield view[:count]
            return
        while received < length:  # the rest, straight off the TLS stream
            data = await _read(self._stream, min(self._read_size, length - received))
            if not data:
                raise FetchError(f"the body ended {length - received} bytes before its length")
            received += len(data)
            yield data

    def _direct_length(self) -> int | None:
        """The body's length when it is framed by ``Content-Length`` alone (h11 has checked
        the header), else ``None``."""
        if self.header("transfer-encoding") is not None:
            return None
        value = self.header("content-length")
        return None if value is None else int(value)


def _next_event(connection: h11.Connection) -> object:
    try:
        return connection.next_event()
    except h11.ProtocolError as exc:
        raise FetchError(f"the server's HTTP is bad: {exc}") from exc


def _receive(connection: h11.Connection, data: bytes) -> None:
    try:
        connection.receive_data(data)
    except h11.ProtocolError as exc:
        raise FetchError(f"the server's HTTP is bad: {exc}") from exc


async def _read(stream: httpcore.AsyncNetworkStream, max_bytes: int) -> bytes:
    """At most ``max_bytes`` (at least one, but for ``b""`` at the end of the stream)."""
    try:
        return await stream.read(max_bytes)
    except _TRANSPORT_ERRORS as exc:
        raise FetchError(f"reading failed: {type(exc).__name__}: {exc}") from exc


async def _recv_into(socket: trio.socket.SocketType, view: memoryview) -> int:
    try:
        return await socket.recv_into(view)
    except OSError as exc:
        raise FetchError(f"reading failed: {type(exc).__name__}: {exc}") from exc


@asynccontextmanager
async def http_get(
    url: httpx.URL, backend: PolicyBackend, *, tls: ssl.SSLContext | None = None
) -> AsyncIterator[HttpResponse]:
    """``GET url`` (``http`` or ``https``) through ``backend``; yield the response once its
    head has arrived (informational ``1xx`` heads are passed over). ``tls`` replaces the TLS
    settings of an https fetch (tests give it their own certificate authority).

    Raises:
        AddressRefused: the policy refuses every address of the host (nothing was connected).
        FetchError: as the module doc says.
        ValueError: ``url`` is neither ``http`` nor ``https``, or has no host.
    """
    if url.scheme not in ("http", "https") or not url.raw_host:
        raise ValueError(f"not an http(s) url with a host: {url}")
    host = url.raw_host.decode("ascii")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        stream = await backend.connect_tcp(host, port)
    except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
        raise FetchError(f"couldn't connect: {exc}") from exc
    try:
        if url.scheme == "https":
            try:
                stream = await stream.start_tls(tls or _tls_context(), server_hostname=host)
            except _TRANSPORT_ERRORS as exc:
                raise FetchError(f"TLS failed: {type(exc).__name__}: {exc}") from exc
        connection = h11.Connection(h11.CLIENT)
        try:
            request = h11.Request(method="GET", target=url.raw_path, headers=_headers(url))
            data = connection.send(request)
            end = connection.send(h11.EndOfMessage())
            assert data is not None and end is not None
            await stream.write(data + end)
        except _TRANSPORT_ERRORS as exc:
            raise FetchError(f"sending the request failed: {type(exc).__name__}: {exc}") from exc
        while True:
            event = _next_event(connection)
            if event is h11.NEED_DATA:
                _receive(connection, await _read(stream, HEAD_READ_SIZE))
            elif isinstance(event, h11.Response):
                break
            elif not isinstance(event, h11.InformationalResponse):
                raise FetchError(f"unexpected {type(event).__name__} before the response")
        plain = stream.get_extra_info("socket") if url.scheme == "http" else None
        socket = plain if isinstance(plain, trio.socket.SocketType) else None
        yield HttpResponse(event.status_code, list(event.headers), connection, stream, socket)
    finally:
        # Closed however the block is left; trio closes the socket even when this is cancelled.
        with contextlib.suppress(*_TRANSPORT_ERRORS):
            await stream.aclose()


def _headers(url: httpx.URL) -> list[tuple[bytes, bytes]]:
    headers = [
        (b"Host", url.netloc),
        (b"Accept", b"*/*"),
        (b"Accept-Encoding", b"identity"),
        (b"Connection", b"close"),
        (b"User-Agent", USER_AGENT.encode("ascii")),
    ]
    if url.userinfo:  # as httpx does: credentials in the url are sent as Basic auth
        credentials = f"{url.username}:{url.password}".encode()
        headers.append((b"Authorization", b"Basic " + base64.b64encode(credentials)))
    return headers
