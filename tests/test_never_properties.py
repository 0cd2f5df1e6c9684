"""Property test of never marks over random delivery sequences (SPEC sections 4 and 7.1, 7.4).

A universe of payloads, each reachable under several spellings of one request; random steps
deliver plain references (any spelling, any server), never claims (any spelling, as a link or
inline), floods that evict records, saved copies (written to the real ``refs/`` and recorded
the way the fetcher commits them), and whole batches. After every step, for every payload a
never was delivered for under any spelling: no live record of it is unmarked or names a saved
path, no file of any record of it is left in ``refs/``, and neither the script view nor any
model lane shows one of its spellings or its content. Spellings hold ``.example`` hosts and no
generated name does, so a leak is a plain substring.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scriptbridge import ReferenceRegistry, render_script_view
from scriptbridge._canonical import canonical_key
from scriptbridge._fetcher import ReferenceFetcher
from scriptbridge._workspace import Workspace
from scriptbridge.lanes import convert_push, live_copy, stored_copy

PAYLOADS = 4


def spellings(n: int) -> list[str]:
    """Different spellings of the one request for payload ``n``."""
    host = f"p{n}.example"
    return [
        f"http://{host}/doc/{n}",
        f"HTTP://P{n}.Example/doc/{n}",
        f"http://{host}:80/doc/./{n}",
        f"http://{host}/x/../doc/{n}#frag",
        f"http://{host}/doc/%{ord(str(n)):02X}",
        f"http://{host}./doc/{n}",
    ]


UNIVERSE = {n: spellings(n) for n in range(PAYLOADS)}
SPELLING = st.tuples(st.integers(0, PAYLOADS - 1), st.integers(0, 5))
SERVER = st.sampled_from(["docs", "other", None])


def link(n: int, s: int) -> dict[str, Any]:
    return {"type": "resource_link", "uri": UNIVERSE[n][s], "name": "payload"}


def never(n: int, s: int, inline: bool) -> dict[str, Any]:
    uri = UNIVERSE[n][s]
    if inline:
        return {"type": "image", "data": "", "mimeType": "image/png", "uri": uri,
                "disposition": "never"}  # fmt: skip
    return {"type": "resource_link", "uri": uri, "name": "payload", "disposition": "never"}


STEP = st.one_of(
    st.tuples(st.just("deliver"), SPELLING, SERVER),
    st.tuples(st.just("never"), SPELLING, st.booleans(), SERVER),
    st.tuples(st.just("save"), SPELLING),
    st.tuples(st.just("evict"), st.integers(1, 3)),
    st.tuples(st.just("batch"), st.lists(st.tuples(SPELLING, st.booleans()), max_size=5)),
)


class World:
    """A registry over a real workspace, with what the test knows of every record it made."""

    def __init__(self, root: Path) -> None:
        self.registry = ReferenceRegistry(capacity=8, never_capacity=3)
        self.workspace = Workspace(root)
        ReferenceFetcher(self.registry, self.workspace)  # wires the removal hook
        self.marked: set[int] = set()
        self.ids: dict[str, int] = {}  # every record id ever made -> its payload
        self.filler = 0

    def deliver(self, blocks: list[dict[str, Any]], server: str | None) -> None:
        for record in self.registry.ingest({"content": blocks}, server=server):
            for n, uris in UNIVERSE.items():
                if record.uri in uris:
                    self.ids[record.id] = n

    def save(self, n: int, s: int) -> None:
        record = self.registry.record_for(UNIVERSE[n][s])
        if record is None or record.saved_path is not None:
            return
        path = f"refs/{record.id}.txt"
        (self.workspace.root / path).write_bytes(f"content of payload {n}".encode())
        if not self.registry.record_saved(record, path, 20, "0" * 64):
            self.registry.discard_copy(path)  # what the fetcher's commit does

    def evict(self, rounds: int) -> None:
        for _ in range(rounds):
            self.filler += 1
            uris = [f"filler:{self.filler}/{i}" for i in range(self.registry.capacity)]
            self.registry.ingest(
                {"content": [{"type": "resource_link", "uri": u, "name": "f"} for u in uris]},
                server="docs",
            )

    def check(self) -> None:
        everything = {"content": [link(n, s) for n in UNIVERSE for s in range(6)]}
        shown = [
            json.dumps(render_script_view(everything, self.registry), default=repr),
            json.dumps(stored_copy(everything, self.registry), default=repr),
            json.dumps(live_copy(everything, self.registry), default=repr),
            json.dumps(convert_push(everything["content"], self.registry), default=repr),
        ]
        files = set(os.listdir(self.workspace.refs_dir))
        for n in self.marked:
            for uri in UNIVERSE[n]:
                assert self.registry.is_marked(uri), uri
                record = self.registry.record_for(uri)
                if record is not None:
                    assert record.payload_never and record.saved_path is None, uri
            for text in shown:
                assert f"p{n}.example" not in text.lower(), text
                assert f"content of payload {n}" not in text
            for ref_id, payload in self.ids.items():
                if payload == n:
                    assert not any(name.startswith(ref_id) for name in files), ref_id


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, max_size=25))
def test_no_marked_payload_shows_or_stays_on_disk(steps: list[Any]) -> None:
    """Whatever the order of deliveries, marks, saves, evictions and batches, a payload once
    marked under any spelling shows nowhere and leaves no copy."""
    with tempfile.TemporaryDirectory() as tmp:
        world = World(Path(tmp) / "ws")
        for step in steps:
            kind = step[0]
            if kind == "deliver":
                (n, s), server = step[1], step[2]
                world.deliver([link(n, s)], server)
            elif kind == "never":
                (n, s), inline, server = step[1], step[2], step[3]
                world.deliver([never(n, s, inline)], server)
                world.marked.add(n)
            elif kind == "save":
                world.save(*step[1])
            elif kind == "evict":
                world.evict(step[1])
            else:
                blocks = []
                for (n, s), is_never in step[1]:
                    blocks.append(never(n, s, False) if is_never else link(n, s))
                    if is_never:
                        world.marked.add(n)
                world.deliver(blocks, "docs")
            world.check()


def test_every_spelling_of_a_payload_has_one_key() -> None:
    """The universe's spellings really are one request each (else the property says little)."""
    for uris in UNIVERSE.values():
        assert len({canonical_key(uri) for uri in uris}) == 1, uris
