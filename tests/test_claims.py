"""Tests for the claims walk (SPEC section 3): what never a result claims, and failing closed."""

from __future__ import annotations

from functools import partial
from typing import Any

import mcp.types as mcp_types
from tool_results import link as resource_link

from scriptbridge import read_claims
from scriptbridge._walk import MAX_DEPTH, NODE_BUDGET

link = partial(resource_link, name="n")
"""A resource link named ``n``."""


def nested(value: Any, levels: int) -> Any:
    for _ in range(levels):
        value = {"wrap": [value]}
    return value


def test_reference_never_claims_its_uri() -> None:
    """A reference's own never claims its uri; a plain one claims nothing but is read."""
    claims = read_claims({"content": [link("a:1", disposition="never"), link("a:2")]})
    assert claims.never == {"a:1"}
    assert [r.uri for r in claims.references] == ["a:1", "a:2"]
    assert claims.unreadable is None


def test_inline_and_embedded_never_claim_their_uris() -> None:
    """Inline data's never claims its uri, an embedded resource's its resource.uri."""
    result = {
        "content": [
            {
                "type": "image",
                "data": "AA",
                "mimeType": "image/png",
                "uri": "img:1",
                "disposition": "never",
            },
            {"type": "resource", "resource": {"uri": "emb:1", "text": "t"}, "disposition": "never"},
        ]
    }
    assert read_claims(result).never == {"img:1", "emb:1"}


def test_only_never_counts_from_inline_and_embedded() -> None:
    """Inline data or an embedded resource claiming another disposition marks nothing."""
    result = {
        "content": [
            {
                "type": "image",
                "data": "AA",
                "mimeType": "image/png",
                "uri": "img:1",
                "disposition": "ref",
            },
            {"type": "resource", "resource": {"uri": "emb:1", "text": "t"}, "disposition": "ref"},
        ]
    }
    assert read_claims(result).never == frozenset()


def test_empty_uri_marks_nothing() -> None:
    """An embedded resource with an empty uri and a never claims no uri."""
    result = {
        "content": [
            {"type": "resource", "resource": {"uri": "", "text": "t"}, "disposition": "never"}
        ]
    }
    assert read_claims(result).never == frozenset()


def test_structured_content_is_read_at_any_depth() -> None:
    """A never nested deep in structuredContent (within the depth limit) is claimed."""
    result = {"content": [], "structuredContent": nested(link("deep:1", disposition="never"), 40)}
    claims = read_claims(result)
    assert claims.never == {"deep:1"}
    assert claims.unreadable is None


def test_fields_of_blocks_and_meta_are_read() -> None:
    """A never nested in a block's own fields or in the result's _meta is claimed."""
    result = {
        "content": [
            {
                "type": "text",
                "text": "t",
                "_meta": {"attachment": link("meta:1", disposition="never")},
            }
        ],
        "_meta": {"also": [link("meta:2", disposition="never")]},
    }
    assert read_claims(result).never == {"meta:1", "meta:2"}


def test_walk_stops_at_an_embedded_resource() -> None:
    """A never nested inside an embedded resource (its _meta and all) marks nothing."""
    result = {
        "content": [
            {
                "type": "resource",
                "resource": {
                    "uri": "emb:1",
                    "text": "t",
                    "_meta": {"x": link("inside:1", disposition="never")},
                },
                "_meta": {"y": link("inside:2", disposition="never")},
            }
        ]
    }
    claims = read_claims(result)
    assert claims.never == frozenset()
    assert claims.references == ()


def test_error_results_are_walked_the_same() -> None:
    """An error result's nested never is claimed like a success's."""
    result = {
        "isError": True,
        "content": [{"type": "text", "text": "failed"}],
        "structuredContent": {"attachment": link("err:1", disposition="never")},
    }
    assert read_claims(result).never == {"err:1"}


def test_call_tool_result_is_accepted() -> None:
    """The mcp SDK's CallToolResult is read by alias, structuredContent included."""
    result = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text="x")],
        structuredContent={"ref": link("sdk:1", disposition="never")},
    )
    assert read_claims(result).never == {"sdk:1"}


def test_too_deep_fails_closed_but_keeps_what_it_read() -> None:
    """Past the depth limit the claims are unreadable, yet nevers read elsewhere still count."""
    result = {
        "content": [link("shallow:1", disposition="never")],
        "structuredContent": nested(link("deep:1", disposition="never"), MAX_DEPTH),
    }
    claims = read_claims(result)
    assert claims.unreadable is not None and "deeper" in claims.unreadable
    assert claims.never == {"shallow:1"}


def test_cycle_fails_closed() -> None:
    """A cycle counts as too deep: the claims are unreadable, and the walk ends."""
    loop: list[Any] = []
    loop.append(loop)
    claims = read_claims({"content": [], "structuredContent": {"loop": loop}})
    assert claims.unreadable is not None and "twice" in claims.unreadable


def test_shared_container_fails_closed() -> None:
    """A list shared under one result many times is reached twice: unreadable, linear time."""
    shared = [link("s:1")] * 10
    layers: Any = shared
    for _ in range(60):
        layers = [layers, layers]
    claims = read_claims({"content": [], "structuredContent": layers})
    assert claims.unreadable is not None and "twice" in claims.unreadable, claims.unreadable


def test_unconvertible_value_fails_closed() -> None:
    """A value that is not plain data makes the claims unreadable."""
    claims = read_claims({"content": [], "structuredContent": {"x": object()}})
    assert claims.unreadable is not None and "object" in claims.unreadable


def test_node_budget_fails_closed() -> None:
    """A result holding more values than the budget is unreadable."""
    claims = read_claims({"content": [], "structuredContent": [0] * (NODE_BUDGET + 1)})
    assert claims.unreadable is not None and "more than" in claims.unreadable


def test_non_dict_result_is_unreadable() -> None:
    """A result that is neither a dict nor a list of blocks can't be read for a never."""
    for result in ("not a result", None):
        unreadable = read_claims(result).unreadable
        assert unreadable is not None and "not a dict" in unreadable, unreadable


def test_a_message_of_blocks_reads_as_its_content() -> None:
    """A push, channel or injection message (a list of blocks) is read as a result's content."""
    claims = read_claims([link("push:1", disposition="never"), {"type": "text", "text": "x"}])
    assert claims.never == {"push:1"}
    assert claims.unreadable is None


def test_ten_thousand_levels_never_overflow_the_stack() -> None:
    """Hostile nesting far past the limit fails closed without recursing on the Python stack."""
    claims = read_claims({"content": [], "structuredContent": nested("x", 10_000)})
    assert claims.unreadable is not None and "deeper" in claims.unreadable, claims.unreadable


def test_result_itself_is_not_a_block() -> None:
    """A result dict with a type field is still read as a result, its fields walked."""
    result = {
        "type": "resource",
        "uri": "top:1",
        "disposition": "never",
        "content": [link("c:1", disposition="never")],
    }
    assert read_claims(result).never == {"c:1"}


def test_claims_walk_is_pure() -> None:
    """Reading claims leaves the result unchanged."""
    result = {"content": [link("a:1", disposition="never")], "structuredContent": {"k": [1, 2]}}
    before = repr(result)
    read_claims(result)
    assert repr(result) == before


def test_walk_stops_at_an_embedded_resource_claiming_a_disposition() -> None:
    """An embedded resource that claims a disposition is still not read into, beyond its never."""
    result = {
        "content": [
            {
                "type": "resource",
                "disposition": "never",
                "resource": {
                    "uri": "emb:1",
                    "text": "t",
                    "_meta": {"x": link("inside:1", disposition="never")},
                },
            }
        ]
    }
    claims = read_claims(result)
    assert claims.never == {"emb:1"}
    assert claims.references == ()


class _FakeStr:
    """An object that claims to be a str through a ``__class__`` property."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str


def test_an_object_posing_as_a_scalar_makes_the_result_unreadable() -> None:
    """A value that only claims to be a str is not plain data: the claims fail closed."""
    claims = read_claims({"content": [], "structuredContent": {"note": _FakeStr()}})
    assert claims.unreadable is not None and "_FakeStr" in claims.unreadable
