"""Tests for the wire shapes of SPEC section 1: each well-formed shape classifies as its kind."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scriptbridge._blocks import (
    ByUriBlock,
    EmbeddedResourceBlock,
    InlineBlock,
    ReferenceBlock,
    ResourceLinkBlock,
    TextBlock,
)
from scriptbridge._classify import (
    Embedded,
    Inline,
    InlineNoMediaType,
    NoLink,
    Reference,
    Text,
    Unknown,
    Withheld,
    classify_block,
)


@settings(max_examples=200, deadline=None)
@given(st.from_type(TextBlock))
def test_text_shape(block: dict[str, Any]) -> None:
    """A text block of SPEC's shape is text."""
    assert classify_block(block) == Text(block["text"])


@settings(max_examples=200, deadline=None)
@given(st.from_type(InlineBlock))
def test_inline_shape(block: dict[str, Any]) -> None:
    """Inline data of SPEC's shape is inline, withheld when it claims a disposition."""
    kind = classify_block(block)
    if block.get("disposition") is not None:
        assert isinstance(kind, Withheld)
    elif block["mimeType"].strip():
        assert kind == Inline(block["type"], block["data"], block["mimeType"])
    else:
        assert kind == InlineNoMediaType(block["type"])


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.from_type(ByUriBlock), st.from_type(ResourceLinkBlock), st.from_type(ReferenceBlock)
    )
)
def test_reference_shapes(block: dict[str, Any]) -> None:
    """By-uri media, resource links and MCPL references are references to their own uri."""
    kind = classify_block(block)
    if block["uri"]:
        assert isinstance(kind, Reference) and kind.uri == block["uri"]
    elif block["type"] in ("image", "audio"):
        assert isinstance(kind, Unknown)  # neither data nor a uri of its own
    else:
        assert isinstance(kind, NoLink)


@settings(max_examples=200, deadline=None)
@given(st.from_type(EmbeddedResourceBlock))
def test_embedded_shape(block: dict[str, Any]) -> None:
    """An embedded resource of SPEC's shape is embedded, under its record's uri."""
    kind = classify_block(block)
    assert isinstance(kind, Embedded) and kind.uri == block["resource"]["uri"]
