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

Two walks read claims. The general walk reads any value, hostile containers and objects
included. A :class:`PlainWalk` reads only plain data (exact builtin containers, leaves and
keys, see :func:`scriptbridge._plain.plain_children`), gives up at the first value that isn't,
and before it gives up it has run nothing of the result's own; on plain data it finds the same
claims, faster, and keeps no classification alive. :func:`read_claims` tries it first.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from ._blocks import BLOCK_TYPES
from ._canonical import canonical_key
from ._classify import (
    Classification,
    Embedded,
    Inline,
    Reference,
    Text,
    Withheld,
    classify_block,
)
from ._plain import PLAIN_SCALARS, plain_children
from ._result_dict import result_dict
from ._walk import MAX_DEPTH, NODE_BUDGET, SLICE_VALUES, run_to_end

_CONTAINERS: Final = (dict, list, tuple)

_CLAIMING_KINDS: Final = frozenset({"image", "audio", "resource", "resource_link"})
"""Block types whose classification can claim a never or stop the walk (a ``text`` block
classifies as text or unknown, a ``reference`` block as a script object or unknown)."""


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
    _never_keys: frozenset[str] | None = field(default=None, repr=False, compare=False)

    def names_never(self, uri: str) -> bool:
        """Whether a never of this result names ``uri``: as sent, or under another spelling of
        the same request (its canonical key, SPEC section 4). Costs nothing when the result
        claims no never."""
        if not self.never:
            return False
        if uri in self.never:
            return True
        keys = self._never_keys
        if keys is None:
            keys = frozenset(canonical_key(claimed) for claimed in self.never)
            object.__setattr__(self, "_never_keys", keys)
        return canonical_key(uri) in keys


def read_claims(result: object, memo: dict[int, Classification] | None = None) -> Claims:
    """Read a tool result's claims (dict or ``CallToolResult``). Pure; linear; never raises.

    When ``memo`` is given, each block's classification is stored in it under ``id(block)``,
    so a walk of the same result right after needn't classify it again. Without one, a result
    that is plain data all through is read by :func:`read_plain_claims`, which gives the same
    claims; any other result, or one past the node budget, by the general walk.
    """
    return run_to_end(read_claims_in_slices(result, memo))


def read_claims_in_slices(
    result: object, memo: dict[int, Classification] | None = None
) -> Generator[None, None, Claims]:
    """:func:`read_claims` as a generator that pauses (yields) after every
    :data:`~scriptbridge._walk.SLICE_VALUES` values it visits and returns the same claims.

    Between pauses nothing of the walk is left half done; the result must not change until
    the generator returns (a walk reads it across its pauses). Pure; never raises.
    """
    top = result_dict(result)
    if top is None:
        return Claims(frozenset(), (), "the tool result is not a dict")
    if memo is None and type(top) is dict:
        walk = PlainWalk(keep_references=True, strict=False)
        try:
            yield from walk.walk_in_slices([top], 0)
        except NotPlain:
            pass  # read again, whole, by the general walk
        else:
            return walk.claims()
    return (yield from _read_general_in_slices(top, memo))


def read_plain_claims(top: dict[Any, Any]) -> Claims | None:
    """The claims of a result that is plain data wherever a claims walk reads it, or ``None``
    if it is not. (No walk reads below an embedded resource's record's own values, so what
    lies there can be anything.)

    ``None`` also when the walk passes the node budget. Otherwise the claims are exactly the
    general walk's: the same walk, in the same order, with the same limits (see
    :class:`PlainWalk`). Pure; linear; runs nothing of the result's own; never raises.
    """
    if type(top) is not dict:
        return None
    walk = PlainWalk(keep_references=True, strict=False)
    try:
        walk.walk([top], 0)
    except NotPlain:
        return None
    return walk.claims()


def classify_plain(block: dict[Any, Any]) -> Classification:
    """Classify a block whose own values and keys are plain data (an opened block).

    The classifier reads an embedded resource's record too, so it is checked first
    (:func:`check_record`). Otherwise this is :func:`~scriptbridge._classify.classify_block`,
    and runs nothing of the block's own.
    """
    check_record(block)
    return classify_block(block)


def check_record(block: dict[Any, Any]) -> None:
    """Raise :class:`NotPlain` unless the ``resource`` record of a block whose own values are
    plain (an opened block) is plain too, or is no dict (which the classifier doesn't read)."""
    record = block.get("resource")
    if type(record) is dict and plain_children(record) is None:
        raise NotPlain


class NotPlain(Exception):
    """A plain walk met a value that is not plain data, a limit it doesn't report, or (when
    strict) any limit at all: the caller reads the result with the general walk instead."""


class PlainWalk:
    """A claims walk over plain data, which gives up (:class:`NotPlain`) where data isn't plain.

    Before it reads a container's values any further it checks the container's values and
    keys with :func:`scriptbridge._plain.plain_children`, which compares types by identity
    only; so until it gives up it has run nothing of the result's own, and a caller can read
    the result again with the general walk as if this walk had not happened. On plain data it
    finds the claims the general walk finds: it visits the same containers, depth first in
    document order, with the same seen set, depth limit and node count, and classifies the
    same blocks the same way (classifying plain data is a pure function of it). It classifies
    only the blocks whose kind can claim a never or stop the walk, keeps no classification
    (nor, unless ``keep_references``, any reference), so a big result leaves nothing behind
    for the garbage collector to scan.

    Past the node budget it gives up, so the general walk tells where it stopped. A ``strict``
    walk gives up at every limit (a container reached twice or nested too deep): having reached
    none, its claims don't depend on the order it reads the result in, which lets the renderer
    walk the content first (see :mod:`scriptbridge._render`).
    """

    def __init__(self, *, keep_references: bool, strict: bool) -> None:
        self.keep_references = keep_references
        self.strict = strict
        self.never: dict[str, None] = {}
        self.references: list[Reference] = []
        self.problem: str | None = None
        self.seen: set[int] = set()
        self.nodes = 1

    def claims(self) -> Claims:
        """The claims read so far."""
        return Claims(frozenset(self.never), tuple(self.references), self.problem)

    def open(self, container: Any, depth: int) -> list[Any] | tuple[()] | None:
        """Check an exact dict, list or tuple at ``depth`` before it is read.

        Returns the containers among its values (to walk next), or ``None`` when it is not to
        be read (reached before, or too deep: noted as the problem). Raises :class:`NotPlain`
        when a value or key of it isn't plain, or when strict and a limit is reached. Counts
        no nodes: see :meth:`count`.
        """
        key = id(container)
        if key in self.seen:
            self._limit("a list or dict is reached twice in it")
            return None
        if depth > MAX_DEPTH:
            self._limit(f"it is nested deeper than {MAX_DEPTH}")
            return None
        self.seen.add(key)
        below = plain_children(container)
        if below is None:
            raise NotPlain
        return below

    def count(self, values: int) -> None:
        """Count an opened container's values against the node budget (NotPlain past it)."""
        self.nodes += values
        if self.nodes > NODE_BUDGET:
            raise NotPlain

    def note(self, claim: Classification) -> bool:
        """Note what a block's classification claims; True when the walk stops at the block
        (an embedded resource, whose fields no walk reads)."""
        if isinstance(claim, Reference):
            if self.keep_references:
                self.references.append(claim)
            if claim.never:
                self.never[claim.uri] = None
        elif isinstance(claim, Withheld):
            if claim.never_uri:
                self.never[claim.never_uri] = None
            return claim.embedded
        elif isinstance(claim, Embedded):
            return True
        return False

    def walk(self, containers: list[Any] | tuple[()], depth: int) -> None:
        """Walk ``containers`` (exact dicts, lists and tuples at ``depth``) and all below them,
        depth first, in order. Each one's containers are checked by :meth:`open` before it is
        read; a dict below depth 0 whose ``type`` is a block type is a block. Raises
        :class:`NotPlain` as :meth:`open` and :meth:`count` do.
        """
        run_to_end(self.walk_in_slices(containers, depth))

    def walk_in_slices(
        self, containers: list[Any] | tuple[()], depth: int
    ) -> Generator[None, None, None]:
        """:meth:`walk`, pausing (yielding) after every :data:`SLICE_VALUES` values it visits."""
        # open(), count() and note() inlined but for the blocks: this loop runs once a value.
        seen = self.seen
        frames: list[tuple[Iterator[Any], int]] = [(iter(containers), depth)]
        left = SLICE_VALUES
        while frames:
            values, depth = frames[-1]
            for value in values:
                left -= 1
                if not left:
                    left = SLICE_VALUES
                    yield
                key = id(value)
                if key in seen:
                    self._limit("a list or dict is reached twice in it")
                    continue
                if depth > MAX_DEPTH:
                    self._limit(f"it is nested deeper than {MAX_DEPTH}")
                    continue
                seen.add(key)
                below = plain_children(value)
                if below is None:
                    raise NotPlain
                if depth > 0 and type(value) is dict:
                    # A block claims only if its kind can: a text or reference block can't, and
                    # its fields are read like any dict's.
                    kind = value.get("type")
                    if (
                        type(kind) is str
                        and kind in _CLAIMING_KINDS
                        and self.note(classify_plain(value))
                    ):
                        continue  # an embedded resource: no walk reads its fields
                self.nodes += len(value)
                if self.nodes > NODE_BUDGET:
                    raise NotPlain
                if below:
                    frames.append((iter(below), depth + 1))
                    break  # visit them now; this frame resumes after
            else:
                frames.pop()

    def _limit(self, reason: str) -> None:
        if self.strict:
            raise NotPlain
        self.problem = self.problem or reason


def _read_general(top: dict[Any, Any], memo: dict[int, Classification] | None) -> Claims:
    """The claims of the general walk (:func:`_read_general_in_slices`), read without a pause."""
    return run_to_end(_read_general_in_slices(top, memo))


def _read_general_in_slices(
    top: dict[Any, Any], memo: dict[int, Classification] | None
) -> Generator[None, None, Claims]:
    """The claims walk over any value, hostile containers and objects included, pausing
    (yielding) after every :data:`SLICE_VALUES` values it visits.

    The walk is depth first, in document order, and iterative: each opened container pushes a
    frame holding its values still to visit. It reads each value through the base types' own
    methods and answers what the walk it replaced answered (one that pushed every value on a
    stack of its own); only a value's own code that answers a type check (a ``__class__``
    property) may be asked a different number of times.
    """
    never: dict[str, None] = {}
    references: list[Reference] = []
    problem: str | None = None
    seen: set[int] = set()
    nodes = 1
    frames: list[tuple[Iterator[Any], int]] = [(iter((top,)), 0)]
    left = SLICE_VALUES
    try:
        while frames:
            values, depth = frames[-1]
            for value in values:
                left -= 1
                if not left:
                    left = SLICE_VALUES
                    yield
                if not isinstance(value, _CONTAINERS):
                    problem = problem or f"it holds a value of type {type(value).__name__}"
                    continue
                key = id(value)
                if key in seen:
                    problem = problem or "a list or dict is reached twice in it"
                    continue
                if depth > MAX_DEPTH:
                    problem = problem or f"it is nested deeper than {MAX_DEPTH}"
                    continue
                seen.add(key)
                children: list[Any]
                if isinstance(value, dict):
                    if depth > 0:
                        kind = dict.get(value, "type")  # is_block, inlined
                        if isinstance(kind, str) and kind in BLOCK_TYPES:
                            claim = classify_block(value)
                            if memo is not None:
                                memo[key] = claim
                            claim_type = type(claim)
                            if claim_type is Text or claim_type is Inline:
                                pass  # claims nothing; its fields are still read
                            elif isinstance(claim, Reference):
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
                    children = list(dict.values(value))  # children_of, inlined
                elif isinstance(value, list):
                    children = list(list.__iter__(value))
                else:
                    children = list(tuple.__iter__(value))
                nodes += len(children)
                if nodes > NODE_BUDGET:
                    problem = problem or f"it holds more than {NODE_BUDGET:,} values"
                    frames.clear()
                    break
                # The values to visit: all but the scalars, tested last to first (the order a
                # stack walk tests them in); an exact dict is never a scalar.
                below: list[Any] = []
                for child in reversed(children):  # by real type: a __class__ can't pose
                    if type(child) is dict or not issubclass(type(child), PLAIN_SCALARS):
                        below.append(child)
                if below:
                    below.reverse()
                    frames.append((iter(below), depth + 1))
                    break  # visit them now; this frame resumes after
            else:
                frames.pop()
    except Exception as exc:  # a hostile container type whose iteration raises
        problem = problem or f"reading it raised {type(exc).__name__}"
    return Claims(frozenset(never), tuple(references), problem)
