"""Property tests over hostile tool results: the SPEC section 7 invariants of the pure core.

Uris come from two disjoint pools so a leak is a plain substring: ``emb:`` uris are used only
by embedded resources (never shown anywhere), ``ref:`` uris by references and by embedded
resources' never claims (shown only while unmarked, unless they carry a credential).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scriptbridge import SCRIPT_VIEW, ReferenceRegistry, classify_block, render_script_view
from scriptbridge._walk import MAX_DEPTH

HOSTILE_TEXT = st.text(
    alphabet=st.characters(categories=["L", "N", "P", "Zs", "Cc", "Cf", "Cs"]), max_size=12
)
REF_URIS = st.integers(0, 30).map(lambda n: f"ref:{n:03d}/x")
EMB_URIS = st.integers(0, 30).map(lambda n: f"emb:{n:03d}/x")
CREDENTIAL_URIS = st.sampled_from(
    ["https://user:pw@h/ref:900/x", "https://h/ref:901/x?sig=1", "https://h/ref:902/x#fr4gment"]
)
ANY = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), HOSTILE_TEXT, st.binary(max_size=4)
)
DISPOSITIONS = st.one_of(
    st.sampled_from(["never", "NEVER", " never ", "ref", "", "inline", None]), ANY
)
MIMES = st.one_of(
    st.sampled_from(
        [
            "image/png",
            "Image/PNG",
            "audio/wav",
            "application/pdf",
            "image",
            "image/",
            "image/svg+xml",
            "text/plain",
            "",
            "image/\u202epng",
        ]
    ),
    HOSTILE_TEXT,
    ANY,
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.just(_ABSENT), strategy)


_ABSENT = object()


BLOCK_KINDS = ["text", "image", "audio", "resource", "resource_link", "reference"]


@st.composite
def blocks(draw: st.DrawFn, kinds: tuple[Any, ...] = (*BLOCK_KINDS, "video", 5)) -> dict[str, Any]:
    """A block of a hostile shape. At depth only block types are drawn: a dict of another type
    is plain data, whose fields a view shows as they are."""
    kind = draw(st.sampled_from(kinds))
    fields: dict[str, Any] = {"type": kind}
    candidates: dict[str, st.SearchStrategy[Any]] = {
        "text": st.one_of(HOSTILE_TEXT, ANY),
        "data": st.one_of(st.sampled_from(["", "AAAA", "iVBORw0KGgo="]), ANY),
        "uri": st.one_of(REF_URIS, CREDENTIAL_URIS, st.sampled_from(["", None]), ANY),
        "mimeType": MIMES,
        "name": st.one_of(HOSTILE_TEXT, ANY),
        "size": st.one_of(st.integers(-5, 10**12), ANY),
        "disposition": DISPOSITIONS,
        "id": st.one_of(st.sampled_from(["ref_forged", ""]), ANY),
        "resource": st.one_of(
            st.fixed_dictionaries(
                {"uri": st.one_of(EMB_URIS, REF_URIS, st.just(""))},
                optional={
                    "text": st.one_of(HOSTILE_TEXT, ANY),
                    "blob": st.one_of(st.sampled_from(["", "AAAA", "A" * 400]), ANY),
                    "mimeType": MIMES,
                    "_meta": st.fixed_dictionaries(
                        {
                            "inner": st.builds(
                                lambda u: {
                                    "type": "resource_link",
                                    "uri": u,
                                    "disposition": "never",
                                },
                                REF_URIS,
                            )
                        }
                    ),
                },
            ),
            ANY,
        ),
    }
    for name, strategy in candidates.items():
        value = draw(maybe(strategy))
        if value is not _ABSENT:
            fields[name] = value
    return fields


def json_like(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(HOSTILE_TEXT, inner, max_size=4),
        ),
        max_leaves=25,
    )


RESULTS = st.fixed_dictionaries(
    {"content": st.one_of(st.lists(st.one_of(blocks(), ANY), max_size=8), ANY)},
    optional={
        "structuredContent": json_like(st.one_of(blocks(tuple(BLOCK_KINDS)), ANY)),
        "isError": ANY,
        "_meta": json_like(st.one_of(blocks(tuple(BLOCK_KINDS)), ANY)),
    },
)


def strings_in(value: Any) -> list[str]:
    """Every string in a view, keys included, checking each value is of an exact plain type."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            out.append(item)
        elif type(item) is dict:
            assert all(type(key) is str for key in item), item
            stack.extend(item.keys())
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
        else:
            assert type(item) in (type(None), bool, int, float, bytes), type(item)
    return out


def check_invariants(
    view: dict[str, Any], reg: ReferenceRegistry, saved: dict[str, str] | None = None
) -> None:
    """No embedded uri, no marked uri or its once-saved path, no credential; well formed."""
    SCRIPT_VIEW.validate_python(view)
    marked = {f"ref:{n:03d}/x" for n in range(31) if reg.is_marked(f"ref:{n:03d}/x")}
    secrets = marked | {path for uri, path in (saved or {}).items() if uri in marked}
    for text in strings_in(view):
        text.encode("utf-8")  # well formed
        assert "emb:" not in text, text
        for secret in secrets:
            assert secret not in text, (secret, text)
        for credential in ("user:pw@h", "x?sig=1", "#fr4gment"):
            assert credential not in text, text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RESULTS, min_size=1, max_size=3), st.data())
def test_hostile_results_keep_every_invariant(
    results: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Ingest and render never raise, never leak, are well formed, and render idempotently."""
    reg = ReferenceRegistry()
    reg.set_removal_hook(lambda path: None)
    saved: dict[str, str] = {}
    for result in results:
        records = reg.ingest(result, server=data.draw(st.sampled_from(["a", "b", None])))
        for record in records:
            path = f"refs/{record.id}.bin"
            if data.draw(st.booleans()) and reg.record_saved(record, path, 1, "0" * 64):
                saved[record.uri] = path
    for result in results:
        view = render_script_view(result, reg)
        check_invariants(view, reg, saved)
        assert render_script_view(view, reg) == view


@settings(max_examples=300, deadline=None)
@given(st.one_of(blocks(), ANY, json_like(blocks())))
def test_classify_is_total(block: Any) -> None:
    """The classifier answers every value without raising and leaves it unchanged."""
    before = repr(block)
    classify_block(block)
    assert repr(block) == before


@settings(max_examples=60, deadline=None)
@given(st.integers(MAX_DEPTH - 3, MAX_DEPTH + 30), REF_URIS, st.booleans())
def test_never_past_depth_limit_never_leaks(levels: int, uri: str, as_dict: bool) -> None:
    """A never nested near or past the limit either marks its link or withholds every uri."""
    nested: Any = {"type": "resource_link", "uri": uri, "disposition": "never"}
    for _ in range(levels):
        nested = {"k": nested} if as_dict else [nested]
    result = {"content": [{"type": "resource_link", "uri": uri}], "structuredContent": nested}
    reg = ReferenceRegistry()
    (record,) = reg.ingest(result, server="s")
    view = render_script_view(result, reg)
    check_invariants(view, reg)
    assert uri not in " ".join(strings_in(view))
    assert record.payload_never or record.unreadable
