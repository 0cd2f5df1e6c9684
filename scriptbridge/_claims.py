"""Claims: what the servers behind one tool result asked, per uri (SPEC section 3).

:func:`read_claims` walks the whole result (content, ``structuredContent``, ``_meta`` and any
other field, at any depth) and returns the uris it claims ``never`` for and the references it
names, in order. Only ingestion (:meth:`ReferenceRegistry.ingest`) acts on claims; reading them
is pure.

- A reference's own ``never`` claims its uri.
- Inline data's or an image/audio block's ``never`` claims its uri; an embedded resource's
  claims its ``resource.uri``. From those only ``never`` counts, and an empty uri marks nothing.
- The walk **stops at an embedded resource**: it never reads that resource's fields (``_meta``
  and all), so a ``never`` nested there marks nothing.
- An error result is walked like a success.
- **Fail closed**: past a walk limit (:mod:`scriptbridge._walk`), or on a value that is not plain
  data, the claims are *unreadable*: :attr:`Claims.unreadable` says why, the never claims the
  walk could read still count, and what was readable is still walked (a too-deep branch is
  skipped, not the whole result). Past the node budget the walk stops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._classify import (
    Classification,
    Embedded,
    Reference,
    Withheld,
    classify_block,
    is_block,
)
from ._walk import MAX_DEPTH, NODE_BUDGET, PLAIN_SCALARS, children_of, result_dict


@dataclass(frozen=True, slots=True)
class Claims:
    """The claims of one tool result.

    ``never`` holds each uri a ``never`` claims (non-empty strings, as sent); ``references`` the
    references the walk read, in document order (repeats included); ``unreadable`` is ``None``
    when the whole result was read, else the first reason it could not be.
    """

    never: frozenset[str]
    references: tuple[Reference, ...]
    unreadable: str | None


def read_claims(result: object, memo: dict[int, Classification] | None = None) -> Claims:
    """Read a tool result's claims (dict or ``CallToolResult``). Pure; linear; never raises.

    When ``memo`` is given, each block's classification is stored in it under ``id(block)``,
    so a walk of the same result right after (the renderer's) needn't classify it again.
    """
    top = result_dict(result)
    if top is None:
        return Claims(frozenset(), (), "the tool result is not a dict")
    never: dict[str, None] = {}
    references: list[Reference] = []
    problem: str | None = None
    seen: set[int] = set()
    nodes = 1
    stack: list[tuple[Any, int]] = [(top, 0)]
    try:
        while stack:
            value, depth = stack.pop()
            if not isinstance(value, dict | list | tuple):
                problem = problem or f"it holds a value of type {type(value).__name__}"
                continue
            if id(value) in seen:
                problem = problem or "a list or dict is reached twice in it"
                continue
            if depth > MAX_DEPTH:
                problem = problem or f"it is nested deeper than {MAX_DEPTH}"
                continue
            seen.add(id(value))
            if depth > 0 and is_block(value):
                claim = classify_block(value)
                if memo is not None:
                    memo[id(value)] = claim
                if isinstance(claim, Reference):
                    references.append(claim)
                    if claim.never:
                        never[claim.uri] = None
                elif isinstance(claim, Withheld):
                    if claim.never_uri:
                        never[claim.never_uri] = None
                    if claim.embedded:
                        continue
                elif isinstance(claim, Embedded):
                    continue
            children = children_of(value)
            nodes += len(children)
            if nodes > NODE_BUDGET:
                problem = problem or f"it holds more than {NODE_BUDGET:,} values"
                break
            below = depth + 1
            stack.extend(
                [
                    (child, below)
                    for child in reversed(children)
                    if not isinstance(child, PLAIN_SCALARS)
                ]
            )
    except Exception as exc:  # a hostile container type whose iteration raises
        problem = problem or f"reading it raised {type(exc).__name__}"
    return Claims(frozenset(never), tuple(references), problem)
