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
  :mod:`scriptbridge._disclosure`, for this view and the model's lanes alike.
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

Two paths give the same view. The general path reads any result: it reads the claims with the
general walk, keeping each block's classification in a memo, then walks the content and data.
The plain path (:func:`_render_plain`) reads a result that is plain data all through (exact
builtin containers, leaves and keys; the common case, anything decoded from JSON) and reaches
no walk limit; on any other result it gives up before it has run anything of the result's own,
and the general path reads it. On plain data classifying a block is a pure function of it, so
the plain path classifies each block where it needs it instead of keeping a memo (a big memo
costs more in garbage collection than classifying again), and reads the claims of the
content's blocks while it renders them. Blocks of the common shapes are shown there without
being classified, by a loop that is compiled at install (``scriptbridge/_fastcontent.c``, built
by ``hatch_build.py`` when a C compiler is at hand) or else runs as its Python twin
(:func:`_read_blocks`); the two give the same views, and only the speed differs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from sys import getrefcount
from typing import Any, Final, assert_never

from . import markers
from ._blocks import BLOCK_TYPES
from ._claims import Claims, NotPlain, PlainWalk, check_record, read_claims
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
    is_never,
)
from ._disclosure import ShownReference, show_record, show_reference
from ._plain import INT_MAX, INT_MIN, is_plain_leaf, plain_children, plain_key
from ._registry import ReferenceRegistry
from ._result_dict import data_of, result_dict
from ._walk import Budget, children_of, copy_tree

__all__ = ["ScriptView", "render_for_script", "render_script_view", "render_withheld_view"]

_NONE_TYPE: Final = type(None)

_compiled_read_blocks: Callable[..., int] | None
"""The compiled twin of :func:`_read_blocks`, or ``None`` when it wasn't built."""
try:
    from ._fastcontent import configure as _configure_compiled
    from ._fastcontent import read_blocks as _compiled_read_blocks
except ImportError:  # built without a C compiler (or SCRIPTBRIDGE_PURE_PYTHON=1)
    _compiled_read_blocks = None
else:
    _configure_compiled(markers.well_formed, is_never, NotPlain)


@dataclass(frozen=True)
class ScriptView:
    """A script view with what the renderer learnt while it made it."""

    view: dict[str, Any]
    reference_ids: frozenset[str]
    """The ids of the script objects in it: the references a script given it may fetch."""
    nodes: int
    """Its size as the protocol counts plain data (one per container, leaf and dict key);
    no container in it sits deeper than the walk limit, so it is plain data within the
    protocol's bounds exactly when this is within ``MAX_DATA_NODES``."""


def render_script_view(result: object, registry: ReferenceRegistry) -> dict[str, Any]:
    """Render a tool result (dict or ``CallToolResult``) as a script sees it. Pure; never raises."""
    return render_for_script(result, registry).view


def render_for_script(result: object, registry: ReferenceRegistry) -> ScriptView:
    """:func:`render_script_view`'s view, with its reference ids and size read as it was made
    (so no one walks it again to find them). Pure; never raises."""
    top = result_dict(result)
    if top is None:
        return _finished({"content": [_text(markers.UNKNOWN_BLOCK)], "data": None}, None, False)
    done = _render_plain(top, registry)
    return done if done is not None else _render_general(top, registry)


def _finished(parts: dict[str, Any], walk: _Walk | None, is_error: bool) -> ScriptView:
    """The view of ``parts`` (its content and data), counted (module doc of ScriptView)."""
    view = {"content": parts["content"], "data": parts["data"], "isError": is_error}
    content = view["content"]
    content_nodes = 1 + len(content) + 2 * sum(map(len, content))  # each block: it, keys, values
    data_nodes = walk.budget.copied if walk is not None else 1
    ids = frozenset(walk.ids) if walk is not None else frozenset()
    return ScriptView(view, ids, 5 + content_nodes + data_nodes)  # the dict, 3 keys, isError


def _render_general(top: dict[Any, Any], registry: ReferenceRegistry) -> ScriptView:
    """The view of any result: claims read (and blocks classified) by the general walk."""
    walk = _Walk.of(registry, top)
    content = walk.content(top.get("content"))
    data = walk.value(data_of(top))
    return _finished({"content": content, "data": data}, walk, top.get("isError") is True)


def _render_plain(top: dict[Any, Any], registry: ReferenceRegistry) -> ScriptView | None:
    """The view of a result that is plain data all through, or ``None`` for any other result.

    ``None`` when a value or key is not plain data, or when the claims walk reaches a limit (a
    container reached twice, nested too deep, past the node budget); then nothing of the result
    has run (see :class:`scriptbridge._claims.PlainWalk`), and the general path reads it.
    Otherwise the view is exactly :func:`_render_general`'s:

    - The claims are the general walk's. A strict walk that reaches no limit finds the same
      never claims in any order, so it reads the content's blocks first, as it renders them.
      Its seen set holds a block of the content only when another container may hold it too
      (:data:`_ONE_HOLDER`): no walk can reach a block the content array alone holds twice.
    - Each block shows what its classification shows, classified where it is shown instead of
      remembered (classifying plain data again gives the same classification), or read
      without classifying it when it has a common shape (:func:`_read_blocks`,
      :func:`_plain_view`). A reference
      (or script object), whose view depends on the whole result's claims, is shown once the
      claims are read (:meth:`_Walk.show_waiting`), or, for a resource link with a record, as
      the claims read so far show it, and again once they are all read if a later never
      claims its uri (:meth:`_Walk.settle_links`).
    - Having reached no limit, the claims walk read every container once, no deeper than the
      depth limit, within the node budget, and the view's walk reads no more than it did, in
      fewer nodes; so the view's walk, which still keeps its own seen set and budget, meets no
      limit either, as the general path's doesn't. (Its budget counts the content as the
      general path's does; its seen set leaves out the content's blocks, none of which the
      data can hold.)
    """
    if type(top) is not dict:
        return None
    claims_walk = PlainWalk(keep_references=False, strict=True)
    walk = _Walk(registry, _NO_CLAIMS, {})  # its claims are set once the claims walk ends
    try:
        opened = claims_walk.open(top, 0)
        claims_walk.count(len(top))
        assert opened is not None  # a strict walk raises instead
        rest = list(opened)
        blocks: Any = top.get("content")
        shown: _ContentRead | None = None
        if type(blocks) is list or type(blocks) is tuple:
            _remove(rest, blocks)  # read here; the rest of the result walks after
            shown = _read_content(claims_walk, blocks, walk)
        claims_walk.walk(rest, 1)
    except NotPlain:
        return None
    walk.claims = claims_walk.claims()
    content: list[Any]
    if shown is None:
        content = walk.content(blocks)
    else:
        # What the view's walk records of the content: its node count, and the content (but not
        # its blocks: having been reached once only by the claims walk, none of them is in the
        # data, so the data's walk would never find one in its seen set).
        walk.budget.open(blocks, len(blocks))
        content = shown.shown
        walk.settle_links(blocks, content, shown.links)
        for index in shown.waiting:
            content[index] = walk.show_waiting(content[index])
    data = walk.plain_value(data_of(top))
    return _finished({"content": content, "data": data}, walk, top.get("isError") is True)


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


def _remove(values: list[Any], value: object) -> None:
    """Remove the first item of ``values`` that is ``value`` itself (not one equal to it)."""
    for index, candidate in enumerate(values):
        if candidate is value:
            del values[index]
            return


class _ContentRead:
    """What :func:`_read_content` made of a content array: its views in order, where each
    reference and script object (whose view depends on the claims of the whole result) holds
    the block itself instead, and what to show in those places once the claims are read."""

    __slots__ = ("links", "shown", "waiting")

    def __init__(self) -> None:
        self.shown: list[Any] = []
        self.waiting: list[int] = []
        """The indexes of the blocks to show by :meth:`_Walk.show_waiting`."""
        self.links: list[int] = []
        """The indexes of the resource links shown while the content was read under no
        never claim of their uri (see :meth:`_Walk.settle_links`)."""


def _read_content(
    claims_walk: PlainWalk, blocks: list[Any] | tuple[Any, ...], walk: _Walk
) -> _ContentRead:
    """Read the claims of a content array of plain data (depth 1), and show its blocks.

    Each block is opened, classified and noted as ``claims_walk`` does it, and what is below
    it walked; raises :class:`NotPlain` as that strict walk does. The blocks are read by the
    compiled loop (``scriptbridge._fastcontent``, built at install when a C compiler is at
    hand) or else by its twin in Python, :func:`_read_blocks`: the two give the same views,
    claims, seen set and node count.
    """
    seen = claims_walk.seen
    if id(blocks) in seen:
        raise NotPlain  # reached twice
    seen.add(id(blocks))
    claims_walk.count(len(blocks))
    read = _ContentRead()
    if _compiled_read_blocks is None:
        nodes = _read_blocks(claims_walk, blocks, walk, read)
    else:
        nodes = _compiled_read_blocks(
            blocks,
            read.shown,
            read.links,
            read.waiting,
            claims_walk.never,
            seen,
            walk.record_views,
            walk.link_view,
            partial(_read_item, claims_walk, read),
        )
    claims_walk.count(nodes)
    return read


def _read_blocks(
    claims_walk: PlainWalk, blocks: list[Any] | tuple[Any, ...], walk: _Walk, read: _ContentRead
) -> int:
    """:func:`_read_content`'s loop over the blocks; returns the nodes they hold that are left
    to count (the claims walk's count is the same once they are counted, and a count past the
    budget raises then as it would have sooner).

    A block held by another container besides the content array (:data:`_ONE_HOLDER`) is put
    in the seen set; :class:`NotPlain` if it is there already. A block that is an exact dict
    whose keys are all exact ``str`` (checked by identity of type before any key is looked up,
    so that looking one up runs nothing of its own) and of one of these exact shapes is shown
    at once, each of its values checked to be plain data where it is read:

    - ``{"type": "text", "text": str}``: a text block;
    - ``{"type": "image" | "audio", "data": str, "mimeType": str}`` with a media type that
      holds something besides whitespace: inline data;
    - ``{"type": "resource", "resource": dict}`` whose record's keys are ``str`` and values
      plain data (:func:`_plain_record`), with a ``str`` ``uri``, a ``str`` ``text`` and no
      ``str`` ``blob``: an embedded resource of text, at which the claims walk stops;
    - ``{"type": "resource_link", "uri": non-empty str, ...}`` with no container among its
      values: a reference, whose own disposition may claim its uri never, shown by ``walk``
      (:meth:`_Walk.link_view`) under the never claims read so far when its uri has a record,
      else shown once the claims are read, as :meth:`_Walk.show_waiting` shows it.

    These are the views :func:`_plain_view` and :meth:`_Walk.show_waiting` give such blocks,
    and the claims and node counts :func:`_read_block` takes from them. Any other item is read
    by :func:`_read_item`. ``scriptbridge/_fastcontent.c`` is this loop in C.
    """
    seen = claims_walk.seen
    shown = read.shown
    show = shown.append
    link = read.links.append
    wait = read.waiting.append
    never = claims_walk.never
    link_views = walk.record_views
    well_formed = markers.well_formed
    nodes = 0  # counted into claims_walk.nodes before anything else reads it
    for block, holders in zip(blocks, map(getrefcount, blocks), strict=True):
        if type(block) is not dict:  # each one's type is checked before it is read
            claims_walk.count(nodes)
            nodes = 0
            _read_item(claims_walk, read, block)
            continue
        if holders > _ONE_HOLDER:  # another container may hold it: the seen set decides
            key = id(block)
            if key in seen:
                raise NotPlain  # reached twice: a limit, which a strict walk doesn't read past
            seen.add(key)
        kind: object = None
        for name in block:
            if type(name) is not str:
                break  # not looked up: read by _read_block
        else:
            kind = block.get("type")
        if type(kind) is not str:
            pass
        elif kind == "text":
            text = block.get("text")
            if len(block) == 2 and type(text) is str:
                show({"type": "text", "text": text if text.isascii() else well_formed(text)})
                nodes += 2
                continue
        elif kind == "image" or kind == "audio":
            data = block.get("data")
            mime = block.get("mimeType")
            if len(block) == 3 and type(data) is str and type(mime) is str and mime.strip():
                show(
                    {
                        "type": kind,
                        "data": data if data.isascii() else well_formed(data),
                        "mimeType": mime if mime.isascii() else well_formed(mime),
                    }
                )
                nodes += 3
                continue
        elif kind == "resource":
            record = block.get("resource")
            if len(block) == 2 and type(record) is dict and _plain_record(record):
                text = record.get("text")
                if (
                    type(record.get("uri")) is str
                    and type(text) is str
                    and type(record.get("blob")) is not str
                ):
                    show({"type": "text", "text": text if text.isascii() else well_formed(text)})
                    continue  # an embedded resource: no walk reads its fields
        elif kind == "resource_link":
            uri = block.get("uri")
            if type(uri) is str and uri and _scalars(block):
                disposition = block.get("disposition")
                claimed = disposition is not None and (
                    disposition == "never" or is_never(disposition)
                )
                if claimed:
                    never[uri] = None
                else:
                    claimed = uri in never
                view = link_views[claimed].get(uri) or walk.link_view(uri, claimed)
                if view is None:  # no record: shown once the claims are read
                    wait(len(shown))
                    show(block)
                else:
                    if not claimed:
                        link(len(shown))
                    show(view.copy())
                nodes += len(block)
                continue
        claims_walk.count(nodes)
        nodes = 0
        _read_item(claims_walk, read, block)
    return nodes


def _read_item(claims_walk: PlainWalk, read: _ContentRead, item: object) -> None:
    """Read an item of a content array that :func:`_read_blocks` doesn't show at once, and
    show it: a dict (already in the seen set if it needs a place there) by
    :func:`_read_block`; a list or tuple, opened at depth 2 and walked, and any other leaf of
    plain data show as an unknown block; anything else raises :class:`NotPlain`."""
    if type(item) is dict:
        _read_block(claims_walk, item, read)
        return
    if type(item) is list or type(item) is tuple:
        below = claims_walk.open(item, 2)
        claims_walk.count(len(item))
        if below:
            claims_walk.walk(below, 3)
    elif not is_plain_leaf(item):
        raise NotPlain
    read.shown.append(_text(markers.UNKNOWN_BLOCK))  # it classifies as unknown


def _holders_of_one() -> int:
    """What :func:`sys.getrefcount` answers in :func:`_read_content`'s loop (the same ``zip``
    over the content and ``map`` of it) for a dict that its content array alone holds."""
    content: list[dict[str, Any]] = [{}]
    return next(zip(content, map(getrefcount, content), strict=True))[1]


_ONE_HOLDER: Final = _holders_of_one()
"""CPython counts every reference any container holds: a block counted more than this in
:func:`_read_content`'s loop may be held by another container too, and only those need a place
in the claims walk's seen set, since no walk can reach a block its content array alone holds a
second time."""


def _scalars(block: dict[Any, Any]) -> bool:
    """Whether every value of an exact dict is a leaf of plain data (by identity of type)."""
    for value in block.values():
        value_type = type(value)
        if not (
            value_type is str
            or value_type is _NONE_TYPE
            or value_type is int
            or value_type is bool
            or value_type is float
            or value_type is bytes
        ):
            return False
    return True


def _plain_record(record: dict[Any, Any]) -> bool:
    """Whether an exact dict's keys are exact ``str`` and its values plain data (containers
    included, not read): :func:`check_record`'s condition, in the common case."""
    for key, value in record.items():
        if type(key) is not str:
            return False
        value_type = type(value)
        if not (
            value_type is str
            or value_type is _NONE_TYPE
            or value_type is int
            or value_type is bool
            or value_type is float
            or value_type is bytes
            or value_type is dict
            or value_type is list
            or value_type is tuple
        ):
            return False
    return True


def _read_block(claims_walk: PlainWalk, block: dict[Any, Any], read: _ContentRead) -> None:
    """Read one block of a content array (an exact dict, already in the seen set) as
    :func:`_read_content` reads it, and show it."""
    below = plain_children(block)
    if below is None:
        raise NotPlain
    shown = read.shown
    never = claims_walk.never
    kind = block.get("type")
    if type(kind) is not str or kind not in BLOCK_TYPES:
        shown.append(_text(markers.UNKNOWN_BLOCK))  # not a block: it classifies as unknown
    elif kind == "resource_link" and _linked(block):
        # A reference, whose own disposition may claim its uri never, and whose view
        # waits for the claims.
        if is_never(block.get("disposition")):
            never[block["uri"]] = None
        read.waiting.append(len(shown))
        shown.append(block)
    else:
        if kind == "resource":
            check_record(block)  # before its record is read
        view = _plain_view(block, kind)
        if view is not None:
            shown.append(view)
            if kind == "resource":
                return  # an embedded resource: no walk reads its fields
        else:
            classification = classify_block(block)
            if isinstance(classification, Reference | ScriptObject):
                if isinstance(classification, Reference) and classification.never:
                    never[classification.uri] = None
                # Its view waits for the claims; the block waits, not its classification
                # (a classification kept alive is one more object for the garbage
                # collector to scan, which costs more than classifying again).
                read.waiting.append(len(shown))
                shown.append(block)
            else:
                shown.append(_local_view(classification))
                if isinstance(classification, Withheld):
                    if classification.never_uri:
                        never[classification.never_uri] = None
                    if classification.embedded:
                        return  # no walk reads an embedded resource's fields
                elif isinstance(classification, Embedded):
                    return
    claims_walk.count(len(block))
    if below:
        claims_walk.walk(below, 3)


def _linked(block: dict[Any, Any]) -> bool:
    """Whether a ``resource_link`` block of plain data has a uri of its own (an exact non-empty
    ``str``): then it classifies as a reference to that uri, whose ``never`` is
    :func:`is_never` of its ``disposition``."""
    uri = block.get("uri")
    return type(uri) is str and uri != ""


def _plain_view(block: dict[Any, Any], kind: str) -> dict[str, Any] | None:
    """The view of a block of plain data, of a common shape, read without classifying it;
    ``None`` for any other block (classify it).

    The view is the one its classification shows (:func:`_local_view`), and none of these
    blocks claims anything. The shapes: a ``text`` block with a string ``text``; an ``image``
    or ``audio`` block with string ``data``, no disposition (absent or ``None``) and a string
    ``mimeType`` with something in it besides whitespace (inline data); a ``resource`` block
    with no uri of its own, no disposition and a dict ``resource`` with a string ``uri``, a
    string ``text`` and no string ``blob`` (an embedded resource of text, at which the claims
    walk stops). The block's values, and a ``resource`` record's, must be plain data (an
    exact ``str`` is the only string): they are read with no check of their own.
    """
    if kind == "text":
        text = block.get("text")
        return {"type": "text", "text": markers.well_formed(text)} if type(text) is str else None
    if kind == "image" or kind == "audio":
        data = block.get("data")
        if type(data) is str and block.get("disposition") is None:
            mime = block.get("mimeType")
            if type(mime) is str and mime.strip():
                return {
                    "type": kind,
                    "data": markers.well_formed(data),
                    "mimeType": markers.well_formed(mime),
                }
        return None
    if kind == "resource":
        uri = block.get("uri")
        record = block.get("resource")
        if (
            (type(uri) is not str or not uri)
            and type(record) is dict
            and block.get("disposition") is None
        ):
            text = record.get("text")
            if (
                type(record.get("uri")) is str
                and type(text) is str
                and type(record.get("blob")) is not str
            ):
                return {"type": "text", "text": markers.well_formed(text)}
        return None
    return None


_NO_CLAIMS: Final = Claims(frozenset(), (), None)
"""The claims of a result of which none has been read: readable, no never."""


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
    record_views: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]] = field(
        default_factory=lambda: ({}, {})
    )
    """The views :meth:`link_view` made of records in this walk, by uri: of links that no
    never claims (under ``claims``, or under the never claims read so far while those are not
    set), and of links that a never claims."""
    ids: set[str] = field(default_factory=set)
    """The ids of the script objects this walk made."""

    @classmethod
    def of(cls, registry: ReferenceRegistry, top: dict[Any, Any]) -> _Walk:
        memo: dict[int, Classification] = {}
        return cls(registry, read_claims(top, memo), memo)

    def content(self, blocks: object) -> list[dict[str, Any]]:
        if blocks is None:
            return []
        if not isinstance(blocks, list | tuple):
            return [_text(markers.UNKNOWN_BLOCK)]
        try:
            items = children_of(blocks)  # the base type's own iteration, as the claims walk's
        except Exception:  # an object posing as a list (its __class__) can't be iterated so
            return [_text(markers.UNKNOWN_BLOCK)]
        if not self.budget.open(blocks, len(items)):
            return [_text(markers.DATA_TOO_DEEP)]
        return [self._block_at(block) for block in items]

    def _block_at(self, block: object) -> dict[str, Any]:
        if isinstance(block, dict) and not self.budget.visit(block):
            return _text(markers.DATA_TOO_DEEP)
        return self.block(block)

    def value(self, data: object) -> Any:
        """Render a result's data (at depth 1): blocks replaced, dicts and lists walked."""
        return copy_tree(data, 1, self.budget, self.block, keep_bytes=True)

    def plain_value(self, data: object) -> Any:
        """:meth:`value` of data the plain path's claims walk read whole, copied without the
        checks it can't need.

        That walk found every container, leaf and key of exact builtin types and reached no
        limit (no container twice, none too deep, the budget kept), so the copy meets none
        either: the same copy :func:`~scriptbridge._walk.copy_tree` makes (leaves and keys as
        :func:`~scriptbridge._plain.plain_scalar` and :func:`~scriptbridge._plain.plain_key`
        give them, blocks as :meth:`block` shows them), counted into ``budget.copied`` alike.
        """
        well_formed = markers.well_formed
        copied = 0
        holder: list[Any] = [None]
        stack: list[tuple[Any, Any, Any]] = [(data, holder, 0)]
        while stack:
            value, parent, key = stack.pop()
            copied += 1
            kind = type(value)
            if kind is str:
                parent[key] = well_formed(value)
            elif kind is int:
                parent[key] = value if INT_MIN <= value <= INT_MAX else markers.UNREADABLE_VALUE
            elif kind is dict:
                if is_block(value):
                    shown = parent[key] = self.block(value)
                    copied += 2 * len(shown)
                    continue
                chosen: dict[str, Any] = {}
                for name, child in value.items():
                    plain = well_formed(name) if type(name) is str else plain_key(name)
                    if plain is None:
                        break
                    chosen[plain] = child  # a key spelt twice keeps its last value
                else:
                    out = parent[key] = dict.fromkeys(chosen)
                    copied += len(chosen)
                    stack.extend((child, out, name) for name, child in chosen.items())
                    continue
                parent[key] = markers.UNREADABLE_VALUE
            elif kind is list or kind is tuple:
                seq = parent[key] = [None] * len(value)
                stack.extend((child, seq, index) for index, child in enumerate(value))
            else:
                parent[key] = value
        self.budget.copied += copied
        return holder[0]

    def block(self, block: object) -> dict[str, Any]:
        """What one block shows as in a script's view."""
        classification = self.memo.get(id(block))
        if classification is None:
            classification = classify_block(block)
        return self.show(classification)

    def show_waiting(self, block: dict[Any, Any]) -> dict[str, Any]:
        """What a block of plain data that classifies as a reference or a script object shows
        as, on the plain path: a resource link with a uri of its own (see :func:`_linked`) as
        :meth:`show_link` shows it, any other block classified and shown."""
        if block.get("type") == "resource_link" and _linked(block):
            return self.show_link(block, block["uri"], is_never(block.get("disposition")))
        return self.show(classify_block(block))

    def link_view(self, uri: str, never: bool) -> dict[str, Any] | None:
        """The view of a resource link with the uri of its own ``uri`` when ``uri`` has a
        record, ``None`` when it has none; ``never`` says whether a never claims it besides
        this walk's claims. Made once per uri and never flag, kept in :attr:`record_views`:
        the caller shows a copy."""
        record = self.registry.record_for(uri)
        if record is None:
            return None
        shown = show_record(record, self.registry, self.claims, never=never)
        view = self.record_views[never][uri] = self._object(shown)
        return view

    def settle_links(self, blocks: Any, content: list[Any], links: list[int]) -> None:
        """Show again, now that this walk's claims are set, the links :func:`_read_content`
        showed (at ``links`` in ``content``, of ``blocks``) before a never claimed their uri.

        Those views were made under the never claims read so far, and a never read later
        (further on in the content, or in the data) claims their uri too: each such uri's view
        is forgotten and the links of it shown again (:meth:`show_link`). Then every view in
        :attr:`record_views` is the view under this walk's claims.
        """
        unclaimed = self.record_views[False]
        late = [uri for uri in unclaimed if self.claims.names_never(uri)]
        if not late:
            return
        for uri in late:
            del unclaimed[uri]
        for index in links:
            block = blocks[index]
            uri = block["uri"]
            if self.claims.names_never(uri):
                content[index] = self.show_link(block, uri, is_never(block.get("disposition")))

    def show_link(self, block: dict[Any, Any], uri: str, never: bool) -> dict[str, Any]:
        """What a resource link of plain data with the uri of its own ``uri`` shows as, on the
        plain path, ``never`` saying whether its own disposition claims never.

        When ``uri`` has a record, the link is read without classifying it, as
        :func:`show_reference` reads it: its view is the view of that record
        (:func:`show_record`) under this walk's claims and the block's own never. That view
        is made once per uri and never flag in this walk (in :attr:`record_views`), and each
        block gets a copy of it: on the plain path nothing runs between two blocks that could
        change the registry, and this walk's claims don't change. (A registry holds at most
        its capacity of records, so a large result's registered links cost at most that many
        views.) A link whose uri has no record is classified and shown.
        """
        view = self.record_views[never].get(uri) or self.link_view(uri, never)
        return view.copy() if view is not None else self.show(classify_block(block))

    def show(self, classification: Classification) -> dict[str, Any]:
        """What a block of this classification shows as."""
        match classification:
            case Reference() as reference:
                return self._object(show_reference(reference, self.registry, self.claims))
            case ScriptObject(ref_id):
                record = self.registry.get(ref_id)
                if record is None:
                    return _text(markers.UNKNOWN_BLOCK)
                return self._object(show_record(record, self.registry, self.claims))
            case _:
                return _local_view(classification)

    def _object(self, shown: ShownReference) -> dict[str, Any]:
        """The script object of a shown reference, its id noted."""
        if shown.id is not None:
            self.ids.add(shown.id)
        return _script_object(shown)


_Local = Text | Inline | InlineNoMediaType | Withheld | Embedded | NoLink | Unknown
"""The classifications whose view depends on the block alone (not on a registry or claims)."""


def _local_view(classification: _Local) -> dict[str, Any]:
    """What a block of this classification shows as."""
    match classification:
        case Text(text):
            return _text(text)
        case Inline() as inline:
            return _inline(inline)
        case InlineNoMediaType():
            return _text(markers.INLINE_NO_MEDIA_TYPE)
        case Withheld():
            return _text(markers.WITHHELD_DISPOSITION)
        case Embedded(contents=contents):
            return _contents(contents)
        case NoLink():
            return _text(markers.REFERENCE_NO_LINK)
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
