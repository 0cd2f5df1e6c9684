"""The script view: the only way a script receives a tool result (SPEC section 6.1).

:func:`render_script_view` is pure (no marks, no I/O, no registry change, not even LRU order)
and returns plain data only (dict, list, str, int, float, bool, None, bytes), shaped
``{"content": [...], "data": ..., "isError": bool}``. Every string in it is well formed.

- Text shows as a text block; inline image or audio as that block, as sent (an empty image blob
  included); an embedded resource as the block its contents make, or a text block holding its
  marker, never with its uri or its resource record.
- A reference (MCPL reference, resource link, by-uri image or audio) shows as a script object
  ``{"type": "reference", "id", "name", "mimeType", "size", "uri"?, "savedTo", "unfetchable"}``.
  A never-marked record (or one whose result claims never) has ``savedTo: None``,
  ``unfetchable: PAYLOAD_NEVER`` and no ``uri`` key. A record of a result whose claims could not
  be read whole shows ``UNREADABLE_RESULT`` and no uri. A reference with no record (rendered
  before ingestion) is read from the block alone, with ``id: None``.
- ``uri`` appears only when it may be shown: the record is unmarked, its result was readable,
  and the uri carries no credential (no userinfo, no query, no fragment) and nothing a reader
  could be misled by (whitespace, control or format characters, a lone surrogate, more than
  2,048 characters). What a reader may learn of a reference is decided in
  :mod:`scriptbridge._refs`, for this view and the model's lanes alike.
- A ``{"type": "reference", "id": ...}`` dict is a script object only when its id names a live
  record; it is rebuilt from that record, so rendering a view again gives the same view.
- At any depth of the data, a dict whose ``type`` is a block type is replaced by what that block
  shows as; other dicts and lists are walked (tuples become lists). Past a walk limit the view
  shows ``DATA_TOO_DEEP``; a value that is not plain data (an object, an ``int`` outside 64
  bits, a dict with a key that is not a str, number, bool or None) shows ``UNREADABLE_VALUE``.
- Every leaf has its exact builtin type (subclasses are copied down without calling their
  methods) and every dict key is a ``str`` (number, bool and None keys become their ``repr``),
  so a view crosses the channel to a script as it is.

The data is read from ``structuredContent``, or from ``data`` when the result has no
``structuredContent`` (so a rendered view reads as the result it came from).
"""

from __future__ import annotations

from collections.abc import Iterable
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
    NoLink,
    Reference,
    ScriptObject,
    Text,
    Unknown,
    Withheld,
    classify_block,
    is_block,
)
from ._refs import ShownReference, show_record, show_reference
from ._registry import ReferenceRegistry
from ._walk import Budget, copy_tree, data_of, result_dict

__all__ = ["render_script_view", "render_withheld_view"]


def render_script_view(result: object, registry: ReferenceRegistry) -> dict[str, Any]:
    """Render a tool result (dict or ``CallToolResult``) as a script sees it. Pure; never raises."""
    top = result_dict(result)
    if top is None:
        return {"content": [_text(markers.UNKNOWN_BLOCK)], "data": None, "isError": False}
    walk = _Walk.of(registry, top)
    return {
        "content": walk.content(top.get("content")),
        "data": walk.value(data_of(top)),
        "isError": top.get("isError") is True,
    }


def render_withheld_view(
    result: object, registry: ReferenceRegistry, keep: Iterable[str]
) -> dict[str, Any]:
    """A script's view of a result whose body the host's guard refused.

    The content is dropped. Of the data, only the top-level fields named in ``keep`` are kept,
    each rendered as :func:`render_script_view` renders it. When the data is a block (an
    embedded resource above all), it keeps nothing: its fields can't be kept apart from its
    contents or its uri. Pure; never raises.
    """
    top = result_dict(result)
    if top is None:
        return {"content": [], "data": None, "isError": False}
    data = data_of(top)
    kept: dict[str, Any] | None = None
    if isinstance(data, dict) and not is_block(data):
        picked = {name: data[name] for name in keep if name in data}
        kept = _Walk.of(registry, top).value(picked)
    return {"content": [], "data": kept, "isError": top.get("isError") is True}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": markers.well_formed(text)}


@dataclass
class _Walk:
    """One walk over one result: one budget for its content and data, its claims, its memo."""

    registry: ReferenceRegistry
    claims: Claims
    memo: dict[int, Classification]
    """Classifications the claims walk made of this result's blocks, by ``id(block)``."""
    budget: Budget = field(default_factory=Budget)

    @classmethod
    def of(cls, registry: ReferenceRegistry, top: dict[Any, Any]) -> _Walk:
        memo: dict[int, Classification] = {}
        return cls(registry, read_claims(top, memo), memo)

    def content(self, blocks: object) -> list[dict[str, Any]]:
        if blocks is None:
            return []
        if not isinstance(blocks, list | tuple):
            return [_text(markers.UNKNOWN_BLOCK)]
        if not self.budget.open(blocks, len(blocks)):
            return [_text(markers.DATA_TOO_DEEP)]
        return [self._block_at(block) for block in blocks]

    def _block_at(self, block: object) -> dict[str, Any]:
        if isinstance(block, dict) and not self.budget.visit(block):
            return _text(markers.DATA_TOO_DEEP)
        return self.block(block)

    def value(self, data: object) -> Any:
        """Render a result's data (at depth 1): blocks replaced, dicts and lists walked."""
        return copy_tree(data, 1, self.budget, self.block, keep_bytes=True)

    def block(self, block: object) -> dict[str, Any]:
        """What one block shows as in a script's view."""
        classification = self.memo.get(id(block))
        if classification is None:
            classification = classify_block(block)
        match classification:
            case Text(text):
                return _text(text)
            case Inline() as inline:
                return _inline(inline)
            case InlineNoMediaType():
                return _text(markers.INLINE_NO_MEDIA_TYPE)
            case Withheld():
                return _text(markers.WITHHELD_DISPOSITION)
            case Reference() as reference:
                return _script_object(show_reference(reference, self.registry, self.claims))
            case Embedded(contents=contents):
                return _contents(contents)
            case NoLink():
                return _text(markers.REFERENCE_NO_LINK)
            case ScriptObject(ref_id):
                record = self.registry.get(ref_id)
                if record is None:
                    return _text(markers.UNKNOWN_BLOCK)
                return _script_object(show_record(record, self.registry, self.claims))
            case Unknown():
                return _text(markers.UNKNOWN_BLOCK)
            case unreachable:
                assert_never(unreachable)


def _script_object(shown: ShownReference) -> dict[str, Any]:
    view: dict[str, Any] = {
        "type": "reference",
        "id": shown.id,
        "name": shown.name,
        "mimeType": shown.mime,
        "size": shown.size,
    }
    if shown.uri is not None:
        view["uri"] = shown.uri
    view["savedTo"] = shown.saved_to
    view["unfetchable"] = shown.unfetchable
    return view


def _inline(inline: Inline) -> dict[str, Any]:
    return {
        "type": inline.kind,
        "data": markers.well_formed(inline.data),
        "mimeType": markers.well_formed(inline.mime),
    }


def _contents(contents: EmbeddedContents) -> dict[str, Any]:
    match contents:
        case Text(text):
            return _text(text)
        case Inline() as inline:
            return _inline(inline)
        case Marker(text):
            return _text(text)
        case unreachable:
            assert_never(unreachable)
