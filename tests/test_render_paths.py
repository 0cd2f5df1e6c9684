"""The fast paths of the script view and the claims walk give what the general paths give.

The script view has a plain path (:func:`scriptbridge._render._render_plain`) for results that
are plain data all through, and a general path for any result; the claims walk likewise
(:func:`scriptbridge._claims.read_plain_claims`). Several helpers have a shortcut for the common
case (plain ASCII text, a uri with nothing to check). Each property here draws hostile inputs
and checks that the fast path either declines or answers exactly what the general path answers:
the same types, the same dict key order, the same values.
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest
from hostile_strategies import HOSTILE_TEXT, REF_URIS, SCALARS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import BLOCK_KINDS, RESULTS, blocks, json_like

from sandbox.protocol import MAX_DATA_NODES, check_plain
from scriptbridge import ReferenceRegistry, _render, markers, render_script_view
from scriptbridge._claims import _read_general, read_claims, read_plain_claims
from scriptbridge._classify import classify_block
from scriptbridge._disclosure import URI_MAX_CHARS, _label, shows_uri
from scriptbridge._plain import plain_children
from scriptbridge._render import (
    ScriptView,
    _local_view,
    _plain_view,
    _render_general,
    _render_plain,
    _Walk,
)
from scriptbridge._walk import MAX_DEPTH

# --- strategies -------------------------------------------------------------------------------

COMMON_BLOCKS = st.one_of(
    st.builds(
        lambda text, extra: {"type": "text", "text": text, **extra},
        st.one_of(HOSTILE_TEXT, SCALARS),
        st.sampled_from([{}, {"_meta": {"k": 1}}, {"annotations": None}]),
    ),
    st.builds(
        lambda kind, data, mime, extra: {"type": kind, "data": data, "mimeType": mime, **extra},
        st.sampled_from(["image", "audio"]),
        st.one_of(st.sampled_from(["", "AAAA", "iVBORw0KGgo="]), SCALARS),
        st.one_of(st.sampled_from(["image/png", "", " ", "\t", "audio/wav", "x"]), SCALARS),
        st.sampled_from(
            [
                {},
                {"disposition": None},
                {"disposition": "never"},
                {"disposition": "ref"},
                {"disposition": ""},
                {"uri": "ref:007/x", "disposition": " Never "},
                {"uri": "ref:008/x"},
            ]
        ),
    ),
    st.builds(
        lambda record, extra: {"type": "resource", "resource": record, **extra},
        st.fixed_dictionaries(
            {},
            optional={
                "uri": st.one_of(st.sampled_from(["emb:001/x", "", "ref:009/x"]), SCALARS),
                "text": st.one_of(HOSTILE_TEXT, SCALARS),
                "blob": st.one_of(st.sampled_from(["", "AAAA"]), SCALARS),
                "mimeType": st.sampled_from(["image/png", "text/plain", "", "audio/x"]),
            },
        ),
        st.sampled_from(
            [
                {},
                {"uri": ""},
                {"uri": None},
                {"uri": 5},
                {"uri": "ref:010/x"},
                {"disposition": None},
                {"disposition": "never"},
                {"disposition": "NEVER "},
            ]
        ),
    ),
    st.builds(
        lambda uri, extra: {"type": "resource_link", "uri": uri, **extra},
        st.one_of(REF_URIS, st.sampled_from(["", "https://u:p@h/ref:905/x", "ref:011/x?q"])),
        st.fixed_dictionaries(
            {},
            optional={
                "name": st.one_of(HOSTILE_TEXT, SCALARS),
                "disposition": st.sampled_from(["never", None, "ref", " NEVER"]),
                "mimeType": st.sampled_from(["text/plain", "", None]),
                "size": st.sampled_from([0, 12, -1, True, None]),
            },
        ),
    ),
    st.builds(
        lambda ref_id: {"type": "reference", "id": ref_id},
        st.sampled_from(["ref_forged", "", None]),
    ),
)
"""Blocks of the shapes the plain path reads without classifying, and their near misses."""

LINK_URIS = st.sampled_from(["ref:001/x", "ref:002/x", "https://h/ref:003/x", "ref:004/x?q"])
"""A few uris, so that links share records and a never of one link claims another's uri."""

FAST_BLOCKS = st.one_of(
    COMMON_BLOCKS,
    st.builds(
        lambda uri, extra: {"type": "resource_link", "uri": uri, **extra},
        LINK_URIS,
        st.fixed_dictionaries(
            {},
            optional={
                "name": st.one_of(HOSTILE_TEXT, SCALARS, LINK_URIS),
                "disposition": st.one_of(st.sampled_from(["never", " Never", None]), SCALARS),
                "_meta": st.just({"k": [1]}),
            },
        ),
    ),
    st.builds(
        lambda uri, disposition: {
            "type": "image",
            "uri": uri,
            "mimeType": "image/png",
            "disposition": disposition,
        },
        LINK_URIS,
        st.sampled_from(["never", None]),
    ),
)
"""Blocks of the shapes the content's loop shows at once, their near misses, and links (and
by-uri images) that claim one another's uris never."""

FAST_RESULTS = st.fixed_dictionaries(
    {"content": st.lists(FAST_BLOCKS, max_size=12)},
    optional={
        "structuredContent": json_like(FAST_BLOCKS),
        "_meta": st.one_of(FAST_BLOCKS, st.lists(FAST_BLOCKS, max_size=3)),
    },
)
"""Results whose content holds dicts only (the content's loop never meets another item)."""

COMMON_RESULTS = st.fixed_dictionaries(
    {"content": st.one_of(st.lists(st.one_of(COMMON_BLOCKS, SCALARS), max_size=10), SCALARS)},
    optional={
        "structuredContent": json_like(st.one_of(COMMON_BLOCKS, blocks(tuple(BLOCK_KINDS)))),
        "isError": SCALARS,
        "_meta": json_like(st.one_of(COMMON_BLOCKS, SCALARS)),
    },
)


class Tracer:
    """Records each call of its hooks: a value whose code must not run on the plain path."""

    calls: list[str] = []  # noqa: RUF012 (shared on purpose: every instance records here)

    def __eq__(self, other: object) -> bool:
        Tracer.calls.append("__eq__")
        return False

    def __hash__(self) -> int:
        Tracer.calls.append("__hash__")
        return hash("type")  # collides with the key every walk looks up

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        Tracer.calls.append("__class__")
        # Not ``str``: a value that claims to be one raises in the general path's well_formed
        # (a gap older than the plain path, and not this test's subject).
        return Tracer


class TracedStr(str):
    def __eq__(self, other: object) -> bool:
        Tracer.calls.append("str.__eq__")
        return str.__eq__(self, other)

    def __hash__(self) -> int:
        Tracer.calls.append("str.__hash__")
        return str.__hash__(self)

    def strip(self, chars: str | None = None) -> str:
        Tracer.calls.append("strip")
        return str.strip(self, chars)


class TracedDict(dict[Any, Any]):
    def get(self, *args: Any) -> Any:
        Tracer.calls.append("get")
        return dict.get(self, *args)


class TracedList(list[Any]):
    def __iter__(self) -> Any:
        Tracer.calls.append("__iter__")
        return list.__iter__(self)


def _traced_leaf(tag: int) -> Any:
    return [Tracer(), TracedStr("text"), TracedStr("never")][tag % 3]


@st.composite
def foreign_results(draw: st.DrawFn) -> Any:
    """A common result with one value somewhere a walk reads replaced by one whose code would
    run. No walk reads below an embedded resource's record's own values (the classifier reads
    those, its uri, contents and mime type, and nothing deeper), so no spot is picked there."""
    result: Any = draw(COMMON_RESULTS)
    spots: list[tuple[Any, Any]] = []
    stack: list[Any] = [result]
    while stack:
        value = stack.pop()
        if type(value) is dict:
            spots.extend((value, key) for key in value)
            record = value.get("resource") if value is not result else None
            if value.get("type") == "resource" and type(record) is dict:
                spots.extend((record, key) for key in record)  # its values, not below them
                stack.extend(v for k, v in value.items() if k != "resource")
                continue
            stack.extend(value.values())
        elif type(value) is list:
            spots.extend((value, index) for index in range(len(value)))
            stack.extend(value)
    how = draw(st.sampled_from(["leaf", "key", "dict", "list"]))
    if how == "key" or not spots:
        target = draw(st.sampled_from([result, *[c for c, _ in spots if type(c) is dict]]))
        if type(target) is dict:
            target[Tracer()] = 1
        return result
    container, key = draw(st.sampled_from(spots))
    value = container[key]
    if how == "dict" and type(value) is dict:
        container[key] = TracedDict(value)
    elif how == "list" and type(value) is list:
        container[key] = TracedList(value)
    else:
        container[key] = _traced_leaf(draw(st.integers(0, 2)))
    return result


# --- checks -----------------------------------------------------------------------------------


def assert_same(a: Any, b: Any, path: str = "") -> None:
    """``a`` and ``b`` are the same plain data: same types, dict key order and values."""
    assert type(a) is type(b), (path, a, b)
    if type(a) is dict:
        assert list(a) == list(b), (path, list(a), list(b))
        for key in a:
            assert_same(a[key], b[key], f"{path}/{key!r}")
    elif type(a) is list:
        assert len(a) == len(b), (path, a, b)
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{index}]")
    elif type(a) is float and math.isnan(a):
        assert math.isnan(b), path
    else:
        assert a == b, (path, a, b)


def ingested(results: list[Any], data: st.DataObject) -> ReferenceRegistry:
    """A registry that ingested ``results``, some of their records saved."""
    reg = ReferenceRegistry()
    reg.set_removal_hook(lambda path: None)
    for result in results:
        for record in reg.ingest(result, server=data.draw(st.sampled_from(["a", "b"]))):
            if data.draw(st.booleans()):
                reg.record_saved(record, f"refs/{record.id}.bin", 1, "0" * 64)
    return reg


def counted_nodes(view: Any) -> int:
    """A value's size as ``check_plain`` counts it: one per container, leaf and dict key."""
    nodes, stack = 0, [view]
    while stack:
        item = stack.pop()
        nodes += 1
        if type(item) is dict:
            nodes += len(item)
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return nodes


def script_object_ids(view: Any) -> set[str]:
    """The ids of the script objects anywhere in a view, found by walking it."""
    found, stack = set(), [view]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            if item.get("type") == "reference" and type(item.get("id")) is str:
                found.add(item["id"])
            else:
                stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return found


def check_what_the_render_learnt(done: ScriptView) -> None:
    """What the renderer says of its view is what a walk of the view finds, and a view within
    the node bound passes the protocol's own check of plain data."""
    assert done.nodes == counted_nodes(done.view)
    assert done.reference_ids == script_object_ids(done.view)
    if done.nodes <= MAX_DATA_NODES:
        check_plain(done.view)


LOOPS = ["python"] if _render._compiled_read_blocks is None else ["compiled", "python"]
"""The content loops the plain path can take here: the compiled one when it was built."""


@contextmanager
def content_loop(which: str) -> Iterator[None]:
    """Within it, the plain path reads a content array with the loop named (see LOOPS)."""
    compiled = _render._compiled_read_blocks
    if which == "python":
        _render._compiled_read_blocks = None
    try:
        yield
    finally:
        _render._compiled_read_blocks = compiled


def read_as(result: Any) -> list[Any]:
    """A result as drawn, a deep copy of it (its blocks held by nothing but the result, as in
    a result decoded from JSON; its sharing kept), and that copy with its content as a tuple
    (as a Python tool may hand it)."""
    readings = [result, copy.deepcopy(result)]
    as_tuple = copy.deepcopy(result)
    if type(as_tuple) is dict and type(as_tuple.get("content")) is list:
        as_tuple["content"] = tuple(as_tuple["content"])
        readings.append(as_tuple)
    return readings


COMPARED: Counter[str] = Counter()
"""How many readings of the property running now the plain paths took (``render``: the plain
view compared with the general one; ``claims``: the plain claims with the general ones;
``view``: a block's plain view with its classification's)."""


def compared(*kinds: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """The property it decorates (a Hypothesis test) as a test that also fails unless each of
    ``kinds`` was counted in :data:`COMPARED` over its examples: were the plain paths to
    decline every one, nothing would have been compared."""

    def decorate(prop: Callable[[], None]) -> Callable[[], None]:
        def test() -> None:
            COMPARED.clear()
            prop()
            for kind in kinds:
                assert COMPARED[kind] > 0, f"no {kind} was compared: {dict(COMPARED)}"

        test.__name__, test.__doc__ = prop.__name__, prop.__doc__
        return test

    return decorate


def check_paths_agree(results: list[Any], reg: ReferenceRegistry) -> None:
    """Each result renders and reads the same on both paths, the plain one with each content
    loop (the two decline alike); counts in :data:`COMPARED` the readings the plain paths
    took. Each is read in each of its forms (:func:`read_as`)."""
    for result in [item for drawn in results for item in read_as(drawn)]:
        general = _render_general(result, reg)
        check_what_the_render_learnt(general)
        declined = set()
        for loop in LOOPS:
            with content_loop(loop):
                plain = _render_plain(result, reg)
            declined.add(plain is None)
            if plain is not None:
                COMPARED["render"] += 1
                assert_same(plain.view, general.view)
                assert (plain.nodes, plain.reference_ids) == (general.nodes, general.reference_ids)
        assert len(declined) == 1, "one content loop declined where the other didn't"
        assert_same(render_script_view(result, reg), general.view)
        claims = read_plain_claims(result)
        if claims is not None:
            COMPARED["claims"] += 1
            assert claims == _read_general(result, None)
        assert read_claims(result) == _read_general(result, None)


SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@compared("render", "claims")
@SETTINGS
@given(st.lists(st.one_of(RESULTS, COMMON_RESULTS), min_size=1, max_size=3), st.data())
def test_plain_path_renders_and_reads_as_the_general_path(
    results: list[Any], data: st.DataObject
) -> None:
    """On hostile plain data, the plain path's view and claims are the general path's."""
    check_paths_agree(results, ingested(results, data))


def without_nevers(value: Any) -> Any:
    """A copy of plain data with every ``disposition`` dropped: a result whose ingestion
    registers the same references and marks none of them."""
    if type(value) is dict:
        return {k: without_nevers(v) for k, v in value.items() if k != "disposition"}
    if type(value) is list:
        return [without_nevers(item) for item in value]
    return value


@compared("render", "claims")
@SETTINGS
@given(st.lists(FAST_RESULTS, min_size=1, max_size=3), st.data())
def test_links_render_as_the_general_path_under_claims_the_registry_never_read(
    results: list[Any], data: st.DataObject
) -> None:
    """Rendered before its own ingestion, against records that a copy of it without its
    nevers registered (or that nothing registered), a result whose links claim one another's
    uris never, earlier or later in the content or in the data, renders and reads as the
    general path renders and reads it."""
    registered = [without_nevers(result) for result in results if data.draw(st.booleans())]
    check_paths_agree(results, ingested(registered, data))


@compared("render", "claims")
@SETTINGS
@given(st.lists(FAST_RESULTS, min_size=1, max_size=3), st.data())
def test_dict_contents_render_as_the_general_path(results: list[Any], data: st.DataObject) -> None:
    """A content array of dicts only, of the shapes the content's loop shows at once and
    their near misses, renders and reads as the general path renders and reads it."""
    check_paths_agree(results, ingested(results, data))


@compared("render", "claims")
@SETTINGS
@given(st.lists(st.one_of(COMMON_RESULTS, FAST_RESULTS), min_size=1, max_size=2), st.data())
def test_shared_deep_and_cyclic_plain_data_agree(results: list[Any], data: st.DataObject) -> None:
    """Results that reach a walk limit (a shared container, a cycle, deep nesting, a block
    listed twice) render and read the same on both paths, the plain one declining or not."""
    reg = ingested(results, data)
    for result in results:
        blocks_ = result.get("content")
        trick = data.draw(st.sampled_from(["share", "cycle", "deep", "twice", "data"]))
        if trick == "share" and type(blocks_) is list and blocks_:
            result["_meta"] = blocks_[0]
        elif trick == "cycle":
            loop: list[Any] = [{"type": "resource_link", "uri": "ref:020/x"}]
            loop.append(loop)
            result["_meta"] = loop
        elif trick == "deep":
            nested: Any = data.draw(COMMON_BLOCKS)
            for _ in range(data.draw(st.integers(MAX_DEPTH - 3, MAX_DEPTH + 1))):
                nested = [nested]
            result["structuredContent"] = nested
        elif trick == "twice" and type(blocks_) is list and blocks_:
            blocks_.append(blocks_[0])
        elif trick == "data":
            result["structuredContent"] = blocks_
    check_paths_agree(results, reg)


@SETTINGS
@given(foreign_results(), st.data())
def test_plain_path_declines_before_running_anything_of_the_result(
    result: Any, data: st.DataObject
) -> None:
    """A result holding a value whose own code could run (a hook on ``__eq__``, ``__hash__``,
    ``__class__``, a dict subclass's ``get``, a list subclass's ``__iter__``) is declined by
    the plain paths before any of that code runs, and both paths still agree."""
    reg = ReferenceRegistry()
    Tracer.calls.clear()
    assert read_plain_claims(result) is None
    for loop in LOOPS:
        with content_loop(loop):
            assert _render_plain(result, reg) is None
    assert Tracer.calls == []
    assert_same(render_script_view(result, reg), _render_general(result, reg).view)
    assert read_claims(result) == _read_general(result, None)


@pytest.mark.parametrize("where", ["structuredContent", "content", "_meta"])
@pytest.mark.parametrize("leaf", [0, 1, 2])
def test_what_lies_below_an_embedded_record_is_never_read(where: str, leaf: int) -> None:
    """A value whose own code could run, below an embedded resource's record's own values
    (where no walk reads), runs nothing on either path, and both paths agree; the plain paths
    take such a result (found by hypothesis: they did, and that is right)."""
    block = {
        "type": "resource",
        "resource": {"uri": "emb:1/x", "text": "t", "_meta": {"inner": [_traced_leaf(leaf)]}},
    }
    result: dict[str, Any] = {"content": []}
    result[where] = [block] if where == "content" else block
    reg = ReferenceRegistry()
    Tracer.calls.clear()
    plain_claims = read_plain_claims(result)
    plain_view = _render_plain(result, reg)
    general_view = _render_general(result, reg)
    assert read_claims(result) == _read_general(result, None)
    assert Tracer.calls == []
    assert plain_claims is not None and plain_view is not None, "the plain paths declined"
    assert plain_claims == _read_general(result, None)
    assert_same(plain_view.view, general_view.view)


@compared("view")
@SETTINGS
@given(st.one_of(COMMON_BLOCKS, blocks()))
def test_plain_view_is_the_view_of_the_classification(block: dict[str, Any]) -> None:
    """A block the plain path shows without classifying it shows what its classification
    shows, and that classification claims nothing (the claims walk doesn't note it)."""
    record = block.get("resource")
    if plain_children(block) is None or (type(record) is dict and plain_children(record) is None):
        return  # not plain data: the plain path never reads it
    kind = block.get("type")
    if type(kind) is not str:
        return
    view = _plain_view(block, kind)
    if view is None:
        return  # shown only once classified
    COMPARED["view"] += 1
    classification = classify_block(block)
    assert type(classification).__name__ in {"Text", "Inline", "Embedded"}
    assert_same(view, _local_view(classification))  # type: ignore[arg-type]


@SETTINGS
@given(st.lists(COMMON_BLOCKS, min_size=1, max_size=6), st.data())
def test_waiting_views_are_the_views_of_the_classification(
    content: list[Any], data: st.DataObject
) -> None:
    """A reference shown after the claims are read (its view made once per record) shows what
    its classification shows, each time as a dict of its own."""
    result = {"content": content}
    reg = ingested([result], data)
    walk = _Walk(reg, read_claims(result), {})
    for block in content:
        if plain_children(block) is None or type(block.get("type")) is not str:
            continue
        expected = walk.show(classify_block(block))
        first, again = walk.show_waiting(block), walk.show_waiting(block)
        assert_same(first, expected)
        assert_same(again, expected)
        assert first is not again


def test_the_compiled_content_loop_is_built() -> None:
    """An install builds the compiled content loop (``hatch_build.py``), so the tests here
    check it against the Python loop: its absence fails, unless ``SCRIPTBRIDGE_PURE_PYTHON``
    is set (a machine with no C compiler, whose tests then check the Python loop alone)."""
    if _render._compiled_read_blocks is None:
        reason = "scriptbridge._fastcontent is not built (python hatch_build.py builds it)"
        if not os.environ.get("SCRIPTBRIDGE_PURE_PYTHON"):
            pytest.fail(f"{reason}; set SCRIPTBRIDGE_PURE_PYTHON=1 to test the Python loop alone")
        pytest.skip(reason)


EDGE_BLOCKS: dict[str, dict[str, Any]] = {
    "text": {"type": "text", "text": "t"},
    "image": {"type": "image", "data": "AAAA", "mimeType": "image/png"},
    "embedded": {"type": "resource", "resource": {"uri": "emb:001/x", "text": "t"}},
    "link": {"type": "resource_link", "uri": "https://h/ref:012/x", "name": "n"},
    "other": {"type": "text", "text": "t", "annotations": None},
}


@pytest.mark.parametrize("over", [0, 1])
@pytest.mark.parametrize("kind", list(EDGE_BLOCKS))
def test_the_node_budget_is_kept_alike_at_its_edge(kind: str, over: int) -> None:
    """A result whose claims walk counts exactly the node budget, or one node past it (its
    ``_meta`` padded to it), renders as the general path renders it, on each content loop: a
    result past it fails closed (its link shows ``UNREADABLE_RESULT``), whichever blocks of a
    common shape its content holds."""
    link = {"type": "resource_link", "uri": "https://h/ref:013/x", "name": "n"}
    content = [copy.deepcopy(EDGE_BLOCKS[kind]) for _ in range(3)] + [link]
    counted = 1 + 2 + len(content)  # the result, its two fields, the content's blocks
    counted += sum(len(block) for block in content if block["type"] != "resource")
    result: dict[str, Any] = {"content": content, "_meta": [0] * (MAX_DATA_NODES - counted + over)}
    reg = ReferenceRegistry()
    reg.ingest(copy.deepcopy({"content": content}), server="s")
    assert (read_claims(result).unreadable is not None) == bool(over)
    general = _render_general(result, reg)
    assert ("uri" in general.view["content"][-1]) != bool(over)
    for loop in LOOPS:
        with content_loop(loop):
            plain = _render_plain(result, reg)
        if plain is not None:
            assert_same(plain.view, general.view)
    assert_same(render_script_view(result, reg), general.view)


def test_a_plain_result_takes_the_plain_path() -> None:
    """The common case (decoded JSON) is read by the plain path."""
    result = {
        "content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "mem://1", "text": "t"}},
            {"type": "resource_link", "uri": "https://x/1", "name": "a.txt"},
        ],
        "structuredContent": {
            "rows": [{"n": 1}, {"link": {"type": "resource_link", "uri": "x:2"}}]
        },
    }
    reg = ReferenceRegistry()
    reg.ingest(result, server="s")
    done = _render_plain(result, reg)
    assert done is not None
    assert_same(done.view, _render_general(result, reg).view)
    assert read_plain_claims(result) is not None


# --- the helpers' shortcuts ---------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def full_well_formed(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


def full_clean_label(text: str, limit: int) -> str:
    """:func:`markers.clean_label` without its shortcut for text that needs no cleaning."""
    visible = markers._invisible().sub("", text)
    collapsed = re.sub(r"\s+", " ", visible).strip()
    return full_well_formed(collapsed[:limit])


def full_shows_uri(uri: str) -> bool:
    """:func:`shows_uri` without its shortcut for plain ASCII uris."""
    if len(uri) > URI_MAX_CHARS or "?" in uri or "#" in uri:
        return False
    if full_clean_label(uri, URI_MAX_CHARS) != uri or any(c.isspace() for c in uri):
        return False
    try:
        parts = urlsplit(uri)
    except ValueError:
        return False
    return "@" not in parts.netloc


def full_label(text: str | None, uri: str, limit: int) -> str | None:
    """:func:`scriptbridge._disclosure._label` without its shortcut for labels that need no
    cleaning."""
    if text is None:
        return None
    full = full_clean_label(text, len(text))
    if not full or uri in text or uri in full:
        return None
    cleaned_uri = full_clean_label(uri, len(uri))
    if cleaned_uri and cleaned_uri in full:
        return None
    return full[:limit]


ASCII_ISH = st.text(
    alphabet=st.one_of(
        st.characters(min_codepoint=0, max_codepoint=0x7F),
        st.sampled_from([" ", "\t", "\u00a0", "\u200b", "\u202e", "\ud800", "é", "@", "[", "]"]),
    ),
    max_size=16,
)
TEXTS = st.one_of(HOSTILE_TEXT, ASCII_ISH, st.sampled_from(["", " ", "a  b", " a", "a ", "a b"]))
URIS = st.one_of(
    ASCII_ISH.map(lambda rest: "https://h/" + rest),
    ASCII_ISH,
    st.sampled_from(
        [
            "http://[::1]/x",
            "http://[::1/x",
            "http://::1]/x",
            "http://[v1.x]/y",
            "http://[vz]/y",
            "http://[1.2.3.4]/y",
            "https://u@h/x",
            "https://h/p@x",
            "//a@b/c",
            "mailto:a@b",
            "https://\u2100/x",
            "https://h/" + "a" * URI_MAX_CHARS,
        ]
    ),
)


@settings(max_examples=1500, deadline=None)
@given(TEXTS, st.integers(0, 30))
def test_text_shortcuts_agree_with_the_full_forms(text: str, limit: int) -> None:
    """well_formed and clean_label answer, on every text, what their full forms answer."""
    assert markers.well_formed(text) == full_well_formed(text)
    assert markers.clean_label(text, limit) == full_clean_label(text, limit)
    if markers.is_clean(text):
        assert full_clean_label(text, len(text)) == text


@settings(max_examples=1500, deadline=None)
@given(URIS, st.one_of(st.none(), TEXTS, URIS))
def test_uri_shortcuts_agree_with_the_full_forms(uri: str, label: str | None) -> None:
    """shows_uri and a label's cleaning answer, on every uri, what their full forms answer."""
    assert shows_uri(uri) == full_shows_uri(uri)
    assert _label(label, uri, 200) == full_label(label, uri, 200)
    if label is not None:
        assert _label(uri + label, uri, 200) is None


@pytest.mark.parametrize("path", ["plain", "general"])
def test_a_key_spelt_twice_gives_no_hidden_reference(path: str) -> None:
    """Keys 1 and "1" are one key of the view, holding the last value: a reference under the
    first one is in no view, so it is no id the script was given, and the view's size counts
    what is in it."""
    link = {"type": "resource_link", "uri": "https://a.example/x", "name": "x"}
    result: dict[str, Any] = {"content": [], "structuredContent": {1: link, "1": "b"}}
    reg = ReferenceRegistry()
    reg.ingest(result, server="s")
    done = _render_plain(result, reg) if path == "plain" else _render_general(result, reg)
    assert done is not None
    assert done.view["data"] == {"1": "b"}
    check_what_the_render_learnt(done)
    assert done.reference_ids == frozenset()
