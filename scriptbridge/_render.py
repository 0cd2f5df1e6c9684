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
  2,048 characters).
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
from typing import Any, Final, assert_never
from urllib.parse import urlsplit

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
from ._registry import ReferenceRecord, ReferenceRegistry
from ._walk import (
    MAX_DEPTH,
    NODE_BUDGET,
    NOT_PLAIN,
    PLAIN_SCALARS,
    plain_key,
    plain_scalar,
    result_dict,
)

__all__ = ["render_script_view", "render_withheld_view", "shows_uri"]

NAME_MAX_CHARS: Final = 255
URI_MAX_CHARS: Final = 2048


def render_script_view(result: object, registry: ReferenceRegistry) -> dict[str, Any]:
    """Render a tool result (dict or ``CallToolResult``) as a script sees it. Pure; never raises."""
    top = result_dict(result)
    if top is None:
        return {"content": [_text(markers.UNKNOWN_BLOCK)], "data": None, "isError": False}
    memo: dict[int, Classification] = {}
    walk = _Walk(registry, read_claims(top, memo), memo)
    return {
        "content": walk.content(top.get("content")),
        "data": walk.value(_data_of(top), depth=1),
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
    data = _data_of(top)
    kept: dict[str, Any] | None = None
    if isinstance(data, dict) and not is_block(data):
        memo: dict[int, Classification] = {}
        walk = _Walk(registry, read_claims(top, memo), memo)
        picked = {name: data[name] for name in keep if name in data}
        kept = walk.value(picked, depth=1)
    return {"content": [], "data": kept, "isError": top.get("isError") is True}


def shows_uri(uri: str) -> bool:
    """Whether a uri may be shown: no credential in it and nothing misleading (module doc)."""
    if len(uri) > URI_MAX_CHARS or "?" in uri or "#" in uri:
        return False
    if markers.clean_label(uri, limit=URI_MAX_CHARS) != uri or any(c.isspace() for c in uri):
        return False
    try:
        parts = urlsplit(uri)
    except ValueError:
        return False
    return "@" not in parts.netloc


def _data_of(top: dict[Any, Any]) -> Any:
    return top["structuredContent"] if "structuredContent" in top else top.get("data")


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": markers.well_formed(text)}


def _label(text: str | None, limit: int = markers.MEDIA_TYPE_MAX_CHARS) -> str | None:
    if text is None:
        return None
    return markers.clean_label(text, limit=limit) or None


@dataclass
class _Walk:
    """One walk over one result: a shared seen set and node budget for its content and data."""

    registry: ReferenceRegistry
    claims: Claims
    memo: dict[int, Classification]
    """Classifications the claims walk made of this result's blocks, by ``id(block)``."""
    seen: set[int] = field(default_factory=set)
    nodes: int = 1

    def content(self, blocks: object) -> list[dict[str, Any]]:
        if blocks is None:
            return []
        if not isinstance(blocks, list | tuple):
            return [_text(markers.UNKNOWN_BLOCK)]
        if not self._spend(blocks, len(blocks)):
            return [_text(markers.DATA_TOO_DEEP)]
        return [self._block_at(block) for block in blocks]

    def _spend(self, container: object, count: int) -> bool:
        """Open a container: False when it was reached before or the budget runs out."""
        if id(container) in self.seen or self.nodes + count > NODE_BUDGET:
            return False
        self.seen.add(id(container))
        self.nodes += count
        return True

    def _block_at(self, block: object) -> dict[str, Any]:
        if isinstance(block, dict):
            if id(block) in self.seen:
                return _text(markers.DATA_TOO_DEEP)
            self.seen.add(id(block))
        return self.block(block)

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
                return self._reference(reference)
            case Embedded(contents=contents):
                return _contents(contents)
            case NoLink():
                return _text(markers.REFERENCE_NO_LINK)
            case ScriptObject(ref_id):
                record = self.registry.get(ref_id)
                if record is None:
                    return _text(markers.UNKNOWN_BLOCK)
                return self._record(record, claimed_never=False)
            case Unknown():
                return _text(markers.UNKNOWN_BLOCK)
            case unreachable:
                assert_never(unreachable)

    def _reference(self, reference: Reference) -> dict[str, Any]:
        claimed_never = reference.never or reference.uri in self.claims.never
        record = self.registry.record_for(reference.uri)
        if record is not None:
            return self._record(record, claimed_never)
        never = claimed_never or self.registry.is_marked(reference.uri)
        view: dict[str, Any] = {
            "type": "reference",
            "id": None,
            "name": _label(reference.name, NAME_MAX_CHARS),
            "mimeType": _label(reference.mime),
            "size": reference.size,
        }
        if not never and self.claims.unreadable is None and shows_uri(reference.uri):
            view["uri"] = reference.uri
        view["savedTo"] = None
        view["unfetchable"] = (
            markers.PAYLOAD_NEVER
            if never
            else markers.UNREADABLE_RESULT
            if self.claims.unreadable is not None
            else markers.REFERENCE_UNREGISTERED
        )
        return view

    def _record(self, record: ReferenceRecord, claimed_never: bool) -> dict[str, Any]:
        never = claimed_never or record.payload_never or self.registry.is_marked(record.uri)
        blocked = record.unreadable or self.claims.unreadable is not None
        view: dict[str, Any] = {
            "type": "reference",
            "id": record.id,
            "name": _label(record.name, NAME_MAX_CHARS),
            "mimeType": _label(record.mime_type),
            "size": record.size,
        }
        if not never and not blocked and shows_uri(record.uri):
            view["uri"] = record.uri
        view["savedTo"] = None if never or blocked else record.saved_path
        view["unfetchable"] = (
            markers.PAYLOAD_NEVER if never else markers.UNREADABLE_RESULT if blocked else None
        )
        return view

    def value(self, root: object, depth: int) -> Any:
        """Render nested data iteratively: blocks replaced, dicts and lists walked."""
        holder: list[Any] = [None]
        stack: list[tuple[Any, Any, Any, int]] = [(root, holder, 0, depth)]
        while stack:
            value, parent, key, level = stack.pop()
            parent[key] = self._one(value, level, stack)
        return holder[0]

    def _one(self, value: object, level: int, stack: list[tuple[Any, Any, Any, int]]) -> Any:
        if isinstance(value, PLAIN_SCALARS):
            leaf = plain_scalar(value)
            return markers.UNREADABLE_VALUE if leaf is NOT_PLAIN else leaf
        if isinstance(value, dict):
            if level > MAX_DEPTH or id(value) in self.seen:
                return markers.DATA_TOO_DEEP
            if is_block(value):
                self.seen.add(id(value))
                return self.block(value)
            try:
                items = [(plain_key(k), child) for k, child in value.items()]
            except Exception:
                return markers.UNREADABLE_VALUE
            if any(k is None for k, _ in items):
                return markers.UNREADABLE_VALUE
            if not self._spend(value, len(items)):
                return markers.DATA_TOO_DEEP
            out: dict[Any, Any] = {}
            for k, _ in items:  # keys in order first, filled as the stack unwinds
                out[k] = None
            for k, child in reversed(items):
                stack.append((child, out, k, level + 1))
            return out
        if isinstance(value, list | tuple):
            if level > MAX_DEPTH or not self._spend(value, len(value)):
                return markers.DATA_TOO_DEEP
            seq: list[Any] = [None] * len(value)
            for index in range(len(value) - 1, -1, -1):
                stack.append((value[index], seq, index, level + 1))
            return seq
        return markers.UNREADABLE_VALUE


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
