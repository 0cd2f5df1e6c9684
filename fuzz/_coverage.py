"""Which modules a fuzz target instruments for coverage.

atheris's import hook instruments whole top-level packages, and importing any module of
``scriptbridge`` imports all of it (its ``__init__`` re-exports the public names): instrumenting
every module costs seconds at each start, which CI pays for each target. :func:`packages`
gives the packages to instrument and the modules of them to leave out, so that a target
instruments only the modules it fuzzes.
"""

from __future__ import annotations

import importlib.util
import pkgutil
from pathlib import Path


def _modules(package: str) -> list[str]:
    """Every module of ``package``, the package itself too, found without importing any."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.submodule_search_locations is None:
        return [package]
    found, paths = [package], [(package, list(spec.submodule_search_locations))]
    while paths:
        prefix, where = paths.pop()
        for info in pkgutil.iter_modules(where):
            name = f"{prefix}.{info.name}"
            found.append(name)
            if info.ispkg:
                paths.append((name, [str(Path(path) / info.name) for path in where]))
    return found


def packages(*modules: str) -> dict[str, list[str]]:
    """``include`` and ``exclude`` for :func:`atheris.instrument_imports`: the packages of
    ``modules`` (dotted names), less every other module of theirs."""
    include = sorted({name.split(".")[0] for name in modules})
    exclude = [name for package in include for name in _modules(package) if name not in modules]
    return {"include": include, "exclude": exclude}
