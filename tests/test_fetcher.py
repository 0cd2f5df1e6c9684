"""Tests for the reference fetcher, against real HTTP servers on loopback addresses.

The bound-server path uses a small fake of ``ResourceReader`` (the MCP client that implements it
is tested with the supervisor).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from loopback_http import (
    LoopbackServer,
    body,
    chunked,
    encoded,
    gated,
    redirect,
    stall,
    start_server,
)
from tool_results import link as resource_link

from scriptbridge import ReferenceRecord, ReferenceRegistry, markers
from scriptbridge._fetcher import ReferenceFetcher, Saved, Unfetchable
from scriptbridge._walk import MAX_DEPTH
from scriptbridge._workspace import PartialFile, Workspace
from scriptbridge.markers import (
    BAD_BLOB,
    CLOSED,
    DATA_SCHEME,
    ENCODED,
    FILE_SCHEME,
    NO_SCHEME,
    NO_SERVER,
    NOT_CONNECTED,
    REDIRECT_SCHEME,
    SERVER_ANSWER,
    SERVER_FAILED,
)

MARKED = Unfetchable(markers.PAYLOAD_NEVER)


link = partial(resource_link, name="payload")
"""A resource link named ``payload``."""


def register(reg: ReferenceRegistry, uri: str, server: str = "docs", **fields: Any) -> Any:
    return reg.ingest({"content": [link(uri, **fields)]}, server=server)[0]


def mark(reg: ReferenceRegistry, uri: str, server: str = "docs") -> None:
    never = {"type": "resource", "uri": uri, "disposition": "never"}
    reg.ingest({"content": [never]}, server=server)


def listing(ws: Workspace) -> list[str]:
    """Everything in refs/, hidden temporary files included."""
    return sorted(os.listdir(ws.refs_dir))


@pytest.fixture
def fetcher(reg: ReferenceRegistry, ws: Workspace) -> ReferenceFetcher:
    return ReferenceFetcher(reg, ws, allow=["127.0.0.1"])


# --- the normal path -------------------------------------------------------------------------


async def test_normal_fetch(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace, fetcher: ReferenceFetcher
) -> None:
    """A fetch streams the payload into refs/<id>.<ext>, verified, and records it."""
    data = os.urandom(300_000)
    server.routes["/img"] = body(data, content_type="image/png")
    record = register(reg, server.url("/img"), mimeType="image/png", size=len(data))
    outcome = await fetcher.fetch(record.id)
    digest = hashlib.sha256(data).hexdigest()
    assert outcome == Saved(f"refs/{record.id}.png", len(data), digest)
    assert (ws.root / outcome.path).read_bytes() == data
    assert (record.saved_path, record.verified_bytes, record.sha256) == (
        outcome.path,
        len(data),
        digest,
    )
    assert listing(ws) == [f"{record.id}.png"]
    assert server.requests[0].headers["accept-encoding"] == "identity"


async def test_saved_record_answers_its_copy_without_fetching(
    server: LoopbackServer, reg: ReferenceRegistry, fetcher: ReferenceFetcher
) -> None:
    """A second fetch of a saved record answers the same Saved and sends no request."""
    server.routes["/a"] = body(b"abc")
    record = register(reg, server.url("/a"))
    first = await fetcher.fetch(record)
    assert await fetcher.fetch(record) == first
    assert server.hits["/a"] == 1


async def test_extension_from_the_response_when_the_reference_names_none(
    server: LoopbackServer, reg: ReferenceRegistry, fetcher: ReferenceFetcher
) -> None:
    """Without a declared media type the response's, through the allowlist, picks the extension."""
    server.routes["/doc"] = body(b"%PDF-1.7", content_type="application/pdf")
    server.routes["/page"] = body(b"<script>", content_type="text/html")
    doc = await fetcher.fetch(register(reg, server.url("/doc")))
    page = await fetcher.fetch(register(reg, server.url("/page")))
    assert isinstance(doc, Saved) and doc.path.endswith(".pdf")
    assert isinstance(page, Saved) and page.path.endswith(".bin")


async def test_default_fetcher_refuses_loopback_and_the_allowlist_opens_it(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace
) -> None:
    """A default fetcher refuses 127.0.0.1 without connecting; allow=["127.0.0.1"] fetches it."""
    server.routes["/a"] = body(b"abc")
    record = register(reg, server.url("/a"))
    default = ReferenceFetcher(reg, ws)
    outcome = await default.fetch(record)
    assert outcome == Unfetchable(
        "it points to a loopback address, which this host doesn't fetch from"
    )
    assert server.hits == {}
    assert listing(ws) == []
    allowed = ReferenceFetcher(reg, ws, allow=["127.0.0.1"])
    assert isinstance(await allowed.fetch(record), Saved)
    assert server.hits["/a"] == 1


async def test_environment_proxies_are_ignored(
    server: LoopbackServer,
    reg: ReferenceRegistry,
    fetcher: ReferenceFetcher,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy in the environment can't route a fetch around the policy: it isn't used."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    server.routes["/a"] = body(b"direct")
    outcome = await fetcher.fetch(register(reg, server.url("/a")))
    assert isinstance(outcome, Saved)


# --- marks -----------------------------------------------------------------------------------


async def test_a_marked_record_is_refused_before_anything_else(
    server: LoopbackServer,
    reg: ReferenceRegistry,
    ws: Workspace,
    fetcher: ReferenceFetcher,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A marked record answers PAYLOAD_NEVER with no request, no file and no log line."""
    server.routes["/a"] = body(b"abc")
    record = register(reg, server.url("/a"))
    mark(reg, server.url("/a"))
    with caplog.at_level(logging.DEBUG, logger="scriptbridge.fetcher"):
        assert await fetcher.fetch(record) == MARKED
        assert await fetcher.fetch(record.id) == MARKED
    assert caplog.records == []
    assert server.hits == {}
    assert listing(ws) == []


async def test_never_before_the_reference_marks_it(
    server: LoopbackServer, reg: ReferenceRegistry, fetcher: ReferenceFetcher
) -> None:
    """A never read for a uri before its reference (inline data) refuses the later reference."""
    url = server.url("/a")
    reg.ingest(
        {
            "content": [
                {
                    "type": "image",
                    "uri": url,
                    "data": "",
                    "mimeType": "image/png",
                    "disposition": "never",
                }
            ]
        },
        server="docs",
    )
    record = register(reg, url)
    assert await fetcher.fetch(record) == MARKED
    assert server.hits == {}


async def test_refusal_text_for_a_marked_record(
    server: LoopbackServer, reg: ReferenceRegistry, fetcher: ReferenceFetcher
) -> None:
    """The host-facing answer for a marked record is SPEC's sentence, word for word."""
    record = register(reg, server.url("/a"))
    mark(reg, server.url("/a"))
    outcome = await fetcher.fetch(record.id)
    assert isinstance(outcome, Unfetchable)
    assert outcome.refusal_text(record.id) == (
        f'couldn\'t fetch "{record.id}": a server asked that its content never reach you or '
        "your tools. Calling again won't change that."
    )


async def test_refusal_text_of_a_retryable_failure_promises_nothing(
    reg: ReferenceRegistry, fetcher: ReferenceFetcher
) -> None:
    """A failure that may pass (a server not connected yet) doesn't say calling again won't help."""
    (record,) = reg.ingest(
        {"content": [{"type": "resource_link", "uri": "docs://later"}]}, server="docs"
    )
    outcome = await fetcher.fetch(record)
    assert outcome == Unfetchable(NOT_CONNECTED, retryable=True)
    assert outcome.refusal_text(record.id) == f'couldn\'t fetch "{record.id}": {NOT_CONNECTED}.'


async def test_a_mark_aborts_a_stalled_download_at_once(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace, fetcher: ReferenceFetcher
) -> None:
    """A mark during a stalled download answers every waiting caller with the mark at once
    (once they run, before anything else has to happen: no byte, no timer) and leaves no file
    in refs/, final or temporary."""
    stalled = trio.Event()
    server.routes["/big"] = stall(b"x" * 20_000, 1_000_000, stalled)
    url = server.url("/big")
    record = register(reg, url, size=1_000_000)
    answers: list[object] = []

    async def caller() -> None:
        answers.append(await fetcher.fetch(record.id))

    async with trio.open_nursery() as callers:
        for _ in range(3):
            callers.start_soon(caller)
        await stalled.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert len(listing(ws)) == 1 and listing(ws)[0].endswith(".part")  # mid-body
        mark(reg, url)
        assert listing(ws) == []  # gone before ingest returned
        await trio.testing.wait_all_tasks_blocked()  # the download still stalls meanwhile
        assert answers == [MARKED] * 3, "a caller waited on the stalled download"
    assert listing(ws) == []
    assert server.hits["/big"] == 1
    assert record.saved_path is None
    assert await fetcher.fetch(record.id) == MARKED


async def test_a_mark_after_the_last_chunk_while_saving_leaves_no_copy(
    server: LoopbackServer, reg: ReferenceRegistry, tmp_path: Path
) -> None:
    """A mark landing once every byte arrived, while the copy is written, saves nothing."""
    data = os.urandom(50_000)
    server.routes["/a"] = body(data)
    url = server.url("/a")

    class MarkOnLastChunk(Workspace):
        def open_partial(self, relative: str) -> PartialFile:
            partial = super().open_partial(relative)
            write = partial.write

            def write_then_mark(chunk: Any) -> None:
                write(chunk)
                if partial.size == len(data):  # every byte arrived; not yet renamed
                    mark(reg, url)

            partial.write = write_then_mark  # type: ignore[method-assign]
            return partial

    ws = MarkOnLastChunk(tmp_path)
    fetcher = ReferenceFetcher(reg, ws, allow=["127.0.0.1"])
    record = register(reg, url)
    assert await fetcher.fetch(record) == MARKED
    assert listing(ws) == []
    assert record.saved_path is None


async def test_a_mark_after_the_save_removes_the_copy(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace, fetcher: ReferenceFetcher
) -> None:
    """A mark after a successful save removes the copy (the fetcher wired the removal hook)."""
    server.routes["/a"] = body(b"secret")
    record = register(reg, server.url("/a"))
    saved = await fetcher.fetch(record)
    assert isinstance(saved, Saved) and (ws.root / saved.path).exists()
    mark(reg, server.url("/a"))
    assert not (ws.root / saved.path).exists()
    assert listing(ws) == []
    assert (record.saved_path, record.verified_bytes, record.sha256) == (None, None, None)
    assert reg.pending_removals == ()
    assert await fetcher.fetch(record) == MARKED


async def test_a_failed_removal_is_retried_at_the_next_sweep(
    server: LoopbackServer,
    reg: ReferenceRegistry,
    ws: Workspace,
    fetcher: ReferenceFetcher,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """When the copy can't be removed at the mark, the path is logged, kept pending, and
    removed at the registry's next sweep."""
    server.routes["/a"] = body(b"secret")
    record = register(reg, server.url("/a"))
    saved = await fetcher.fetch(record)
    assert isinstance(saved, Saved)
    final = ws.root / saved.path
    final.unlink()
    final.mkdir()  # unlink() of a directory fails: the removal hook raises OSError
    with caplog.at_level(logging.ERROR, logger="scriptbridge.registry"):
        mark(reg, server.url("/a"))
    assert reg.pending_removals == (saved.path,)
    assert any(saved.path in r.getMessage() for r in caplog.records)
    reg.sweep()  # still a directory: stays pending
    assert reg.pending_removals == (saved.path,)
    final.rmdir()
    final.write_bytes(b"secret")  # what a retry must now remove
    reg.sweep()
    assert reg.pending_removals == ()
    assert not final.exists()


# --- limits ----------------------------------------------------------------------------------


async def test_more_than_the_cap(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace
) -> None:
    """A body past the byte cap is cut off; an announced or declared size past it isn't fetched."""
    fetcher = ReferenceFetcher(reg, ws, allow=["127.0.0.1"], max_bytes=10_000)
    server.routes["/stream"] = chunked(os.urandom(50_000))
    server.routes["/length"] = body(os.urandom(50_000))
    cut = await fetcher.fetch(register(reg, server.url("/stream")))
    assert cut == Unfetchable("it is larger than the ~10KB this host fetches")
    announced = await fetcher.fetch(register(reg, server.url("/length")))
    assert announced == Unfetchable("it declares ~49KB, more than the ~10KB this host fetches")
    declared = await fetcher.fetch(register(reg, server.url("/never-asked"), size=50_000))
    assert declared == Unfetchable("it declares ~49KB, more than the ~10KB this host fetches")
    assert server.hits["/never-asked"] == 0
    assert listing(ws) == []


async def test_more_or_less_than_declared(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace, fetcher: ReferenceFetcher
) -> None:
    """A body longer or shorter than the declared size, or a Content-Length that disagrees with
    it, saves nothing."""
    server.routes["/more"] = chunked(os.urandom(5_000))
    server.routes["/less"] = chunked(os.urandom(500))
    server.routes["/length"] = body(os.urandom(5_000))
    more = await fetcher.fetch(register(reg, server.url("/more"), size=1_000))
    assert more == Unfetchable("its server sent more than the 1000 bytes it declared")
    less = await fetcher.fetch(register(reg, server.url("/less"), size=1_000))
    assert less == Unfetchable("its server sent 500 bytes where it declared 1000")
    length = await fetcher.fetch(register(reg, server.url("/length"), size=1_000))
    assert length == Unfetchable(
        "its server announced 5000 bytes where the reference declared 1000"
    )
    assert listing(ws) == []


async def test_a_short_body_is_a_broken_transfer(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace, fetcher: ReferenceFetcher
) -> None:
    """A body shorter than its Content-Length is refused as a broken transfer, retryable."""
    server.routes["/short"] = body(b"x" * 100, length=1_000)
    outcome = await fetcher.fetch(register(reg, server.url("/short")))
    assert isinstance(outcome, Unfetchable) and outcome.retryable
    assert listing(ws) == []


async def test_http_errors_and_encodings(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace, fetcher: ReferenceFetcher
) -> None:
    """A non-200 answer or a compressed body saves nothing, with a reason."""
    server.routes["/gz"] = encoded(b"\x1f\x8b" + b"\x00" * 20)
    missing = await fetcher.fetch(register(reg, server.url("/missing")))
    assert missing == Unfetchable("its server answered HTTP 404")
    assert await fetcher.fetch(register(reg, server.url("/gz"))) == Unfetchable(ENCODED)
    assert listing(ws) == []


async def test_deadline(reg: ReferenceRegistry, ws: Workspace, autojump_clock: Any) -> None:
    """A flight that outlives deadline_s answers a retryable deadline reason."""

    class Silent:
        async def read_resource(self, uri: str) -> Mapping[str, object]:
            await trio.sleep_forever()
            raise AssertionError

    fetcher = ReferenceFetcher(reg, ws, deadline_s=30.0, servers={"docs": Silent()})
    started = trio.current_time()
    outcome = await fetcher.fetch(register(reg, "docs://slow"))
    assert outcome == Unfetchable("it didn't arrive within the 30 s this host waits", True)
    assert trio.current_time() - started == pytest.approx(30.0)


# --- redirects -------------------------------------------------------------------------------


async def test_redirects_are_followed_and_checked_per_hop(
    nursery: trio.Nursery, server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace
) -> None:
    """A permitted redirect is followed; one to a refused address is refused unconnected."""
    other = await start_server(nursery, host="127.0.0.2")
    other.routes["/x"] = body(b"should not be read")
    server.routes["/ok"] = redirect("/data")
    server.routes["/data"] = body(b"payload")
    server.routes["/to-other"] = redirect(other.url("/x"))
    server.routes["/to-metadata"] = redirect("http://169.254.169.254/latest/meta-data/")
    server.routes["/to-file"] = redirect("file:///etc/passwd")
    server.routes["/loop"] = redirect("/loop", status=307)
    fetcher = ReferenceFetcher(reg, ws, allow=["127.0.0.1"])
    ok = await fetcher.fetch(register(reg, server.url("/ok")))
    assert isinstance(ok, Saved) and (ws.root / ok.path).read_bytes() == b"payload"
    assert await fetcher.fetch(register(reg, server.url("/to-other"))) == Unfetchable(
        "it redirected to a loopback address, which this host doesn't fetch from"
    )
    assert other.hits == {}
    assert await fetcher.fetch(register(reg, server.url("/to-metadata"))) == Unfetchable(
        "it redirected to a cloud metadata address, which this host doesn't fetch from"
    )
    assert await fetcher.fetch(register(reg, server.url("/to-file"))) == Unfetchable(
        REDIRECT_SCHEME
    )
    loop = await fetcher.fetch(register(reg, server.url("/loop")))
    assert loop == Unfetchable("it redirected more than 5 times")
    assert server.hits["/loop"] == 6
    assert listing(ws) == [ok.path.removeprefix("refs/")]


# --- flights ---------------------------------------------------------------------------------


async def test_concurrent_callers_share_one_download(
    server: LoopbackServer, reg: ReferenceRegistry, fetcher: ReferenceFetcher
) -> None:
    """Two callers fetching one record at once get one answer from one request."""
    arrived, gate = trio.Event(), trio.Event()
    server.routes["/a"] = gated(b"shared", arrived, gate)
    record = register(reg, server.url("/a"))
    answers: list[object] = []

    async def caller() -> None:
        answers.append(await fetcher.fetch(record.id))

    async with trio.open_nursery() as callers:
        callers.start_soon(caller)
        await arrived.wait()
        callers.start_soon(caller)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    assert len(answers) == 2 and answers[0] == answers[1]
    assert isinstance(answers[0], Saved)
    assert server.hits["/a"] == 1


async def test_a_cancelled_leader_hands_the_flight_over(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace, fetcher: ReferenceFetcher
) -> None:
    """When the caller leading a flight is cancelled, a joined caller fetches again, and the
    cancelled flight leaves no file."""
    arrived, gate = trio.Event(), trio.Event()
    server.routes["/a"] = gated(b"payload", arrived, gate)
    record = register(reg, server.url("/a"))
    answers: list[object] = []

    leader_scope = trio.CancelScope()

    async def leader() -> None:
        with leader_scope:
            answers.append(await fetcher.fetch(record.id))

    async def joiner() -> None:
        answers.append(await fetcher.fetch(record.id))

    async with trio.open_nursery() as callers:
        callers.start_soon(leader)
        await arrived.wait()
        callers.start_soon(joiner)
        await trio.testing.wait_all_tasks_blocked()
        leader_scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert listing(ws) == []  # the cancelled flight's temporary file is gone
        gate.set()
    assert len(answers) == 1 and isinstance(answers[0], Saved)
    assert server.hits["/a"] == 2
    assert listing(ws) == [answers[0].path.removeprefix("refs/")]


async def test_close_aborts_flights(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace, fetcher: ReferenceFetcher
) -> None:
    """close() answers waiting callers, leaves no file, and later fetches are refused."""
    stalled = trio.Event()
    server.routes["/big"] = stall(b"x" * 1000, 100_000, stalled)
    record = register(reg, server.url("/big"))
    answers: list[object] = []

    async def caller() -> None:
        answers.append(await fetcher.fetch(record))

    async with trio.open_nursery() as callers:
        callers.start_soon(caller)
        await stalled.wait()
        fetcher.close()
    assert answers == [Unfetchable(CLOSED)]
    assert listing(ws) == []
    assert await fetcher.fetch(register(reg, server.url("/other"))) == Unfetchable(CLOSED)


# --- schemes and records ---------------------------------------------------------------------


async def test_schemes_that_are_refused(reg: ReferenceRegistry, fetcher: ReferenceFetcher) -> None:
    """file:, data: and a uri without a valid scheme are refused with their reasons."""
    assert await fetcher.fetch(register(reg, "file:///etc/passwd")) == Unfetchable(FILE_SCHEME)
    assert await fetcher.fetch(register(reg, "FILE:/etc/passwd")) == Unfetchable(FILE_SCHEME)
    assert await fetcher.fetch(register(reg, "data:text/plain,hi")) == Unfetchable(DATA_SCHEME)
    assert await fetcher.fetch(register(reg, "report.pdf")) == Unfetchable(NO_SCHEME)
    assert await fetcher.fetch(register(reg, "1http://x")) == Unfetchable(NO_SCHEME)


async def test_unknown_ids_and_unreadable_results(
    reg: ReferenceRegistry, fetcher: ReferenceFetcher
) -> None:
    """An id the registry doesn't hold, and a record of an unreadable result, are refused."""
    assert await fetcher.fetch("ref_000000000000") == Unfetchable(markers.REFERENCE_UNREGISTERED)
    deep: Any = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    (record,) = reg.ingest(
        {"content": [link("https://example.com/a")], "structuredContent": {"x": deep}},
        server="docs",
    )
    assert record.unreadable
    assert await fetcher.fetch(record) == Unfetchable(markers.UNREADABLE_RESULT)


class FakeReader:
    """A connected server's resources/read, answering from a dict of uri -> result."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    async def read_resource(self, uri: str) -> Mapping[str, object]:
        self.calls.append(uri)
        answer = self.answers[uri]
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]


async def test_other_schemes_are_read_through_the_bound_server(
    reg: ReferenceRegistry, ws: Workspace
) -> None:
    """A docs:// reference is read with its server's resources/read, text and blob alike."""
    blob = os.urandom(3000)
    reader = FakeReader(
        {
            "docs://note": {
                "contents": [
                    {"uri": "docs://note", "mimeType": "text/plain", "text": "hello \ud800 world"}
                ]
            },
            "docs://img": {
                "contents": [
                    {
                        "uri": "docs://img",
                        "mimeType": "image/png",
                        "blob": base64.b64encode(blob).decode(),
                    }
                ]
            },
        }
    )
    fetcher = ReferenceFetcher(reg, ws, servers={"docs": reader})
    note = await fetcher.fetch(register(reg, "docs://note"))
    assert isinstance(note, Saved) and note.path.endswith(".txt")
    assert (ws.root / note.path).read_text("utf-8") == "hello \ufffd world"
    img = await fetcher.fetch(register(reg, "docs://img", size=3000))
    assert img == Saved(img.path, 3000, hashlib.sha256(blob).hexdigest())  # type: ignore[union-attr]
    assert (ws.root / img.path).read_bytes() == blob  # type: ignore[union-attr]
    assert img.path.endswith(".png")  # type: ignore[union-attr]
    assert reader.calls == ["docs://note", "docs://img"]


async def test_bound_server_failures(reg: ReferenceRegistry, ws: Workspace) -> None:
    """A server not connected, no server at all, a failing server and malformed answers are
    refused with their reasons, and nothing is saved."""
    servers: dict[str, Any] = {}
    fetcher = ReferenceFetcher(reg, ws, servers=servers)
    record = register(reg, "docs://a")
    assert await fetcher.fetch(record) == Unfetchable(NOT_CONNECTED, retryable=True)
    reader = FakeReader(
        {
            "docs://a": {"contents": [{"uri": "docs://a", "text": "now connected"}]},
            "docs://boom": RuntimeError("the server fell over"),
            "docs://both": {"contents": [{"uri": "docs://both", "text": "a", "blob": "YQ=="}]},
            "docs://none": {"contents": []},
            "docs://shape": ["not", "a", "result"],
            "docs://b64": {"contents": [{"uri": "docs://b64", "blob": "%%%not base64%%%"}]},
        }
    )
    servers["docs"] = reader  # the host connects the server later: the mapping is read live
    assert isinstance(await fetcher.fetch(record), Saved)
    assert await fetcher.fetch(register(reg, "docs://boom")) == Unfetchable(SERVER_FAILED, True)
    for uri in ("docs://both", "docs://none", "docs://shape"):
        assert await fetcher.fetch(register(reg, uri)) == Unfetchable(SERVER_ANSWER)
    assert await fetcher.fetch(register(reg, "docs://b64")) == Unfetchable(BAD_BLOB)
    host_tool = reg.ingest({"content": [link("docs://tool")]}, server=None)[0]
    assert await fetcher.fetch(host_tool) == Unfetchable(NO_SERVER)
    assert listing(ws) == [f"{record.id}.bin"]  # no media type: .bin


async def test_a_mark_cancels_a_pending_resources_read(
    reg: ReferenceRegistry, ws: Workspace
) -> None:
    """A mark while the bound server is still reading answers the mark at once."""
    started = trio.Event()

    class Hanging:
        async def read_resource(self, uri: str) -> Mapping[str, object]:
            started.set()
            await trio.sleep_forever()
            raise AssertionError

    fetcher = ReferenceFetcher(reg, ws, servers={"docs": Hanging()})
    record = register(reg, "docs://secret")
    answers: list[object] = []

    async def caller() -> None:
        answers.append(await fetcher.fetch(record))

    async with trio.open_nursery() as callers:
        callers.start_soon(caller)
        await started.wait()
        mark(reg, "docs://secret")
    assert answers == [MARKED]
    assert listing(ws) == []


# --- the eager pass --------------------------------------------------------------------------


async def test_eager_pass(
    server: LoopbackServer,
    reg: ReferenceRegistry,
    ws: Workspace,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Small unmarked references are fetched in the background; marked ones are passed over
    without a log line; big and unsized ones are left for demand."""
    for path in ("/small", "/big", "/marked", "/unsized"):
        server.routes[path] = body(b"x" * (5000 if path == "/big" else 100))
    fetcher = ReferenceFetcher(reg, ws, allow=["127.0.0.1"], eager_max_bytes=1000)
    result = {
        "content": [
            link(server.url("/small"), size=100),
            link(server.url("/big"), size=5000),
            {"type": "resource", "uri": server.url("/marked"), "size": 100, "disposition": "never"},
            link(server.url("/unsized")),
        ]
    }
    with caplog.at_level(logging.DEBUG, logger="scriptbridge"):
        records = reg.ingest(result, server="docs")
        async with trio.open_nursery() as nursery:
            started = fetcher.start_eager(nursery, records)
        assert [r.uri for r in started] == [server.url("/small")]
    assert dict(server.hits) == {"/small": 1}
    assert records[0].saved_path == f"refs/{records[0].id}.bin"
    marked: ReferenceRecord = records[2]
    assert marked.payload_never
    assert not any(
        marked.id in r.getMessage() or "/marked" in r.getMessage() for r in caplog.records
    )


async def test_eager_pass_is_off_by_default_and_skips_unreadable_results(
    server: LoopbackServer, reg: ReferenceRegistry, ws: Workspace
) -> None:
    """Without eager_max_bytes nothing is fetched ahead; a result whose claims couldn't be read
    fetches nothing even with it."""
    server.routes["/small"] = body(b"x" * 100)
    off = ReferenceFetcher(reg, ws, allow=["127.0.0.1"])
    records = reg.ingest({"content": [link(server.url("/small"), size=100)]}, server="docs")
    async with trio.open_nursery() as nursery:
        assert off.start_eager(nursery, records) == []
    deep: Any = {}
    for _ in range(MAX_DEPTH + 5):
        deep = {"d": deep}
    unreadable = reg.ingest(
        {"content": [link(server.url("/other"), size=100)], "structuredContent": deep},
        server="docs",
    )
    on = ReferenceFetcher(reg, ws, allow=["127.0.0.1"], eager_max_bytes=1000)
    async with trio.open_nursery() as nursery:
        assert on.start_eager(nursery, unreadable) == []
    assert server.hits == {}
