"""A minimal HTTP/1.1 server on a loopback address, run by trio in a test's nursery.

Each route is an async handler given the connection's stream and the parsed request; helpers
below build the usual handlers (a body, a chunked body, a redirect, a stall, a gated body).
The server counts requests per path and keeps every request's headers. It speaks just enough
HTTP for the fetcher's tests: one request per connection, then the connection is closed.
"""

from __future__ import annotations

import functools
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]


Handler = Callable[[trio.SocketStream, Request], Awaitable[None]]


@dataclass
class LoopbackServer:
    host: str
    port: int = 0
    routes: dict[str, Handler] = field(default_factory=dict)
    hits: Counter[str] = field(default_factory=Counter)
    requests: list[Request] = field(default_factory=list)
    scheme: str = "http"

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{path}"

    async def _serve(self, stream: trio.SocketStream) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                data = await stream.receive_some(65536)
                if not data or len(head) > 65536:
                    return
                head += data
            lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            method, path, _version = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            request = Request(method, path, headers)
            self.requests.append(request)
            self.hits[path] += 1
            handler = self.routes.get(path, not_found)
            await handler(stream, request)
        except trio.BrokenResourceError:
            pass
        finally:
            await stream.aclose()


async def start_server(nursery: trio.Nursery, host: str = "127.0.0.1") -> LoopbackServer:
    """Start a server on ``host`` (an ephemeral port) in ``nursery``; it runs until cancelled."""
    server = LoopbackServer(host)
    listeners = await nursery.start(functools.partial(trio.serve_tcp, host=host), server._serve, 0)
    server.port = listeners[0].socket.getsockname()[1]
    return server


async def start_tls_server(
    nursery: trio.Nursery, context: ssl.SSLContext, host: str = "127.0.0.1"
) -> LoopbackServer:
    """Start a server speaking TLS with ``context`` (its certificate) on ``host``; the handlers
    get a ``trio.SSLStream``, which sends and receives as a socket stream does."""
    server = LoopbackServer(host, scheme="https")
    serve = functools.partial(trio.serve_ssl_over_tcp, host=host, https_compatible=True)
    listeners = await nursery.start(serve, server._serve, 0, context)
    server.port = listeners[0].transport_listener.socket.getsockname()[1]
    return server


def _head(status: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items()), "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def not_found(stream: trio.SocketStream, request: Request) -> None:
    await stream.send_all(_head("404 Not Found", {"Content-Length": "0"}))


def body(
    data: bytes, *, content_type: str = "application/octet-stream", length: int | None = None
) -> Handler:
    """Answer 200 with ``data`` and a Content-Length of ``length`` (default: its real length)."""

    async def handler(stream: trio.SocketStream, request: Request) -> None:
        size = len(data) if length is None else length
        headers = {"Content-Type": content_type, "Content-Length": str(size)}
        await stream.send_all(_head("200 OK", headers) + data)

    return handler


def chunked(data: bytes, *, piece: int = 4096) -> Handler:
    """Answer 200 with ``data`` in chunked transfer encoding (no Content-Length)."""

    async def handler(stream: trio.SocketStream, request: Request) -> None:
        await stream.send_all(_head("200 OK", {"Transfer-Encoding": "chunked"}))
        for start in range(0, len(data), piece):
            part = data[start : start + piece]
            await stream.send_all(b"%x\r\n%s\r\n" % (len(part), part))
        await stream.send_all(b"0\r\n\r\n")

    return handler


def redirect(location: str, status: int = 302) -> Handler:
    async def handler(stream: trio.SocketStream, request: Request) -> None:
        headers = {"Location": location, "Content-Length": "0"}
        await stream.send_all(_head(f"{status} Redirect", headers))

    return handler


def stall(first: bytes, total: int, stalled: trio.Event) -> Handler:
    """Announce ``total`` bytes, send ``first``, set ``stalled``, then send nothing more."""

    async def handler(stream: trio.SocketStream, request: Request) -> None:
        await stream.send_all(_head("200 OK", {"Content-Length": str(total)}) + first)
        stalled.set()
        await trio.sleep_forever()

    return handler


def gated(data: bytes, arrived: trio.Event, gate: trio.Event) -> Handler:
    """Set ``arrived`` when the request comes, wait for ``gate``, then answer with ``data``."""

    async def handler(stream: trio.SocketStream, request: Request) -> None:
        arrived.set()
        await gate.wait()
        await body(data)(stream, request)

    return handler


def encoded(data: bytes) -> Handler:
    """Answer 200 with a gzip Content-Encoding although identity was asked for."""

    async def handler(stream: trio.SocketStream, request: Request) -> None:
        headers = {"Content-Encoding": "gzip", "Content-Length": str(len(data))}
        await stream.send_all(_head("200 OK", headers) + data)

    return handler
