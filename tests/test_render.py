"""Tests for the script view (SPEC section 6.1): the only way a script sees a tool result."""

from __future__ import annotations

import json
from typing import Any

import mcp.types as mcp_types
import pytest
from tool_results import link

from sandbox.protocol import check_plain
from scriptbridge import (
    SCRIPT_VIEW,
    ReferenceRegistry,
    markers,
    render_script_view,
    render_withheld_view,
)
from scriptbridge._walk import MAX_DEPTH

PDF_12KB = "A" * (16 * 1024)


def embedded(uri: str = "mem://secret-embedded", **record: Any) -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, **record}}


def view_of(
    reg: ReferenceRegistry, *blocks: Any, data: Any = None, ingest: bool = True, **top: Any
) -> dict[str, Any]:
    result: dict[str, Any] = {"content": list(blocks), **top}
    if data is not None:
        result["structuredContent"] = data
    if ingest:
        reg.ingest(result, server="docs")
    view = render_script_view(result, reg)
    SCRIPT_VIEW.validate_python(view)
    return view


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def test_shape_and_text(reg: ReferenceRegistry) -> None:
    """A view is {content, data, isError}; text shows as a text block, other fields dropped."""
    view = view_of(reg, {"type": "text", "text": "hi", "annotations": {"x": 1}})
    assert view == {"content": [text("hi")], "data": None, "isError": False}


def test_is_error_only_when_true(reg: ReferenceRegistry) -> None:
    """isError is True only when the result says True."""
    assert view_of(reg, isError=True)["isError"] is True
    assert view_of(reg, isError="yes")["isError"] is False


@pytest.mark.parametrize("kind", ["image", "audio"])
def test_inline_media_as_sent(reg: ReferenceRegistry, kind: str) -> None:
    """Inline image or audio shows as that block, as sent, an empty image blob included."""
    block = {"type": kind, "data": "AAAA", "mimeType": "Image/PNG", "_meta": {"x": 1}}
    assert view_of(reg, block)["content"] == [
        {"type": kind, "data": "AAAA", "mimeType": "Image/PNG"}
    ]
    empty = {"type": kind, "data": "", "mimeType": "image/png"}
    assert view_of(reg, empty)["content"] == [{"type": kind, "data": "", "mimeType": "image/png"}]


def test_inline_markers(reg: ReferenceRegistry) -> None:
    """Inline data without a media type, or claiming a disposition, shows its marker as text."""
    view = view_of(
        reg,
        {"type": "image", "data": "AA"},
        {"type": "image", "data": "AA", "mimeType": "image/png", "disposition": "ref"},
    )
    assert view["content"] == [
        text(markers.INLINE_NO_MEDIA_TYPE),
        text(markers.WITHHELD_DISPOSITION),
    ]


@pytest.mark.parametrize(
    ("record", "shown"),
    [
        ({"mimeType": "text/plain", "text": "hello"}, text("hello")),
        (
            {"mimeType": "image/png", "blob": "iVBO"},
            {"type": "image", "data": "iVBO", "mimeType": "image/png"},
        ),
        (
            {"mimeType": "AUDIO/wav", "blob": "UklG"},
            {"type": "audio", "data": "UklG", "mimeType": "AUDIO/wav"},
        ),
        (
            {"mimeType": "image/png", "blob": ""},
            {"type": "image", "data": "", "mimeType": "image/png"},
        ),
        (
            {"mimeType": "application/pdf", "blob": PDF_12KB},
            text(markers.embedded_unshowable("application/pdf", 12 * 1024)),
        ),
        ({"mimeType": "image", "blob": "AAAA"}, text(markers.embedded_unshowable("image", 3))),
        ({"mimeType": "image/", "blob": "AAAA"}, text(markers.embedded_unshowable("image/", 3))),
        ({"blob": "AAAA"}, text(markers.EMBEDDED_NO_MEDIA_TYPE)),
        ({"text": "a", "blob": "AAAA"}, text(markers.EMBEDDED_UNREADABLE)),
        ({}, text(markers.EMBEDDED_UNREADABLE)),
    ],
)
def test_embedded_shows_as_the_block_its_contents_make(
    reg: ReferenceRegistry, record: dict[str, Any], shown: dict[str, Any]
) -> None:
    """An embedded resource shows as its contents' block or marker, at the top and at depth."""
    view = view_of(reg, embedded(**record), data={"deep": [embedded(**record)]})
    assert view["content"] == [shown]
    assert view["data"] == {"deep": [shown]}
    assert "mem://secret-embedded" not in json.dumps(view)
    assert "resource" not in json.dumps(view)


def test_embedded_claiming_a_disposition_is_withheld(reg: ReferenceRegistry) -> None:
    """An embedded resource with a disposition shows the withheld notice, never its text."""
    block = {**embedded(text="secret words"), "disposition": "ref"}
    view = view_of(reg, block, data=[dict(block)])
    assert view["content"] == [text(markers.WITHHELD_DISPOSITION)]
    assert view["data"] == [text(markers.WITHHELD_DISPOSITION)]
    assert "secret words" not in json.dumps(view)


@pytest.mark.parametrize("top_uri", [None, ""])
def test_embedded_with_null_or_empty_top_uri(reg: ReferenceRegistry, top_uri: Any) -> None:
    """A top-level uri of null or "" is none of its own: the block is embedded."""
    view = view_of(reg, {**embedded(text="x"), "uri": top_uri})
    assert view["content"] == [text("x")]


def test_reference_without_link(reg: ReferenceRegistry) -> None:
    """A resource with no uri and no usable record shows REFERENCE_NO_LINK, at depth too."""
    block = {"type": "resource", "resource": {"text": "x"}}
    view = view_of(reg, block, data={"a": dict(block)})
    assert view["content"] == [text(markers.REFERENCE_NO_LINK)]
    assert view["data"] == {"a": text(markers.REFERENCE_NO_LINK)}


def test_registered_reference_object(reg: ReferenceRegistry) -> None:
    """A registered reference shows its id, facts, uri (when clean) and no saved copy yet."""
    view = view_of(
        reg, link("https://files.example/r.pdf", name="r.pdf", mimeType="application/pdf", size=12)
    )
    record = reg.record_for("https://files.example/r.pdf")
    assert record is not None
    assert view["content"] == [
        {
            "type": "reference",
            "id": record.id,
            "name": "r.pdf",
            "mimeType": "application/pdf",
            "size": 12,
            "uri": "https://files.example/r.pdf",
            "savedTo": None,
            "unfetchable": None,
        }
    ]


def test_saved_reference_shows_saved_to(reg: ReferenceRegistry) -> None:
    """A saved copy shows its workspace-relative path as savedTo."""
    (record,) = reg.ingest({"content": [link("https://x/a.txt")]}, server="docs")
    reg.record_saved(record, "refs/a.txt", 3, "0" * 64)
    (obj,) = view_of(reg, link("https://x/a.txt"))["content"]
    assert obj["savedTo"] == "refs/a.txt"


def test_never_reference_shows_no_uri_no_path(reg: ReferenceRegistry) -> None:
    """A never-marked record: savedTo None, unfetchable PAYLOAD_NEVER, and no uri key at all."""
    (record,) = reg.ingest({"content": [link("https://x/n.txt")]}, server="docs")
    reg.record_saved(record, "refs/n.txt", 3, "0" * 64)
    view = view_of(reg, link("https://x/n.txt", disposition="never"))
    (obj,) = view["content"]
    assert obj == {
        "type": "reference",
        "id": record.id,
        "name": None,
        "mimeType": None,
        "size": None,
        "savedTo": None,
        "unfetchable": markers.PAYLOAD_NEVER,
    }
    assert "https://x/n.txt" not in json.dumps(view)
    assert "refs/n.txt" not in json.dumps(view)


def test_later_delivery_shows_the_mark(reg: ReferenceRegistry) -> None:
    """A plain delivery after a never still shows the record as never."""
    view_of(reg, link("https://x/n", disposition="never"))
    (obj,) = view_of(reg, link("https://x/n"))["content"]
    assert obj["unfetchable"] == markers.PAYLOAD_NEVER and "uri" not in obj


def test_never_of_same_result_keeps_link_to_stub_at_depth(reg: ReferenceRegistry) -> None:
    """An embedded never keeps a link of the same result to its stub, at depth, beside a control."""
    never_embedded = {**embedded("https://x/e", text="t"), "disposition": "never"}
    view = view_of(
        reg, never_embedded, data={"links": [link("https://x/e"), link("https://x/control")]}
    )
    marked, control = view["data"]["links"]
    assert marked["unfetchable"] == markers.PAYLOAD_NEVER and "uri" not in marked
    assert control["uri"] == "https://x/control" and control["unfetchable"] is None


def test_inline_never_withholds_a_link_even_unregistered(reg: ReferenceRegistry) -> None:
    """Rendered before ingestion, a link named by a same-result inline never shows no uri."""
    never_image = {
        "type": "image",
        "data": "AA",
        "mimeType": "image/png",
        "uri": "https://x/i.png",
        "disposition": "never",
    }
    view = view_of(reg, never_image, link("https://x/i.png"), link("https://x/ok"), ingest=False)
    _, marked, control = view["content"]
    assert marked == {
        "type": "reference",
        "id": None,
        "name": None,
        "mimeType": None,
        "size": None,
        "savedTo": None,
        "unfetchable": markers.PAYLOAD_NEVER,
    }
    assert control["uri"] == "https://x/ok"
    assert control["unfetchable"] == markers.REFERENCE_UNREGISTERED


def test_walk_stops_at_embedded_meta_for_the_view(reg: ReferenceRegistry) -> None:
    """A never nested in an embedded resource's _meta doesn't withhold a link's uri."""
    inner = embedded("mem://e", text="t", _meta={"x": link("https://x/l", disposition="never")})
    view = view_of(reg, inner, link("https://x/l"))
    assert view["content"][1]["uri"] == "https://x/l"


def test_disposition_ref_and_empty_uri_mark_nothing(reg: ReferenceRegistry) -> None:
    """An embedded ref disposition, or a never with an empty uri, marks no link."""
    view = view_of(
        reg,
        {**embedded("https://x/r", text="t"), "disposition": "ref"},
        {**embedded("", text="t"), "disposition": "never"},
        link("https://x/r"),
        link("x:"),
    )
    assert view["content"][2]["uri"] == "https://x/r"
    assert view["content"][3]["unfetchable"] is None


@pytest.mark.parametrize(
    "uri",
    [
        "https://user:pass@x/a",
        "https://x/a?token=1",
        "https://x/a#frag",
        "https://x/a?",
        "https://x/\u202ea",
        "https://x/a b",
        "https://x/\ud800",
        "https://[bad/a",
        "https://x/" + "a" * 3000,
    ],
)
def test_uri_with_credential_or_tricks_is_not_shown(reg: ReferenceRegistry, uri: str) -> None:
    """A uri with userinfo, a query, a fragment or misleading characters is never shown."""
    (obj,) = view_of(reg, link(uri))["content"]
    assert "uri" not in obj
    assert obj["unfetchable"] is None and obj["id"] is not None


def test_unregistered_reference_is_read_from_the_block(reg: ReferenceRegistry) -> None:
    """A reference with no record shows id None and REFERENCE_UNREGISTERED."""
    view = view_of(reg, link("https://x/u", name="u.txt", size=3), ingest=False)
    assert view["content"] == [
        {
            "type": "reference",
            "id": None,
            "name": "u.txt",
            "mimeType": None,
            "size": 3,
            "uri": "https://x/u",
            "savedTo": None,
            "unfetchable": markers.REFERENCE_UNREGISTERED,
        }
    ]


def test_unregistered_but_marked_uri_shows_never(reg: ReferenceRegistry) -> None:
    """A uri the never set remembers shows PAYLOAD_NEVER even with no record."""
    reg.ingest(
        {
            "content": [
                {
                    "type": "image",
                    "data": "",
                    "mimeType": "image/png",
                    "uri": "https://x/m",
                    "disposition": "never",
                }
            ]
        },
        server=None,
    )
    (obj,) = view_of(reg, link("https://x/m"), ingest=False)["content"]
    assert obj["unfetchable"] == markers.PAYLOAD_NEVER and "uri" not in obj


def test_by_uri_image_renders_as_reference(reg: ReferenceRegistry) -> None:
    """An image by uri renders as a reference object."""
    (obj,) = view_of(reg, {"type": "image", "uri": "https://x/i.png", "mimeType": "image/png"})[
        "content"
    ]
    assert obj["type"] == "reference" and obj["mimeType"] == "image/png"
    assert obj["uri"] == "https://x/i.png"


def test_script_object_rebuilt_and_forgery_unknown(reg: ReferenceRegistry) -> None:
    """A reference dict naming a live record is rebuilt from it; any other is unknown."""
    view = view_of(reg, link("https://x/a", disposition="never"))
    (obj,) = view["content"]
    forged = {"type": "reference", "id": "ref_notmine", "uri": "https://evil", "savedTo": "refs/x"}
    tampered = {**obj, "uri": "https://x/a", "savedTo": "refs/steal", "unfetchable": None}
    again = view_of(reg, forged, tampered, ingest=False)
    assert again["content"] == [text(markers.UNKNOWN_BLOCK), obj]


def test_unknown_blocks_at_top_and_depth(reg: ReferenceRegistry) -> None:
    """Unknown blocks show UNKNOWN_BLOCK in content; at depth only block-typed dicts are blocks."""
    view = view_of(
        reg,
        {"type": "video"},
        "loose",
        None,
        data={"t": {"type": "text", "text": 5}, "plain": {"type": "video", "x": 1}},
    )
    assert view["content"] == [text(markers.UNKNOWN_BLOCK)] * 3
    assert view["data"] == {"t": text(markers.UNKNOWN_BLOCK), "plain": {"type": "video", "x": 1}}


def test_content_of_wrong_type(reg: ReferenceRegistry) -> None:
    """A content field that isn't a list shows one unknown block; none at all shows nothing."""
    assert render_script_view({"content": "hi"}, reg)["content"] == [text(markers.UNKNOWN_BLOCK)]
    assert render_script_view({}, reg)["content"] == []
    assert render_script_view(None, reg)["content"] == [text(markers.UNKNOWN_BLOCK)]
    assert render_script_view([text("pushed")], reg)["content"] == [text("pushed")]


def test_ten_thousand_levels_render_without_recursion(reg: ReferenceRegistry) -> None:
    """Nesting far past the limit shows DATA_TOO_DEEP, with no RecursionError."""
    deep: Any = "x"
    for _ in range(10_000):
        deep = {"k": [deep]}
    view = view_of(reg, data=deep)
    level = view["data"]
    for _ in range(49):
        level = level["k"][0]
    assert level == {"k": [markers.DATA_TOO_DEEP]}


def test_data_walked_plain(reg: ReferenceRegistry) -> None:
    """Plain data passes through; tuples become lists; bytes stay bytes; strings well formed."""
    data = {
        "n": 1,
        "f": 1.5,
        "b": True,
        "none": None,
        "raw": b"\x00",
        "t": (1, "\ud800"),
        "\udfff": "k",
    }
    view = view_of(reg, data=data)
    assert view["data"] == {
        "n": 1,
        "f": 1.5,
        "b": True,
        "none": None,
        "raw": b"\x00",
        "t": [1, "\ufffd"],
        "\ufffd": "k",
    }


def test_text_made_well_formed(reg: ReferenceRegistry) -> None:
    """A lone surrogate in a text block becomes U+FFFD."""
    assert view_of(reg, text("a\ud800b"))["content"] == [text("a\ufffdb")]


def test_too_deep_and_cycles_show_data_too_deep(reg: ReferenceRegistry) -> None:
    """Past the depth limit, and for a container reached twice, the view shows DATA_TOO_DEEP."""
    deep: Any = "bottom"
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    loop: list[Any] = []
    loop.append(loop)
    shared = {"k": 1}
    view = view_of(reg, data={"deep": deep, "loop": loop, "a": shared, "b": shared})
    assert markers.DATA_TOO_DEEP in json.dumps(view["data"]["deep"])
    assert view["data"]["loop"] == [markers.DATA_TOO_DEEP]
    assert view["data"]["a"] == {"k": 1} and view["data"]["b"] == markers.DATA_TOO_DEEP


def test_unreadable_result_shows_no_uri(reg: ReferenceRegistry) -> None:
    """When a result's claims can't be read whole, none of its uris shows, none is fetchable."""
    deep: Any = link("https://x/hidden", disposition="never")
    for _ in range(MAX_DEPTH):
        deep = {"d": deep}
    view = view_of(reg, link("https://x/visible"), data=deep)
    (obj,) = view["content"]
    assert "uri" not in obj
    assert obj["unfetchable"] == markers.UNREADABLE_RESULT and obj["savedTo"] is None
    assert "https://x/hidden" not in json.dumps(view)


def test_non_plain_value_shows_unreadable_value(reg: ReferenceRegistry) -> None:
    """A value that isn't plain data shows UNREADABLE_VALUE in its place."""
    view = view_of(reg, data={"o": object(), "k": {object(): 1}})
    assert view["data"] == {"o": markers.UNREADABLE_VALUE, "k": markers.UNREADABLE_VALUE}


def test_call_tool_result_accepted(reg: ReferenceRegistry) -> None:
    """The mcp SDK's CallToolResult renders like its dict."""
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="x"),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.TextResourceContents(
                    uri="mem://e", mimeType="text/plain", text="inner"
                ),
            ),
        ],
        structuredContent={"k": 1},
        isError=True,
    )
    assert render_script_view(result, reg) == {
        "content": [text("x"), text("inner")],
        "data": {"k": 1},
        "isError": True,
    }


def test_rendering_twice_equals_once(reg: ReferenceRegistry) -> None:
    """Rendering a rendered view again gives the same view, for an ingested result."""
    result = {
        "content": [
            text("a"),
            {"type": "image", "data": "AA", "mimeType": "image/png"},
            embedded(text="t"),
            embedded(mimeType="application/pdf", blob="AAAA"),
            link("https://x/a", name="a"),
            link("https://x/n", disposition="never"),
            {"type": "video"},
        ],
        "structuredContent": {
            "nested": [embedded(blob="AA", mimeType="image/png"), link("https://x/q?t=1")]
        },
    }
    reg.ingest(result, server="docs")
    once = render_script_view(result, reg)
    assert render_script_view(once, reg) == once


def test_render_does_not_mutate_result_or_registry(reg: ReferenceRegistry) -> None:
    """Rendering leaves the result and the registry's LRU order untouched."""
    reg2 = ReferenceRegistry(capacity=2)
    reg2.ingest({"content": [link("o:1"), link("o:2")]}, server=None)
    result = {"content": [link("o:1")], "structuredContent": {"x": [1]}}
    before = repr(result)
    render_script_view(result, reg2)
    assert repr(result) == before
    reg2.ingest({"content": [link("o:3")]}, server=None)
    assert reg2.record_for("o:1") is None  # o:1 was still the oldest: render didn't touch it


def test_withheld_view_keeps_picked_fields_only(reg: ReferenceRegistry) -> None:
    """A withheld result keeps only the host's picked fields, rendered, and no content."""
    result = {
        "content": [text("body")],
        "structuredContent": {"title": "t", "secret": "s", "att": embedded(text="inner")},
    }
    view = render_withheld_view(result, reg, keep=["title", "att", "missing"])
    assert view == {"content": [], "data": {"title": "t", "att": text("inner")}, "isError": False}


def test_withheld_view_of_embedded_data_keeps_nothing(reg: ReferenceRegistry) -> None:
    """A withheld result whose data is an embedded resource keeps nothing."""
    result = {"content": [], "structuredContent": embedded(text="t")}
    view = render_withheld_view(result, reg, keep=["resource", "type"])
    assert view["data"] is None
    assert "mem://secret-embedded" not in json.dumps(view)


def test_block_shared_twice_in_content_fails_closed(reg: ReferenceRegistry) -> None:
    """One block object listed twice (a Python tool's sharing) is reached twice: too deep."""
    shared = link("https://x/shared")
    view = view_of(reg, shared, shared)
    first, second = view["content"]
    assert second == text(markers.DATA_TOO_DEEP)
    assert first["unfetchable"] == markers.UNREADABLE_RESULT and "uri" not in first


def test_exponentially_shared_data_renders_in_linear_time(reg: ReferenceRegistry) -> None:
    """A list shared under itself 2**60 times over renders at once, failing closed."""
    layers: Any = [link("https://x/s")]
    for _ in range(60):
        layers = [layers, layers]
    view = view_of(reg, data=layers)
    assert markers.DATA_TOO_DEEP in json.dumps(view["data"])


def test_leaves_get_exact_types_and_keys_become_strings(reg: ReferenceRegistry) -> None:
    """Subclassed leaves are copied to exact builtins, keys become str, huge ints unreadable."""
    import enum

    class Color(enum.IntEnum):
        RED = 1

    class Sneaky(str):
        def __str__(self) -> str:
            raise RuntimeError("never called")

    data = {1: Color.RED, 2.5: Sneaky("s"), None: True, "big": 2**70, "neg": -(2**63)}
    view = view_of(reg, data=data)
    assert view["data"] == {
        "1": 1,
        "2.5": "s",
        "None": True,
        "big": markers.UNREADABLE_VALUE,
        "neg": -(2**63),
    }
    assert type(view["data"]["1"]) is int and type(view["data"]["2.5"]) is str
    assert view_of(reg, data={b"k": 1})["data"] == markers.UNREADABLE_VALUE


class _LoudStr(str):
    """A host tool's str subclass whose own methods raise."""

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise RuntimeError("encode was called")

    def __str__(self) -> str:
        raise RuntimeError("__str__ was called")


class _FakeStr:
    """An object that claims to be a str through a ``__class__`` property."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str


class _LyingList(list):  # type: ignore[type-arg]
    """A list whose own iteration shows other blocks than it holds."""

    def __iter__(self) -> Any:
        return iter([{"type": "text", "text": "not in the list"}])

    def __len__(self) -> int:
        return 1


def test_a_str_subclass_shows_as_an_exact_str_without_its_methods(reg: ReferenceRegistry) -> None:
    """A text block's str subclass is copied down to an exact str; none of its methods run."""
    view = render_script_view({"content": [{"type": "text", "text": _LoudStr("hi")}]}, reg)
    (block,) = view["content"]
    assert block == {"type": "text", "text": "hi"} and type(block["text"]) is str


def test_an_object_posing_as_a_str_is_an_unknown_block(reg: ReferenceRegistry) -> None:
    """An object that only claims to be a str (``__class__``) is no text: the block is unknown,
    and rendering it doesn't raise."""
    view = render_script_view({"content": [{"type": "text", "text": _FakeStr()}]}, reg)
    assert view["content"] == [{"type": "text", "text": markers.UNKNOWN_BLOCK}]


def test_content_is_read_through_the_list_type_not_its_subclass(reg: ReferenceRegistry) -> None:
    """A list subclass's own ``__iter__`` and ``__len__`` are never called: the view shows what
    the list holds, as the claims walk reads it."""
    blocks = _LyingList([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    view = render_script_view({"content": blocks}, reg)
    assert [block["text"] for block in view["content"]] == ["a", "b"]


@pytest.mark.parametrize("ingest", [True, False])
def test_a_reference_size_shows_as_an_exact_int_the_channel_carries(
    reg: ReferenceRegistry, ingest: bool
) -> None:
    """A size given as an int subclass shows as an exact int; one past 64 bits shows as no
    size (the channel to a script can't carry it). Found by the render fuzz target."""
    import enum

    class Size(enum.IntEnum):
        TWELVE = 12

    view = view_of(reg, link("https://x/sized", size=Size.TWELVE), ingest=ingest)
    shown = view["content"][0]
    assert shown["size"] == 12 and type(shown["size"]) is int
    check_plain(view)
    huge = view_of(reg, link("https://x/huge", size=2**70), ingest=ingest)["content"][0]
    assert huge["size"] is None
