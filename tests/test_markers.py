"""Tests for scriptbridge.markers: the exact marker strings and the helpers that build them."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scriptbridge import markers


def test_fixed_markers_are_the_contract_strings() -> None:
    """Each fixed marker is exactly SPEC section 2's text."""
    assert markers.REFERENCE_NO_LINK == "[Reference not shown: it arrived without a link.]"
    assert (
        markers.EMBEDDED_NO_MEDIA_TYPE
        == "[Resource not shown: its data arrived without a media type.]"
    )
    assert markers.EMBEDDED_UNREADABLE == (
        "[Resource not shown: its contents arrived as neither text nor data, or as both.]"
    )
    assert markers.PAYLOAD_NEVER == "a server asked that its content never reach you or your tools"
    assert (
        markers.SYSTEM_TEXT_ONLY == "[image block not shown: the system prompt carries text only.]"
    )
    assert (
        markers.WITHHELD_DISPOSITION
        == "[Content withheld: inline content can't carry a disposition.]"
    )
    assert markers.UNKNOWN_BLOCK == "[Block not shown: this host doesn't know its type.]"
    assert markers.INLINE_NO_MEDIA_TYPE == "[Data not shown: it arrived without a media type.]"
    assert markers.DATA_TOO_DEEP == "[Data not shown: it is nested deeper than this host reads.]"
    assert markers.REFERENCE_UNREGISTERED == "the host didn't register this reference"
    assert markers.UNREADABLE_RESULT == (
        "its result couldn't be read whole for a server's never, so nothing in it is fetched"
    )
    assert markers.FETCH_HINT == "not fetched yet; fetch it by its id to read it"


def test_marker_functions_match_the_spec_examples() -> None:
    """The marker functions give SPEC's own examples for its own arguments."""
    assert markers.embedded_unshowable("application/pdf", 12 * 1024) == (
        "[Resource not shown: this host can't display its data (application/pdf, ~12KB).]"
    )
    assert markers.inline_no_data("image") == "[image not shown: it arrived without data.]"
    assert markers.inline_no_data("audio") == "[audio not shown: it arrived without data.]"
    assert markers.audio_in_tool_result("audio/wav", 3 * 1024) == (
        "[Audio not shown: this host's tool results carry text and images only (audio/wav, ~3KB).]"
    )
    assert markers.image_placeholder("image/png", 3 * 1024) == "[image: image/png, ~3KB]"
    assert (
        markers.reference_stub(
            "ref_9f2c", "report.pdf", "application/pdf", 12 * 1024, "saved: refs/ref_9f2c.pdf"
        )
        == "[reference ref_9f2c: report.pdf (application/pdf, ~12KB) — saved: refs/ref_9f2c.pdf]"
    )


def test_reference_stub_leaves_out_unknown_facts() -> None:
    """Name, media type and size are each left out of a stub when unknown."""
    tail = markers.PAYLOAD_NEVER
    assert markers.reference_stub("ref_1", None, None, None, tail) == f"[reference ref_1 — {tail}]"
    assert (
        markers.reference_stub("ref_1", None, "image/png", None, tail)
        == f"[reference ref_1 (image/png) — {tail}]"
    )
    assert (
        markers.reference_stub(None, "a.txt", None, 5, markers.FETCH_HINT)
        == f"[reference: a.txt (~5B) — {markers.FETCH_HINT}]"
    )


def test_fetch_refused_is_the_host_facing_refusal() -> None:
    """A refused fetch reads exactly as SPEC section 5 words it."""
    assert markers.fetch_refused("ref_1", markers.PAYLOAD_NEVER) == (
        'couldn\'t fetch "ref_1": a server asked that its content never reach you or your tools.'
        " Calling again won't change that."
    )


@pytest.mark.parametrize(
    ("size", "label"),
    [
        (0, "~0B"),
        (1023, "~1023B"),
        (1024, "~1KB"),
        (1535, "~1KB"),
        (1536, "~2KB"),
        (12 * 1024, "~12KB"),
        (1024 * 1024 - 1, "~1024KB"),
        (1024 * 1024, "~1.0MB"),
        (int(2.5 * 1024 * 1024), "~2.5MB"),
        (-5, "~0B"),
    ],
)
def test_size_label_thresholds(size: int, label: str) -> None:
    """Sizes are ~NB under 1,024, ~NKB (rounded) under 1 MiB, else ~N.NMB."""
    assert markers.size_label(size) == label


@given(st.binary(max_size=3000), st.sampled_from(["", "\n", " "]))
def test_decoded_size_is_exact_for_base64(payload: bytes, wrap: str) -> None:
    """A blob's decoded size is exact for well-formed base64, wrapped or not."""
    text = base64.b64encode(payload).decode()
    if wrap:
        text = wrap.join(text[i : i + 76] for i in range(0, len(text), 76)) + wrap
    assert markers.decoded_size(text) == len(payload)


def test_decoded_size_of_garbage_never_raises() -> None:
    """Malformed base64 gets a size from its length, never an error or a negative."""
    assert markers.decoded_size("====") == 1
    assert markers.decoded_size("") == 0
    assert markers.decoded_size("=") == 0
    assert markers.decoded_size("\ud800\ud800") >= 0


def test_clean_label_removes_controls_and_format_characters() -> None:
    """Control, bidi and zero-width characters go; whitespace collapses; the ends are stripped."""
    assert markers.clean_label("  image/\u202epng\u200b\x00 ") == "image/png"
    assert markers.clean_label("application/\tpdf") == "application/pdf"
    assert markers.clean_label("text/plain;   charset=utf-8") == "text/plain; charset=utf-8"
    assert markers.clean_label("a\u00a0\u00a0b") == "a b"


def test_clean_label_cuts_at_100_and_is_well_formed() -> None:
    """A media type is cut at 100 characters and its lone surrogates become U+FFFD."""
    assert markers.clean_label("x" * 500) == "x" * 100
    assert markers.clean_label("image/\ud800png") == "image/\ufffdpng"
    marker = markers.embedded_unshowable("app/\udfff", 10)
    marker.encode("utf-8")
    assert "\ufffd" in marker


@given(st.text())
def test_well_formed_always_encodes(text: str) -> None:
    """Every well-formed text encodes as UTF-8, and a well-formed one is left as it is."""
    out = markers.well_formed(text)
    out.encode("utf-8")
    assert len(out) == len(text)
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        assert out == text


@given(st.text())
def test_clean_label_output_is_clean(text: str) -> None:
    """A cleaned label has no control or format character, is at most 100 long, and encodes."""
    import unicodedata

    out = markers.clean_label(text)
    out.encode("utf-8")
    assert len(out) <= 100
    assert out == out.strip()
    assert not any(unicodedata.category(c) in ("Cc", "Cf") for c in out)
