"""Attacks on the host's own paths to tool results: the marks gate (sliced ingestion) and
``Bridge.call_tool`` (SPEC sections 4, 5, 6 and 7). Real bridges, real children, a real loopback
payload server; no mocks.

Each test's docstring tells an attack; the test holds it stopped. Those under "weaknesses"
once got through (each was red before its fix); those under "what held" never did.
"""

from __future__ import annotations

import textwrap
from functools import partial
from typing import Any

import pytest
import trio
from loopback_http import LoopbackServer, body, gated, start_server
from tool_results import link as resource_link

from scriptbridge import lanes, markers, render_script_view
from scriptbridge._fetcher import Saved
from scriptbridge._limits import Limits
from scriptbridge._supervisor import Bridge
from scriptbridge._tools import python_tool


def script(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


link = partial(resource_link, name="p.txt")
"""A resource link named ``p.txt``."""


def never_image(uri: str) -> dict[str, Any]:
    return {"type": "image", "data": "", "mimeType": "image/png", "uri": uri,
            "disposition": "never"}  # fmt: skip


def never_flood(uris: list[str], claims: int = 20_000) -> dict[str, Any]:
    """``claims`` never claims for other uris, then one for each of ``uris``: many slices."""
    content = [never_image(f"https://flood.example/{n}") for n in range(claims)]
    return {"content": content + [never_image(uri) for uri in uris]}


BIG = {"content": [link(f"https://big.example/{n}") for n in range(20_000)]}
"""A result no server needs to be hostile to send (20,000 links: a big listing), whose
ingestion takes the gate a few hundred milliseconds, in many slices."""


@pytest.fixture
async def payloads(nursery: trio.Nursery) -> LoopbackServer:
    server = await start_server(nursery)
    server.routes["/p.txt"] = body(b"payload", content_type="text/plain")
    return server


@pytest.fixture
def bridge_options() -> dict[str, Any]:
    """The ``bridge`` fixture's Bridge may fetch from the loopback payload server."""
    return {"fetch_allow": ["127.0.0.1"]}


# --- weaknesses ----------------------------------------------------------------------------


async def test_a_fetch_does_not_outlive_its_wall_time_while_another_run_floods_the_gate(
    bridge: Bridge, payloads: LoopbackServer
) -> None:
    """SPEC 7.6 (a script outlives its wall time). A run whose download ends while another
    run's results are being ingested waits for the gate to settle inside a *shielded* scope
    (``ReferenceFetcher.fetch``), so its wall time can't end it. The other run only needs a
    batch of calls to a tool with a big result whose calls end at different moments: the gate
    then never settles until that run ends (and a client of ``serve`` can keep such runs
    going, one after another). The victim, with a 1 s wall time, runs for about 6 s."""
    arrived, release = trio.Event(), trio.Event()
    payloads.routes["/slow.txt"] = gated(b"payload", arrived, release)
    uri = payloads.url("/slow.txt")
    calls = 0

    async def big() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        await trio.sleep((calls % 8) * 0.05)  # the calls of the batch end at different moments
        return BIG

    async def go() -> dict[str, Any]:
        await arrived.wait()  # the victim's download is in flight
        return {"content": []}

    bridge.add_tool(python_tool(big, name="big"))
    bridge.add_tool(python_tool(go, name="go"))
    bridge.add_tool(python_tool(lambda: {"content": [link(uri)]}, name="links"))
    results: dict[str, Any] = {}

    ended: list[str] = []

    async def victim() -> None:
        source = 'read_text(fetch(call_tool("links")["content"][0]))'
        results["victim"] = await bridge.run(source, limits=Limits(wall_s=1.0))
        ended.append("victim")
        nursery.cancel_scope.cancel()  # the attack has had its chance

    async def attacker() -> None:
        source = 'call_tool("go")\nlen(call_tools([("big", {})] * 500))'
        results["attacker"] = await bridge.run(source, limits=Limits(wall_s=6.0))
        ended.append("attacker")

    async def releaser() -> None:
        await arrived.wait()
        with trio.fail_after(5):
            while not bridge._gate.ingesting:  # the attacker's batch is being ingested
                await trio.sleep(0.001)
        release.set()  # the download ends while it is

    async with trio.open_nursery() as nursery:
        nursery.start_soon(attacker)
        nursery.start_soon(victim)
        nursery.start_soon(releaser)
    victim_result = results["victim"]
    assert victim_result.error is not None, victim_result
    assert victim_result.error.type == "WallTimeExceeded", victim_result.error
    assert ended == ["victim"], (
        f"a run with a 1 s wall time ran {victim_result.duration_s:.1f} s, until the flood "
        "ended: its fetch waited for another run's ingestions in a shielded scope"
    )


async def test_a_host_view_during_a_flood_fails_closed(
    bridge: Bridge, payloads: LoopbackServer
) -> None:
    """SPEC 4 ("marks land before anything is awaited for the result that carries them") and
    7.1. A run's tool returns a flood whose last claim is a never for ``uri``; while its
    ingestion is under way (in slices, with checkpoints between them) the host ingests a
    result of its own that links ``uri`` and renders it with the public
    ``render_script_view``: the view must not show the uri (nor the host's stored copy its
    saved path) of a payload whose never has arrived but not landed. Neither function can wait
    for the gate, so while an ingestion is under way they fail closed (``MARKS_LANDING``)."""
    uri = payloads.url("/p.txt")
    fetched = await bridge.fetcher.fetch(bridge.ingest({"content": [link(uri)]}, server=None)[0])
    assert isinstance(fetched, Saved), fetched
    returned = trio.Event()

    async def the_flood() -> dict[str, Any]:
        returned.set()  # its ingestion begins as this returns
        return never_flood([uri])

    bridge.add_tool(python_tool(the_flood, name="flood"))
    shown: dict[str, Any] = {}

    async def host() -> None:
        await returned.wait()
        with trio.fail_after(5):
            while not bridge._gate.ingesting:
                await trio.sleep(0)
        own = {"content": [link(uri)]}  # a push or a host tool's result, ingested first
        bridge.ingest(own, server=None)
        shown["view"] = render_script_view(own, bridge.registry)
        shown["stored"] = lanes.stored_copy(own, bridge.registry)
        shown["ingesting"] = bridge._gate.ingesting

    async with trio.open_nursery() as nursery:
        nursery.start_soon(host)
        nursery.start_soon(bridge.run, 'len(call_tool("flood")["content"])')
    assert bridge.registry.is_marked(uri)  # the flood's never did land, later
    assert shown["ingesting"], "the host's view wasn't made during the flood's ingestion"
    block = shown["view"]["content"][0]
    assert "uri" not in block and block["savedTo"] is None, shown
    assert block["unfetchable"] in (markers.PAYLOAD_NEVER, markers.MARKS_LANDING), shown
    assert "saved:" not in shown["stored"], shown["stored"]
    assert markers.MARKS_LANDING in shown["stored"] or markers.PAYLOAD_NEVER in shown["stored"]


async def test_a_runs_journal_is_bounded(bridge: Bridge) -> None:
    """Host memory (SPEC 7.6: a hostile party takes the supervisor down). Every run keeps a
    journal (``ReferenceRegistry.journal``) of each record that changed while it was open, and
    nothing bounds it, or ever reads it. A server that names fresh uris in each result (a
    listing of 40,000 links) fills every open journal with all of them, while the registry
    itself holds at most its capacity (2,000): three calls leave 120,000 uris pinned in the
    run's journal, and in every other open run's. At the ingestion rate (about 50,000 links a
    second) a few runs of 30 s wall time pin gigabytes."""
    fresh = iter(range(1_000_000))

    def listing() -> dict[str, Any]:
        batch = next(fresh)
        return {"content": [link(f"https://j.example/{batch}/{n}") for n in range(40_000)]}

    kept: dict[str, int] = {}

    def count() -> dict[str, Any]:
        journals = bridge.registry._journals
        kept["journals"] = len(journals)
        kept["entries"] = max(len(journal.changed()) for journal in journals)
        return {"content": []}

    bridge.add_tool(python_tool(listing, name="listing"))
    bridge.add_tool(python_tool(count, name="count"))
    result = await bridge.run(
        script("""
        for _ in range(3):
            call_tool("listing")
        call_tool("count")
        """)
    )
    assert result.ok, result.error
    assert len(bridge.registry) <= bridge.registry.capacity
    assert kept["entries"] <= 4 * bridge.registry.capacity, (
        f"a run's journal holds {kept['entries']:,} uris; the registry "
        f"{len(bridge.registry):,} records"
    )


# --- weaknesses (second pass) ------------------------------------------------------------


async def test_a_never_of_the_same_result_withholds_every_spelling_of_its_uri(
    bridge: Bridge, payloads: LoopbackServer
) -> None:
    """SPEC 4 (canonical keys: "every never mark, every check of one ... keyed by the uri's
    canonical key") and 6.1 (a reference is withheld when "one [never] of the same result"
    claims it; "the host rendered before it ingested"). A result that links a saved payload
    and, in the same result, claims never for another spelling of its uri (host case, default
    port, a fragment) is rendered by the host before it ingests it: the claims of the result
    are checked by the raw uri (``reference.uri in claims.never``), so the view shows the uri
    and the saved path, and the stored copy ``saved: refs/...``. With the same spelling, both
    withhold it (``PAYLOAD_NEVER``)."""
    uri = payloads.url("/p.txt")
    fetched = await bridge.fetcher.fetch(bridge.ingest({"content": [link(uri)]}, server=None)[0])
    assert isinstance(fetched, Saved), fetched
    spelled = f"HTTP://127.0.0.1:{payloads.port}/p.txt#again"

    def views(never_uri: str) -> tuple[dict[str, Any], str]:
        result = {"content": [link(uri), never_image(never_uri)]}  # not ingested yet
        return render_script_view(result, bridge.registry), lanes.stored_copy(
            result, bridge.registry
        )

    same, same_stored = views(uri)
    assert same["content"][0]["unfetchable"] == markers.PAYLOAD_NEVER, same  # the control
    assert "saved:" not in same_stored, same_stored
    view, stored = views(spelled)
    block = view["content"][0]
    assert "uri" not in block and block["savedTo"] is None, block
    assert block["unfetchable"] == markers.PAYLOAD_NEVER, block
    assert "saved:" not in stored, stored


# --- what held -----------------------------------------------------------------------------


async def test_call_tool_waits_for_another_runs_flood_naming_a_saved_copy_never(
    bridge: Bridge, payloads: LoopbackServer
) -> None:
    """Held: ``Bridge.call_tool`` whose result arrives while another run's flood is being
    ingested (its last claim a never for another spelling of a uri whose copy is saved: an
    IPv4 literal in hex, the default port's absence, a fragment) shows the link's stub with
    ``PAYLOAD_NEVER``, no saved path, and the copy is gone."""
    uri = payloads.url("/p.txt")
    record = bridge.ingest({"content": [link(uri)]}, server=None)[0]
    assert isinstance(await bridge.fetcher.fetch(record), Saved)
    spelled = f"HTTP://0x7f.0.0.1:{payloads.port}/./p.txt#frag"
    returned = trio.Event()

    async def the_flood() -> dict[str, Any]:
        returned.set()
        return never_flood([spelled])

    async def the_link() -> dict[str, Any]:
        await returned.wait()
        while not bridge._gate.ingesting:
            await trio.sleep(0)
        return {"content": [link(uri)]}

    bridge.add_tool(python_tool(the_flood, name="flood"))
    bridge.add_tool(python_tool(the_link, name="the_link"))
    shown: dict[str, Any] = {}

    async def host() -> None:
        shown["live"] = await bridge.call_tool("the_link", {})

    async with trio.open_nursery() as nursery:
        nursery.start_soon(host)
        nursery.start_soon(bridge.run, 'len(call_tool("flood")["content"])')
    text = repr(shown["live"])
    assert markers.PAYLOAD_NEVER in text and "saved" not in text and "refs/" not in text, text
    assert list((bridge.workspace.root / "refs").iterdir()) == []
