"""What each block shows as on the model's lanes, and the text of a result's data (SPEC 6.2).

The model's lanes (:mod:`scriptbridge.lanes`) differ only in how they *present* a block; what a
block shows as is decided once, here, from the one classifier. :meth:`LaneWalk.shown` turns a
classification into one of three things:

- :class:`ShownText`: text that shows as itself (a text block, an embedded text);
- :class:`ShownMedia`: image or audio data with a media type and a non-empty payload (inline, or
  an embedded image or audio blob);
- :class:`ShownMarker`: a marker or a reference's stub line, which the live copy counts against
  its cap.

Each lane then matches over that closed union, ending in ``typing.assert_never``.

Guarantees, on every lane:

- **No uri of a reference is ever shown.** SPEC allows showing none, and the model has no use for
  one: it fetches by id. A reference shows as its stub line, ending with ``saved: <path>`` (an
  unmarked, readable record with a saved copy), :data:`~scriptbridge.markers.FETCH_HINT` (an
  unmarked, readable record), :data:`~scriptbridge.markers.PAYLOAD_NEVER` (a marked record, a
  uri the registry holds a never for, or a uri a never of the same result names),
  :data:`~scriptbridge.markers.UNREADABLE_RESULT` (the result's claims could not be read whole,
  or the record was flagged so) or :data:`~scriptbridge.markers.REFERENCE_UNREGISTERED` (no
  record: the host showed the result before it ingested it). A name or media type that holds the
  reference's uri (as sent, or once cleaned) is left out of its stub, since it would show the uri.
- An embedded resource's uri and record are never shown: it shows as the block its contents make,
  or as its marker.
- Inline or embedded image or audio data that decodes to nothing shows
  ``inline_no_data(kind)`` (the model lanes' rule; a script still gets the empty block).
- A ``{"type": "reference", "id": ...}`` dict shows its record's stub when the id names a live
  record, else the unknown-block marker.
- Data at depth is walked with the shared limits (:mod:`scriptbridge._walk`): iteratively, with a
  seen set and one node budget per result. A block at depth becomes the text its stored copy
  shows (never JSON, which would carry an embedded resource's uri); past a limit the walk shows
  ``DATA_TOO_DEEP``; a value that is not plain JSON data (bytes included, and a dict key that is
  not a string, number or bool) shows ``UNREADABLE_VALUE``.
- Every string produced is well formed. Nothing here mutates the registry (it reads
  ``record_for``, ``get`` and ``is_marked`` only) or the result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, assert_never

from . import markers
from ._claims import Claims, read_claims
from ._classify import (
    Classification,
    Embedded,
    EmbeddedContents,
    Inline,
    InlineNoMediaType,
    Marker,
    MediaKind,
    NoLink,
    Reference,
    ScriptObject,
    Text,
    Unknown,
    Withheld,
    classify_block,
)
from ._disclosure import show_record, show_reference
from ._registry import ReferenceRegistry
from ._walk import Budget, copy_tree

__all__ = [
    "LaneWalk",
    "Shown",
    "ShownMarker",
    "ShownMedia",
    "ShownText",
    "has_data",
    "stored_text",
]


@dataclass(frozen=True, slots=True)
class ShownText:
    """Text that shows as itself (well formed)."""

    text: str


@dataclass(frozen=True, slots=True)
class ShownMedia:
    """Image or audio data that shows as itself where a lane carries it (``data`` non-empty)."""

    kind: MediaKind
    data: str
    mime: str


@dataclass(frozen=True, slots=True)
class ShownMarker:
    """A marker or a reference's stub line (well formed): counted as a marker by the live copy."""

    text: str


Shown = ShownText | ShownMedia | ShownMarker


def has_data(data: str) -> bool:
    """Whether inline or embedded base64 data decodes to at least one byte."""
    return markers.decoded_size(data) > 0


def stored_text(shown: Shown) -> str:
    """The text a shown block has in a stored copy: images as placeholders, audio as its marker."""
    match shown:
        case ShownText(text) | ShownMarker(text):
            return text
        case ShownMedia(kind, data, mime):
            size = markers.decoded_size(data)
            if kind == "image":
                return markers.image_placeholder(mime, size)
            return markers.audio_in_tool_result(mime, size)
        case unreachable:
            assert_never(unreachable)


def _media(inline: Inline) -> Shown:
    if not has_data(inline.data):
        return ShownMarker(markers.inline_no_data(inline.kind))
    data, mime = markers.well_formed(inline.data), markers.well_formed(inline.mime)
    return ShownMedia(inline.kind, data, mime)


def _contents(contents: EmbeddedContents) -> Shown:
    match contents:
        case Text(text):
            return ShownText(markers.well_formed(text))
        case Inline() as inline:
            return _media(inline)
        case Marker(text):
            return ShownMarker(markers.well_formed(text))
        case unreachable:
            assert_never(unreachable)


@dataclass
class LaneWalk:
    """One walk over one result (or one pushed message): a shared seen set and node budget.

    ``claims`` are the claims of the whole result (or message) the walk reads; ``memo`` holds
    the classifications the claims walk made of its blocks, by ``id(block)`` (see
    :func:`scriptbridge._claims.read_claims`), so no block is classified twice.
    """

    registry: ReferenceRegistry
    claims: Claims
    memo: dict[int, Classification] = field(default_factory=dict)
    budget: Budget = field(default_factory=Budget)

    @classmethod
    def of(cls, registry: ReferenceRegistry, result: object) -> LaneWalk:
        """A walk of ``result`` (a tool result, or a message's list of blocks), claims read."""
        memo: dict[int, Classification] = {}
        return cls(registry, read_claims(result, memo), memo)

    def classify(self, block: object) -> Classification:
        """The block's classification, from the claims walk's memo when it made one."""
        classification = self.memo.get(id(block))
        return classify_block(block) if classification is None else classification

    # --- a content array ----------------------------------------------------------------------

    def content(self, blocks: object, *, text_only: bool = False) -> list[Shown]:
        """What each block of a content array shows as, in order.

        ``None`` is an empty array; any other non-list shows the unknown-block marker. With
        ``text_only`` (an error result), only blocks that are text blocks are kept; the walk's
        own markers (a block reached twice, a budget spent) still show in place of what they
        stand for.
        """
        if blocks is None:
            return []
        if not isinstance(blocks, list | tuple):
            return [ShownMarker(markers.UNKNOWN_BLOCK)]
        try:
            items = list(blocks)
        except Exception:
            return [ShownMarker(markers.UNKNOWN_BLOCK)]
        if not self.budget.open(blocks, len(items)):
            return [ShownMarker(markers.DATA_TOO_DEEP)]
        shown: list[Shown] = []
        for block in items:
            if isinstance(block, dict) and not self.budget.visit(block):
                shown.append(ShownMarker(markers.DATA_TOO_DEEP))
                continue
            classification = self.classify(block)
            if text_only:
                if isinstance(classification, Text):
                    shown.append(ShownText(markers.well_formed(classification.text)))
                continue
            shown.append(self.shown(classification))
        return shown

    # --- one block --------------------------------------------------------------------------

    def shown(self, classification: Classification) -> Shown:
        """What one classified block shows as on the model's lanes."""
        match classification:
            case Text(text):
                return ShownText(markers.well_formed(text))
            case Inline() as inline:
                return _media(inline)
            case InlineNoMediaType():
                return ShownMarker(markers.INLINE_NO_MEDIA_TYPE)
            case Withheld():
                return ShownMarker(markers.WITHHELD_DISPOSITION)
            case Reference() as reference:
                return ShownMarker(show_reference(reference, self.registry, self.claims).stub())
            case Embedded(contents=contents):
                return _contents(contents)
            case NoLink():
                return ShownMarker(markers.REFERENCE_NO_LINK)
            case ScriptObject(ref_id):
                record = self.registry.get(ref_id)
                if record is None:
                    return ShownMarker(markers.UNKNOWN_BLOCK)
                return ShownMarker(show_record(record, self.registry, self.claims).stub())
            case Unknown():
                return ShownMarker(markers.UNKNOWN_BLOCK)
            case unreachable:
                assert_never(unreachable)

    # --- data at depth ------------------------------------------------------------------------

    def data_text(self, root: object) -> str:
        """The text of a result's data: JSON with every block at depth replaced by its text.

        Data that is itself a block shows as that block's text, not as a JSON string. Bytes
        show ``UNREADABLE_VALUE`` (JSON can't carry them).
        """
        tree = copy_tree(root, 1, self.budget, self._block_text, keep_bytes=False)
        if isinstance(root, dict) and isinstance(tree, str):
            return tree  # the data was a block (or unreadable): its text as it is
        return markers.well_formed(json.dumps(tree, ensure_ascii=False))

    def _block_text(self, block: dict[Any, Any]) -> str:
        return stored_text(self.shown(self.classify(block)))
