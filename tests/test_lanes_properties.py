"""Property tests for the model's lanes over hostile results (SPEC sections 6.2 and 7).

Uris come from pools whose every member holds ``:``, and no generated text, name, media type or
key does, so a leak is a plain substring: ``emb:`` uris are used only by embedded resources,
``ref:`` uris by references, by-uri media and embedded resources' never claims, and credential
uris carry ``ref:90N``. No model lane shows any reference's uri, so none of them may appear.
Uris sit only in blocks (at depth, a dict whose ``type`` is a block type), never in plain data,
which every lane shows as it is.
"""

from __future__ import annotations

import json
from typing import Any

from hostile_strategies import (
    ABSENT,
    CREDENTIAL_URIS,
    DISPOSITIONS,
    EMB_URIS,
    HOSTILE_TEXT,
    MIMES,
    REF_URIS,
    SCALARS,
    maybe,
    strings_in,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scriptbridge import ReferenceRegistry
from scriptbridge._walk import MAX_DEPTH
from scriptbridge.lanes import (
    convert_push,
    is_visibly_empty,
    live_copy,
    shows_as_itself,
    stored_copy,
    withheld_copy,
)

ALL_URIS = (
    [f"ref:{n:03d}/x" for n in range(31)]
    + [f"emb:{n:03d}/x" for n in range(31)]
    + ["ref:900/x", "ref:901/x", "ref:902/x", "pw@", "sig=1"]
)
DATA = st.one_of(st.sampled_from(["", "AAAA", "iVBORw0KGgo=", "A" * 400, " "]), SCALARS)


class RaisingDict(dict[str, Any]):
    """A Python tool's dict whose reads raise."""

    def get(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("hostile")

    def items(self) -> Any:
        raise RuntimeError("hostile")


class RaisingList(list[Any]):
    """A Python tool's list whose iteration raises."""

    def __iter__(self) -> Any:
        raise RuntimeError("hostile")


HOSTILE_OBJECTS = st.sampled_from(["dict", "list", "object"]).map(
    lambda kind: (
        RaisingDict(type="text", text="x")
        if kind == "dict"
        else RaisingList([1])
        if kind == "list"
        else object()
    )
)


@st.composite
def blocks(draw: st.DrawFn, at_depth: bool = False) -> dict[str, Any]:
    """A block with any mix of fields; at depth only block types, so it is read as a block."""
    kinds = ["text", "image", "audio", "resource", "resource_link", "reference"]
    kind = draw(st.sampled_from(kinds if at_depth else [*kinds, "video", 5]))
    fields: dict[str, Any] = {"type": kind}
    uri = st.one_of(REF_URIS, CREDENTIAL_URIS, st.sampled_from(["", None]), SCALARS)
    candidates: dict[str, st.SearchStrategy[Any]] = {
        "text": st.one_of(HOSTILE_TEXT, SCALARS),
        "data": DATA,
        "uri": uri,
        "mimeType": MIMES,
        "name": st.one_of(HOSTILE_TEXT, SCALARS),
        "size": st.one_of(st.integers(-5, 10**12), SCALARS),
        "disposition": DISPOSITIONS,
        "id": st.one_of(st.sampled_from(["ref_forged", ""]), SCALARS),
        "resource": st.one_of(
            st.fixed_dictionaries(
                {"uri": st.one_of(EMB_URIS, REF_URIS, st.just(""), SCALARS)},
                optional={
                    "text": st.one_of(HOSTILE_TEXT, SCALARS),
                    "blob": DATA,
                    "mimeType": MIMES,
                    "_meta": st.builds(
                        lambda u: {
                            "inner": {"type": "resource_link", "uri": u, "disposition": "never"}
                        },
                        REF_URIS,
                    ),
                },
            ),
            SCALARS,
        ),
    }
    for name, strategy in candidates.items():
        value = draw(maybe(strategy))
        if value is not ABSENT:
            fields[name] = value
    if kind != "resource" and isinstance(fields.get("resource"), dict):
        # Outside a resource block, "resource" is an ordinary field: keep embedded uris out.
        fields["resource"]["uri"] = draw(REF_URIS)
    return fields


LEAVES = st.one_of(SCALARS, blocks(at_depth=True), HOSTILE_OBJECTS)


def nested(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(
                st.one_of(HOSTILE_TEXT, st.integers(), st.booleans()), inner, max_size=4
            ),
        ),
        max_leaves=20,
    )


@st.composite
def hostile_data(draw: st.DrawFn) -> Any:
    """Nested data, maybe wrapped past the depth limit, maybe with shared or cyclic containers."""
    data = draw(nested(LEAVES))
    levels = draw(st.sampled_from([0, 0, 3, MAX_DEPTH - 2, MAX_DEPTH + 1, MAX_DEPTH + 60]))
    for _ in range(levels):
        data = {"d": data} if draw(st.booleans()) else [data]
    shape = draw(st.sampled_from(["plain", "shared", "cycle"]))
    if shape == "shared":
        data = {"a": data, "b": data, "c": [data]}
    elif shape == "cycle":
        loop: list[Any] = [data]
        loop.append(loop)
        data = {"loop": loop}
    return data


RESULTS = st.fixed_dictionaries(
    {
        "content": st.one_of(
            st.lists(st.one_of(blocks(), SCALARS, HOSTILE_OBJECTS), max_size=8), SCALARS
        )
    },
    optional={
        "structuredContent": hostile_data(),
        "isError": st.one_of(st.booleans(), SCALARS),
        "_meta": nested(st.one_of(SCALARS, blocks(at_depth=True))),
    },
)


def check(output: Any, reg: ReferenceRegistry, saved: dict[str, str]) -> None:
    """No uri of any reference or embedded resource, no marked record's saved path; well formed."""
    secret_paths = [path for uri, path in saved.items() if reg.is_marked(uri)]
    for text in strings_in(output):
        text.encode("utf-8")  # well formed
        for uri in ALL_URIS:
            assert uri not in text, (uri, text)
        for path in secret_paths:
            assert path not in text, (path, text)


def check_blocks(output: list[dict[str, Any]]) -> None:
    """Each block is MCP-shaped: a text block, or native image or audio data with its type."""
    for block in output:
        if block["type"] == "text":
            assert set(block) == {"type", "text"} and isinstance(block["text"], str)
        else:
            assert block["type"] in ("image", "audio"), block
            assert set(block) == {"type", "data", "mimeType"}, block


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RESULTS, min_size=1, max_size=3), st.data())
def test_hostile_results_on_every_lane(results: list[dict[str, Any]], data: st.DataObject) -> None:
    """No lane raises, leaks a uri or a marked record's saved path, or shows ill-formed text."""
    reg = ReferenceRegistry()
    reg.set_removal_hook(lambda path: None)
    saved: dict[str, str] = {}
    # Records saved before any never lands, so a later mark has a path to forget.
    uris = data.draw(st.lists(REF_URIS, max_size=4))
    for record in reg.ingest(
        {"content": [{"type": "resource_link", "uri": u} for u in uris]}, server="a"
    ):
        path = f"refs/{record.id}.bin"
        if reg.record_saved(record, path, 1, "0" * 64):
            saved[record.uri] = path
    for result in results:
        if data.draw(st.booleans()):
            reg.ingest(result, server=data.draw(st.sampled_from(["a", "b", None])))
    before = {
        uri: (r.payload_never, r.saved_path)
        for uri in uris
        if (r := reg.record_for(uri)) is not None
    }
    cap = data.draw(st.integers(1, 300))
    position = data.draw(st.sampled_from([None, "system", "user"]))
    for result in results:
        content = result.get("content")
        check(stored_copy(result, reg), reg, saved)
        live = live_copy(result, reg, cap=cap)
        check(live, reg, saved)
        if isinstance(live, list):
            check_blocks(live)
            for block in live:
                if block["type"] == "text":
                    assert len(block["text"]) <= cap or block["text"].startswith("[")
        pushed = convert_push(content, reg, position=position)
        check(pushed, reg, saved)
        check_blocks(pushed)
        if position == "system":
            assert all(block["type"] == "text" for block in pushed)
        check(withheld_copy(result, reg, ["a", "b", "loop", "d"]), reg, saved)
        assert isinstance(is_visibly_empty(content), bool)
        if isinstance(content, list):
            for block in content:
                assert isinstance(shows_as_itself(block), bool)
    after = {
        uri: (r.payload_never, r.saved_path)
        for uri in uris
        if (r := reg.record_for(uri)) is not None
    }
    assert after == before  # lanes are pure


@settings(max_examples=60, deadline=None)
@given(st.integers(MAX_DEPTH - 3, MAX_DEPTH + 30), REF_URIS, st.booleans(), st.booleans())
def test_never_near_the_depth_limit_never_leaks(
    levels: int, uri: str, as_dict: bool, embedded_never: bool
) -> None:
    """A never nested near or past the limit shows its link as a never or unreadable stub."""
    never: Any = (
        {"type": "resource", "resource": {"uri": uri, "text": "t"}, "disposition": "never"}
        if embedded_never
        else {"type": "resource_link", "uri": uri, "disposition": "never"}
    )
    for _ in range(levels):
        never = {"k": never} if as_dict else [never]
    result = {"content": [{"type": "resource_link", "uri": uri}], "structuredContent": never}
    reg = ReferenceRegistry()
    (record,) = reg.ingest(result, server="s")
    out = stored_copy(result, reg)
    assert uri not in out
    assert out.endswith(
        (
            "a server asked that its content never reach you or your tools]",
            "so nothing in it is fetched]",
        )
    )
    assert json.dumps(live_copy(result, reg)).count(uri) == 0
    assert record.payload_never or record.unreadable


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(blocks(), SCALARS), max_size=6))
def test_visibly_empty_agrees_with_the_push_lane(content: list[Any]) -> None:
    """Content is visibly empty exactly when the push lane shows nothing but blank text."""
    reg = ReferenceRegistry()
    pushed = convert_push(content, reg)
    blank = all(
        block["type"] == "text"
        and not "".join(ch for ch in block["text"] if ch.isprintable() and not ch.isspace())
        for block in pushed
    )
    assert is_visibly_empty(content) == blank
