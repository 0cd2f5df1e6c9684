"""Tests for the reference registry (SPEC section 4): records, sticky never marks, journals."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tool_results import link

from scriptbridge import ReferenceRegistry, render_script_view
from scriptbridge._walk import MAX_DEPTH


def result(*blocks: Any, data: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"content": list(blocks)}
    if data is not None:
        out["structuredContent"] = data
    return out


def test_ingest_registers_references_in_order_once_each() -> None:
    """Ingest returns the records it registered, in order, each once, with their facts."""
    reg = ReferenceRegistry()
    records = reg.ingest(
        result(
            link("a:1", name="one", mimeType="text/plain", size=3),
            {"type": "image", "uri": "a:2"},
            link("a:1"),
        ),
        server="docs",
    )
    assert [r.uri for r in records] == ["a:1", "a:2"]
    first = records[0]
    assert (first.name, first.mime_type, first.size) == ("one", "text/plain", 3)
    assert first.server == "docs"
    assert reg.record_for("a:1") is first
    assert reg.get(first.id) is first


def test_ids_are_opaque_and_not_derived_from_the_uri() -> None:
    """Ids are ref_ plus random hex; the same uri in two registries gets different ids."""
    one, two = ReferenceRegistry(), ReferenceRegistry()
    id_one = one.ingest(result(link("https://x/secret-token")), server=None)[0].id
    id_two = two.ingest(result(link("https://x/secret-token")), server=None)[0].id
    assert id_one.startswith("ref_") and len(id_one) == 16
    assert id_one != id_two
    assert "secret" not in id_one


def test_never_marks_the_record_before_ingest_returns() -> None:
    """A reference's never marks its record as ingest returns, with nothing awaited."""
    reg = ReferenceRegistry()
    (record,) = reg.ingest(result(link("n:1", disposition="never")), server="docs")
    assert record.payload_never
    assert reg.is_marked("n:1")


def test_mark_is_sticky_across_later_deliveries_and_servers() -> None:
    """A later delivery without never, from any server, doesn't lift the mark."""
    reg = ReferenceRegistry()
    reg.ingest(result(link("n:1", disposition="never")), server="docs")
    (again,) = reg.ingest(result(link("n:1", disposition="ref")), server="docs")
    (other,) = reg.ingest(result(link("n:1")), server="other")
    assert again.payload_never and other.payload_never


def test_mark_from_a_later_result_marks_an_existing_record() -> None:
    """A never in a later result marks the record an earlier result registered."""
    reg = ReferenceRegistry()
    (record,) = reg.ingest(result(link("n:1")), server="docs")
    assert not record.payload_never
    reg.ingest(result(link("n:1", disposition="never")), server="docs")
    assert record.payload_never


def test_inline_never_before_any_reference_starts_the_record_marked() -> None:
    """An inline never read before any reference to its uri makes a later record start marked."""
    reg = ReferenceRegistry()
    reg.ingest(
        result(
            {
                "type": "image",
                "data": "AA",
                "mimeType": "image/png",
                "uri": "i:1",
                "disposition": "never",
            }
        ),
        server="docs",
    )
    assert reg.record_for("i:1") is None
    assert reg.is_marked("i:1")
    (record,) = reg.ingest(result(link("i:1")), server="docs")
    assert record.payload_never


def test_embedded_never_marks_a_link_of_the_same_result() -> None:
    """An embedded resource's never marks a link of the same result naming its uri."""
    reg = ReferenceRegistry()
    (record,) = reg.ingest(
        result(
            {"type": "resource", "resource": {"uri": "e:1", "text": "t"}, "disposition": "never"},
            link("e:1"),
        ),
        server="docs",
    )
    assert record.payload_never


def test_first_mark_forgets_saved_copy_and_calls_removal_hook() -> None:
    """The first mark forgets the saved path and facts and removes the copy through the hook."""
    reg = ReferenceRegistry()
    removed: list[str] = []
    reg.set_removal_hook(removed.append)
    (record,) = reg.ingest(result(link("s:1")), server="docs")
    assert reg.record_saved(record, "refs/x.bin", 10, "ab" * 32)
    assert record.saved_path == "refs/x.bin"
    reg.ingest(result(link("s:1", disposition="never")), server="docs")
    assert (record.saved_path, record.verified_bytes, record.sha256) == (None, None, None)
    assert removed == ["refs/x.bin"]
    reg.ingest(result(link("s:1", disposition="never")), server="docs")
    assert removed == ["refs/x.bin"]  # only the first mark removes


def test_failed_removal_is_logged_and_retried_at_next_sweep(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A removal that fails is logged with its path and retried at the next sweep."""
    reg = ReferenceRegistry()
    attempts: list[str] = []

    def flaky(path: str) -> None:
        attempts.append(path)
        if len(attempts) == 1:
            raise PermissionError("busy")

    reg.set_removal_hook(flaky)
    (record,) = reg.ingest(result(link("s:1")), server="docs")
    reg.record_saved(record, "refs/y.bin", 1, "0" * 64)
    with caplog.at_level(logging.ERROR, logger="scriptbridge.registry"):
        reg.ingest(result(link("s:1", disposition="never")), server="docs")
    assert "refs/y.bin" in caplog.text
    assert reg.pending_removals == ("refs/y.bin",)
    reg.sweep()
    assert attempts == ["refs/y.bin", "refs/y.bin"]
    assert reg.pending_removals == ()


def test_record_saved_refuses_a_marked_record() -> None:
    """A copy completed after the mark is not recorded, so the fetcher removes it."""
    reg = ReferenceRegistry()
    (record,) = reg.ingest(result(link("m:1", disposition="never")), server="docs")
    assert not reg.record_saved(record, "refs/m.bin", 1, "0" * 64)
    assert record.saved_path is None


def test_cross_server_mark_is_logged_with_both_servers(caplog: pytest.LogCaptureFixture) -> None:
    """A never from a server other than the bound one marks, and logs both server ids."""
    reg = ReferenceRegistry()
    (record,) = reg.ingest(result(link("x:1")), server="alpha")
    with caplog.at_level(logging.WARNING, logger="scriptbridge.registry"):
        reg.ingest(result(link("x:1", disposition="never")), server="beta")
    assert record.payload_never
    assert "'alpha'" in caplog.text and "'beta'" in caplog.text


def test_record_keeps_its_first_bound_server() -> None:
    """A later delivery by another server refreshes facts but doesn't rebind the record."""
    reg = ReferenceRegistry()
    (record,) = reg.ingest(result(link("b:1", name="old")), server="alpha")
    reg.ingest(result(link("b:1", name="new")), server="beta")
    assert (record.server, record.name) == ("alpha", "new")


def test_mark_listener_is_called_once_on_first_mark() -> None:
    """Mark listeners hear each first mark once, synchronously, with the record."""
    reg = ReferenceRegistry()
    heard: list[str] = []
    remove = reg.add_mark_listener(lambda record: heard.append(record.id))
    (record,) = reg.ingest(result(link("l:1")), server=None)
    reg.ingest(result(link("l:1", disposition="never")), server=None)
    reg.ingest(result(link("l:1", disposition="never")), server=None)
    assert heard == [record.id]
    remove()
    reg.ingest(result(link("l:2"), link("l:2", disposition="never")), server=None)
    assert heard == [record.id]


def test_lru_evicts_least_recently_used() -> None:
    """Past capacity the least recently registered record is evicted; refresh counts as use."""
    reg = ReferenceRegistry(capacity=3)
    a, b, _ = reg.ingest(result(link("u:a"), link("u:b"), link("u:c")), server=None)
    reg.ingest(result(link("u:a")), server=None)  # refresh a: b is now the oldest
    reg.ingest(result(link("u:d")), server=None)
    assert reg.record_for("u:b") is None and reg.get(b.id) is None
    assert reg.record_for("u:a") is a
    assert len(reg) == 3


def test_eviction_doesnt_lift_a_mark() -> None:
    """A never-marked uri evicted from the records starts marked when it is registered again."""
    reg = ReferenceRegistry(capacity=2)
    reg.ingest(result(link("e:1", disposition="never")), server=None)
    reg.ingest(result(link("e:2"), link("e:3")), server=None)
    assert reg.record_for("e:1") is None
    (again,) = reg.ingest(result(link("e:1")), server=None)
    assert again.payload_never


def test_never_memory_forgets_no_mark_past_its_capacity(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Past its capacity the never memory still remembers every mark (a flood of inline never
    claims brings no payload back), and says once that it overflowed."""
    reg = ReferenceRegistry(capacity=10, never_capacity=3)
    never_image = {"type": "image", "data": "", "mimeType": "image/png", "disposition": "never"}
    reg.ingest(result(link("http://h.example/payload", disposition="never")), server=None)
    with caplog.at_level(logging.WARNING, logger="scriptbridge.registry"):
        for n in range(200):
            reg.ingest(result({**never_image, "uri": f"gone:{n}"}), server=None)
    assert caplog.text.count("never memory is past its capacity") == 1
    assert reg.is_marked("http://h.example/payload")
    assert all(reg.is_marked(f"gone:{n}") for n in range(200))
    for _ in range(20):  # evict every record: marks live on without them
        reg.ingest(result(*(link(f"http://other.example/{n}") for n in range(10))), server=None)
    assert reg.record_for("http://h.example/payload") is None
    (again,) = reg.ingest(result(link("http://h.example/payload")), server=None)
    assert again.payload_never


def test_unreadable_result_flags_its_records_stickily(caplog: pytest.LogCaptureFixture) -> None:
    """A result whose claims can't be read flags each of its records unfetchable, for good."""
    reg = ReferenceRegistry()
    deep: Any = link("hidden:1", disposition="never")
    for _ in range(MAX_DEPTH):
        deep = [deep]
    with caplog.at_level(logging.WARNING, logger="scriptbridge.registry"):
        (record,) = reg.ingest(result(link("u:1"), data={"deep": deep}), server="docs")
    assert record.unreadable
    assert "couldn't be read whole" in caplog.text
    reg.ingest(result(link("u:1")), server="docs")
    assert record.unreadable
    assert reg.record_for("hidden:1") is None


def test_journal_keeps_records_as_they_stood() -> None:
    """A journal keeps a record as it stood before its first change, mark included."""
    reg = ReferenceRegistry()
    (record,) = reg.ingest(result(link("j:1", name="before")), server=None)
    with reg.journal() as journal:
        reg.ingest(result(link("j:1", name="after")), server=None)
        reg.ingest(result(link("j:1", disposition="never")), server=None)
        reg.ingest(result(link("j:2")), server=None)
        kept = journal.as_it_stood("j:1", reg.record_for("j:1"))
        assert kept is not None and kept is not record
        assert (kept.name, kept.payload_never) == ("before", False)
        assert (record.name, record.payload_never) == ("after", True)
        assert journal.as_it_stood("j:2", reg.record_for("j:2")) is None
        assert journal.changed() == {"j:1", "j:2"}
    reg.ingest(result(link("j:3")), server=None)
    assert "j:3" not in journal.changed()


def test_journal_keeps_a_mark_alone() -> None:
    """A mark with no other change is still journaled before it lands."""
    reg = ReferenceRegistry()
    reg.ingest(result(link("k:1")), server=None)
    with reg.journal() as journal:
        reg.ingest(
            result(
                {
                    "type": "image",
                    "data": "A",
                    "mimeType": "image/png",
                    "uri": "k:1",
                    "disposition": "never",
                }
            ),
            server=None,
        )
        kept = journal.as_it_stood("k:1", reg.record_for("k:1"))
        assert kept is not None and not kept.payload_never


def test_rendering_never_marks() -> None:
    """Rendering a result with a never doesn't mark or register anything."""
    reg = ReferenceRegistry()
    (record,) = reg.ingest(result(link("p:1")), server=None)
    render_script_view(result(link("p:1", disposition="never"), link("p:2")), reg)
    assert not record.payload_never
    assert reg.record_for("p:2") is None
    assert not reg.is_marked("p:1")


def test_ingest_accepts_hostile_results_without_raising() -> None:
    """Ingesting non-dicts and junk registers nothing and raises nothing."""
    reg = ReferenceRegistry()
    for junk in (None, 5, "x", {"content": "nope"}, {"content": [None, 3, []]}):
        assert reg.ingest(junk, server=None) == []


def test_push_messages_are_ingested_the_same_way() -> None:
    """A message's list of blocks is ingested as a result with that content."""
    reg = ReferenceRegistry()
    (record,) = reg.ingest([link("m:1", disposition="never")], server="docs")
    assert record.payload_never


def test_default_capacities() -> None:
    """The registry holds 2,000 records and remembers 100,000 never-marked uris by default."""
    reg = ReferenceRegistry()
    assert (reg.capacity, reg.never_capacity) == (2000, 100_000)


def test_capacity_must_be_positive() -> None:
    """A registry with no room is refused at construction."""
    with pytest.raises(ValueError):
        ReferenceRegistry(capacity=0)


def test_discard_copy_uses_the_hook_and_retries() -> None:
    """A copy no record may name is removed through the hook, and retried if that fails."""
    reg = ReferenceRegistry()
    attempts: list[str] = []

    def flaky(path: str) -> None:
        attempts.append(path)
        if len(attempts) == 1:
            raise OSError("busy")

    reg.set_removal_hook(flaky)
    reg.discard_copy("refs/late.bin")
    assert reg.pending_removals == ("refs/late.bin",)
    reg.sweep()
    assert attempts == ["refs/late.bin"] * 2 and reg.pending_removals == ()
