"""Fetching a reference's payload into the workspace, withholding what a server marked never.

:class:`ReferenceFetcher` answers ``await fetcher.fetch(record_or_id)`` with :class:`Saved` or
:class:`Unfetchable` (SPEC section 5). It never raises for anything a server or a record does;
it raises only when the caller is cancelled (``trio.Cancelled`` passes through) or on a bug.

Guarantees:

- **A mark is answered before anything else.** A record marked never (its own mark, or a never
  the registry holds for its uri) answers ``Unfetchable(PAYLOAD_NEVER)`` before any other check,
  any I/O or any log line; a record flagged unreadable answers ``UNREADABLE_RESULT``. With a
  ``settled`` wait (the bridge's), a fetch decides nothing while a result's marks are still
  landing: it waits before its first check and again before its answer.
- **One flight per record.** Concurrent fetches of one record join one download: a server sees
  one request. If the caller leading the flight is cancelled, the flight stops, leaves no file,
  and a joined caller starts it again.
- **A mark aborts a flight at once.** The fetcher listens to the registry's marks. A mark that
  lands while a flight is running, however stalled its server, answers every waiting caller
  with the mark, removes the temporary file and cancels the flight, all inside the registry's
  synchronous ``ingest`` call, before it returns. No file is left in ``refs/``, final or
  temporary. A mark after the copy was saved removes the copy through the registry's removal hook
  (wired here to :meth:`Workspace.remove`).
- **Saving is atomic.** Bytes are streamed (hashed as they are written) to a temporary file next
  to the final name, then renamed into ``refs/<id><ext>`` and recorded with
  ``registry.record_saved`` in one synchronous step, so a mark lands either before the rename
  (no file ever has the final name) or after the record (the registry removes the copy). When
  ``record_saved`` refuses (the record was flagged unreadable or dropped meanwhile), the copy is
  removed at once.
- **Limits.** Each flight has a deadline (``deadline_s``, redirects and DNS included), a byte cap
  (``max_bytes``) and a declared-size check: a size the reference declared, and the response's
  ``Content-Length``, must agree, and the body must be exactly that long; a body that passes a
  limit is cut off when it does, and nothing past the limit is written.
- **Schemes.** ``http``/``https`` go through :mod:`._httpget` under the network policy of
  :mod:`._netpolicy` (redirects followed here, at most :data:`MAX_REDIRECTS`, each hop checked
  again); ``file:``, ``data:`` and a uri without a valid scheme are refused; any other scheme is
  read through the bound server's ``resources/read`` (a :class:`ResourceReader` the host supplies
  in ``servers``, looked up by the record's server id at fetch time).
- **Eager pass** (:meth:`ReferenceFetcher.start_eager`, off unless ``eager_max_bytes`` is set):
  fetches in the background the references whose declared size is at most ``eager_max_bytes``;
  marked records are passed over without a log line; records flagged unreadable fetch nothing.

Reasons are plain sentences without a trailing period, kept in :mod:`scriptbridge.markers` with
every other notice; :meth:`Unfetchable.refusal_text` puts one in the host-facing sentence of
:func:`markers.fetch_refused` (or :func:`markers.fetch_failed`). ``retryable`` tells a host whether
the same fetch may later succeed (a deadline, a connection failure, a server not connected yet).

Choices where SPEC is silent: only ``200`` answers are saved; the request asks for an identity
encoding and a body sent compressed anyway is refused (the byte cap and declared size then speak
of the bytes saved, and no decompression bomb is ever expanded); a reference without a declared
size is never fetched eagerly; at most :data:`EAGER_CONCURRENCY` eager fetches run at once. An
HTTP body is hashed and written in the trio thread one chunk (at most 1 MiB, about a
millisecond of work) at a time, with no worker-thread hop per chunk; a server's
``resources/read`` answer, decoded and written in one piece, goes to a worker thread. The
fetcher must be used from the trio thread that drives its registry.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

import trio

from . import markers
from ._exceptions import AddressRefused, FetchError
from ._netpolicy import NetworkPolicy
from ._registry import ReferenceRecord, ReferenceRegistry
from ._workspace import PartialFile, Workspace, WorkspacePathError

if TYPE_CHECKING:
    from ._httpget import HttpResponse
    from ._policy_backend import PolicyBackend

__all__ = [
    "EAGER_CONCURRENCY",
    "MAX_REDIRECTS",
    "FetchOutcome",
    "ReferenceFetcher",
    "ResourceReader",
    "Saved",
    "Unfetchable",
]

log = logging.getLogger("scriptbridge.fetcher")

MAX_REDIRECTS: Final = 5
EAGER_CONCURRENCY: Final = 4

_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})

# --- outcomes ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Saved:
    """A payload saved in the workspace.

    ``path`` is workspace-relative (``refs/ref_9f2c.png``); ``size`` and ``sha256`` are the
    verified bytes of the file at that path.
    """

    path: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Unfetchable:
    """The host's answer to a fetch that can't be served, and why: an outcome, not an exception.

    (A script's ``fetch()`` raises the child's own exception of the same name,
    ``sandbox._session.Unfetchable``, whose message is this ``reason``.)

    ``reason`` is a plain sentence without a trailing period (``markers.PAYLOAD_NEVER`` for a
    never-marked record). ``retryable`` is ``True`` when the same fetch may succeed later (a
    deadline passed, a connection failed, the bound server isn't connected yet).
    """

    reason: str
    retryable: bool = False

    def refusal_text(self, ref_id: str) -> str:
        """The host-facing answer. For a reason that won't change (a marked record above all):

        ``couldn't fetch "<id>": a server asked that its content never reach you or your tools.
        Calling again won't change that.``

        For a ``retryable`` one, the same sentence without its last: calling again may work.
        """
        if self.retryable:
            return markers.fetch_failed(ref_id, self.reason)
        return markers.fetch_refused(ref_id, self.reason)


FetchOutcome = Saved | Unfetchable

_MARKED: Final = Unfetchable(markers.PAYLOAD_NEVER)
_UNREADABLE: Final = Unfetchable(markers.UNREADABLE_RESULT)


class ResourceReader(Protocol):
    """A connected server's ``resources/read``, as the fetcher calls it.

    ``read_resource(uri)`` returns the raw MCP ``ReadResourceResult`` as a mapping:
    ``{"contents": [{"uri": ..., "mimeType": ..., "text": ...} | {..., "blob": <base64>}]}``.
    It may raise any ``Exception`` (the fetch then answers ``markers.SERVER_FAILED``) and must
    let ``trio.Cancelled`` through (a mark cancels it).
    """

    async def read_resource(self, uri: str) -> Mapping[str, object]: ...


# --- flights -------------------------------------------------------------------------------------


class _Flight:
    """One download of one record, which concurrent fetches of that record join."""

    __slots__ = ("done", "outcome", "partial", "scope")

    def __init__(self, deadline: float) -> None:
        self.scope = trio.CancelScope(deadline=deadline)
        self.done = trio.Event()
        self.outcome: FetchOutcome | None = None
        self.partial: PartialFile | None = None

    def abort(self, outcome: Unfetchable) -> None:
        """Settle with ``outcome`` now: remove the temporary file, cancel, wake every waiter."""
        if self.outcome is None:
            self.outcome = outcome
        if self.partial is not None:
            self.partial.unlink()
        self.scope.cancel()
        self.done.set()


# --- the fetcher ---------------------------------------------------------------------------------


class ReferenceFetcher:
    """Fetches reference payloads into a workspace, withholding never-marked ones (module doc).

    Args:
        registry: the records; the fetcher sets its removal hook to ``workspace.remove`` and
            listens to its marks.
        workspace: where copies are saved (``refs/``).
        allow: addresses, CIDR networks or host names the network policy permits beyond public
            unicast (``["127.0.0.1"]``).
        deadline_s: how long one flight may take, redirects and DNS included.
        max_bytes: the most bytes one payload may have.
        eager_max_bytes: the largest declared size :meth:`start_eager` fetches; ``None`` turns the
            eager pass off.
        servers: connected servers by id, looked up at fetch time (the host may keep adding to
            the mapping it passes).
        settled: awaited before each decision on a fetch (its first check, and its answer)
            when marks may still be landing (the bridge's
            :meth:`~scriptbridge._marks_gate.MarksGate.wait_settled`); ``None``: marks land
            only in the registry's synchronous ``ingest``, so there is nothing to wait for.

    Raises:
        ValueError: a limit is not positive, or an ``allow`` entry is not an address, network or
            host name.
    """

    def __init__(
        self,
        registry: ReferenceRegistry,
        workspace: Workspace,
        *,
        allow: Iterable[str] = (),
        deadline_s: float = 30.0,
        max_bytes: int = 50 * 2**20,
        eager_max_bytes: int | None = None,
        servers: Mapping[str, ResourceReader] | None = None,
        settled: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        if not deadline_s > 0:
            raise ValueError("deadline_s must be positive")
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        if eager_max_bytes is not None and eager_max_bytes < 0:
            raise ValueError("eager_max_bytes must not be negative")
        self.registry: Final = registry
        self.workspace: Final = workspace
        self.deadline_s: Final = deadline_s
        self.max_bytes: Final = max_bytes
        self.eager_max_bytes: Final = eager_max_bytes
        self._policy = NetworkPolicy(allow)
        self._backend: PolicyBackend | None = None
        """Made at the first HTTP fetch (with httpx, which nothing else here needs); stateless:
        one serves every flight."""
        self._servers: Mapping[str, ResourceReader] = servers if servers is not None else {}
        self._settled = settled
        self._flights: dict[str, _Flight] = {}
        self._eager_limiter: trio.CapacityLimiter | None = None
        registry.set_removal_hook(workspace.remove)
        self._stop_listening = registry.add_mark_listener(self._on_mark)
        self._closed = False

    def __repr__(self) -> str:
        return f"ReferenceFetcher({self.workspace!r}, {self._policy!r})"

    # --- public -----------------------------------------------------------------------------

    async def fetch(self, record_or_id: ReferenceRecord | str) -> Saved | Unfetchable:
        """Fetch a record's payload into ``refs/``, or say why it can't be.

        Args:
            record_or_id: a record of this fetcher's registry, or its id.

        Returns:
            :class:`Saved` with the workspace-relative path and the verified size and sha256 of
            the copy (an already-saved record answers its copy without fetching), or
            :class:`Unfetchable` with the reason. A record marked never answers
            ``Unfetchable(PAYLOAD_NEVER)`` first, whenever the mark landed.

        On any answer but :class:`Saved`, and on cancellation, nothing of this fetch is left in
        the workspace but a copy its flight finished saving, which is the record's saved copy
        (answered to later fetches, removed by any mark). Raises only ``trio.Cancelled`` (when
        the caller is cancelled).
        """
        if self._settled is not None:
            await self._settled()
        if isinstance(record_or_id, str):
            record = self.registry.get(record_or_id)
            if record is None:
                return Unfetchable(markers.REFERENCE_UNREGISTERED)
        else:
            record = record_or_id
        refusal = self._refusal(record)
        if refusal is not None:
            return refusal
        if self.registry.get(record.id) is not record:
            return Unfetchable(markers.NO_LONGER_HELD)
        saved = self._saved(record)
        if saved is not None:
            return saved
        static = self._static_refusal(record)
        if static is not None:
            log.info("not fetching %s: %s", record.id, static.reason)
            return static
        while True:
            if self._closed:
                return Unfetchable(markers.CLOSED)
            flight = self._flights.get(record.id)
            if flight is None:
                flight = _Flight(trio.current_time() + self.deadline_s)
                self._flights[record.id] = flight
                await self._fly(record, flight)
            else:
                await flight.done.wait()
            if self._settled is not None:  # a caller cancelled here leaves the flight's copy,
                await self._settled()  # the record's own, which any mark removes
            if flight.outcome is not None:
                break
            # The caller leading that flight was cancelled: lead a new one (after a new check).
            refusal = self._refusal(record)
            if refusal is not None:
                return refusal
        refusal = self._refusal(record)
        if refusal is not None:
            return refusal
        return flight.outcome

    def start_eager(
        self, nursery: trio.Nursery, records: Iterable[ReferenceRecord]
    ) -> list[ReferenceRecord]:
        """Start background fetches of the small references among ``records`` (the eager pass).

        A record is fetched when ``eager_max_bytes`` is set, the record is unmarked, not flagged
        unreadable, not saved, and declares a size of at most ``eager_max_bytes``. Marked records
        are passed over without a log line (also when a mark lands before their turn). The
        fetches run in ``nursery`` (at most :data:`EAGER_CONCURRENCY` at once) and share flights
        with on-demand fetches; a saved copy is recorded on its record, and a failure is logged
        at info level like any fetch's.

        Returns the records whose fetch was started, in order, each once.
        """
        if self.eager_max_bytes is None or self._closed:
            return []
        if self._eager_limiter is None:
            self._eager_limiter = trio.CapacityLimiter(EAGER_CONCURRENCY)
        started: dict[str, ReferenceRecord] = {}
        for record in records:
            if (
                record.id in started
                or self._refusal(record) is not None
                or record.saved_path is not None
                or record.size is None
                or record.size > self.eager_max_bytes
            ):
                continue
            started[record.id] = record
            nursery.start_soon(self._fetch_eagerly, record, self._eager_limiter)
        return list(started.values())

    def close(self) -> None:
        """Stop listening to the registry and abort every running flight.

        Waiting callers answer ``markers.CLOSED``, and so does every later fetch that would need
        a download (a marked record still answers its mark, a saved one its copy). The
        registry's removal hook stays wired to the workspace. Idempotent.
        """
        if self._closed:
            return
        self._closed = True
        self._stop_listening()
        for flight in list(self._flights.values()):
            flight.abort(Unfetchable(markers.CLOSED))
        self._flights.clear()

    # --- checks -----------------------------------------------------------------------------

    def _refusal(self, record: ReferenceRecord) -> Unfetchable | None:
        """The mark or the unreadable flag; never logged."""
        if record.payload_never or self.registry.is_marked(record.uri):
            return _MARKED
        if record.unreadable:
            return _UNREADABLE
        return None

    def _saved(self, record: ReferenceRecord) -> Saved | None:
        path, size, digest = record.saved_path, record.verified_bytes, record.sha256
        if path is None or size is None or digest is None:
            return None
        try:
            if not self.workspace.resolve(path).is_file():
                return None
        except WorkspacePathError:
            return None
        return Saved(path, size, digest)

    def _static_refusal(self, record: ReferenceRecord) -> Unfetchable | None:
        """Refusals that need no I/O: the scheme, and a declared size over the cap."""
        scheme = _scheme(record.uri)
        if scheme is None:
            return Unfetchable(markers.NO_SCHEME)
        if scheme == "file":
            return Unfetchable(markers.FILE_SCHEME)
        if scheme == "data":
            return Unfetchable(markers.DATA_SCHEME)
        if record.size is not None and record.size > self.max_bytes:
            return Unfetchable(markers.declared_too_large(record.size, self.max_bytes))
        if scheme not in ("http", "https"):
            if record.server is None:
                return Unfetchable(markers.NO_SERVER)
            if record.server not in self._servers:
                return Unfetchable(markers.NOT_CONNECTED, retryable=True)
        return None

    # --- flights ----------------------------------------------------------------------------

    def _on_mark(self, record: ReferenceRecord) -> None:
        """The registry's mark listener: abort the record's flight, synchronously."""
        flight = self._flights.pop(record.id, None)
        if flight is not None:
            flight.abort(_MARKED)

    async def _fly(self, record: ReferenceRecord, flight: _Flight) -> None:
        """Run ``flight`` to its outcome, then clean up and wake its waiters.

        On return ``flight.outcome`` is set, unless the caller was cancelled (then it stays
        ``None``, Cancelled propagates, and a waiter leads a new flight). Either way no
        temporary file is left.
        """
        try:
            outcome: FetchOutcome | None = None
            with flight.scope:
                outcome = await self._download(record, flight)
            if flight.outcome is None:
                if outcome is None:  # the flight's own scope was cancelled: its deadline
                    outcome = Unfetchable(markers.deadline_passed(self.deadline_s), retryable=True)
                flight.outcome = outcome
                if isinstance(outcome, Unfetchable) and outcome.reason != markers.PAYLOAD_NEVER:
                    log.info("couldn't fetch %s: %s", record.id, outcome.reason)
        finally:
            if flight.partial is not None:
                flight.partial.discard()
            if self._flights.get(record.id) is flight:
                del self._flights[record.id]
            flight.done.set()

    async def _download(self, record: ReferenceRecord, flight: _Flight) -> FetchOutcome:
        scheme = _scheme(record.uri)
        if scheme in ("http", "https"):
            return await self._download_http(record, flight)
        return await self._read_from_server(record, flight)

    async def _download_http(self, record: ReferenceRecord, flight: _Flight) -> FetchOutcome:
        import httpx

        from ._httpget import http_get
        from ._policy_backend import PolicyBackend

        if self._backend is None:
            self._backend = PolicyBackend(self._policy)
        try:
            url = httpx.URL(record.uri)
        except (httpx.InvalidURL, TypeError, ValueError):
            return Unfetchable(markers.BAD_URL)
        if url.scheme not in ("http", "https") or not url.host:
            return Unfetchable(markers.BAD_URL)
        for hop in range(MAX_REDIRECTS + 1):
            try:
                async with http_get(url, self._backend) as response:
                    location = response.header("location")
                    if response.status in _REDIRECTS and location is not None:
                        try:
                            url = url.join(location)
                        except (httpx.InvalidURL, TypeError, ValueError):
                            return Unfetchable(markers.REDIRECT_SCHEME)
                        if url.scheme not in ("http", "https") or not url.host:
                            return Unfetchable(markers.REDIRECT_SCHEME)
                        continue
                    if response.status != 200:
                        status = response.status
                        retryable = status >= 500 or status in (408, 429)
                        return Unfetchable(markers.http_status(status), retryable=retryable)
                    return await self._receive(record, flight, response)
            except AddressRefused as exc:
                return Unfetchable(markers.refused_address(exc.label, redirected=hop > 0))
            except FetchError as exc:  # a bare one: the transfer broke
                log.info("fetching %s failed: %s", record.id, exc)
                return Unfetchable(markers.UNREACHABLE, retryable=True)
        return Unfetchable(markers.too_many_redirects(MAX_REDIRECTS))

    async def _receive(
        self, record: ReferenceRecord, flight: _Flight, response: HttpResponse
    ) -> FetchOutcome:
        encoding = (response.header("content-encoding") or "").strip().lower()
        if encoding not in ("", "identity"):
            return Unfetchable(markers.ENCODED)
        declared = record.size
        length = _content_length(response)
        if length is not None:
            if declared is not None and length != declared:
                return Unfetchable(markers.length_mismatch(length, declared))
            if length > self.max_bytes:
                return Unfetchable(markers.declared_too_large(length, self.max_bytes))
            declared = length
        limit = self.max_bytes if declared is None else declared
        opened = self._open_partial(record, flight, response.header("content-type"))
        if isinstance(opened, Unfetchable):
            return opened
        partial = opened
        received = 0
        async for chunk in response.body():
            received += len(chunk)
            if received > limit:
                if declared is None or received > self.max_bytes:
                    return Unfetchable(markers.over_cap(self.max_bytes))
                return Unfetchable(markers.over_declared(declared))
            # Written and hashed in the trio thread (module doc): a chunk is at most READ_SIZE.
            try:
                partial.write(chunk)
            except OSError as exc:
                log.error("couldn't write the copy of %s: %s", record.id, exc)
                return Unfetchable(markers.WORKSPACE_FAILED, retryable=True)
        if declared is not None and received != declared:
            return Unfetchable(markers.under_declared(received, declared))
        return self._commit(record, flight, partial)

    async def _read_from_server(self, record: ReferenceRecord, flight: _Flight) -> FetchOutcome:
        reader = self._servers.get(record.server) if record.server is not None else None
        if reader is None:
            return Unfetchable(markers.NOT_CONNECTED, retryable=True)
        try:
            result = await reader.read_resource(record.uri)
        except Exception as exc:
            log.warning(
                "server %r couldn't read %s: %s: %s",
                record.server,
                record.id,
                type(exc).__name__,
                exc,
            )
            return Unfetchable(markers.SERVER_FAILED, retryable=True)
        content = _pick_contents(result, record.uri)
        if content is None:
            return Unfetchable(markers.SERVER_ANSWER)
        text, blob = content.get("text"), content.get("blob")
        if isinstance(text, str) == isinstance(blob, str):
            return Unfetchable(markers.SERVER_ANSWER)
        if isinstance(blob, str) and markers.decoded_size(blob) > self.max_bytes:
            return Unfetchable(markers.over_cap(self.max_bytes))
        try:
            data = await trio.to_thread.run_sync(_payload_bytes, text, blob)
        except (binascii.Error, ValueError):
            return Unfetchable(markers.BAD_BLOB)
        if len(data) > self.max_bytes:
            return Unfetchable(markers.over_cap(self.max_bytes))
        if record.size is not None and len(data) != record.size:
            if len(data) > record.size:
                return Unfetchable(markers.over_declared(record.size))
            return Unfetchable(markers.under_declared(len(data), record.size))
        opened = self._open_partial(record, flight, content.get("mimeType"))
        if isinstance(opened, Unfetchable):
            return opened
        written = await self._write(record, opened, data)
        if written is not None:
            return written
        return self._commit(record, flight, opened)

    # --- files ------------------------------------------------------------------------------

    def _open_partial(
        self, record: ReferenceRecord, flight: _Flight, fallback_mime: object
    ) -> PartialFile | Unfetchable:
        """Create the temporary file and hang it on the flight, with nothing awaited between,
        so a mark's abort always sees (and removes) it."""
        name = self.workspace.saved_name(record.id, record.mime_type or fallback_mime)
        try:
            flight.partial = self.workspace.open_partial(name)
        except OSError as exc:
            log.error("couldn't create a file for %s in %s: %s", record.id, self.workspace, exc)
            return Unfetchable(markers.WORKSPACE_FAILED, retryable=True)
        return flight.partial

    async def _write(
        self, record: ReferenceRecord, partial: PartialFile, chunk: bytes
    ) -> Unfetchable | None:
        """Write ``chunk`` in a worker thread (for a large piece); ``None`` when it was written."""
        try:
            await trio.to_thread.run_sync(partial.write, chunk)
        except OSError as exc:
            log.error("couldn't write the copy of %s: %s", record.id, exc)
            return Unfetchable(markers.WORKSPACE_FAILED, retryable=True)
        return None

    def _commit(
        self, record: ReferenceRecord, flight: _Flight, partial: PartialFile
    ) -> FetchOutcome:
        """Rename the copy into place and record it, in one synchronous step (no await)."""
        if flight.outcome is not None:  # a mark (or close) settled the flight meanwhile
            return flight.outcome
        try:
            path = partial.commit()
        except OSError as exc:
            log.error("couldn't save the copy of %s: %s", record.id, exc)
            return Unfetchable(markers.WORKSPACE_FAILED, retryable=True)
        size, digest = partial.size, partial.sha256
        if self.registry.record_saved(record, path, size, digest):
            return Saved(path, size, digest)
        # Marked, flagged unreadable or dropped while saving: the copy must not stay.
        self.registry.discard_copy(path)
        refusal = self._refusal(record)
        return refusal if refusal is not None else Unfetchable(markers.NO_LONGER_HELD)

    async def _fetch_eagerly(self, record: ReferenceRecord, limiter: trio.CapacityLimiter) -> None:
        async with limiter:
            await self.fetch(record)


def _scheme(uri: str) -> str | None:
    """The uri's scheme in lower case, or ``None`` when it has no valid one."""
    head, sep, _ = uri.partition(":")
    if not sep or not _SCHEME.fullmatch(head):
        return None
    return head.lower()


def _content_length(response: HttpResponse) -> int | None:
    value = response.header("content-length")
    if value is None:
        return None
    value = value.strip()
    return int(value) if value.isdigit() else None


def _pick_contents(result: object, uri: str) -> Mapping[str, object] | None:
    """The entry of a ReadResourceResult for ``uri``: the one naming it, else the only one."""
    if not isinstance(result, Mapping):
        return None
    contents = result.get("contents")
    if not isinstance(contents, list):
        return None
    entries = [entry for entry in contents if isinstance(entry, Mapping)]
    for entry in entries:
        if entry.get("uri") == uri:
            return entry
    if len(entries) == 1 and len(contents) == 1:
        return entries[0]
    return None


def _payload_bytes(text: object, blob: object) -> bytes:
    """A text as UTF-8 (made well formed) or a base64 blob decoded strictly. Runs in a thread.

    Raises:
        binascii.Error: the blob isn't valid base64 (whitespace aside).
    """
    if isinstance(text, str):
        return markers.well_formed(text).encode("utf-8")
    assert isinstance(blob, str)
    compact = "".join(blob.split())
    return base64.b64decode(compact, validate=True)
