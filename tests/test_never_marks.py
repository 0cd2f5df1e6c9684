"""Never marks that no spelling, eviction or flood undoes (SPEC section 4), against a real
loopback server: every spelling of one request shares one mark, a mark reaches copies whose
record was evicted, and the never memory forgets nothing."""

from __future__ import annotations

import os
from functools import partial
from typing import Any

import pytest
from loopback_http import LoopbackServer, body
from tool_results import link as resource_link

from scriptbridge import ReferenceRegistry, markers, render_script_view
from scriptbridge._canonical import canonical_key
from scriptbridge._fetcher import ReferenceFetcher, Saved, Unfetchable
from scriptbridge._never import NeverMemory
from scriptbridge._workspace import Workspace

MARKED = Unfetchable(markers.PAYLOAD_NEVER)


link = partial(resource_link, name="payload")
"""A resource link named ``payload``."""


def never(uri: str) -> dict[str, Any]:
    return {"content": [{"type": "resource", "uri": uri, "disposition": "never"}]}


def spellings(port: int) -> list[str]:
    """Spellings of ``http://127.0.0.1:<port>/a`` that all lead to the same request."""
    return [
        f"HTTP://127.0.0.1:{port}/a",
        f"http://127.0.0.1:{port}/./a",
        f"http://127.0.0.1:{port}/b/../a",
        f"http://127.0.0.1:{port}/a#fragment",
        f"http://127.0.0.1:{port}/%61",
        f"http://0x7f.0.0.1:{port}/a",
        f"http://2130706433:{port}/a",
        f"http://0177.0.0.1:{port}/a",
        f"http://127.1:{port}/a",
        f"http://[::ffff:127.0.0.1]:{port}/a",
        f"http://127.0.0.1.:{port}/a",
    ]


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("http://host.example/a", "HTTP://Host.Example/a"),
        ("http://host.example/a", "http://host.example:80/a"),
        ("https://host.example/a", "https://host.example:443/a"),
        ("http://host.example/a", "http://host.example/./a"),
        ("http://host.example/a", "http://host.example/x/../a"),
        ("http://host.example/a", "http://host.example/a#x"),
        ("http://host.example/a", "http://u@host.example/a"),
        ("http://host.example/a", "http://u:p@host.example/a"),
        ("http://127.0.0.1/a", "http://0x7f.0.0.1/a"),
        ("http://127.0.0.1/a", "http://2130706433/a"),
        ("http://127.0.0.1/a", "http://[::ffff:7f00:1]/a"),
        ("http://host.example/", "http://host.example"),
        ("http://host.example/a~b", "http://host.example/a%7Eb"),
        ("http://host.example/a%2Fb", "http://host.example/a%2fb"),
        ("http://xn--bcher-kva.example/a", "http://bücher.example/a"),
        ("http://[2001:db8::1]/a", "http://[2001:0db8:0:0:0:0:0:1]/a"),
        ("docs://x/y", "DOCS://x/y"),
    ],
)
def test_spellings_of_one_request_share_a_key(one: str, other: str) -> None:
    """Two uris that lead to the same request have one canonical key."""
    assert canonical_key(one) == canonical_key(other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("http://host.example/a", "http://host.example/A"),
        ("http://host.example/a", "https://host.example/a"),
        ("http://host.example/a", "http://host.example:8080/a"),
        ("http://host.example/a?x=1", "http://host.example/a?x=2"),
        ("http://host.example/a%2Fb", "http://host.example/a/b"),
        ("docs://x/y", "docs://X/y"),
    ],
)
def test_different_requests_keep_different_keys(one: str, other: str) -> None:
    """Uris that lead to different requests keep apart."""
    assert canonical_key(one) != canonical_key(other)


async def test_every_spelling_is_refused_once_one_is_marked(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace
) -> None:
    """A never for one spelling refuses every other spelling, before any request, whichever
    came first and whichever server sent it."""
    server.routes["/a"] = body(b"secret")
    fetcher = ReferenceFetcher(reg, ws, allow=["127.0.0.1", "::ffff:127.0.0.1"])
    records = reg.ingest({"content": [link(u) for u in spellings(server.port)]}, server="docs")
    reg.ingest(never(server.url("/a")), server="other")
    for record in records:
        outcome = await fetcher.fetch(record)
        if record.key.startswith("unparsable:"):  # httpx can't read it: nothing is requested
            assert not isinstance(outcome, Saved), record.uri
        else:
            assert record.payload_never and outcome == MARKED, record.uri
    later = reg.ingest({"content": [link(f"http://127.0.0.1:{server.port}/%61#z")]}, server="x")
    assert later[0].payload_never
    view = render_script_view({"content": [link(u) for u in spellings(server.port)]}, reg)
    assert "127.0.0.1" not in repr(view) and "0x7f" not in repr(view)
    assert server.hits["/a"] == 0 and server.hits["/%61"] == 0


async def test_a_mark_removes_the_copy_of_another_spelling(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace
) -> None:
    """A copy saved through one spelling is removed when another spelling is marked."""
    server.routes["/a"] = body(b"secret")
    fetcher = ReferenceFetcher(reg, ws, allow=["127.0.0.1"])
    (record,) = reg.ingest({"content": [link(f"http://0x7f.0.0.1:{server.port}/./a")]}, server="d")
    outcome = await fetcher.fetch(record)
    assert isinstance(outcome, Saved)
    reg.ingest(never(server.url("/a")), server="d")
    assert record.payload_never and record.saved_path is None
    assert os.listdir(ws.refs_dir) == []


async def test_an_evicted_record_leaves_no_copy_for_a_later_mark(
    server: LoopbackServer, ws: Workspace
) -> None:
    """A fetched payload whose record is evicted is removed with it, so a never arriving after
    the eviction finds no copy a script could read."""
    reg = ReferenceRegistry(capacity=10)
    server.routes["/a"] = body(b"secret")
    fetcher = ReferenceFetcher(reg, ws, allow=["127.0.0.1"])
    (record,) = reg.ingest({"content": [link(server.url("/a"))]}, server="docs")
    assert isinstance(await fetcher.fetch(record), Saved)
    reg.ingest({"content": [link(f"http://other.example/{n}") for n in range(11)]}, server="docs")
    assert reg.get(record.id) is None
    assert os.listdir(ws.refs_dir) == []
    reg.ingest(never(server.url("/a")), server="docs")
    (again,) = reg.ingest({"content": [link(server.url("/a"))]}, server="docs")
    assert again.payload_never and await fetcher.fetch(again) == MARKED


def test_the_memory_keeps_hashes_not_strings() -> None:
    """Long uris cost the memory a fixed few bytes each: it holds no uri string."""
    memory = NeverMemory(capacity=10)
    uri = "http://host.example/" + "x" * 100_000
    memory.add(uri)
    assert uri in memory and "http://host.example/" not in memory
    assert all(len(digest) == 16 for digest in memory._exact)


def test_the_memory_errs_only_toward_marking() -> None:
    """Past capacity nothing added is ever reported absent; some absent keys may be reported
    present (availability, not confidentiality)."""
    memory = NeverMemory(capacity=100)
    added = [f"k{n}" for n in range(5000)]
    for key in added:
        memory.add(key)
    assert memory.overflowed
    assert all(key in memory for key in added)
    wrong = sum(f"absent{n}" in memory for n in range(10_000))
    assert wrong < 10_000  # the filter still tells most absent keys apart
