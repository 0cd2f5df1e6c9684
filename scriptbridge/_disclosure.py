"""What a reader may learn of one reference: the one place every lane decides it.

The script view and the model's lanes show a reference differently (a script object, a stub
line), but what they show of it is decided here, once, from the record (if any), the block and
the claims of the result being shown:

- **never** when the record is marked, the registry holds a never for the uri, or a never of the
  same result names it: no uri, no saved path, and ``PAYLOAD_NEVER`` as the reason;
- **unreadable** when the result's claims could not be read whole or the record was flagged so:
  no uri, no saved path, and ``UNREADABLE_RESULT``;
- **unregistered** when the uri has no record (shown before ingestion): ``REFERENCE_UNREGISTERED``;
- **landing** when a result's ingestion in slices is under way and the reader hasn't waited for
  it (:attr:`~scriptbridge.ReferenceRegistry.landing`: a host's own view during another run's
  flood): no uri, no saved path, and ``MARKS_LANDING``, so no reader ever sees what a never
  that has arrived but not landed withholds;
- otherwise the saved path, if a copy is saved.

A name or media type is cleaned (:func:`markers.clean_label`) and left out when it holds the
reference's uri (as sent or cleaned): a server must not show, by naming it so, a uri another
server's never withholds. The uri itself is offered only where :func:`shows_uri` allows it; the
model's lanes never show it at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from . import markers
from ._claims import Claims
from ._classify import Reference
from ._registry import ReferenceRecord, ReferenceRegistry

__all__ = ["ShownReference", "show_record", "show_reference", "shows_uri"]

NAME_MAX_CHARS: Final = 200
URI_MAX_CHARS: Final = 2048


@dataclass(slots=True)
class ShownReference:
    """What may be shown of one reference (see the module doc)."""

    id: str | None
    name: str | None
    mime: str | None
    size: int | None
    uri: str | None
    """The uri, only when it may be shown (unmarked, readable, no credential in it)."""
    saved_to: str | None
    unfetchable: str | None
    """``None``, or why it can't be fetched (or shown) now: ``PAYLOAD_NEVER``,
    ``UNREADABLE_RESULT``, ``MARKS_LANDING`` or ``REFERENCE_UNREGISTERED``."""

    def stub(self) -> str:
        """Its stub line, ending with its saved path, its reason or the fetch hint."""
        if self.unfetchable is not None:
            tail = self.unfetchable
        elif self.saved_to is not None:
            tail = f"saved: {self.saved_to}"
        else:
            tail = markers.FETCH_HINT
        return markers.reference_stub(self.id, self.name, self.mime, self.size, tail)


def shows_uri(uri: str) -> bool:
    """Whether a uri may be shown: no credential in it and nothing a reader could be misled by.

    False for userinfo, a query or a fragment (bearer credentials look like locations), for
    whitespace, control or format characters, a lone surrogate, or more than 2,048 characters.

    An exact ``str`` of printable ASCII without a space holds none of the characters the scan
    for invisible characters looks for, so it skips that scan; if it holds no ``@`` (so no
    userinfo) and no bracket either, ``urlsplit`` could not reject it (it raises only for a
    bracketed host or a non-ASCII netloc, on Python 3.11 to 3.13), so it is shown without
    being split.
    """
    if len(uri) > URI_MAX_CHARS or "?" in uri or "#" in uri:
        return False
    plain = type(uri) is str and uri.isascii() and uri.isprintable() and " " not in uri
    if plain and "@" not in uri and "[" not in uri and "]" not in uri:
        return True
    if not plain and (
        markers.clean_label(uri, limit=URI_MAX_CHARS) != uri or any(c.isspace() for c in uri)
    ):
        return False
    try:
        parts = urlsplit(uri)
    except ValueError:
        return False
    return "@" not in parts.netloc


def show_reference(
    reference: Reference, registry: ReferenceRegistry, claims: Claims
) -> ShownReference:
    """What may be shown of a reference block, read from its record when it has one."""
    claimed_never = reference.never or claims.names_never(reference.uri)
    record = registry.record_for(reference.uri)
    if record is not None:
        return _shown(record, registry, claims, claimed_never)
    never = claimed_never or registry.is_marked(reference.uri)
    landing = registry.landing
    if never:
        reason: str | None = markers.PAYLOAD_NEVER
    elif claims.unreadable is not None:
        reason = markers.UNREADABLE_RESULT
    elif landing:
        reason = markers.MARKS_LANDING
    else:
        reason = markers.REFERENCE_UNREGISTERED
    return ShownReference(  # positional (a keyword call costs more): id, name, mime, ...
        None,
        _label(reference.name, reference.uri, NAME_MAX_CHARS),
        _label(reference.mime, reference.uri, markers.MEDIA_TYPE_MAX_CHARS),
        reference.size,
        _uri(reference.uri, never or landing or claims.unreadable is not None),
        None,
        reason,
    )


def show_record(
    record: ReferenceRecord, registry: ReferenceRegistry, claims: Claims, *, never: bool = False
) -> ShownReference:
    """What may be shown of a live record named by id (a script object), under ``claims``.

    ``never`` says the block that names it claims never itself: with it, this is what
    :func:`show_reference` shows of a reference block whose uri has this record.
    """
    return _shown(record, registry, claims, never or claims.names_never(record.uri))


def _shown(
    record: ReferenceRecord, registry: ReferenceRegistry, claims: Claims, claimed_never: bool
) -> ShownReference:
    never = claimed_never or record.payload_never or registry.is_marked(record.uri)
    unreadable = record.unreadable or claims.unreadable is not None
    blocked = unreadable or registry.landing
    if never:
        reason: str | None = markers.PAYLOAD_NEVER
    elif unreadable:
        reason = markers.UNREADABLE_RESULT
    elif blocked:
        reason = markers.MARKS_LANDING
    else:
        reason = None
    return ShownReference(  # positional: id, name, mime, size, uri, saved_to, unfetchable
        record.id,
        _label(record.name, record.uri, NAME_MAX_CHARS),
        _label(record.mime_type, record.uri, markers.MEDIA_TYPE_MAX_CHARS),
        record.size,
        _uri(record.uri, never or blocked),
        None if never or blocked else record.saved_path,
        reason,
    )


def _uri(uri: str, withheld: bool) -> str | None:
    return None if withheld or not shows_uri(uri) else uri


def _label(text: str | None, uri: str, limit: int) -> str | None:
    """A server's label, cleaned; ``None`` when blank or when it would show ``uri``.

    When cleaning would change neither the label nor the uri, only ``uri in text`` is asked:
    the full path then asks the same question three times over.
    """
    if text is None:
        return None
    if markers.is_clean(text) and markers.is_clean(uri):
        return None if not text or uri in text else text[:limit]
    full = markers.clean_label(text, limit=len(text))
    if not full or uri in text or uri in full:
        return None
    cleaned_uri = markers.clean_label(uri, limit=len(uri))
    if cleaned_uri and cleaned_uri in full:
        return None
    return full[:limit]
