"""The reference fetcher against hostile payload servers on loopback addresses.

Each server here lies, never stops, never answers, loops or bombs; each fetch must end with a
clear ``Unfetchable`` (or a copy that is exactly what the server's own framing says) within its
deadline, and leave nothing in ``refs/``, final or temporary. Cases ``tests/test_fetcher.py``
already covers (a body past the cap, a body short of its length, a declared size that
disagrees, a self-redirect loop, a redirect to another loopback address or the metadata address,
a token gzip body) are not repeated.
"""

from __future__ import annotations

import functools
import gzip
import os
from typing import Any

import pytest
import trio
from loopback_http import LoopbackServer, Request, redirect

from scriptbridge import ReferenceRegistry, markers
from scriptbridge._fetcher import ReferenceFetcher, Saved, Unfetchable
from scriptbridge._workspace import Workspace

DEADLINE_S = 0.5
CAP = 64 * 1024
DEADLINE = Unfetchable(markers.deadline_passed(DEADLINE_S), retryable=True)
OVER_CAP = Unfetchable(markers.over_cap(CAP))
UNREACHABLE = Unfetchable(markers.UNREACHABLE, retryable=True)


def head(status: str = "200 OK", **headers: str) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def answer(first: bytes, *, then: str = "close", more: bytes = b"") -> Any:
    """A handler that sends ``first``, then closes, stalls, or sends ``more`` forever."""

    async def handler(stream: trio.SocketStream, request: Request) -> None:
        await stream.send_all(first)
        if then == "stall":
            await trio.sleep_forever()
        while then == "endless":
            await stream.send_all(more)

    return handler


def drip(first: bytes, piece: bytes, every_s: float) -> Any:
    """A handler that sends ``first``, then ``piece`` every ``every_s`` seconds, forever."""

    async def handler(stream: trio.SocketStream, request: Request) -> None:
        await stream.send_all(first)
        while True:
            await trio.sleep(every_s)
            await stream.send_all(piece)

    return handler


def listing(ws: Workspace) -> list[str]:
    """Everything in refs/, hidden temporary files included."""
    return sorted(os.listdir(ws.refs_dir))


@pytest.fixture
def fetcher(reg: ReferenceRegistry, ws: Workspace) -> ReferenceFetcher:
    return ReferenceFetcher(reg, ws, allow=["127.0.0.1"], deadline_s=DEADLINE_S, max_bytes=CAP)


async def fetch(
    fetcher: ReferenceFetcher, reg: ReferenceRegistry, uri: str, **fields: Any
) -> Saved | Unfetchable:
    """Register a link to ``uri`` and fetch it; fails the test past twice the deadline + 5 s."""
    (record,) = reg.ingest(
        {"content": [{"type": "resource_link", "uri": uri, **fields}]}, server="s"
    )
    with trio.fail_after(2 * DEADLINE_S + 5):
        return await fetcher.fetch(record)


# --- servers that lie about sizes ---------------------------------------------------------------

LIES = {
    "length-then-stall": (head(Content_Length="1000") + b"x" * 10, "stall", DEADLINE),
    "two-lengths": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nContent-Length: 20\r\n\r\n" + b"x" * 20,
        "close",
        UNREACHABLE,
    ),
    "negative-length": (head(Content_Length="-1") + b"x", "close", UNREACHABLE),
    "length-not-a-number": (head(Content_Length="1e3") + b"x", "close", UNREACHABLE),
    "length-of-twenty-digits": (head(Content_Length="9" * 20), "stall",
                                Unfetchable(markers.declared_too_large(10**20 - 1, CAP))),
    "chunk-of-4gib-then-close": (head(Transfer_Encoding="chunked") + b"ffffffff\r\nxyz", "close",
                                 UNREACHABLE),
}  # fmt: skip


@pytest.mark.parametrize("lie", sorted(LIES))
async def test_a_server_that_lies_about_sizes(
    lie: str,
    server: LoopbackServer,
    reg: ReferenceRegistry,
    ws: Workspace,
    fetcher: ReferenceFetcher,
) -> None:
    """A length that never arrives, two lengths, a length that isn't a number or is absurd,
    and a chunk that announces 4 GiB each end in their Unfetchable, leaving no file."""
    first, then, expected = LIES[lie]
    server.routes["/lie"] = answer(first, then=then)
    assert await fetch(fetcher, reg, server.url("/lie")) == expected
    assert listing(ws) == []


async def test_bytes_past_the_length_are_not_the_body(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace, fetcher: ReferenceFetcher
) -> None:
    """A server that says 10 bytes and sends a megabyte gets a copy of exactly 10 bytes."""
    server.routes["/more"] = answer(head(Content_Length="10") + b"0123456789" + b"x" * 2**20)
    outcome = await fetch(fetcher, reg, server.url("/more"))
    assert isinstance(outcome, Saved) and outcome.size == 10
    assert (ws.root / outcome.path).read_bytes() == b"0123456789"


# --- bodies that never end ----------------------------------------------------------------------

ENDLESS = {
    "chunked": (head(Transfer_Encoding="chunked"), b"4000\r\n" + b"x" * 0x4000 + b"\r\n"),
    "until-close": (head(Content_Type="text/plain"), b"x" * 0x4000),
    "one-huge-chunk": (head(Transfer_Encoding="chunked") + b"7fffffff\r\n", b"x" * 0x4000),
}


@pytest.mark.parametrize("shape", sorted(ENDLESS))
async def test_an_endless_body_is_cut_at_the_cap(
    shape: str,
    server: LoopbackServer,
    reg: ReferenceRegistry,
    ws: Workspace,
    fetcher: ReferenceFetcher,
) -> None:
    """A body that never ends (chunked, read until close, or one chunk announcing 2 GiB) is cut
    off as soon as it passes the byte cap, with no file left."""
    first, more = ENDLESS[shape]
    server.routes["/endless"] = answer(first, then="endless", more=more)
    assert await fetch(fetcher, reg, server.url("/endless")) == OVER_CAP
    assert listing(ws) == []


# --- servers that stall -------------------------------------------------------------------------

STALLS = {
    "never-answers": answer(b"", then="stall"),
    "headers-then-nothing": answer(head(Content_Length="100"), then="stall"),
    "slow-headers": drip(b"HTTP/1.1 200 OK\r\n", b"X-A: b\r\n", 0.05),
    "slow-body": drip(head(Transfer_Encoding="chunked"), b"1\r\nx\r\n", 0.05),
}


@pytest.mark.parametrize("stall", sorted(STALLS))
async def test_a_stalling_server_meets_the_deadline(
    stall: str,
    server: LoopbackServer,
    reg: ReferenceRegistry,
    ws: Workspace,
    fetcher: ReferenceFetcher,
) -> None:
    """A server that never answers, stops after its headers, or drips headers or body a byte at
    a time is cut off at the fetcher's deadline, retryably, with no file left."""
    server.routes["/stall"] = STALLS[stall]
    started = trio.current_time()
    assert await fetch(fetcher, reg, server.url("/stall")) == DEADLINE
    assert trio.current_time() - started >= DEADLINE_S
    assert listing(ws) == []


# --- redirects ----------------------------------------------------------------------------------


async def test_a_redirect_cycle_ends_after_the_limit(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace, fetcher: ReferenceFetcher
) -> None:
    """Two addresses that redirect to each other are followed five times, then refused."""
    server.routes["/a"] = redirect("/b", status=301)
    server.routes["/b"] = redirect(server.url("/a"), status=308)
    outcome = await fetch(fetcher, reg, server.url("/a"))
    assert outcome == Unfetchable(markers.too_many_redirects(5))
    assert server.hits["/a"] + server.hits["/b"] == 6
    assert listing(ws) == []


DISGUISED = {
    "http://2852039166/latest/": "a cloud metadata address",
    "http://0xA9FEA9FE/latest/": "a cloud metadata address",
    "http://[::ffff:169.254.169.254]/latest/": "a cloud metadata address",
    "http://[::1]:{port}/x": "a loopback address",
    "http://[::ffff:127.0.0.2]:{port}/x": "a loopback address",
    "http://0.0.0.0:{port}/x": "an unspecified address",
    "http://10.1.2.3/x": "a private address",
    "http://user:pw@192.168.0.1/x": "a private address",
}


@pytest.mark.parametrize("target", sorted(DISGUISED))
async def test_a_redirect_to_a_refused_address_in_disguise(
    target: str,
    server: LoopbackServer,
    reg: ReferenceRegistry,
    ws: Workspace,
    fetcher: ReferenceFetcher,
) -> None:
    """A redirect to a refused address spelled as a decimal or hex number, an IPv4-mapped IPv6
    address, the unspecified address or behind userinfo is refused as that kind of address,
    without connecting."""
    server.routes["/go"] = redirect(target.format(port=server.port))
    label = DISGUISED[target]
    outcome = await fetch(fetcher, reg, server.url("/go"))
    assert outcome == Unfetchable(markers.refused_address(label, redirected=True))
    assert server.hits["/x"] == 0
    assert listing(ws) == []


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("http://127.0.0.1:1/closed", UNREACHABLE),
        ("https://127.0.0.1:{port}/no-tls", DEADLINE),  # a hello the server never answers
        ("http://[::1", Unfetchable(markers.REDIRECT_SCHEME)),  # no valid link: not retried
        ("gopher://127.0.0.1/x", Unfetchable(markers.REDIRECT_SCHEME)),
        ("/" + "x" * 70_000, UNREACHABLE),  # a head h11 refuses (over 16 KiB without its end)
    ],
)
async def test_a_redirect_nowhere_is_refused(
    location: str,
    expected: Unfetchable,
    server: LoopbackServer,
    reg: ReferenceRegistry,
    ws: Workspace,
    fetcher: ReferenceFetcher,
) -> None:
    """A redirect to a closed port, to TLS on a plain server, to a malformed or foreign link,
    or with a location too long for a header ends in its Unfetchable, with no file left."""
    server.routes["/go"] = redirect(location.format(port=server.port))
    assert await fetch(fetcher, reg, server.url("/go")) == expected
    assert listing(ws) == []


# --- compression bombs ------------------------------------------------------------------------


@functools.cache
def bomb() -> bytes:
    """64 KB of gzip that expands to 64 MiB of zeros."""
    return gzip.compress(b"\0" * (64 * 2**20), compresslevel=9)


@pytest.mark.parametrize("coding", ["gzip", "GZip", "x-gzip", "gzip, identity", "br", "deflate"])
async def test_a_compressed_bomb_is_refused_unopened(
    coding: str,
    server: LoopbackServer,
    reg: ReferenceRegistry,
    ws: Workspace,
    fetcher: ReferenceFetcher,
) -> None:
    """A 64 MiB gzip bomb sent with a Content-Encoding (in any spelling) is refused as encoded
    before its body is read, never expanded, with no file left."""
    first = head(Content_Encoding=coding, Content_Length=str(len(bomb()))) + bomb()
    server.routes["/bomb"] = answer(first)
    assert await fetch(fetcher, reg, server.url("/bomb")) == Unfetchable(markers.ENCODED)
    assert listing(ws) == []


async def test_a_bomb_in_the_transfer_encoding_is_refused(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace, fetcher: ReferenceFetcher
) -> None:
    """A bomb sent with Transfer-Encoding: gzip (which HTTP clients mustn't expand for it) ends
    as a broken transfer, with no file left."""
    first = (
        head(Transfer_Encoding="gzip, chunked")
        + b"%x\r\n" % len(bomb())
        + bomb()
        + b"\r\n0\r\n\r\n"
    )
    server.routes["/bomb"] = answer(first)
    assert await fetch(fetcher, reg, server.url("/bomb")) == UNREACHABLE
    assert listing(ws) == []


async def test_a_compressed_payload_without_an_encoding_is_saved_as_sent(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace, fetcher: ReferenceFetcher
) -> None:
    """A gzip file served plainly (application/gzip, no Content-Encoding) is saved byte for
    byte, never expanded."""
    first = head(Content_Type="application/gzip", Content_Length=str(len(bomb()))) + bomb()
    server.routes["/file.gz"] = answer(first)
    outcome = await fetch(fetcher, reg, server.url("/file.gz"))
    assert isinstance(outcome, Saved) and outcome.size == len(bomb()) < CAP
    assert (ws.root / outcome.path).read_bytes() == bomb()
    assert outcome.path.endswith(".gz")
