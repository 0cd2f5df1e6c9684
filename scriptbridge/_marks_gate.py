"""The bridge's ingestion of tool results: marks land in slices, and whatever must see them waits
(SPEC sections 4, 5 and 6.1).

A result with a flood of claims takes the registry hundreds of milliseconds to ingest. The
registry's synchronous ``ingest`` would hold the event loop all that while, so the bridge
ingests through :class:`MarksGate`, which runs
:meth:`~scriptbridge._registry.ReferenceRegistry.ingest_in_slices` with a checkpoint between
slices (each a few milliseconds of work), and holds back every view and every fetch decision
of the bridge until the ingestions under way when it was asked for have ended.

Guarantees:

- When :meth:`MarksGate.ingest` returns, the result is ingested whole: every never claim of it
  marked, every reference registered, the registry as its synchronous ``ingest`` leaves it. It
  can't be stopped midway: a caller cancelled meanwhile still gets its result ingested whole
  (its cancellation is delivered at its next checkpoint), so no claim read is left unmarked.
- A result whose ingestion fits in one slice is ingested with no checkpoint at all, as by the
  synchronous ``ingest``.
- :meth:`MarksGate.wait_settled` returns when every ingestion under way when it was called has
  ended (at once, with no checkpoint, when none was). A view rendered, or a fetch decided, right
  after it returns (with no await in between, inside ``registry.settled_view()``) is rendered or
  decided against every mark of every result whose ingestion had begun before the reader began
  to wait: as if each result had been ingested in one step when it arrived. A result whose
  ingestion began later arrived after the reader's own: its marks land as they come, as a
  result arriving a moment later would.
- While an ingestion is under way, a reader that hasn't waited (a host's own
  ``render_script_view`` or lane) fails closed: the registry's ``landing`` is true, and every
  reference shows no uri, no saved path and ``MARKS_LANDING`` (SPEC's rendering stays pure).

A wait is bounded by the work of the ingestions under way when it began: new ones never hold
it, so no stream of results can keep a run past its wall time.
"""

from __future__ import annotations

import itertools

import trio

from ._registry import ReferenceRecord, ReferenceRegistry

__all__ = ["MarksGate"]


class MarksGate:
    """Ingests tool results into ``registry`` in slices, and tells when those under way have
    ended (module doc). Use it from the trio thread that drives the registry."""

    def __init__(self, registry: ReferenceRegistry) -> None:
        self.registry = registry
        self._under_way: dict[int, trio.Event] = {}
        """Each ingestion under way, by its number: the event set when it ends."""
        self._numbers = itertools.count()

    @property
    def ingesting(self) -> bool:
        """Whether an ingestion is under way (its result's marks may not all have landed)."""
        return bool(self._under_way)

    async def ingest(self, result: object, server: str | None) -> list[ReferenceRecord]:
        """Ingest ``result`` from ``server`` whole, with a checkpoint between slices; returns
        the records it registered, as the registry's ``ingest`` does. Never raises on hostile
        input; not stopped by cancellation (module doc)."""
        slices = self.registry.ingest_in_slices(result, server=server)
        try:
            next(slices)
        except StopIteration as done:  # one slice: no checkpoint, nothing to wait for
            records: list[ReferenceRecord] = done.value
            return records
        number = next(self._numbers)
        self._under_way[number] = trio.Event()
        try:
            while True:
                await trio.lowlevel.cancel_shielded_checkpoint()
                try:
                    next(slices)
                except StopIteration as done:
                    records = done.value
                    return records
        finally:
            self._under_way.pop(number).set()

    async def wait_settled(self) -> None:
        """Return when every ingestion under way when this was called has ended (at once, with
        no checkpoint, when none is); ingestions that begin meanwhile aren't waited for, so a
        stream of them can't hold a waiter. Raises ``trio.Cancelled`` when the caller is
        cancelled while it waits."""
        for ended in list(self._under_way.values()):
            await ended.wait()
