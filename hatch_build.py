"""Build hook: compile scriptbridge's optional C loop, ``scriptbridge/_fastcontent.c``.

A wheel, and an editable install (in place, beside the source), gets
``scriptbridge/_fastcontent<EXT_SUFFIX>`` when the interpreter's C compiler (``sysconfig``'s
``CC``) is at hand. Without one, on a build that fails, or with ``SCRIPTBRIDGE_PURE_PYTHON=1``
set, the build goes on without it (saying so on stderr), and scriptbridge runs the same loop in
Python (``scriptbridge._render._read_blocks``), which gives the same views, more slowly.

Run as a script (``python hatch_build.py``), it builds the module in place, for a source tree
used without installing it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script: only build_in_place is used
    BuildHookInterface = object  # type: ignore[assignment,misc]

SOURCE = Path("scriptbridge") / "_fastcontent.c"


def build_in_place(root: Path) -> Path | None:
    """Compile the C loop beside its source; returns the module's path, or ``None`` (with a
    line on stderr saying why) when it is not built. Leaves no partial module behind."""
    if os.environ.get("SCRIPTBRIDGE_PURE_PYTHON"):
        print("scriptbridge: SCRIPTBRIDGE_PURE_PYTHON is set: no C loop", file=sys.stderr)
        return None
    target = root / SOURCE.with_name("_fastcontent" + str(sysconfig.get_config_var("EXT_SUFFIX")))

    def flags(name: str, default: str = "") -> list[str]:
        return shlex.split(str(sysconfig.get_config_var(name) or default))

    include = sysconfig.get_paths()["include"]
    with tempfile.TemporaryDirectory() as scratch:
        obj = Path(scratch) / "_fastcontent.o"
        built = Path(scratch) / target.name
        compile_flags = [*flags("CFLAGS"), *flags("CCSHARED"), "-O2", f"-I{include}"]
        steps = [
            [*flags("CC", "cc"), *compile_flags, "-c", str(root / SOURCE), "-o", str(obj)],
            [*flags("LDSHARED", "cc -shared"), str(obj), "-o", str(built)],
        ]
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, check=False)
            except OSError as exc:
                print(f"scriptbridge: no C loop ({exc}); the Python one is used", file=sys.stderr)
                return None
            if done.returncode != 0:
                print(
                    f"scriptbridge: no C loop ({shlex.join(step)} failed); the Python one is"
                    f" used\n{done.stderr}",
                    file=sys.stderr,
                )
                return None
        os.replace(built, target)
    return target


class CustomBuildHook(BuildHookInterface):  # type: ignore[misc,valid-type]
    """Builds the C loop into a wheel (platform-tagged) or in place for an editable install."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        module = build_in_place(root)
        if module is None:
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        build_data["artifacts"].append(module.relative_to(root).as_posix())


if __name__ == "__main__":
    sys.exit(0 if build_in_place(Path(__file__).resolve().parent) is not None else 1)
