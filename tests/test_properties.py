"""Property tests over hostile tool results: the SPEC section 7 invariants of the pure core.

Uris come from two disjoint pools so a leak is a plain substring: ``emb:`` uris are used only
by embedded resources (never shown anywhere), ``ref:`` uris by references and by embedded
resources' never claims (shown only while unmarked, unless they carry a credential).
"""

from __future__ import annotations

import sys
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

from scriptbridge import (
    SCRIPT_VIEW,
    ReferenceRegistry,
    classify_block,
    markers,
    render_script_view,
)
from scriptbridge._render import render_withheld_view
from scriptbridge._walk import MAX_DEPTH
from scriptbridge.lanes import convert_push, live_copy, stored_copy, withheld_copy

BLOCK_KINDS = ["text", "image", "audio", "resource", "resource_link", "reference"]


@st.composite
def blocks(draw: st.DrawFn, kinds: tuple[Any, ...] = (*BLOCK_KINDS, "video", 5)) -> dict[str, Any]:
    """A block of a hostile shape. At depth only block types are drawn: a dict of another type
    is plain data, whose fields a view shows as they are."""
    kind = draw(st.sampled_from(kinds))
    fields: dict[str, Any] = {"type": kind}
    candidates: dict[str, st.SearchStrategy[Any]] = {
        "text": st.one_of(HOSTILE_TEXT, SCALARS),
        "data": st.one_of(st.sampled_from(["", "AAAA", "iVBORw0KGgo="]), SCALARS),
        "uri": st.one_of(REF_URIS, CREDENTIAL_URIS, st.sampled_from(["", None]), SCALARS),
        "mimeType": MIMES,
        "name": st.one_of(HOSTILE_TEXT, SCALARS),
        "size": st.one_of(st.integers(-5, 10**12), SCALARS),
        "disposition": DISPOSITIONS,
        "id": st.one_of(st.sampled_from(["ref_forged", ""]), SCALARS),
        "resource": st.one_of(
            st.fixed_dictionaries(
                {"uri": st.one_of(EMB_URIS, REF_URIS, st.just(""))},
                optional={
                    "text": st.one_of(HOSTILE_TEXT, SCALARS),
                    "blob": st.one_of(st.sampled_from(["", "AAAA", "A" * 400]), SCALARS),
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
            SCALARS,
        ),
    }
    for name, strategy in candidates.items():
        value = draw(maybe(strategy))
        if value is not ABSENT:
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
    {"content": st.one_of(st.lists(st.one_of(blocks(), SCALARS), max_size=8), SCALARS)},
    optional={
        "structuredContent": json_like(st.one_of(blocks(tuple(BLOCK_KINDS)), SCALARS)),
        "isError": SCALARS,
        "_meta": json_like(st.one_of(blocks(tuple(BLOCK_KINDS)), SCALARS)),
    },
)


def check_invariants(
    view: dict[str, Any], reg: ReferenceRegistry, saved: dict[str, str] | None = None
) -> None:
    """No embedded uri, no marked uri or its once-saved path, no credential; well formed."""
    SCRIPT_VIEW.validate_python(view)
    marked = {f"ref:{n:03d}/x" for n in range(31) if reg.is_marked(f"ref:{n:03d}/x")}
    secrets = marked | {path for uri, path in (saved or {}).items() if uri in marked}
    for text in strings_in(view, allow_bytes=True):
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
@given(st.one_of(blocks(), SCALARS, json_like(blocks())))
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
    assert uri not in " ".join(strings_in(view, allow_bytes=True))
    assert record.payload_never or record.unreadable


# --- every lane and the script view, against payloads, credentials, depth and cycles ---------
#
# Secrets come from pools no generated text can hold (none has a ``:`` or an upper-case run
# like ``SECRET``): ``nev:`` uris are each withdrawn by a never that a first result carries at its
# top level (so every one of them is marked, whatever the other results do); ``emb:`` uris are
# embedded resources' own; ``PAYLOAD-n`` is the data of blocks that claim a disposition (of any
# type); ``SECRETn`` sits in a uri's userinfo, query or fragment. None of them, nor a marked
# record's once-saved path, may appear in any output, in any form (a uri with a lone surrogate
# would show as its well-formed self, so the pools' prefixes are what is looked for).

SAFE_TEXT = st.text(
    alphabet=st.characters(
        categories=["L", "N", "P", "Zs", "Cc", "Cf", "Cs"], exclude_characters=":"
    ),
    max_size=12,
).filter(lambda text: "SECRET" not in text and "PAYLOAD" not in text)
NEVER_URIS = st.builds(
    lambda n, tail: f"nev:{n:03d}/{tail}", st.integers(0, 20), st.sampled_from(["x", "\ud800x"])
)
CREDENTIALS = st.builds(
    lambda n, shape: shape.format(n=n),
    st.integers(0, 20),
    st.sampled_from(
        [
            "https://user:SECRET{n}@h/p",
            "https://SECRET{n}@h/p",
            "https://h/p?token=SECRET{n}",
            "https://h/p#SECRET{n}",
            "https://h/p?a=1&sig=SECRET{n}#f",
        ]
    ),
)
EVERY_DISPOSITION = st.one_of(
    st.sampled_from(["never", "NEVER", " Never\t", "ref", "", "inline", 0, False, b""]),
    st.lists(st.just("never"), max_size=1),
    st.dictionaries(st.just("never"), st.booleans(), max_size=1),
    st.floats(),
    st.integers(),
)
PAYLOADS = st.integers(0, 99).map(lambda n: f"PAYLOAD-{n}")
LABELS = st.one_of(
    SAFE_TEXT,
    st.sampled_from(["image/png\u202e", "r\u202eport\u200b.pdf", "a\x00b\x1bc", "\ud800", ""]),
)


@st.composite
def secret_blocks(draw: st.DrawFn, nevers: list[str]) -> dict[str, Any]:
    """A block that holds a secret: a link to a withdrawn or credential-bearing uri, data that
    claims a disposition, or an embedded resource; with hostile labels."""
    uri = draw(st.sampled_from(nevers) | CREDENTIALS) if nevers else draw(CREDENTIALS)
    label = {"name": draw(LABELS), "mimeType": draw(LABELS)}
    match draw(st.sampled_from(["link", "resource", "by-uri", "inline", "embedded", "withdraw"])):
        case "link":
            return {"type": "resource_link", "uri": uri, **label}
        case "resource":
            return {"type": "resource", "uri": uri, "size": draw(st.integers(-1, 10)), **label}
        case "by-uri":
            return {"type": draw(st.sampled_from(["image", "audio"])), "uri": uri, **label}
        case "inline":
            kind = draw(st.sampled_from(["image", "audio"]))
            data, disposition = draw(PAYLOADS), draw(EVERY_DISPOSITION)
            return {"type": kind, "data": data, "uri": uri, "disposition": disposition, **label}
        case "embedded":
            contents = draw(st.sampled_from(["text", "blob"]))
            record = {"uri": draw(EMB_URIS), contents: draw(PAYLOADS), "mimeType": draw(LABELS)}
            return {"type": "resource", "resource": record, "disposition": draw(EVERY_DISPOSITION)}
        case _:
            return {"type": "resource_link", "uri": uri, "disposition": "never", **label}


@st.composite
def entangled(draw: st.DrawFn, leaves: st.SearchStrategy[Any]) -> Any:
    """Nested data near, at or far past the walk's depth limit, maybe shared or cyclic."""
    data = draw(json_like(leaves))
    levels = draw(st.sampled_from([0, 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 10_000]))
    for _ in range(levels):
        data = {"d": data} if draw(st.booleans()) else [data]
    match draw(st.sampled_from(["plain", "shared", "list-cycle", "dict-cycle", "cross-cycle"])):
        case "shared":
            return {"a": data, "b": [data, data]}
        case "list-cycle":
            loop: list[Any] = [data]
            loop.append(loop)
            return loop
        case "dict-cycle":
            knot: dict[str, Any] = {"data": data}
            knot["self"] = knot
            return knot
        case "cross-cycle":
            outer: dict[str, Any] = {"data": data}
            outer["inner"] = [{"back": outer}]
            return outer
    return data


@st.composite
def secret_results(draw: st.DrawFn) -> tuple[list[str], list[Any]]:
    """The withdrawn uris, and results that hide secrets in content, data and cycles."""
    nevers = draw(st.lists(NEVER_URIS, max_size=4, unique=True))
    leaves = st.one_of(secret_blocks(nevers), SCALARS, SAFE_TEXT)
    results: list[Any] = []
    for _ in range(draw(st.integers(1, 3))):
        content: Any = draw(st.lists(st.one_of(secret_blocks(nevers), SCALARS), max_size=6))
        shape = draw(st.sampled_from(["plain", "shared-block", "self-listed"]))
        if shape == "shared-block" and content:
            content.append(content[0])
        elif shape == "self-listed":
            content.append(content)
        result: dict[str, Any] = {"content": content}
        if draw(st.booleans()):
            result["structuredContent"] = draw(entangled(leaves))
        if draw(st.booleans()):
            result["isError"] = draw(st.booleans())
        results.append(result)
    return nevers, results


def every_output(result: Any, reg: ReferenceRegistry) -> list[Any]:
    """What every lane and the script view show of ``result`` (none may raise)."""
    content = result.get("content") if isinstance(result, dict) else None
    keep = ["a", "b", "d", "data", "self", "inner"]
    return [
        render_script_view(result, reg),
        render_withheld_view(result, reg, keep),
        stored_copy(result, reg),
        live_copy(result, reg, cap=50),
        convert_push(content, reg),
        convert_push(content, reg, position="system"),
        withheld_copy(result, reg, keep),
    ]


def leaks(outputs: list[Any], forbidden: list[str]) -> list[tuple[str, str]]:
    """Each (secret, text) where an output's string holds a secret; checks every string is
    well formed on the way."""
    found = []
    for output in outputs:
        for text in strings_in(output, allow_bytes=True):
            text.encode("utf-8")
            found += [(secret, text) for secret in forbidden if secret in text]
    return found


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret_results(), st.data())
def test_no_lane_shows_a_withdrawn_uri_payload_saved_path_or_credential(
    drawn: tuple[list[str], list[Any]], data: st.DataObject
) -> None:
    """However results nest, share and cycle, no lane and no script view shows a never-marked
    uri, its saved path, an embedded resource's uri, data that claimed a disposition, or a
    credential in a uri; every string is well formed; nothing raises."""
    nevers, results = drawn
    reg = ReferenceRegistry()
    reg.set_removal_hook(lambda path: None)
    saved: list[str] = []
    links = {"content": [{"type": "resource_link", "uri": uri} for uri in nevers]}
    for record in reg.ingest(links, server="a"):
        path = f"refs/{record.id}.bin"
        if reg.record_saved(record, path, 1, "0" * 64):
            saved.append(path)
    withdrawal = {
        "content": [{"type": "resource", "uri": u, "disposition": "never"} for u in nevers]
    }
    reg.ingest(withdrawal, server=data.draw(st.sampled_from(["a", "b", None])))
    assert all(reg.is_marked(uri) for uri in nevers)
    for result in results:
        if data.draw(st.booleans()):
            reg.ingest(result, server=data.draw(st.sampled_from(["a", "b", None])))
    for result in results:
        outputs = every_output(result, reg)
        assert not leaks(outputs, ["nev:", "emb:", "PAYLOAD-", "SECRET", *saved])


@settings(max_examples=150, deadline=None)
@given(st.lists(secret_blocks(["nev:000/x"]), min_size=1, max_size=6), st.data())
def test_markers_and_stubs_carry_no_control_or_format_characters(
    blocks_: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Bidi overrides, zero-width and control characters in names and media types never reach
    a marker, a stub or a reference object's labels, on any lane."""
    reg = ReferenceRegistry()
    result = {"content": blocks_}
    if data.draw(st.booleans()):
        reg.ingest(result, server="s")
    view = render_script_view(result, reg)
    for item in view["content"]:
        if item["type"] == "reference":
            for label in (item["name"], item["mimeType"]):
                assert label is None or markers.clean_label(label, len(label)) == label, item
            assert item["size"] is None or (type(item["size"]) is int and item["size"] >= 0)
        elif item["type"] == "text":
            assert item["text"] == markers.clean_label(item["text"], len(item["text"])), item
    lines = stored_copy(result, reg).split("\n")
    assert all(line == markers.clean_label(line, len(line)) for line in lines), lines
    for block in live_copy(result, reg) + convert_push(blocks_, reg):
        if block["type"] == "text":
            assert block["text"] == markers.clean_label(block["text"], len(block["text"]))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 3 * 2**20), st.integers(0, 10), st.sampled_from(["image", "audio", "blob"]))
def test_huge_base64_declared_tiny_shows_its_real_size(size: int, declared: int, kind: str) -> None:
    """Data of any length that declares a tiny size shows the size of its data on every lane,
    never the declared one, and its placeholder is one line."""
    data = "A" * (size // 3 * 4)
    if kind == "blob":
        block: dict[str, Any] = {
            "type": "resource",
            "resource": {"uri": "emb:1", "blob": data, "mimeType": "application/pdf"},
            "size": declared,
        }
        marker = markers.embedded_unshowable("application/pdf", size // 3 * 3)
    else:
        block = {"type": kind, "data": data, "mimeType": f"{kind}/x", "size": declared}
        shown = (markers.image_placeholder if kind == "image" else markers.audio_in_tool_result)(
            f"{kind}/x", size // 3 * 3
        )
        marker = shown if size >= 3 else markers.inline_no_data(kind)
    reg = ReferenceRegistry()
    assert stored_copy({"content": [block]}, reg) == marker


def test_work_grows_linearly_with_the_input() -> None:
    """Every lane's work (Python and builtin calls, counted) grows linearly with hostile inputs:
    4n of a shape costs at most 6 times n (quadratic work would cost 16)."""

    def calls(make: Any, n: int) -> int:
        result = make(n)
        count = 0

        def profile(frame: Any, event: str, arg: Any) -> None:
            nonlocal count
            if event in ("call", "c_call"):
                count += 1

        sys.setprofile(profile)
        try:
            reg = ReferenceRegistry(capacity=50_000)
            reg.ingest(result, server="s")
            every_output(result, reg)
        finally:
            sys.setprofile(None)
        return count

    def many_blocks(n: int) -> Any:
        kinds = [
            lambda i: {"type": "resource_link", "uri": f"nev:{i}", "disposition": "never"},
            lambda i: {
                "type": "resource_link",
                "uri": f"https://u:SECRET@h/{i}?q#f",
                "name": f"r\u202e{i}" * 3,
            },
            lambda i: {"type": "image", "data": "A" * 400, "mimeType": "image/png", "size": 1},
            lambda i: {"type": "resource", "resource": {"uri": f"emb:{i}", "text": "t\ud800"}},
            lambda i: {"type": "audio", "data": "PAYLOAD", "mimeType": "a/b", "disposition": 0},
            lambda i: {"type": "reference", "id": f"ref_{i}"},
            lambda i: {"type": "video", "uri": f"x:{i}"},
        ]
        return {"content": [kinds[i % len(kinds)](i) for i in range(n)]}

    def wide_data(n: int) -> Any:
        block = {"type": "resource_link", "uri": "nev:0", "disposition": "never"}
        return {"content": [], "structuredContent": {f"k{i}": dict(block) for i in range(n)}}

    def shared(n: int) -> Any:
        one = {"k": [1, 2, {"type": "text", "text": "x"}]}
        return {"content": [], "structuredContent": [one] * n}

    def deep(n: int) -> Any:
        nested: Any = {"type": "resource_link", "uri": "nev:1", "disposition": "never"}
        for _ in range(n):
            nested = [{"d": nested}]
        return {"content": [{"type": "resource_link", "uri": "nev:1"}], "structuredContent": nested}

    def cycles(n: int) -> Any:
        loops = []
        for _ in range(n):
            loop: list[Any] = [{"type": "text", "text": "x"}]
            loop.append(loop)
            loops.append(loop)
        return {"content": [], "structuredContent": loops}

    for make in (many_blocks, wide_data, shared, deep, cycles):
        calls(make, 10)  # caches warm (the invisible-character pattern is built once)
        small, large = calls(make, 250), calls(make, 1000)
        assert large <= 6 * small, (make.__name__, small, large)
