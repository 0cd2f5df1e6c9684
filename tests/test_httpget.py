"""The fetcher's HTTP/1.1 GET against real loopback servers, plain and TLS.

The body of a response framed by ``Content-Length`` is read straight off the connection (over
plain http, into one reused buffer); every other body is framed by h11. These tests pin what
that must not change: the bytes handed out are exactly the body, however the server cuts its
writes, never a byte past the length; a body cut short is an error; TLS verifies the server.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator

import httpx
import pytest
import trio
import trustme
from loopback_http import LoopbackServer, Request, body, chunked, start_tls_server

from scriptbridge._exceptions import FetchError
from scriptbridge._httpget import READ_SIZE, http_get
from scriptbridge._netpolicy import NetworkPolicy
from scriptbridge._policy_backend import PolicyBackend

BACKEND = PolicyBackend(NetworkPolicy(["127.0.0.1"]))


async def get_body(
    url: str, *, backend: PolicyBackend = BACKEND, tls: ssl.SSLContext | None = None
) -> tuple[int, bytes]:
    """The status and the body, each piece copied as it arrives (a piece may be a view of a
    buffer the next one overwrites)."""
    async with http_get(httpx.URL(url), backend, tls=tls) as response:
        pieces = [bytes(piece) async for piece in response.body()]
    return response.status, b"".join(pieces)


def in_pieces(head: bytes, data: bytes, sizes: list[int], *, extra: bytes = b"") -> object:
    """A handler that sends ``head``, then ``data`` cut at ``sizes`` (cycled), the last piece
    in one write with ``extra``, so a reader that doesn't stop at the length gets it too."""

    async def handler(stream: trio.SocketStream, request: Request) -> None:
        await stream.send_all(head)
        position, turn = 0, 0
        while position < len(data):
            size = sizes[turn % len(sizes)]
            last = position + size >= len(data)
            await stream.send_all(data[position : position + size] + (extra if last else b""))
            position += size
            turn += 1
            await trio.sleep(0)

    return handler


@pytest.mark.parametrize(
    ("sizes", "length"),
    [
        ([1], 20_000),  # a byte a write: a bounded body, or the test would send 2 MiB this way
        ([7, 4093], 2 * READ_SIZE + 12345),
        ([READ_SIZE - 1, 3], 2 * READ_SIZE + 12345),
        ([3 * READ_SIZE], 2 * READ_SIZE + 12345),
    ],
)
async def test_a_length_framed_body_is_exactly_its_bytes(
    server: LoopbackServer, sizes: list[int], length: int
) -> None:
    """However the server cuts its writes, the pieces make exactly the body, and the bytes it
    sends past the length are not part of it."""
    data = os.urandom(length)
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(data)
    server.routes["/x"] = in_pieces(head, data, sizes, extra=b"NOT-THE-BODY" * 100)
    assert await get_body(server.url("/x")) == (200, data)


async def test_a_body_cut_short_is_an_error(server: LoopbackServer) -> None:
    """A connection that closes before the Content-Length is reached raises FetchError."""
    server.routes["/short"] = body(b"x" * (READ_SIZE + 10), length=READ_SIZE + 1000)
    with pytest.raises(FetchError, match="990 bytes before its length"):
        await get_body(server.url("/short"))


async def test_a_chunked_body_is_framed_by_h11(server: LoopbackServer) -> None:
    data = os.urandom(300_000)
    server.routes["/chunked"] = chunked(data, piece=65_536)
    assert await get_body(server.url("/chunked")) == (200, data)


async def test_a_body_without_a_length_runs_to_the_close(server: LoopbackServer) -> None:
    data = os.urandom(200_000)
    server.routes["/eof"] = in_pieces(b"HTTP/1.1 200 OK\r\n\r\n", data, [50_000])
    assert await get_body(server.url("/eof")) == (200, data)


async def test_the_request_asks_for_the_body_plain_and_closes(server: LoopbackServer) -> None:
    server.routes["/x?q=1"] = body(b"ok")
    assert await get_body(server.url("/x?q=1")) == (200, b"ok")
    (request,) = server.requests
    assert request.path == "/x?q=1"
    assert request.headers["host"] == f"127.0.0.1:{server.port}"
    assert request.headers["accept-encoding"] == "identity"
    assert request.headers["connection"] == "close"


# --- TLS ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def trusting(authority: trustme.CA) -> Iterator[ssl.SSLContext]:
    """A client context that trusts the test authority (and nothing else)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    authority.configure_trust(context)
    yield context


@pytest.fixture
async def tls_server(nursery: trio.Nursery, authority: trustme.CA) -> LoopbackServer:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    return await start_tls_server(nursery, context)


async def test_a_body_over_tls(tls_server: LoopbackServer, trusting: ssl.SSLContext) -> None:
    """Over TLS, a length-framed body is read through the TLS stream, exactly."""
    data = os.urandom(READ_SIZE + 777)
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(data)
    tls_server.routes["/x"] = in_pieces(head, data, [100_000], extra=b"PAST")
    assert await get_body(tls_server.url("/x"), tls=trusting) == (200, data)


async def test_an_untrusted_certificate_is_refused(tls_server: LoopbackServer) -> None:
    """With the default settings (certifi's roots), the test authority's certificate fails
    verification and nothing is read."""
    tls_server.routes["/x"] = body(b"secret")
    with pytest.raises(FetchError, match="TLS failed"):
        await get_body(tls_server.url("/x"))
    assert tls_server.hits["/x"] == 0


async def test_a_certificate_for_another_name_is_refused(
    nursery: trio.Nursery, authority: trustme.CA, trusting: ssl.SSLContext
) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("elsewhere.test").configure_cert(context)
    other = await start_tls_server(nursery, context)
    other.routes["/x"] = body(b"secret")
    with pytest.raises(FetchError, match="TLS failed"):
        await get_body(other.url("/x"), tls=trusting)
    assert other.hits["/x"] == 0
