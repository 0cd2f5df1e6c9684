"""Tests for what a reader may learn of one reference (scriptbridge._disclosure)."""

from __future__ import annotations

import pytest

from scriptbridge import ReferenceRegistry, markers, read_claims
from scriptbridge._classify import Reference
from scriptbridge._disclosure import show_record, show_reference, shows_uri


def reference(uri: str, **facts: object) -> Reference:
    return Reference(
        "resource",
        uri,
        facts.get("name"),
        facts.get("mime"),  # type: ignore[arg-type]
        facts.get("size"),
        bool(facts.get("never")),
        None,
    )  # type: ignore[arg-type]


NO_CLAIMS = read_claims({"content": []})


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("https://x/a.pdf", True),
        ("mcp://docs/a", True),
        ("https://u:p@x/a", False),
        ("https://x/a?sig=1", False),
        ("https://x/a#f", False),
        ("https://x/\u200ba", False),
        ("https://x/\ud800", False),
        ("https://[::1/a", False),
        ("https://x/a b", False),
    ],
)
def test_shows_uri(uri: str, shown: bool) -> None:
    """A uri shows only without a credential and without anything misleading."""
    assert shows_uri(uri) is shown


def test_label_holding_the_uri_is_left_out() -> None:
    """A name or media type that holds the reference's uri (raw or cleaned) is left out."""
    reg = ReferenceRegistry()
    shown = show_reference(
        reference("https://x/secret", name="see https://x/secret", mime="https://x/\u200bsecret"),
        reg,
        NO_CLAIMS,
    )
    assert (shown.name, shown.mime) == (None, None)
    assert "https://x/secret" not in shown.stub()


def test_stub_tails() -> None:
    """A stub ends with the reason, else the saved path, else the fetch hint."""
    reg = ReferenceRegistry()
    plain, never = reg.ingest(
        {
            "content": [
                {"type": "resource_link", "uri": "https://x/p", "name": "p.txt"},
                {"type": "resource_link", "uri": "https://x/n", "disposition": "never"},
            ]
        },
        server="s",
    )
    assert show_record(plain, reg, NO_CLAIMS).stub().endswith(f"— {markers.FETCH_HINT}]")
    reg.record_saved(plain, "refs/p.txt", 1, "0" * 64)
    assert show_record(plain, reg, NO_CLAIMS).stub().endswith("— saved: refs/p.txt]")
    assert show_record(never, reg, NO_CLAIMS).stub().endswith(f"— {markers.PAYLOAD_NEVER}]")


def test_never_of_the_same_result_withholds_a_script_object() -> None:
    """A record named by id still shows never when a never of the same result names its uri."""
    reg = ReferenceRegistry()
    (record,) = reg.ingest(
        {"content": [{"type": "resource_link", "uri": "https://x/a"}]}, server="s"
    )
    claims = read_claims(
        {
            "content": [
                {
                    "type": "image",
                    "data": "",
                    "mimeType": "image/png",
                    "uri": "https://x/a",
                    "disposition": "never",
                }
            ]
        }
    )
    shown = show_record(record, reg, claims)
    assert (shown.uri, shown.saved_to, shown.unfetchable) == (None, None, markers.PAYLOAD_NEVER)
