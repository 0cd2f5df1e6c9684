"""Where the fuzz targets find the compiled content loop, ``scriptbridge._fastcontent``.

``make fuzz`` builds the loop with AddressSanitizer and UndefinedBehaviorSanitizer into a
directory of its own (``build/fuzz/``) and names the module in ``SCRIPTBRIDGE_FUZZ_NATIVE``;
:func:`load` then puts that build in ``sys.modules`` before ``scriptbridge`` is imported, so
``scriptbridge._render`` runs it, and the one beside the source (the normal install's) is not
touched. Without the variable the normal build is used (CI's short runs).
"""

from __future__ import annotations

import importlib.util
import os
import sys

VARIABLE = "SCRIPTBRIDGE_FUZZ_NATIVE"


def load() -> str | None:
    """Load the build ``SCRIPTBRIDGE_FUZZ_NATIVE`` names as ``scriptbridge._fastcontent``;
    returns its path, or ``None`` when the variable is unset. Call it before importing
    ``scriptbridge``; raises ``ImportError`` when the build can't be loaded."""
    path = os.environ.get(VARIABLE)
    if not path:
        return None
    if "scriptbridge" in sys.modules:
        raise ImportError(f"{VARIABLE}: scriptbridge was imported before the build was loaded")
    spec = importlib.util.spec_from_file_location("scriptbridge._fastcontent", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{VARIABLE}: no extension module at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["scriptbridge._fastcontent"] = module
    return path


def check(module: object, path: str | None) -> None:
    """Fail unless ``module`` (``scriptbridge._fastcontent`` as ``_render`` imported it) is
    compiled, and is the build ``path`` names when one was named: a target that silently ran
    the Python loop twice would compare nothing."""
    if module is None:
        raise SystemExit(
            "scriptbridge._fastcontent is not built (python hatch_build.py builds it): "
            "the content loop's target has nothing to compare"
        )
    if path is not None and os.path.realpath(getattr(module, "__file__", "")) != (
        os.path.realpath(path)
    ):
        raise SystemExit(f"scriptbridge._fastcontent is not the build {VARIABLE} names")
