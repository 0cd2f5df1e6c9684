"""Tests for the one classifier (SPEC section 2), kind by kind."""

from __future__ import annotations

from typing import Any

import pytest

from scriptbridge import markers
from scriptbridge._classify import (
    Embedded,
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
)

PDF_12KB = "A" * (16 * 1024)  # 16 Ki base64 characters decode to 12 KiB


def embedded(**record: Any) -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": "mem://doc", **record}}


def test_text_block() -> None:
    """A string text is text; a text block whose text isn't a string is unknown."""
    assert classify_block({"type": "text", "text": "hi"}) == Text("hi")
    assert classify_block({"type": "text", "text": 5}) == Unknown()
    assert classify_block({"type": "text"}) == Unknown()


@pytest.mark.parametrize("kind", ["image", "audio"])
def test_inline_data(kind: str) -> None:
    """String data with a string media type is inline; an empty blob stays inline."""
    assert classify_block({"type": kind, "data": "AAAA", "mimeType": "x/y"}) == Inline(
        kind,  # type: ignore[arg-type]
        "AAAA",
        "x/y",
    )
    empty = classify_block({"type": kind, "data": "", "mimeType": "image/png"})
    assert isinstance(empty, Inline)
    assert empty.data == ""


@pytest.mark.parametrize("mime", [None, 5, "", "   ", ["image/png"]])
def test_inline_without_media_type(mime: object) -> None:
    """Inline data with no usable string media type shows INLINE_NO_MEDIA_TYPE."""
    block = {"type": "image", "data": "AAAA", "mimeType": mime}
    assert classify_block(block) == InlineNoMediaType("image")


@pytest.mark.parametrize("disposition", ["never", "ref", "", False, 0, "inline", {}])
def test_inline_claiming_a_disposition_is_withheld(disposition: object) -> None:
    """Inline data carrying any non-null disposition, falsy ones included, is withheld."""
    block = {"type": "image", "data": "AAAA", "mimeType": "image/png", "disposition": disposition}
    result = classify_block(block)
    assert isinstance(result, Withheld)
    assert result.never_uri is None
    assert not result.embedded


def test_inline_never_claims_its_uri_even_with_data() -> None:
    """An image block's never claims its uri whether or not it has data."""
    block = {
        "type": "image",
        "data": "AA",
        "mimeType": "image/png",
        "uri": "https://x/a.png",
        "disposition": "never",
    }
    assert classify_block(block) == Withheld(never_uri="https://x/a.png", embedded=False)
    null_disposition = {"type": "image", "data": "AA", "mimeType": "image/png", "disposition": None}
    assert isinstance(classify_block(null_disposition), Inline)


@pytest.mark.parametrize("kind", ["image", "audio"])
def test_by_uri_media_is_a_reference(kind: str) -> None:
    """An image or audio block with a uri and no data reads as a reference to that uri."""
    block = {"type": kind, "uri": "https://x/a", "mimeType": "image/png", "disposition": "never"}
    result = classify_block(block)
    assert isinstance(result, Reference)
    assert (result.source, result.uri, result.never, result.mime) == (
        kind,
        "https://x/a",
        True,
        "image/png",
    )


def test_media_with_neither_data_nor_uri_is_unknown() -> None:
    """An image with no string data and no uri of its own is an unknown block."""
    assert classify_block({"type": "image", "uri": "", "data": 7}) == Unknown()


def test_mcpl_reference_and_resource_link() -> None:
    """A resource with a uri of its own, or a resource_link, is a reference with its facts."""
    ref = classify_block(
        {
            "type": "resource",
            "uri": "https://x/r.pdf",
            "name": "r.pdf",
            "mimeType": "application/pdf",
            "size": 12,
            "disposition": "never",
            "expires": "2030-01-01T00:00:00Z",
        }
    )
    assert ref == Reference(
        "resource", "https://x/r.pdf", "r.pdf", "application/pdf", 12, True, "2030-01-01T00:00:00Z"
    )
    link = classify_block({"type": "resource_link", "uri": "mcp://a", "name": 5, "size": True})
    assert link == Reference("resource_link", "mcp://a", None, None, None, False, None)


@pytest.mark.parametrize("disposition", ["never", "NEVER", " Never\n"])
def test_never_ignores_case_and_surrounding_space(disposition: str) -> None:
    """A disposition spelled never in any case still claims never (confidentiality first)."""
    result = classify_block({"type": "resource_link", "uri": "x:y", "disposition": disposition})
    assert isinstance(result, Reference)
    assert result.never


@pytest.mark.parametrize("disposition", ["ref", "nev er", None, 1, ["never"]])
def test_other_dispositions_are_not_never(disposition: object) -> None:
    """Only the word never claims never."""
    result = classify_block({"type": "resource_link", "uri": "x:y", "disposition": disposition})
    assert isinstance(result, Reference)
    assert not result.never


@pytest.mark.parametrize("size", [-1, 1.5, "12", True])
def test_bad_sizes_are_unknown(size: object) -> None:
    """A size counts only as a non-negative int."""
    result = classify_block({"type": "resource", "uri": "x:y", "size": size})
    assert isinstance(result, Reference)
    assert result.size is None


def test_resource_link_without_uri_has_no_link() -> None:
    """A resource_link with no uri of its own is a reference without a link."""
    assert classify_block({"type": "resource_link", "name": "x"}) == NoLink()
    assert classify_block({"type": "resource_link", "uri": ""}) == NoLink()


@pytest.mark.parametrize("top_uri", ["absent", None, "", 7])
def test_embedded_text_with_no_uri_of_its_own(top_uri: object) -> None:
    """A top-level uri that is absent, null, empty or not a string is none of its own."""
    block = embedded(mimeType="text/plain", text="hello")
    if top_uri != "absent":
        block["uri"] = top_uri
    assert classify_block(block) == Embedded("mem://doc", Text("hello"))


def test_embedded_with_a_uri_of_its_own_is_a_reference() -> None:
    """A resource block with a uri of its own is MCPL's reference, whatever it embeds."""
    block = {**embedded(text="x"), "uri": "https://x/own"}
    result = classify_block(block)
    assert isinstance(result, Reference)
    assert result.uri == "https://x/own"


@pytest.mark.parametrize("record", [None, "mem://x", {"text": "x"}, {"uri": 5, "text": "x"}])
def test_resource_without_usable_record_has_no_link(record: object) -> None:
    """A resource block with no uri and no record with a string uri shows the no-link line."""
    assert classify_block({"type": "resource", "resource": record}) == NoLink()
    assert classify_block({"type": "resource"}) == NoLink()


def test_embedded_empty_record_uri_is_still_embedded() -> None:
    """An empty string uri under resource is still an embedded resource's uri."""
    block = {"type": "resource", "resource": {"uri": "", "text": "t"}}
    assert classify_block(block) == Embedded("", Text("t"))


@pytest.mark.parametrize(
    ("mime", "kind"),
    [
        ("image/png", "image"),
        ("Image/PNG", "image"),
        ("IMAGE/jpeg", "image"),
        ("image/svg+xml", "image"),
        ("image/png; charset=x", "image"),
        ("audio/wav", "audio"),
        ("AUDIO/Mpeg", "audio"),
    ],
)
def test_embedded_image_and_audio_blobs(mime: str, kind: str) -> None:
    """A blob of image/<subtype> or audio/<subtype>, in any case, shows as inline data as sent."""
    result = classify_block(embedded(mimeType=mime, blob="AAAA"))
    assert result == Embedded("mem://doc", Inline(kind, "AAAA", mime))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "mime",
    ["application/pdf", "image", "image/", "image//png", "imagex/png", " image/png", "audio"],
)
def test_embedded_blob_of_other_types_shows_a_marker(mime: str) -> None:
    """A bare image, an empty subtype or any other type shows the unshowable marker."""
    result = classify_block(embedded(mimeType=mime, blob=PDF_12KB))
    assert result == Embedded("mem://doc", Marker(markers.embedded_unshowable(mime, 12 * 1024)))


def test_embedded_pdf_marker_text() -> None:
    """An embedded pdf shows its cleaned type and decoded size in the marker."""
    result = classify_block(embedded(mimeType="application/pdf", blob=PDF_12KB))
    assert isinstance(result, Embedded)
    assert result.contents == Marker(
        "[Resource not shown: this host can't display its data (application/pdf, ~12KB).]"
    )


@pytest.mark.parametrize("mime", ["absent", None, "", 3])
def test_embedded_blob_without_media_type(mime: object) -> None:
    """A blob with no media type shows EMBEDDED_NO_MEDIA_TYPE."""
    record: dict[str, Any] = {"blob": "AAAA"}
    if mime != "absent":
        record["mimeType"] = mime
    assert classify_block(embedded(**record)) == Embedded(
        "mem://doc", Marker(markers.EMBEDDED_NO_MEDIA_TYPE)
    )


@pytest.mark.parametrize(
    "record",
    [
        {"text": "a", "blob": "AAAA"},
        {},
        {"text": 5},
        {"blob": None},
        {"text": None, "blob": 3},
    ],
)
def test_embedded_both_or_neither(record: dict[str, Any]) -> None:
    """Both a string text and a string blob, or neither, shows EMBEDDED_UNREADABLE."""
    assert classify_block(embedded(**record)) == Embedded(
        "mem://doc", Marker(markers.EMBEDDED_UNREADABLE)
    )


@pytest.mark.parametrize("disposition", ["never", "ref", "", False])
def test_embedded_claiming_a_disposition_is_withheld(disposition: object) -> None:
    """An embedded resource carrying a disposition is withheld; only never claims its uri."""
    block = {**embedded(text="secret"), "disposition": disposition}
    expected = "mem://doc" if disposition == "never" else None
    assert classify_block(block) == Withheld(never_uri=expected, embedded=True)


def test_embedded_never_with_empty_uri_claims_nothing() -> None:
    """An empty uri marks nothing."""
    block = {"type": "resource", "resource": {"uri": "", "text": "x"}, "disposition": "never"}
    assert classify_block(block) == Withheld(never_uri=None, embedded=True)


def test_script_object_and_forgeries() -> None:
    """A reference dict with a string id is a script object candidate; others are unknown."""
    assert classify_block({"type": "reference", "id": "ref_1"}) == ScriptObject("ref_1")
    assert classify_block({"type": "reference", "id": None}) == Unknown()
    assert classify_block({"type": "reference", "id": ""}) == Unknown()


@pytest.mark.parametrize(
    "block",
    [
        None,
        5,
        "text",
        ["type", "text"],
        {},
        {"type": "video"},
        {"type": None},
        {"type": ["text"]},
        {"type": "Text", "text": "x"},
    ],
)
def test_unknown_blocks(block: object) -> None:
    """Any other type, or a non-dict, is unknown."""
    assert classify_block(block) == Unknown()


def test_hostile_dict_subclass_is_unknown() -> None:
    """A dict whose methods raise classifies as unknown instead of raising."""

    class Hostile(dict[str, Any]):
        def get(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("boom")

    assert classify_block(Hostile(type="text", text="x")) == Unknown()


def test_classification_does_not_mutate_the_block() -> None:
    """Classifying leaves the block exactly as it was."""
    block = {
        "type": "resource",
        "resource": {"uri": "mem://a", "blob": "AA", "mimeType": "x/y"},
        "disposition": "never",
    }
    snapshot = repr(block)
    classify_block(block)
    assert repr(block) == snapshot
