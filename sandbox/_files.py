"""The workspace as a script sees it: which paths it may read and write, and the file I/O.

Paths are workspace-relative, ``/``-separated, without ``..``; reads are allowed under ``refs/``
and ``out/``, writes under ``out/`` only (:func:`resolve`). The resolved path must stay in that
directory, and the last component is never followed if it is a symlink (``O_NOFOLLOW``).
Parents of a write are made one ``mkdir`` at a time (:func:`make_directories`), never by
recursion, so a path may be a thousand deep. The session (:mod:`sandbox._session`) keeps the
run's disk quota around these functions; they keep none themselves.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ._values import exact_str

__all__ = ["make_directories", "missing_directories", "read_bytes", "resolve", "write_bytes"]


def resolve(workspace: str, path: Any, *, write: bool) -> str:
    """Return ``path`` (read as an exact ``str`` first) as a relative path the script may use:
    for reading under ``refs/`` or ``out/``, or with ``write`` for writing under ``out/``.

    Raises:
        TypeError: ``path`` is not a ``str``.
        PermissionError: it breaks the rules of the module doc, or resolves (through symlinks)
            outside its directory of ``workspace`` (the child's working directory).
    """
    path = exact_str(path, "a path")
    allowed = ("out",) if write else ("refs", "out")
    rule = "write under out/" if write else "read under refs/ and out/"
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if (
        "\x00" in path
        or path.startswith("/")
        or ".." in parts
        or len(parts) < 2
        or parts[0] not in allowed
    ):
        raise PermissionError(f"{path!r}: scripts may only {rule} (workspace-relative)")
    relative = "/".join(parts)
    real = os.path.realpath(relative)
    if not real.startswith(os.path.join(workspace, parts[0]) + os.sep):
        raise PermissionError(f"{path!r} resolves outside {parts[0]}/")
    return relative


def read_bytes(relative: str) -> bytes:
    """The contents of ``relative`` (a path :func:`resolve` returned), not following a final
    symlink; raises ``OSError`` subclasses as ``open`` does."""
    fd = os.open(relative, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def write_bytes(relative: str, data: bytes) -> None:
    """Make or replace the file ``relative`` (a path :func:`resolve` returned for writing,
    whose parents exist) holding ``data``, not following a final symlink; raises ``OSError``
    subclasses as ``open`` and ``write`` do."""
    fd = os.open(
        relative,
        os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o644,
    )
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def missing_directories(parent: str) -> int:
    """How many directories of ``parent`` (a resolved path under ``out/``) don't exist yet."""
    parts = parent.split("/")
    missing = 0
    while len(parts) > 1 and not os.path.lexists("/".join(parts)):
        missing += 1
        parts.pop()
    return missing


def make_directories(parent: str, missing: int) -> None:
    """Make the last ``missing`` directories of ``parent``, outermost first, one ``mkdir`` each,
    iteratively (``os.makedirs`` would recurse once per level). One made meanwhile counts as
    made."""
    parts = parent.split("/")
    for end in range(len(parts) - missing + 1, len(parts) + 1):
        with contextlib.suppress(FileExistsError):
            os.mkdir("/".join(parts[:end]), 0o755)
