"""The reference registry: one record per uri, and RFC-005's sticky ``never`` (SPEC section 4).

Only ingestion registers references and applies ``never`` marks. :meth:`ReferenceRegistry.ingest`
is synchronous: between reading a result and marking, nothing can be awaited, so no fetch of
a marked reference can be served first. :meth:`ReferenceRegistry.ingest_in_slices` does the same
work in slices, for a caller on an event loop that holds back every view and fetch decision
until it ends (the bridge's :class:`~scriptbridge._marks_gate.MarksGate`). Classifying and
rendering never mark.

Guarantees:

- A record's id is ``ref_`` and 12 random hex digits, never derived from its uri.
- Marks are keyed by the uri's canonical key (:func:`scriptbridge._canonical.canonical_key`:
  what the fetcher would request), so every spelling of one request shares one mark: the
  first ``never`` read for any of them marks every live record under that key, and a record
  made later under it starts marked. Nothing clears a mark. The keys marked are kept for the
  registry's whole life in a :class:`~scriptbridge._never.NeverMemory` (fixed memory, never
  forgets, errs only toward marking), so a mark outlives eviction and any number of marks.
- Every never claim, even for a key already marked, calls each key listener with the key (the
  bridge unlinks copies linked into runs under it); each first mark of a record calls the
  mark listeners with the record (the fetcher aborts its flight there).
- The first mark forgets the record's saved path and verified facts, calls the removal hook
  with the old path, then tells each mark listener (the fetcher aborts a flight there). A hook
  that raises is logged with the path and retried at the next :meth:`~ReferenceRegistry.sweep`
  (each ingest sweeps).
- A never from a server other than the record's bound server still marks, and is logged with
  both server ids.
- A result whose claims can't be read whole flags each of its records as unfetchable,
  stickily, and is logged with the reason.
- Journals keep each record as it stood before its first change during the journal.

Choices where SPEC is silent: a record keeps the server it was first bound to (a later delivery
of the same uri by another server refreshes its name, media type, size and expiry, but can't
rebind it, so one server can't have another's uri read through itself); an evicted record's
saved copy is removed from the workspace with it, through the removal hook (a copy exists in
``refs/`` only while its record lives, so no copy outlives the index that a mark reads; copies
linked into a run's ``refs/`` are indexed by key by the bridge, see ``add_key_listener``).
Records stay keyed by the uri as sent. The registry is not thread-safe: use it from one thread
(the trio thread of a host).
"""

from __future__ import annotations

import copy
import logging
import secrets
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import Final

from ._canonical import canonical_key
from ._claims import read_claims_in_slices
from ._classify import Reference
from ._never import NeverMemory
from ._walk import run_to_end

__all__ = ["Journal", "ReferenceRecord", "ReferenceRegistry"]

log = logging.getLogger("scriptbridge.registry")

SLICE_CLAIMS: Final = 1024
"""Never claims :meth:`ReferenceRegistry.ingest_in_slices` marks between two pauses."""
SLICE_REFERENCES: Final = 512
"""References :meth:`ReferenceRegistry.ingest_in_slices` registers between two pauses."""

RemovalHook = Callable[[str], None]
"""Removes a saved copy, given its workspace-relative path; raises ``OSError`` on failure."""

MarkListener = Callable[["ReferenceRecord"], None]
KeyListener = Callable[[str], None]
"""Told the canonical key of every never claim ingested (repeats included); must be cheap."""


@dataclass(slots=True)
class ReferenceRecord:
    """What the host knows of one reference. Read it; change it only through the registry.

    ``key`` is the uri's canonical key (marks are kept by it). ``saved_path`` is
    workspace-relative (``refs/<id>.<ext>``) and set only for an unmarked record;
    ``verified_bytes`` and ``sha256`` are facts the fetcher checked. ``unreadable`` means a
    result naming it could not be read whole for a never: it is never fetched.
    """

    id: str
    uri: str
    server: str | None
    key: str = ""
    name: str | None = None
    mime_type: str | None = None
    size: int | None = None
    expires: str | None = None
    saved_path: str | None = None
    verified_bytes: int | None = None
    sha256: str | None = None
    payload_never: bool = False
    unreadable: bool = False


class Journal:
    """Keeps each record as it stood before its first change while the journal is open.

    Open one per script run with :meth:`ReferenceRegistry.journal`; :meth:`as_it_stood` then
    tells what the run could have shown for a uri when it began. It keeps at most ``limit``
    uris (the registry gives four times its capacity), so no stream of fresh uris grows it
    without bound; past that it keeps no more and :attr:`complete` is false.
    """

    def __init__(self, limit: int = 8000) -> None:
        self._kept: dict[str, ReferenceRecord | None] = {}
        self.limit = limit
        self.complete = True
        """False once a change went unkept because the journal was full."""

    def keep(self, uri: str, record: ReferenceRecord | None) -> None:
        """Keep a copy of ``record`` (``None``: the uri had no record) unless one is kept, or
        the journal is full (then :attr:`complete` turns false)."""
        if uri in self._kept:
            return
        if len(self._kept) >= self.limit:
            self.complete = False
            return
        self._kept[uri] = copy.copy(record) if record is not None else None

    def as_it_stood(self, uri: str, live: ReferenceRecord | None) -> ReferenceRecord | None:
        """The record for ``uri`` as it stood when the journal opened (``live`` if unchanged)."""
        return self._kept.get(uri, live)

    def changed(self) -> frozenset[str]:
        """The uris whose records changed (or appeared, or left) while the journal was open."""
        return frozenset(self._kept)


class ReferenceRegistry:
    """Reference records keyed by the raw uri, with sticky never marks keyed by canonical key
    (see the module doc)."""

    def __init__(self, capacity: int = 2000, never_capacity: int = 100_000) -> None:
        if capacity < 1 or never_capacity < 1:
            raise ValueError("capacity and never_capacity must be at least 1")
        self.capacity = capacity
        self.never_capacity = never_capacity
        self._by_uri: OrderedDict[str, ReferenceRecord] = OrderedDict()
        self._by_id: dict[str, ReferenceRecord] = {}
        self._by_key: dict[str, dict[str, ReferenceRecord]] = {}
        self._never = NeverMemory(never_capacity)
        self._key_listeners: list[KeyListener] = []
        self._overflow_told = False
        self._journals: list[Journal] = []
        self._removal_hook: RemovalHook | None = None
        self._pending_removals: dict[str, None] = {}
        self._mark_listeners: list[MarkListener] = []
        self._landing = 0
        """Ingestions in slices begun and not ended (:attr:`landing`)."""
        self._settled_views = 0

    # --- reading ----------------------------------------------------------------------------

    @property
    def landing(self) -> bool:
        """Whether a reader must fail closed: an :meth:`ingest_in_slices` is paused between its
        slices (its result's marks may not all have landed) and the reader isn't a
        :meth:`settled_view`. Every lane then shows each reference with no uri, no saved path
        and :data:`~scriptbridge.markers.MARKS_LANDING`."""
        return self._landing > 0 and self._settled_views == 0

    @contextmanager
    def settled_view(self) -> Iterator[None]:
        """For a view made, with no await in it, by a reader that has waited for every
        ingestion under way when it began to wait (the marks gate's ``wait_settled``): within
        the block, :attr:`landing` is false, so the view shows references as they stand."""
        self._settled_views += 1
        try:
            yield
        finally:
            self._settled_views -= 1

    def __len__(self) -> int:
        return len(self._by_uri)

    def record_for(self, uri: str) -> ReferenceRecord | None:
        """The live record for ``uri`` as sent, or ``None``. Pure: doesn't touch LRU order."""
        return self._by_uri.get(uri)

    def get(self, ref_id: str) -> ReferenceRecord | None:
        """The live record with id ``ref_id``, or ``None``. Pure."""
        return self._by_id.get(ref_id)

    def is_marked(self, uri: str) -> bool:
        """Whether a never was read for ``uri`` or any spelling of the same request (its
        record is marked, or will start marked)."""
        record = self._by_uri.get(uri)
        if record is not None:
            return record.payload_never or record.key in self._never
        return canonical_key(uri) in self._never

    # --- wiring -----------------------------------------------------------------------------

    def set_removal_hook(self, hook: RemovalHook | None) -> None:
        """Set what removes a saved copy when its record is first marked (the workspace's).

        There is one hook: the last one set wins, so one registry serves one workspace.
        """
        self._removal_hook = hook

    def add_mark_listener(self, listener: MarkListener) -> Callable[[], None]:
        """Call ``listener(record)`` right after each first mark; returns its remover."""
        self._mark_listeners.append(listener)
        return lambda: self._mark_listeners.remove(listener)

    def add_key_listener(self, listener: KeyListener) -> Callable[[], None]:
        """Call ``listener(key)`` for every never claim ingested, with its canonical key, after
        the records under it are marked (repeats included: the memory may not tell a first
        mark from a repeat once it overflows); returns its remover."""
        self._key_listeners.append(listener)
        return lambda: self._key_listeners.remove(listener)

    @contextmanager
    def journal(self) -> Iterator[Journal]:
        """Open a journal for the duration of the ``with`` block (one per script run)."""
        journal = Journal(limit=4 * self.capacity)
        self._journals.append(journal)
        try:
            yield journal
        finally:
            self._journals.remove(journal)

    # --- ingestion --------------------------------------------------------------------------

    def ingest(self, result: object, *, server: str | None) -> list[ReferenceRecord]:
        """Register a tool result's references and apply its never marks, before returning.

        Accepts a dict or a ``CallToolResult``; ``server`` is the id of the server it came from
        (``None`` for a host tool). Returns the records it registered, in the order the result
        names them, each once. Never raises on hostile input; an unreadable result is logged
        and its records flagged unfetchable (SPEC section 3).
        """
        return run_to_end(self.ingest_in_slices(result, server=server))

    def ingest_in_slices(
        self, result: object, *, server: str | None
    ) -> Generator[None, None, list[ReferenceRecord]]:
        """:meth:`ingest` as a generator that pauses (yields) between slices of its work and
        returns the same records, leaving the registry as :meth:`ingest` leaves it.

        It reads the claims (pausing every :data:`~scriptbridge._walk.SLICE_VALUES` values),
        then marks them (pausing every :data:`SLICE_CLAIMS` claims), then registers the
        references (every :data:`SLICE_REFERENCES`); a part of more than one slice starts with
        a pause, and a result that small in each part is ingested without one. Each slice is
        a run of whole steps, so at every pause the registry is consistent: it holds every mark
        it held before, and some of the result's. The caller must run it to its end, and must
        not change the result meanwhile; whatever must see the result's marks (a view, a fetch
        decision) waits for its end (see :mod:`scriptbridge._marks_gate`); a reader that
        doesn't wait fails closed while it is paused (:attr:`landing`).
        """
        self._landing += 1
        try:
            self.sweep()
            claims = yield from read_claims_in_slices(result)
            never = iter(claims.never)
            for start in range(0, len(claims.never), SLICE_CLAIMS):
                if start or len(claims.never) > SLICE_CLAIMS:
                    yield
                self._mark_all(islice(never, SLICE_CLAIMS), server)
            records: dict[str, ReferenceRecord] = {}
            references = claims.references
            for start in range(0, len(references), SLICE_REFERENCES):
                if start or len(references) > SLICE_REFERENCES:
                    yield
                for reference in references[start : start + SLICE_REFERENCES]:
                    record = self._register(reference, server, reference.uri in claims.never)
                    if claims.unreadable is not None and not record.unreadable:
                        self._before_change(record)
                        record.unreadable = True
                    records.setdefault(record.id, record)
            if claims.unreadable is not None:
                log.warning(
                    "a result from server %r couldn't be read whole for a never (%s); "
                    "none of its %d references will be fetched",
                    server,
                    claims.unreadable,
                    len(records),
                )
            return list(records.values())
        finally:
            self._landing -= 1

    # --- the fetcher's side -------------------------------------------------------------------

    def record_saved(self, record: ReferenceRecord, path: str, size: int, sha256: str) -> bool:
        """Record a completed saved copy; returns ``False`` (and records nothing) when the record
        is marked, flagged unreadable or no longer live, in which case the caller removes the copy.
        """
        if (
            record.payload_never
            or record.unreadable
            or self._by_id.get(record.id) is not record
            or record.key in self._never
        ):
            return False
        self._before_change(record)
        record.saved_path = path
        record.verified_bytes = size
        record.sha256 = sha256
        return True

    def discard_copy(self, path: str) -> None:
        """Remove a copy no record may name (saved for a record marked or dropped meanwhile)
        through the removal hook; a failure is logged and retried at the next sweep."""
        if not self._remove(path):
            self._pending_removals[path] = None

    def sweep(self) -> None:
        """Retry each removal that failed earlier; those that fail again stay pending."""
        if not self._pending_removals or self._removal_hook is None:
            return
        for path in list(self._pending_removals):
            if self._remove(path):
                del self._pending_removals[path]

    @property
    def pending_removals(self) -> tuple[str, ...]:
        """Saved copies whose removal failed and will be retried at the next sweep."""
        return tuple(self._pending_removals)

    # --- internals --------------------------------------------------------------------------

    def _before_change(self, record: ReferenceRecord | None, uri: str | None = None) -> None:
        key = record.uri if record is not None else uri
        assert key is not None
        for journal in self._journals:
            journal.keep(key, record)

    def _register(self, reference: Reference, server: str | None, marked: bool) -> ReferenceRecord:
        """Create or refresh the record of ``reference``; ``marked``: its uri was just marked
        (its key is in the memory, which needn't be asked again)."""
        record = self._by_uri.get(reference.uri)
        if record is None:
            self._before_change(None, reference.uri)
            key = canonical_key(reference.uri)
            record = ReferenceRecord(
                id=self._new_id(),
                uri=reference.uri,
                server=server,
                key=key,
                name=reference.name,
                mime_type=reference.mime,
                size=reference.size,
                expires=reference.expires,
                payload_never=marked or key in self._never,
            )
            self._by_uri[reference.uri] = record
            self._by_id[record.id] = record
            self._by_key.setdefault(key, {})[record.id] = record
            self._evict()
            return record
        self._by_uri.move_to_end(reference.uri)
        fresh = {
            "name": reference.name,
            "mime_type": reference.mime,
            "size": reference.size,
            "expires": reference.expires,
        }
        changes = {k: v for k, v in fresh.items() if v is not None and getattr(record, k) != v}
        if changes:
            self._before_change(record)
            for field, value in changes.items():
                setattr(record, field, value)
        return record

    def _evict(self) -> None:
        while len(self._by_uri) > self.capacity:
            uri, record = next(iter(self._by_uri.items()))
            self._before_change(record)
            del self._by_uri[uri]
            del self._by_id[record.id]
            spellings = self._by_key.get(record.key)
            if spellings is not None:
                spellings.pop(record.id, None)
                if not spellings:
                    del self._by_key[record.key]
            if record.saved_path is not None:  # no copy outlives its record in refs/
                self.discard_copy(record.saved_path)

    def _new_id(self) -> str:
        while True:
            ref_id = f"ref_{secrets.token_hex(6)}"
            if ref_id not in self._by_id:
                return ref_id

    def _mark_all(self, uris: Iterable[str], server: str | None) -> None:
        """Mark each of ``uris`` (never claims of one result sent by ``server``): its key enters
        the memory, each live record under it is marked, then each key listener is told."""
        remember = self._never.add
        spellings_of = self._by_key.get
        listeners = tuple(self._key_listeners)
        for uri in uris:
            key = canonical_key(uri)
            remember(key)
            spellings = spellings_of(key)
            if spellings:
                for record in list(spellings.values()):
                    self._mark_record(record, server)
            for listener in listeners:
                try:
                    listener(key)
                except Exception:
                    log.exception("a key listener failed for a never claim")
        if not self._overflow_told and self._never.overflowed:
            self._overflow_told = True
            log.warning(
                "the never memory is past its capacity (%d keys): every mark is still kept, "
                "but some unmarked payloads may now be refused as if they were marked",
                self.never_capacity,
            )

    def _mark_record(self, record: ReferenceRecord, server: str | None) -> None:
        if record.server is not None and server is not None and record.server != server:
            log.warning(
                "server %r marked never a reference bound to server %r (%s); marked anyway",
                server,
                record.server,
                record.id,
            )
        if record.payload_never:
            return
        self._before_change(record)
        old_path = record.saved_path
        record.payload_never = True
        record.saved_path = None
        record.verified_bytes = None
        record.sha256 = None
        if old_path is not None:
            log.info("removing %s: %s was marked never", old_path, record.id)
            self.discard_copy(old_path)
        for listener in list(self._mark_listeners):
            try:
                listener(record)
            except Exception:
                log.exception("a mark listener failed for %s", record.id)

    def _remove(self, path: str) -> bool:
        if self._removal_hook is None:
            log.error("no removal hook is set: %s stays on disk", path)
            return False
        try:
            self._removal_hook(path)
        except Exception as exc:
            log.error("couldn't remove %s (%s); will retry at the next sweep", path, exc)
            return False
        return True
