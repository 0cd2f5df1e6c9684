"""Which isolation layers a bridge requires, and what it says of the ones it runs without.

The zygote says, as it starts, which layers its children get, how, and for each one they
don't, why and what would apply it (:attr:`sandbox.ZygoteProcess.layers`: a child forked and
isolated as theirs are). A bridge then holds to ``require_isolation``:

``None`` (the default)
    Every layer is wanted and none refused over: each one missing is logged once, at
    ``WARNING``, when the bridge opens (:func:`describe_missing`'s words; ``scriptbridge run``
    and ``serve`` show that on stderr). ``ScriptResult.isolation`` says what each run had.
``"all"``, or a list of layer names
    Those layers are required: opening raises :class:`~scriptbridge.IsolationUnavailable`
    naming each missing one, why, and the remedy; and a run whose child reports one of them
    not applied (a layer that failed in that child alone) ends ``SandboxCrashed`` before its
    script is sent (:func:`unmet`).

A launcher that can't say what its children get (a test's own) is taken at its children's
word: only the runs' check applies.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Final

from sandbox.protocol import LAYER_NAMES, LayerState, Ready

from ._exceptions import IsolationUnavailable, MissingLayer

__all__ = [
    "RequiredIsolation",
    "check_layers",
    "describe_missing",
    "refuse_or_warn",
    "required_layers",
    "unmet",
]

RequiredIsolation = str | Sequence[str] | None
"""What ``require_isolation`` takes: ``None``, ``"all"``, or layer names."""

_KNOWN: Final = frozenset(LAYER_NAMES)

log = logging.getLogger("scriptbridge.supervisor")


def required_layers(spec: RequiredIsolation) -> frozenset[str]:
    """The layers ``spec`` requires.

    Raises:
        ValueError: a name that isn't a layer (the known ones are listed), or a bare string
            other than ``"all"``.
    """
    if spec is None:
        return frozenset()
    if isinstance(spec, str):
        if spec == "all":
            return _KNOWN
        raise ValueError(f"require_isolation takes 'all' or a list of layers, not {spec!r}")
    names = frozenset(spec)
    unknown = sorted(names - _KNOWN)
    if unknown:
        raise ValueError(
            f"require_isolation names no such layer: {', '.join(unknown)} "
            f"(the layers: {', '.join(LAYER_NAMES)})"
        )
    return names


def describe_missing(missing: Iterable[MissingLayer]) -> str:
    """The words for layers not in force: each one, why, and what would apply it (layers
    missing for one reason, with one remedy, named together)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for item in missing:
        groups.setdefault((item.reason, item.remedy), []).append(item.layer)
    return "; ".join(
        f"{', '.join(layers)} (why: {reason}; to apply {'them' if len(layers) > 1 else 'it'}: "
        f"{remedy})"
        for (reason, remedy), layers in groups.items()
    )


def _missing(layers: Sequence[LayerState]) -> list[MissingLayer]:
    return [
        MissingLayer(state.layer, state.reason or "unknown", state.remedy or "see SECURITY.md")
        for state in layers
        if not state.available
    ]


def check_layers(
    layers: Sequence[LayerState] | None, required: frozenset[str]
) -> list[MissingLayer]:
    """The layers missing from ``layers`` (what a zygote's children get; ``None``: unknown).

    Raises:
        IsolationUnavailable: one of them is ``required``.
    """
    if layers is None:
        return []
    missing = _missing(layers)
    refused = [item for item in missing if item.layer in required]
    if refused:
        raise IsolationUnavailable(
            f"required isolation layers can't be applied here: {describe_missing(refused)}",
            refused,
        )
    return missing


def unmet(ready: Ready, required: frozenset[str]) -> str | None:
    """Why a child that said ``ready`` may not run a script of a bridge requiring
    ``required``, or ``None`` when every required layer is in force in it."""
    absent = sorted(required - set(ready.isolation))
    if not absent:
        return None
    reasons: dict[str, str] = {skipped.layer: skipped.reason for skipped in ready.skipped}
    listed = ", ".join(f"{layer} ({reasons.get(layer, 'not reported')})" for layer in absent)
    return f"the sandbox child lacks required isolation layers: {listed}"


def refuse_or_warn(
    layers: Sequence[LayerState] | None, required: frozenset[str]
) -> IsolationUnavailable | None:
    """As a bridge opens: the refusal to raise (once all it started is stopped) when a
    ``required`` layer is missing from ``layers``, else ``None``, having logged the missing
    ones once at ``WARNING``."""
    try:
        missing = check_layers(layers, required)
    except IsolationUnavailable as refused:
        return refused
    if missing:
        log.warning("running scripts without %s", describe_missing(missing))
    return None
