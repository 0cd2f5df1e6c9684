"""The bridge's ingestion of tool results: marks land in slices, and whatever must see them waits
(SPEC sections 4, 5 and 6.1).

A result with a flood of claims takes the registry hundreds of milliseconds to ingest. The
registry's synchronous ``ingest`` would hold the event loop all that while, so the bridge
ingests through :class:`MarksGate`, which runs
:meth:`~scriptbridge._registry.ReferenceRegistry.ingest_in_slices` with a checkpoint between
slices (each a few milliseconds of work), and holds back every view and every fetch decision
of the bridge until no ingestion is under way.

Guarantees:

- When :meth:`MarksGate.ingest` returns, the result is ingested whole: every never claim of it
  marked, every reference registered, the registry as its synchronous ``ingest`` leaves it. It
  can't be stopped midway: a caller cancelled meanwhile still gets its result ingested whole
  (its cancellation is delivered at its next checkpoint), so no claim read is left unmarked.
- A result whose ingestion fits in one slice is ingested with no checkpoint at all, as by the
  synchronous ``ingest``.
- :meth:`MarksGate.wait_settled` returns only when no ingestion is under way, without a
  checkpoint when none is. A view rendered, or a fetch decided, right after it returns (with no
  await in between) is rendered or decided against every mark of every result whose ingestion
  had begun: as if each result had been ingested in one step when it arrived, so SPEC's "marks
  before views" holds, and no fetch of a marked reference is served, or even requested, first.
- At each checkpoint the registry is consistent (a slice is a run of the registry's own
  steps). A reader that does not wait (a host's own ``render_script_view``) sees every mark of
  every ingestion that ended and some of the one under way, never fewer than before it began.

Waiting ends when the ingestions under way end; an ingestion never waits for anything, so a
wait is bounded by the work of the results that arrived before it ended. Under a steady stream
of overlapping ingestions a waiter waits until there is a moment with none: each run of the
bridge waits before it renders what it ingested, so a run can't start another ingestion first.
"""

from __future__ import annotations

import trio

from ._registry import ReferenceRecord, ReferenceRegistry

__all__ = ["MarksGate"]


class MarksGate:
    """Ingests tool results into ``registry`` in slices, and tells when none is under way
    (module doc). Use it from the trio thread that drives the registry."""

    def __init__(self, registry: ReferenceRegistry) -> None:
        self.registry = registry
        self._under_way = 0
        self._settled: trio.Event | None = None  # set when the last one under way ends

    @property
    def ingesting(self) -> bool:
        """Whether an ingestion is under way (its result's marks may not all have landed)."""
        return self._under_way > 0

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
        if self._under_way == 0:
            self._settled = trio.Event()
        self._under_way += 1
        try:
            while True:
                await trio.lowlevel.cancel_shielded_checkpoint()
                try:
                    next(slices)
                except StopIteration as done:
                    records = done.value
                    return records
        finally:
            self._under_way -= 1
            if self._under_way == 0 and self._settled is not None:
                self._settled.set()
                self._settled = None

    async def wait_settled(self) -> None:
        """Return when no ingestion is under way (at once, with no checkpoint, when none is).
        Raises ``trio.Cancelled`` when the caller is cancelled while it waits."""
        while self._settled is not None:
            await self._settled.wait()
