"""Tests for the model's lanes (SPEC section 6.2): stored copy, live copy, push lanes, checks."""

from __future__ import annotations

import json
from typing import Any

import mcp.types as mcp_types
import pytest
from tool_results import link

from scriptbridge import ReferenceRegistry, markers
from scriptbridge._walk import MAX_DEPTH
from scriptbridge.lanes import (
    convert_push,
    is_visibly_empty,
    live_copy,
    shows_as_itself,
    stored_copy,
    withheld_copy,
)

EMB_URI = "mem://secret-embedded?token=abc"
PNG = "iVBORw0KGgo="  # 8 bytes
BLOB_3KB = "A" * 4096  # 3,072 bytes
PDF_MARKER = markers.embedded_unshowable("application/pdf", 3072)
WAV_MARKER = markers.audio_in_tool_result("audio/wav", 3072)
PNG_PLACEHOLDER = markers.image_placeholder("image/png", 8)
NATIVE_PNG = {"type": "image", "data": PNG, "mimeType": "image/png"}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def embedded(uri: str = EMB_URI, **record: Any) -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, **record}}


def emb_text(value: str) -> dict[str, Any]:
    return embedded(text=value)


def emb_png() -> dict[str, Any]:
    return embedded(mimeType="image/png", blob=PNG)


def emb_wav() -> dict[str, Any]:
    return embedded(mimeType="audio/wav", blob=BLOB_3KB)


def emb_pdf() -> dict[str, Any]:
    return embedded(mimeType="application/pdf", blob=BLOB_3KB)


def image() -> dict[str, Any]:
    return dict(NATIVE_PNG)


def all_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def stub(
    ref_id: str | None,
    tail: str,
    name: str | None = None,
    mime: str | None = None,
    size: int | None = None,
) -> str:
    return markers.reference_stub(ref_id, name, mime, size, tail)


@pytest.fixture
def reg() -> ReferenceRegistry:
    registry = ReferenceRegistry()
    registry.set_removal_hook(lambda path: None)
    return registry


# --- stored copy -------------------------------------------------------------------------------


def test_stored_copy_joins_block_texts_never_json(reg: ReferenceRegistry) -> None:
    """The stored copy is the blocks' texts joined by newlines, not the content array's JSON."""
    result = {"content": [text("first"), text("second")], "structuredContent": {"k": 1}}
    assert stored_copy(result, reg) == "first\nsecond"


def test_stored_copy_image_placeholder_and_audio_marker(reg: ReferenceRegistry) -> None:
    """An image shows as its placeholder and audio as the tool-result lane's audio marker."""
    result = {"content": [image(), {"type": "audio", "data": BLOB_3KB, "mimeType": "audio/wav"}]}
    assert stored_copy(result, reg) == f"{PNG_PLACEHOLDER}\n{WAV_MARKER}"


def test_embedded_text_image_audio_in_stored_copy(reg: ReferenceRegistry) -> None:
    """An embedded text, image blob and audio blob show as text, placeholder and audio marker."""
    result = {"content": [emb_text("inner words"), emb_png(), emb_wav()]}
    out = stored_copy(result, reg)
    assert out == f"inner words\n{PNG_PLACEHOLDER}\n{WAV_MARKER}"
    assert "mem://" not in out


def test_embedded_text_image_audio_in_live_copy(reg: ReferenceRegistry) -> None:
    """In the live copy an embedded text is a text block, an image native, audio its marker."""
    result = {"content": [emb_text("inner words"), emb_png(), emb_wav()]}
    assert live_copy(result, reg) == [text("inner words"), NATIVE_PNG, text(WAV_MARKER)]


def test_embedded_text_image_audio_on_push_lane(reg: ReferenceRegistry) -> None:
    """On the push lane an embedded text is text, an image and audio blob go natively."""
    out = convert_push([emb_text("inner words"), emb_png(), emb_wav()], reg)
    assert out == [
        text("inner words"),
        NATIVE_PNG,
        {"type": "audio", "data": BLOB_3KB, "mimeType": "audio/wav"},
    ]


def test_embedded_media_types_in_any_case(reg: ReferenceRegistry) -> None:
    """An embedded blob of IMAGE/PNG shows as an image, keeping its type as sent."""
    block = embedded(mimeType="IMAGE/PNG", blob=PNG)
    assert convert_push([block], reg) == [{"type": "image", "data": PNG, "mimeType": "IMAGE/PNG"}]
    assert stored_copy({"content": [block]}, reg) == markers.image_placeholder("IMAGE/PNG", 8)


@pytest.mark.parametrize("top_uri", [None, ""])
def test_embedded_with_null_or_empty_top_uri(reg: ReferenceRegistry, top_uri: Any) -> None:
    """A top-level uri of null or '' is no uri of its own: the block is an embedded resource."""
    block = {**emb_text("words"), "uri": top_uri}
    assert stored_copy({"content": [block]}, reg) == "words"
    assert convert_push([block], reg) == [text("words")]


UNSHOWABLE = [
    pytest.param(emb_pdf(), PDF_MARKER, id="other-type"),
    pytest.param(
        embedded(mimeType="image", blob=BLOB_3KB),
        markers.embedded_unshowable("image", 3072),
        id="bare-image",
    ),
    pytest.param(
        embedded(mimeType="image/", blob=BLOB_3KB),
        markers.embedded_unshowable("image/", 3072),
        id="empty-subtype",
    ),
    pytest.param(embedded(blob=BLOB_3KB), markers.EMBEDDED_NO_MEDIA_TYPE, id="no-media-type"),
    pytest.param(
        embedded(mimeType="image/png", blob=""),
        markers.inline_no_data("image"),
        id="empty-image-blob",
    ),
    pytest.param(
        embedded(mimeType="audio/wav", blob=""),
        markers.inline_no_data("audio"),
        id="empty-audio-blob",
    ),
    pytest.param(
        embedded(text="t", blob=PNG, mimeType="image/png"), markers.EMBEDDED_UNREADABLE, id="both"
    ),
    pytest.param(embedded(mimeType="text/plain"), markers.EMBEDDED_UNREADABLE, id="neither"),
    pytest.param(
        {**emb_text("t"), "disposition": "never"},
        markers.WITHHELD_DISPOSITION,
        id="disposition-never",
    ),
    pytest.param(
        {**emb_png(), "disposition": "ref"}, markers.WITHHELD_DISPOSITION, id="disposition-ref"
    ),
    pytest.param(
        {**emb_text("t"), "disposition": ""}, markers.WITHHELD_DISPOSITION, id="disposition-empty"
    ),
    pytest.param(
        {**emb_text("t"), "disposition": False},
        markers.WITHHELD_DISPOSITION,
        id="disposition-false",
    ),
    pytest.param(
        {**emb_text("t"), "disposition": 0}, markers.WITHHELD_DISPOSITION, id="disposition-zero"
    ),
]


@pytest.mark.parametrize(("block", "marker"), UNSHOWABLE)
def test_each_unshowable_content_on_every_lane(
    reg: ReferenceRegistry, block: dict[str, Any], marker: str
) -> None:
    """Contents no lane shows as themselves show their marker on every model and push lane."""
    result = {"content": [block]}
    assert stored_copy(result, reg) == marker
    assert live_copy(result, reg) == [text(marker)]
    assert convert_push([block], reg) == [text(marker)]
    assert convert_push([block], reg, position="system") == [text(marker)]
    assert shows_as_itself(block) is False
    assert is_visibly_empty([block]) is False


def test_embedded_uri_and_data_shown_nowhere(reg: ReferenceRegistry) -> None:
    """An embedded resource's uri and record, and an unshowable blob's data, appear on no lane."""
    pdf_data = "QUJD" * 1024
    pdf = embedded(mimeType="application/pdf", blob=pdf_data)
    blocks = [emb_text("t"), emb_png(), emb_wav(), pdf, embedded(blob=pdf_data)]
    result = {"content": blocks}
    nested = {"content": [], "structuredContent": {"a": blocks, "b": {"c": pdf}}}
    outputs = [
        stored_copy(result, reg),
        stored_copy(nested, reg),
        live_copy(result, reg),
        live_copy(nested, reg),
        convert_push(blocks, reg),
        convert_push(blocks, reg, position="system"),
        withheld_copy(nested, reg, ["a", "b"]),
    ]
    for out in outputs:
        flat = all_text(out)
        assert "mem://" not in flat and "token=abc" not in flat and "resource" not in flat
        assert pdf_data not in flat


# --- structured data -----------------------------------------------------------------------------


def test_data_added_only_when_content_is_empty(reg: ReferenceRegistry) -> None:
    """structuredContent shows, as JSON, only when the content array is empty or absent."""
    data = {"n": 1, "s": "x"}
    assert stored_copy({"content": [text("body")], "structuredContent": data}, reg) == "body"
    expected = json.dumps(data, ensure_ascii=False)
    assert stored_copy({"content": [], "structuredContent": data}, reg) == expected
    assert stored_copy({"structuredContent": data}, reg) == expected


def test_blocks_at_depth_show_as_their_text(reg: ReferenceRegistry) -> None:
    """At depth each block becomes its stored text, an embedded one never JSON; other dicts stay."""
    data = {
        "doc": emb_text("inner"),
        "pic": emb_png(),
        "pdf": emb_pdf(),
        "list": [text("t"), image(), {"type": "video"}],
    }
    out = stored_copy({"content": [], "structuredContent": data}, reg)
    assert json.loads(out) == {
        "doc": "inner",
        "pic": PNG_PLACEHOLDER,
        "pdf": PDF_MARKER,
        "list": ["t", PNG_PLACEHOLDER, {"type": "video"}],
    }


def test_data_that_is_a_block_shows_its_text_well_formed(reg: ReferenceRegistry) -> None:
    """Data that is one embedded resource shows its text, made well formed, not a JSON string."""
    result = {"content": [], "structuredContent": emb_text("a\ud800b")}
    assert stored_copy(result, reg) == "a\ufffdb"
    assert live_copy(result, reg) == [text("a\ufffdb")]


def test_data_past_walk_limits_shows_data_too_deep(reg: ReferenceRegistry) -> None:
    """Past the depth limit, a cycle or a shared container, the data shows DATA_TOO_DEEP."""
    deep: Any = "bottom"
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    loop: list[Any] = []
    loop.append(loop)
    shared = {"k": 1}
    data = {"deep": deep, "loop": loop, "a": shared, "b": shared}
    parsed = json.loads(stored_copy({"content": [], "structuredContent": data}, reg))
    assert markers.DATA_TOO_DEEP in json.dumps(parsed["deep"])
    assert "bottom" not in json.dumps(parsed["deep"])
    assert parsed["loop"] == [markers.DATA_TOO_DEEP]
    assert parsed["a"] == {"k": 1} and parsed["b"] == markers.DATA_TOO_DEEP


def test_values_json_cant_carry_show_unreadable_value(reg: ReferenceRegistry) -> None:
    """Objects, bytes, odd keys and ints past Python's digit limit show UNREADABLE_VALUE."""
    data = {"o": object(), "b": b"raw", "k": {object(): 1}, "big": 10**5000, "ok": [1, 2.5, True]}
    parsed = json.loads(stored_copy({"content": [], "structuredContent": data}, reg))
    assert parsed == {
        "o": markers.UNREADABLE_VALUE,
        "b": markers.UNREADABLE_VALUE,
        "k": markers.UNREADABLE_VALUE,
        "big": markers.UNREADABLE_VALUE,
        "ok": [1, 2.5, True],
    }


def test_hostile_containers_do_not_raise(reg: ReferenceRegistry) -> None:
    """A dict or list whose methods raise is read through its base type's own; nothing raises."""

    class RaisingDict(dict[str, Any]):
        def get(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("boom")

        def items(self) -> Any:
            raise RuntimeError("boom")

    class RaisingList(list[Any]):
        def __iter__(self) -> Any:
            raise RuntimeError("boom")

    data = {"d": RaisingDict(a=1), "l": RaisingList([1])}
    parsed = json.loads(stored_copy({"content": [], "structuredContent": data}, reg))
    assert parsed == {"d": {"a": 1}, "l": [1]}
    assert convert_push(RaisingList([text("x")]), reg) == [text(markers.UNKNOWN_BLOCK)]
    assert is_visibly_empty(RaisingList([text("x")])) is False
    assert stored_copy({"content": [RaisingDict(type="text", text="x")]}, reg) == (
        markers.UNKNOWN_BLOCK
    )


# --- references ----------------------------------------------------------------------------------


def test_reference_stub_tails(reg: ReferenceRegistry) -> None:
    """A reference shows its stub, ending with its saved path, the fetch hint or PAYLOAD_NEVER."""
    saved, hinted, never = reg.ingest(
        {
            "content": [
                link("https://x/saved.txt", name="saved.txt", mimeType="text/plain", size=3),
                link("https://x/hint.txt", name="hint.txt"),
                link("https://x/never.txt", name="never.txt"),
            ]
        },
        server="docs",
    )
    reg.record_saved(saved, "refs/saved.txt", 3, "0" * 64)
    reg.record_saved(never, "refs/never.txt", 3, "0" * 64)
    reg.ingest({"content": [link("https://x/never.txt", disposition="never")]}, server="docs")
    result = {
        "content": [
            link("https://x/saved.txt"),
            link("https://x/hint.txt"),
            link("https://x/never.txt"),
        ]
    }
    out = stored_copy(result, reg)
    assert out.split("\n") == [
        stub(saved.id, "saved: refs/saved.txt", "saved.txt", "text/plain", 3),
        stub(hinted.id, markers.FETCH_HINT, "hint.txt"),
        stub(never.id, markers.PAYLOAD_NEVER, "never.txt"),
    ]
    assert "https://" not in out and "refs/never.txt" not in out


def test_no_reference_uri_on_any_model_lane(reg: ReferenceRegistry) -> None:
    """Even a fetchable, credential-free uri is never shown on a model lane."""
    result = {
        "content": [
            link("https://x/plain.txt"),
            {"type": "image", "uri": "https://x/p.png"},
            {"type": "resource", "uri": "https://x/r"},
        ],
        "structuredContent": {"k": link("https://x/deep")},
    }
    reg.ingest(result, server="docs")
    outputs = [
        stored_copy(result, reg),
        live_copy(result, reg),
        convert_push(result["content"], reg),
        stored_copy({**result, "content": []}, reg),
    ]
    for out in outputs:
        assert "https://" not in all_text(out)


def test_never_of_same_result_keeps_link_to_stub(reg: ReferenceRegistry) -> None:
    """An embedded never keeps a link of the same result to its stub, beside a fetchable control."""
    result = {
        "content": [
            {
                **emb_text("t"),
                "resource": {"uri": "https://x/e", "text": "t"},
                "disposition": "never",
            },
            link("https://x/e"),
            link("https://x/control"),
        ]
    }
    marked, control = reg.ingest(result, server="docs")
    assert stored_copy(result, reg).split("\n") == [
        markers.WITHHELD_DISPOSITION,
        stub(marked.id, markers.PAYLOAD_NEVER),
        stub(control.id, markers.FETCH_HINT),
    ]


def test_never_of_same_result_keeps_link_to_stub_at_depth(reg: ReferenceRegistry) -> None:
    """At depth, an embedded never keeps a same-result link to its stub; a control is fetchable."""
    never_embedded = {
        "type": "resource",
        "resource": {"uri": "https://x/e", "text": "t"},
        "disposition": "never",
    }
    result = {
        "content": [],
        "structuredContent": {
            "att": never_embedded,
            "links": [link("https://x/e"), link("https://x/control")],
        },
    }
    marked, control = reg.ingest(result, server="docs")
    parsed = json.loads(stored_copy(result, reg))
    assert parsed == {
        "att": markers.WITHHELD_DISPOSITION,
        "links": [stub(marked.id, markers.PAYLOAD_NEVER), stub(control.id, markers.FETCH_HINT)],
    }


def test_never_of_same_result_before_ingestion(reg: ReferenceRegistry) -> None:
    """Before ingestion, a link a same-result never names shows PAYLOAD_NEVER, not unregistered."""
    never_image = {
        "type": "image",
        "data": PNG,
        "mimeType": "image/png",
        "uri": "https://x/i.png",
        "disposition": "never",
    }
    result = {"content": [never_image, link("https://x/i.png"), link("https://x/ok")]}
    assert stored_copy(result, reg).split("\n") == [
        markers.WITHHELD_DISPOSITION,
        stub(None, markers.PAYLOAD_NEVER),
        stub(None, markers.REFERENCE_UNREGISTERED),
    ]


def test_claims_walk_stops_at_embedded_resource(reg: ReferenceRegistry) -> None:
    """A never nested in an embedded resource's _meta doesn't withhold a link of the result."""
    inner = {
        "type": "resource",
        "resource": {
            "uri": "mem://e",
            "text": "t",
            "_meta": {"x": link("https://x/a", disposition="never")},
        },
    }
    result = {"content": [inner, link("https://x/a")]}
    (record,) = reg.ingest(result, server="docs")
    assert stored_copy(result, reg) == f"t\n{stub(record.id, markers.FETCH_HINT)}"


def test_disposition_ref_and_empty_uri_mark_nothing(reg: ReferenceRegistry) -> None:
    """An embedded 'ref' disposition, or a never with an empty uri, leaves a link fetchable."""
    ref_embedded = {
        "type": "resource",
        "resource": {"uri": "https://x/r", "text": "t"},
        "disposition": "ref",
    }
    empty_never = {"type": "resource", "resource": {"uri": "", "text": "t"}, "disposition": "never"}
    result = {"content": [ref_embedded, empty_never, link("https://x/r")]}
    (record,) = reg.ingest(result, server="docs")
    assert stored_copy(result, reg).split("\n")[-1] == stub(record.id, markers.FETCH_HINT)


def test_unreadable_result_shows_unreadable_result(reg: ReferenceRegistry) -> None:
    """A result whose claims can't be read whole shows its links' stubs with UNREADABLE_RESULT."""
    deep: Any = link("https://x/hidden", disposition="never")
    for _ in range(MAX_DEPTH):
        deep = {"d": deep}
    result = {"content": [link("https://x/visible")], "structuredContent": deep}
    (record, *_) = reg.ingest(result, server="docs")
    out = stored_copy(result, reg)
    assert out == stub(record.id, markers.UNREADABLE_RESULT)


def test_unregistered_reference_and_marked_uri(reg: ReferenceRegistry) -> None:
    """With no record, a stub says the host didn't register it, or PAYLOAD_NEVER if marked."""
    reg.ingest(
        {
            "content": [
                {
                    "type": "image",
                    "data": PNG,
                    "mimeType": "image/png",
                    "uri": "https://x/m",
                    "disposition": "never",
                }
            ]
        },
        server="docs",
    )
    result = {"content": [link("https://x/u", name="u.txt"), link("https://x/m")]}
    assert stored_copy(result, reg).split("\n") == [
        stub(None, markers.REFERENCE_UNREGISTERED, "u.txt"),
        stub(None, markers.PAYLOAD_NEVER),
    ]


def test_name_holding_the_uri_is_left_out(reg: ReferenceRegistry) -> None:
    """A never reference whose name is its uri (even with invisible characters) shows no name."""
    uri = "https://x/secret?sig=1"
    result = {"content": [link(uri, name=f"\u200b{uri}", mimeType=uri, disposition="never")]}
    (record,) = reg.ingest(result, server="docs")
    out = stored_copy(result, reg)
    assert out == stub(record.id, markers.PAYLOAD_NEVER)


def test_script_object_resolved_or_unknown(reg: ReferenceRegistry) -> None:
    """A reference script object shows its record's stub; a forged one the unknown marker."""
    (record,) = reg.ingest({"content": [link("https://x/a", name="a")]}, server="docs")
    result = {
        "content": [
            {"type": "reference", "id": record.id, "uri": "https://evil"},
            {"type": "reference", "id": "ref_forged", "uri": "https://evil"},
        ]
    }
    assert stored_copy(result, reg).split("\n") == [
        stub(record.id, markers.FETCH_HINT, "a"),
        markers.UNKNOWN_BLOCK,
    ]


# --- error results ------------------------------------------------------------------------------


def test_error_result_keeps_only_text_blocks(reg: ReferenceRegistry) -> None:
    """An error result keeps only its text blocks on every tool-result lane, and no data."""
    result = {
        "isError": True,
        "content": [text("boom"), emb_text("hidden words"), image(), link("https://x/a")],
        "structuredContent": {"detail": "d"},
    }
    assert stored_copy(result, reg) == "boom"
    assert live_copy(result, reg) == [text("boom")]


def test_error_words_in_embedded_text_do_not_show(reg: ReferenceRegistry) -> None:
    """An error whose words come in an embedded text resource reads as having no words."""
    result = {"isError": True, "content": [emb_text("the words")], "structuredContent": "x"}
    assert stored_copy(result, reg) == ""
    assert live_copy(result, reg) == []


# --- withheld results ---------------------------------------------------------------------------


def test_withheld_copy_keeps_picked_fields_only(reg: ReferenceRegistry) -> None:
    """A withheld result keeps only the host's picked fields, blocks as their text."""
    result = {
        "content": [text("body")],
        "structuredContent": {"title": "t", "secret": "s", "att": emb_text("inner")},
    }
    out = withheld_copy(result, reg, keep=["title", "att", "missing"])
    assert json.loads(out) == {"title": "t", "att": "inner"}
    assert "body" not in out and "secret" not in out


def test_withheld_copy_of_embedded_data_keeps_nothing(reg: ReferenceRegistry) -> None:
    """A withheld result whose data is an embedded resource keeps nothing (the guard's stub)."""
    result = {"content": [], "structuredContent": emb_text("t")}
    assert withheld_copy(result, reg, keep=["resource", "type"]) == ""


def test_withheld_copy_of_error_or_nothing_picked_is_empty(reg: ReferenceRegistry) -> None:
    """An error result, or a pick that names no field, keeps nothing."""
    data = {"title": "t"}
    assert withheld_copy({"isError": True, "structuredContent": data}, reg, ["title"]) == ""
    assert withheld_copy({"structuredContent": data}, reg, ["other"]) == ""
    assert withheld_copy({"structuredContent": [1]}, reg, ["title"]) == ""


# --- live copy ----------------------------------------------------------------------------------


def test_live_copy_cuts_each_text_block_on_its_own(reg: ReferenceRegistry) -> None:
    """Each text block is cut at the cap on its own, not the copy as a whole."""
    result = {"content": [text("a" * 150), text("b" * 150), image()]}
    assert live_copy(result, reg, cap=100) == [text("a" * 100), text("b" * 100), NATIVE_PNG]


def test_embedded_text_cut_at_the_cap_as_a_text_block_is(reg: ReferenceRegistry) -> None:
    """An embedded text is cut at the cap exactly as a text block is."""
    plain = live_copy({"content": [text("x" * 150), image()]}, reg, cap=100)
    embed = live_copy({"content": [emb_text("x" * 150), image()]}, reg, cap=100)
    assert embed == plain == [text("x" * 100), NATIVE_PNG]


def test_embedded_texts_beside_an_image_no_longer_pass_the_cap(reg: ReferenceRegistry) -> None:
    """Embedded texts beside an image count as text, not markers, so they never pass the cap."""
    texts = [emb_text(f"{n}" * 60) for n in range(5)]
    out = live_copy({"content": [*texts, image()]}, reg, cap=100)
    assert out == [*[text(f"{n}" * 60) for n in range(5)], NATIVE_PNG]


def test_490_embedded_texts_beside_an_image_stay_native(reg: ReferenceRegistry) -> None:
    """At the default cap, 490 short embedded texts beside an image still go as blocks."""
    texts = [emb_text("x" * 49) for _ in range(490)]
    out = live_copy({"content": [image(), *texts]}, reg)
    assert isinstance(out, list) and len(out) == 491 and out[0] == NATIVE_PNG


@pytest.mark.parametrize(("make", "marker"), [(emb_wav, WAV_MARKER), (emb_pdf, PDF_MARKER)])
def test_embedded_markers_count_as_markers(reg: ReferenceRegistry, make: Any, marker: str) -> None:
    """Embedded audio and pdf markers count as markers: one fits a cap of 100, two pass it."""
    assert len(marker) <= 100 < 2 * len(marker)
    one = {"content": [image(), make()]}
    assert live_copy(one, reg, cap=100) == [NATIVE_PNG, text(marker)]
    two = {"content": [image(), make(), make()]}
    out = live_copy(two, reg, cap=100)
    assert out == stored_copy(two, reg) == f"{PNG_PLACEHOLDER}\n{marker}\n{marker}"
    assert PNG not in out


def test_links_past_the_cap_send_the_stored_copy(reg: ReferenceRegistry) -> None:
    """Links and markers together past the cap send the stored copy; its image is a placeholder."""
    result = {"content": [image(), link("https://x/a"), {"type": "video"}]}
    reg.ingest(result, server="docs")
    stubs_and_markers = len(stored_copy(result, reg)) - len(PNG_PLACEHOLDER) - 2
    assert isinstance(live_copy(result, reg, cap=stubs_and_markers), list)
    out = live_copy(result, reg, cap=stubs_and_markers - 1)
    assert out == stored_copy(result, reg)
    assert isinstance(out, str) and out.startswith(PNG_PLACEHOLDER)


def test_live_copy_audio_shows_as_its_marker(reg: ReferenceRegistry) -> None:
    """Inline audio in the live copy is the tool-result lane's audio marker."""
    result = {"content": [{"type": "audio", "data": BLOB_3KB, "mimeType": "audio/wav"}]}
    assert live_copy(result, reg) == [text(WAV_MARKER)]


def test_live_copy_of_data_only_result(reg: ReferenceRegistry) -> None:
    """A result with only data goes as one text block of its stored text, cut at the cap."""
    result = {"structuredContent": {"k": "v" * 200}}
    (block,) = live_copy(result, reg, cap=50)
    assert block == text(stored_copy(result, reg)[:50])


def test_live_copy_rejects_a_cap_below_one(reg: ReferenceRegistry) -> None:
    """A cap below one is a host's mistake: ValueError."""
    with pytest.raises(ValueError):
        live_copy({"content": []}, reg, cap=0)


# --- push, channel and injection lanes ----------------------------------------------------------


def test_push_lane_text_and_inline_media_natively(reg: ReferenceRegistry) -> None:
    """Text as text, inline images and audio natively, markers as text blocks."""
    audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
    out = convert_push([text("hi"), image(), audio, {"type": "video"}], reg)
    assert out == [text("hi"), NATIVE_PNG, audio, text(markers.UNKNOWN_BLOCK)]


def test_push_lane_marked_uri_only_image_is_its_stub(reg: ReferenceRegistry) -> None:
    """A uri-only image whose record is marked never becomes its stub, never a url source."""
    (record,) = reg.ingest(
        {"content": [{"type": "image", "uri": "https://x/p.png", "disposition": "never"}]},
        server="docs",
    )
    out = convert_push([{"type": "image", "uri": "https://x/p.png"}], reg)
    assert out == [text(stub(record.id, markers.PAYLOAD_NEVER))]
    assert "https://" not in all_text(out)


def test_push_lane_other_uri_only_image_is_its_stub(reg: ReferenceRegistry) -> None:
    """An unmarked uri-only image is its stub too: the provider never gets a url to fetch."""
    block = {"type": "image", "uri": "https://x/q.png", "mimeType": "image/png"}
    assert convert_push([block], reg) == [
        text(stub(None, markers.REFERENCE_UNREGISTERED, mime="image/png"))
    ]
    (record,) = reg.ingest({"content": [block]}, server="docs")
    assert convert_push([block], reg) == [
        text(stub(record.id, markers.FETCH_HINT, mime="image/png"))
    ]


def test_push_lane_reads_the_message_own_claims(reg: ReferenceRegistry) -> None:
    """A never in the message itself keeps a uri-only image of it to its never stub."""
    never = {
        "type": "image",
        "data": PNG,
        "mimeType": "image/png",
        "uri": "https://x/n",
        "disposition": "never",
    }
    out = convert_push([never, {"type": "image", "uri": "https://x/n"}], reg)
    assert out == [text(markers.WITHHELD_DISPOSITION), text(stub(None, markers.PAYLOAD_NEVER))]


def test_system_position_carries_text_only(reg: ReferenceRegistry) -> None:
    """At the system position an image or audio, inline or embedded, becomes SYSTEM_TEXT_ONLY."""
    audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
    blocks = [text("rules"), image(), audio, emb_png(), emb_wav(), emb_text("more")]
    out = convert_push(blocks, reg, position="system")
    only = text(markers.SYSTEM_TEXT_ONLY)
    assert out == [text("rules"), only, only, only, only, text("more")]
    assert convert_push(blocks, reg, position="user") == convert_push(blocks, reg)


def test_push_lane_empty_image_data_shows_no_data_marker(reg: ReferenceRegistry) -> None:
    """Inline image data that arrived empty shows inline_no_data on the model's lanes."""
    empty = {"type": "image", "data": "", "mimeType": "image/png"}
    assert convert_push([empty], reg) == [text(markers.inline_no_data("image"))]
    assert stored_copy({"content": [empty]}, reg) == markers.inline_no_data("image")


def test_push_lane_of_nothing_or_garbage(reg: ReferenceRegistry) -> None:
    """None converts to no blocks; a non-list to the unknown-block marker."""
    assert convert_push(None, reg) == []
    assert convert_push("text", reg) == [text(markers.UNKNOWN_BLOCK)]


# --- emptiness and render results ---------------------------------------------------------------


@pytest.mark.parametrize(
    "blocks",
    [
        [],
        None,
        [text("")],
        [text("  \n\t")],
        [text("\u200b\u202e ")],
        [emb_text("")],
        [emb_text(" \n"), text("")],
    ],
)
def test_visibly_empty(blocks: Any) -> None:
    """Blank text and embedded resources with blank text are nothing to see."""
    assert is_visibly_empty(blocks) is True


@pytest.mark.parametrize(
    "blocks",
    [
        [text("x")],
        [emb_text("x")],
        [emb_text(""), text("x")],
        [{**emb_text(""), "disposition": "ref"}],
        [emb_png()],
        [emb_pdf()],
        [embedded(blob="AAAA")],
        [image()],
        [link("https://x/a")],
        [{"type": "video"}],
        [{"type": "resource"}],
        "not a list",
    ],
)
def test_not_visibly_empty(blocks: Any) -> None:
    """Every other block, an embedded marker or a withheld notice included, is something to see."""
    assert is_visibly_empty(blocks) is False


def test_block_reached_twice_is_not_empty() -> None:
    """A blank block reached twice would show DATA_TOO_DEEP, so it is something to see."""
    blank = text("")
    assert is_visibly_empty([blank, blank]) is False


@pytest.mark.parametrize(
    "block",
    [
        text("x"),
        text(""),
        image(),
        emb_text("t"),
        emb_png(),
        emb_wav(),
        {"type": "audio", "data": "AA", "mimeType": "a/b"},
    ],
)
def test_shows_as_itself_accepts(block: dict[str, Any]) -> None:
    """Text, inline data and an embedded resource whose contents show as themselves pass."""
    assert shows_as_itself(block) is True


@pytest.mark.parametrize(
    "block",
    [
        emb_pdf(),
        embedded(blob="AAAA"),
        embedded(),
        embedded(mimeType="image/png", blob=""),
        {**emb_text("t"), "disposition": "never"},
        {"type": "image", "data": "", "mimeType": "image/png"},
        {"type": "image", "data": PNG},
        {"type": "image", "uri": "https://x/p.png"},
        link("https://x/a"),
        {"type": "resource"},
        {"type": "reference", "id": "ref_x"},
        {"type": "video"},
        "text",
    ],
)
def test_shows_as_itself_refuses(block: Any) -> None:
    """A block shown as a marker, a placeholder or a stub is refused."""
    assert shows_as_itself(block) is False


# --- well formed, pure, SDK -------------------------------------------------------------------


def test_marker_with_lone_surrogate_media_type_is_well_formed(reg: ReferenceRegistry) -> None:
    """An embedded marker naming a media type with a lone surrogate is well formed on each lane."""
    block = embedded(mimeType="application/x\ud800y", blob=BLOB_3KB)
    marker = markers.embedded_unshowable("application/x\ufffdy", 3072)
    result = {"content": [block]}
    assert stored_copy(result, reg) == marker
    assert live_copy(result, reg) == [text(marker)]
    assert convert_push([block], reg) == [text(marker)]
    data_only = {"structuredContent": block}
    assert stored_copy(data_only, reg) == marker
    for out in (stored_copy(result, reg), json.dumps(convert_push([block], reg))):
        out.encode("utf-8")


def test_texts_made_well_formed_everywhere(reg: ReferenceRegistry) -> None:
    """A lone surrogate in a text or embedded text becomes U+FFFD on every lane."""
    result = {"content": [text("a\udc00"), emb_text("b\ud800")]}
    assert stored_copy(result, reg) == "a\ufffd\nb\ufffd"
    assert live_copy(result, reg) == [text("a\ufffd"), text("b\ufffd")]
    assert convert_push(result["content"], reg) == [text("a\ufffd"), text("b\ufffd")]


def test_lanes_are_pure(reg: ReferenceRegistry) -> None:
    """No lane changes the result, the registry's records or its LRU order."""
    small = ReferenceRegistry(capacity=2)
    small.ingest({"content": [link("o:1"), link("o:2")]}, server=None)
    result = {
        "content": [link("o:1"), {"type": "image", "uri": "o:2", "disposition": "never"}],
        "structuredContent": {"x": [link("o:1")]},
    }
    before = repr(result)
    stored_copy(result, small)
    live_copy(result, small)
    convert_push(result["content"], small)
    withheld_copy(result, small, ["x"])
    assert repr(result) == before
    assert not small.is_marked("o:2")
    small.ingest({"content": [link("o:3")]}, server=None)
    assert small.record_for("o:1") is None  # still the oldest: no lane touched the LRU order


def test_call_tool_result_accepted(reg: ReferenceRegistry) -> None:
    """The mcp SDK's CallToolResult reads like its dict on the tool-result lanes."""
    inner = mcp_types.TextResourceContents(uri="mem://e", mimeType="text/plain", text="inner")
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="x"),
            mcp_types.EmbeddedResource(type="resource", resource=inner),
        ],
    )
    assert stored_copy(result, reg) == "x\ninner"
    assert live_copy(result, reg) == [text("x"), text("inner")]


def test_non_dict_result_shows_unknown_block(reg: ReferenceRegistry) -> None:
    """A result that isn't a dict shows the unknown-block marker and raises nothing."""
    assert stored_copy("nope", reg) == markers.UNKNOWN_BLOCK
    assert live_copy(42, reg) == [text(markers.UNKNOWN_BLOCK)]
    assert withheld_copy(None, reg, ["x"]) == ""
