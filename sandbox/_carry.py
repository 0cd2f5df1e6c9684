"""A session's step in the child: what carries in before the script, and what carries out.

A step of a session (``start.carry`` set) runs as every run does, in a fresh child; around its
script:

- :func:`carry_in` builds the script's globals, binds the carried plain values, re-runs the
  carried definitions in order and binds the plain values again (so a definition may read a
  carried value at definition time, and a value bound later than a stale definition of the same
  name wins). Each definition is re-checked to be one top-level ``def``, ``class``, ``import`` or
  ``from ... import`` statement, compiled by the same restricted compiler and run in the same
  globals as the script, with **every effect refused**: a tool call, a fetch, a file read or
  write, or a print made while definitions re-run raises ``RuntimeError`` in it (a decorator, a
  default or a class body can't reach the host). A definition that fails to re-run is left
  out, and its names are reported dropped unless the step binds them again.
- :func:`carry_out`, once the script has completed, walks its globals: a name bound by a carried
  or new top-level definition whose value is still callable or a module proxy carries as that
  definition; any other value that is plain data carries as its value (tuples and sets as
  lists, copies: two names for one list carry two lists); everything else (a generator, a
  lambda, an exception, a module proxy in a variable, an API name rebound, ...) is dropped and
  named. Definitions take
  the bound first, newest kept; then plain values in the order they were bound, each kept while
  the whole fits (:func:`~sandbox.protocol.carry_bytes`, ``CarryIn.max_bytes``).

Nothing here runs code of the script's outside the re-run: values are read through
:func:`~sandbox._values.to_plain`, which reads builtin slots only, and ``callable``.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ._blocking_channel import BlockingChannel
from ._compile import SCRIPT_FILENAME, compile_script
from ._guards import ModuleProxy
from ._session import HostGone, Session
from ._values import NotPlainError, to_plain
from ._wire import Carry, CarryIn
from .protocol import (
    CARRY_MAX_DEFINITIONS,
    CARRY_MAX_NAMES,
    ProtocolError,
    carry_bytes,
)

__all__ = ["Carried", "Definition", "carry_in", "carry_out", "definitions_in", "send_carry"]

REFUSED: Final = (
    "a session's definitions re-run without effects: no tool call, fetch, file or print"
)
"""Why an effect made while carried definitions re-run is refused (the ``RuntimeError``)."""


@dataclass(frozen=True)
class Definition:
    """One top-level definition statement's source and the names it binds."""

    source: str
    names: frozenset[str]


@dataclass
class Carried:
    """A step's globals and what carried into them."""

    namespace: dict[str, Any]
    api: dict[str, Any]
    """The globals the session made, before anything carried was bound."""
    definitions: list[Definition] = field(default_factory=list)
    """The carried definitions that re-ran without error, in order."""
    failed: list[str] = field(default_factory=list)
    """Names of carried definitions that failed to re-run."""
    max_bytes: int = 0


def _binds(node: ast.stmt) -> frozenset[str]:
    """The names a top-level definition statement binds; empty for any other statement."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return frozenset({node.name})
    if isinstance(node, ast.Import):
        return frozenset(alias.asname or alias.name.partition(".")[0] for alias in node.names)
    if isinstance(node, ast.ImportFrom) and node.level == 0:
        if any(alias.name == "*" for alias in node.names):
            return frozenset()
        return frozenset(alias.asname or alias.name for alias in node.names)
    return frozenset()


def _statements(source: str) -> list[ast.stmt]:
    try:
        return ast.parse(source, SCRIPT_FILENAME, "exec").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []


def definitions_in(source: str) -> list[Definition]:
    """The top-level definitions of ``source``, each as its own source (``ast.unparse`` of the
    statement alone: nothing beside it on its lines comes with it); never raises."""
    found = []
    for node in _statements(source):
        names = _binds(node)
        if not names or not all(_reportable(name) for name in names):
            continue
        try:
            found.append(Definition(ast.unparse(node), names))
        except (ValueError, RecursionError, MemoryError):
            continue
    return found


def _one_definition(source: str) -> Definition | None:
    """``source`` as a definition, when it is exactly one top-level definition statement."""
    statements = _statements(source)
    names = _binds(statements[0]) if len(statements) == 1 else frozenset()
    return Definition(source, names) if names else None


def _reportable(name: object) -> bool:
    """Whether ``name`` is a global a step may carry or name (as ``Carry`` validates it)."""
    return (
        type(name) is str and len(name) <= 200 and name.isidentifier() and not name.startswith("_")
    )


def _names(definitions: Sequence[Definition]) -> set[str]:
    return {name for definition in definitions for name in definition.names}


def _bind(namespace: dict[str, Any], api: dict[str, Any], values: dict[str, Any]) -> None:
    for name, value in values.items():
        if name not in api and not name.startswith("_"):
            namespace[name] = value


def _rerun(
    session: Session, definition: Definition, namespace: dict[str, Any], *, restricted: bool
) -> bool:
    """Run one carried definition in ``namespace`` with every effect refused; whether it ran."""
    compiled = compile_script(definition.source, restricted=restricted)
    if not isinstance(compiled, tuple):
        return False
    session.refusing = REFUSED
    try:
        exec(compiled[0], namespace)
    except HostGone:
        raise
    except BaseException:  # whatever a definition raises, it only leaves the definition out
        return False
    finally:
        session.refusing = None
    return True


def carry_in(session: Session, carry: CarryIn, *, restricted: bool) -> Carried:
    """The step's globals with what carried in bound (module doc). Never raises for anything a
    carried definition does: one that fails is left out and its names kept in ``failed``."""
    namespace = session.script_globals(audited=restricted)
    carried = Carried(namespace, dict(namespace), max_bytes=carry.max_bytes)
    _bind(namespace, carried.api, carry.globals)
    for source in carry.definitions:
        definition = _one_definition(source)
        if definition is None:
            continue
        if _rerun(session, definition, namespace, restricted=restricted):
            carried.definitions.append(definition)
        else:
            carried.failed.extend(sorted(definition.names))
    _bind(namespace, carried.api, carry.globals)
    return carried


def _is_definition(value: Any) -> bool:
    return callable(value) or type(value) is ModuleProxy


def _fit_definitions(
    definitions: Sequence[Definition], live: set[str], budget: int
) -> tuple[list[Definition], int]:
    """The definitions that bind a live name, the newest kept when not all fit; and their cost."""
    kept = [definition for definition in definitions if definition.names & live]
    sizes = [carry_bytes({}, [definition.source]) for definition in kept]
    total = sum(sizes)
    first = 0
    while first < len(kept) and (total > budget or len(kept) - first > CARRY_MAX_DEFINITIONS):
        total -= sizes[first]
        first += 1
    return kept[first:], total


def carry_out(carried: Carried, source: str) -> Carry:
    """What carries out of a step whose script ``source`` completed (module doc)."""
    namespace, api = carried.namespace, carried.api
    definitions = [*carried.definitions, *definitions_in(source)]
    bound = _names(definitions)
    live: set[str] = set()
    plain: list[tuple[str, Any]] = []
    dropped: list[str] = []
    for name, value in list(namespace.items()):
        if not _reportable(name):
            continue  # the hooks, or a name no script statement binds
        if name in api:
            if value is not api[name]:
                dropped.append(name)  # an API name the script bound again
            continue
        if name in bound and _is_definition(value):
            live.add(name)
            continue
        try:
            plain.append((name, to_plain(value)))
        except NotPlainError:
            dropped.append(name)
    kept, used = _fit_definitions(definitions, live, carried.max_bytes)
    still = _names(kept)
    dropped.extend(sorted(live - still))
    values: dict[str, Any] = {}
    for name, value in plain:
        try:
            size = carry_bytes({name: value}, [])
        except ValueError:
            size = carried.max_bytes + 1
        if used + size > carried.max_bytes or len(values) >= CARRY_MAX_NAMES:
            dropped.append(name)
            continue
        values[name] = value
        used += size
    dropped.extend(name for name in carried.failed if name not in namespace)
    names = list(dict.fromkeys(dropped))[:CARRY_MAX_NAMES]
    return Carry(
        globals=values, definitions=[definition.source for definition in kept], dropped=names
    )


def send_carry(channel: BlockingChannel, carry: Carry) -> None:
    """Send ``carry``; when its names of what was dropped make it too large for a frame, with
    fewer of them. Raises ``OSError`` when the host is gone."""
    dropped = list(carry.dropped)
    while True:
        try:
            channel.send(carry.model_copy(update={"dropped": dropped}))
            return
        except ProtocolError:
            if not dropped:
                raise
            dropped = dropped[: len(dropped) // 2]
