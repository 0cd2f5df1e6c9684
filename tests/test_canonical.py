"""Canonical keys (SPEC section 4): the fast path for an already-canonical uri gives exactly the
key the full path gives, on every spelling class SPEC names and on generated uris."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scriptbridge._canonical import _full_key, canonical_key

SPELLINGS = [
    "http://host.example/a",
    "HTTP://Host/a",
    "HTTP://host.example/a",
    "http://Host.Example/a",
    "http://host.example:80/a",
    "https://host.example:443/a",
    "http://host.example:443/a",
    "http://host.example:/a",
    "http://host.example/./a",
    "http://host.example/a/.",
    "http://host.example/x/../a",
    "http://host.example/a/..",
    "http://host.example/.a/b.",
    "http://host.example/a#x",
    "http://host.example/a#",
    "http://u@host.example/a",
    "http://u:p@host.example/a",
    "http://@host.example/a",
    "http://0x7f.0.0.1/a",
    "http://2130706433/a",
    "http://0177.0.0.1/a",
    "http://127.1/a",
    "http://127.0.0.1/a",
    "http://1.2.3.a/a",
    "http://a.0x10/a",
    "http://[::ffff:127.0.0.1]/a",
    "http://[2001:0db8:0:0:0:0:0:1]/a",
    "http://bücher.example/a",
    "http://xn--bcher-kva.example/a",
    "http://BÜCHER.example/a",
    "http://xn--a.example/a",
    "http://host.example./a",
    "http://host..example/a",
    "http://-host.example/a",
    "http://host.example/%61",
    "http://host.example/a%2fb",
    "http://host.example/a%7Eb",
    "http://host.example/a%",
    "http://host.example/a?x=%41",
    "http://host.example/a?x=.",
    "http://host.example/a?",
    "http://host.example?x",
    "http://host.example?",
    "http://host.example",
    "http://host.example/",
    "http://host.example//a",
    "http://host.example/a//",
    "http://host.example/a b",
    "http://host.example/a?b c",
    "http://host.example/a\\b",
    "http://host.example/a'b(c)*!$&+,;=:@",
    "http://host.example/a?'/?",
    "http://host.example/a\x00",
    "http://host.example/\u0101",
    "http:host.example/a",
    "http:/host.example/a",
    "http:///a",
    "https://h.example/run/1",
    "docs://x/y",
    "DOCS://x/y",
    "no-scheme",
    ":x",
    "",
]


@pytest.mark.parametrize("uri", SPELLINGS)
def test_the_fast_path_gives_the_full_paths_key_on_each_spelling_class(uri: str) -> None:
    """Each spelling class of SPEC section 4 gets from the fast path the full path's key."""
    assert canonical_key(uri) == _full_key(uri)


_SCHEME = st.sampled_from(["http", "https", "HTTP", "Https", "ftp", "docs"])
_LABEL = st.text(alphabet="abcxyz019-AZ", min_size=1, max_size=6)
_NAME = st.lists(_LABEL, min_size=1, max_size=3).map(".".join)
_HOST = st.one_of(
    _NAME,
    _NAME.map(lambda name: name + "."),
    st.sampled_from(["0x7f.0.0.1", "2130706433", "127.1", "[::1]", "[::ffff:7f00:1]", "bücher.de"]),
    st.sampled_from(["xn--bcher-kva.de", "xn--a.de", "a..b", "h.0x1", "1.2.3.4", "h.example"]),
)
_PORT = st.sampled_from(["", ":", ":80", ":443", ":8080", ":0"])
_USERINFO = st.sampled_from(["", "u@", "u:p@", "@"])
_SEGMENT = st.text(alphabet="abAB09-_~.!$&'()*+,;=:@%2fF4 \\\u0101", max_size=5)
_PATH = st.lists(_SEGMENT, max_size=4).map(lambda parts: "".join("/" + p for p in parts))
_QUERY = st.one_of(st.just(""), st.text(alphabet="ab=&?/.%41 '", max_size=6).map("?".__add__))
_FRAGMENT = st.one_of(st.just(""), st.text(alphabet="ab#", max_size=3).map("#".__add__))
_URI = st.builds(
    lambda scheme, user, host, port, path, query, fragment: (
        f"{scheme}://{user}{host}{port}{path}{query}{fragment}"
    ),
    _SCHEME,
    _USERINFO,
    _HOST,
    _PORT,
    _PATH,
    _QUERY,
    _FRAGMENT,
)


@settings(max_examples=600, deadline=None)
@given(st.one_of(_URI, st.text(max_size=40), st.text(max_size=30).map("http://h.example/".__add__)))
@example("http://h.example?x")
def test_the_fast_path_gives_the_full_paths_key(uri: str) -> None:
    """On generated uris (every part of SPEC section 4 varied) the two paths agree."""
    assert canonical_key(uri) == _full_key(uri)


def test_an_empty_path_before_a_query_is_one_request_with_a_slash() -> None:
    """``http://h.example?x`` and ``http://h.example/?x`` lead to one request: one key."""
    assert canonical_key("http://h.example?x") == canonical_key("http://h.example/?x")


@pytest.mark.parametrize(
    ("stray", "same"),
    [
        ("https://example.com/./%41%%41f-NN", "https://example.com/A%25Af-NN"),
        ("https://example.com/a%", "https://example.com/a%25"),
        ("https://example.com/a%4", "https://example.com/a%254"),
        ("https://example.com/a%zz", "https://example.com/a%25zz"),
        ("https://example.com/?q=%%41", "https://example.com/?q=%25A"),
    ],
)
def test_a_stray_percent_is_a_literal_percent_and_every_key_is_its_own_key(
    stray: str, same: str
) -> None:
    """A ``%`` not starting an escape is the literal percent ``%25`` is (a lenient server reads
    both so), so the two share a key, and the key is its own key: decoding ``%41`` beside a
    stray ``%`` can't make a new escape (``%41%%41f`` gave ``A%Af``, whose own key is
    ``A%AF``: found by the canonical fuzz target)."""
    key = canonical_key(stray)
    assert key == canonical_key(same)
    assert canonical_key(key) == key
