"""Hypothesis strategies for hostile tool results, shared by the property tests.

Uris come from pools whose every member holds ``:``, and no generated text holds one, so a leak
is a plain substring: ``emb:`` uris are for embedded resources (never shown anywhere), ``ref:``
uris for references and for embedded resources' never claims, and credential uris carry
``ref:90N`` with userinfo, a query or a fragment.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

HOSTILE_TEXT = st.text(
    alphabet=st.characters(
        categories=["L", "N", "P", "Zs", "Cc", "Cf", "Cs"], exclude_characters=":"
    ),
    max_size=12,
)
"""Short text with letters, punctuation, controls, format characters and lone surrogates."""

REF_URIS = st.integers(0, 30).map(lambda n: f"ref:{n:03d}/x")
EMB_URIS = st.integers(0, 30).map(lambda n: f"emb:{n:03d}/x")
CREDENTIAL_URIS = st.sampled_from(
    ["https://user:pw@h/ref:900/x", "https://h/ref:901/x?sig=1", "https://h/ref:902/x#fr4gment"]
)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), HOSTILE_TEXT, st.binary(max_size=4)
)
DISPOSITIONS = st.one_of(
    st.sampled_from(["never", "NEVER", " never ", "ref", "", "inline", None, False, 0]), SCALARS
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
            "image/p\ud800ng",
        ]
    ),
    HOSTILE_TEXT,
    SCALARS,
)


ABSENT = object()
"""What :func:`maybe` draws for a field left out."""


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy``, or :data:`ABSENT` (the field left out)."""
    return st.one_of(st.just(ABSENT), strategy)


def strings_in(value: Any, *, allow_bytes: bool = False) -> list[str]:
    """Every string in a plain tree (a view, a lane's output), keys included, checking each
    key is a ``str`` and every other value of an exact plain type (``bytes`` only when
    allowed); iterative, so a deep tree costs no stack."""
    leaves: tuple[type, ...] = (type(None), bool, int, float, *((bytes,) if allow_bytes else ()))
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
            assert type(item) in leaves, type(item)
    return out
