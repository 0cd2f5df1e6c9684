"""The workspace: the directory where fetched payloads are saved and scripts write (SPEC section 5).

``Workspace(root)`` makes ``root/refs`` (saved payloads; a script may only read it) and
``root/out`` (a script's scratch space). Guarantees:

- **No partial file under a final name.** A payload is written to a temporary file in the same
  directory as its final name (``.<final name>.<random>.part``, mode 0600) and renamed into place
  by :meth:`PartialFile.commit` only when it is complete and its size checked; the final file is
  mode 0644. A temporary file that is discarded, or whose writer is cancelled or fails, is
  removed; one left by a process that died is removed when the next ``Workspace`` opens the root.
- **Names from the host, never from a server.** A saved copy is named ``refs/<record id><ext>``;
  the extension comes from the media type through an allowlist (:func:`extension_for`), and
  anything not on it is ``.bin``. Nothing a server sent (its uri, name, or path) reaches a file
  name.
- **Confinement.** Every path the workspace takes is relative, has no ``..`` part, and resolves
  (symlinks followed) inside the root; anything else raises :class:`WorkspacePathError`.
- **Removal.** :meth:`Workspace.remove` is the registry's removal hook: it returns once no file is
  at the path and raises ``OSError`` when one stays, so the registry logs the path and retries at
  its next sweep (the retry lives in the registry, not here).

Choices where SPEC is silent: SVG and HTML are saved as ``.bin`` (a viewer would run their
scripts); writes are not fsynced (a copy lost in a crash is fetched again); one ``Workspace`` per
root at a time in a process tree, since opening one removes leftover temporary files.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from pathlib import Path, PurePosixPath
from typing import Final

from ._exceptions import WorkspacePathError

__all__ = [
    "OUT_DIR",
    "REFS_DIR",
    "PartialFile",
    "Workspace",
    "WorkspacePathError",
    "extension_for",
    "remove_tree",
]

REFS_DIR: Final = "refs"
OUT_DIR: Final = "out"

_PARTIAL_SUFFIX: Final = ".part"
_RECORD_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")

_EXTENSIONS: Final[dict[str, str]] = {
    "application/gzip": ".gz",
    "application/json": ".json",
    "application/pdf": ".pdf",
    "application/xml": ".xml",
    "application/yaml": ".yaml",
    "application/zip": ".zip",
    "audio/flac": ".flac",
    "audio/mp4": ".m4a",
    "audio/mpeg": ".mp3",
    "audio/ogg": ".ogg",
    "audio/wav": ".wav",
    "audio/webm": ".weba",
    "audio/x-wav": ".wav",
    "image/avif": ".avif",
    "image/bmp": ".bmp",
    "image/gif": ".gif",
    "image/jpeg": ".jpg",
    "image/png": ".png",
    "image/tiff": ".tiff",
    "image/webp": ".webp",
    "text/csv": ".csv",
    "text/markdown": ".md",
    "text/plain": ".txt",
    "text/xml": ".xml",
    "text/yaml": ".yaml",
    "video/mp4": ".mp4",
    "video/webm": ".webm",
}


def extension_for(media_type: object) -> str:
    """The file extension for a media type: from the allowlist, else ``".bin"``.

    Parameters (``; charset=...``), case and surrounding whitespace are ignored. Any value that
    isn't a string gets ``".bin"``. Pure and total.
    """
    if not isinstance(media_type, str):
        return ".bin"
    essence = media_type.split(";", 1)[0].strip().lower()
    return _EXTENSIONS.get(essence, ".bin")


def remove_tree(top: Path | str) -> None:
    """Remove ``top`` and everything under it, however deep, never following a symlink.

    Iterative (``shutil.rmtree`` recurses once per level, so a tree a script built a thousand
    directories deep would raise ``RecursionError`` from it). Never raises: what can't be
    removed stays, as with ``shutil.rmtree(..., ignore_errors=True)``.
    """
    stack: list[tuple[str, bool]] = [(os.fspath(top), False)]
    while stack:
        path, listed = stack.pop()
        if listed:
            with contextlib.suppress(OSError):
                os.rmdir(path)
            continue
        try:
            entries = list(os.scandir(path))
        except NotADirectoryError:
            with contextlib.suppress(OSError):
                os.unlink(path)
            continue
        except OSError:
            continue
        stack.append((path, True))
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                stack.append((entry.path, False))
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


class Workspace:
    """A host-named directory holding ``refs/`` (saved payloads) and ``out/`` (script scratch).

    Args:
        root: the directory; it and its two subdirectories are created if missing.

    Raises:
        WorkspacePathError: ``refs`` or ``out`` exists as something other than a directory.
        OSError: the directories can't be created (the message names the workspace).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        base = Path(root)
        try:
            base.mkdir(parents=True, exist_ok=True)
            self.root: Final = base.resolve(strict=True)
            for name in (REFS_DIR, OUT_DIR):
                (self.root / name).mkdir(mode=0o755, exist_ok=True)
        except OSError as exc:
            raise OSError(
                exc.errno, f"couldn't create the workspace {base}: {exc.strerror or exc}"
            ) from exc
        for name in (REFS_DIR, OUT_DIR):
            path = self.root / name
            if path.is_symlink() or not path.is_dir():
                raise WorkspacePathError(f"{path} is not a directory of the workspace")
        self._remove_leftover_partials()

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    @property
    def refs_dir(self) -> Path:
        """The absolute path of ``refs/``."""
        return self.root / REFS_DIR

    @property
    def out_dir(self) -> Path:
        """The absolute path of ``out/``."""
        return self.root / OUT_DIR

    def saved_name(self, record_id: str, media_type: object) -> str:
        """The workspace-relative name of a record's saved copy: ``refs/<id><ext>``.

        Raises:
            WorkspacePathError: ``record_id`` is not 1-64 letters, digits, ``_`` or ``-``.
        """
        if not isinstance(record_id, str) or not _RECORD_ID.fullmatch(record_id):
            raise WorkspacePathError(f"not a record id: {record_id!r}")
        return f"{REFS_DIR}/{record_id}{extension_for(media_type)}"

    def resolve(self, relative: str) -> Path:
        """The absolute path of a workspace-relative path, confined to the workspace.

        The last component is not followed if it is a symlink (so removing or replacing it
        touches the link, not its target); every directory above it must resolve inside the root.

        Raises:
            WorkspacePathError: ``relative`` is not a string, is empty, absolute, holds a NUL or
                a ``..`` part, or leads outside the root.
        """
        if not isinstance(relative, str) or not relative or "\x00" in relative:
            raise WorkspacePathError(f"not a workspace path: {relative!r}")
        pure = PurePosixPath(relative)
        if pure.is_absolute() or ".." in pure.parts or not pure.parts or pure.name in ("", "."):
            raise WorkspacePathError(f"not a workspace path: {relative!r}")
        parent = (self.root / pure.parent).resolve()
        if not parent.is_relative_to(self.root):
            raise WorkspacePathError(f"{relative!r} leads outside the workspace")
        return parent / pure.name

    def open_partial(self, relative: str) -> PartialFile:
        """Start writing the file that becomes ``relative`` once committed (:class:`PartialFile`).

        The temporary file exists (empty, mode 0600) when this returns.

        Raises:
            WorkspacePathError: ``relative`` is not a path inside the workspace.
            OSError: the temporary file can't be created.
        """
        final = self.resolve(relative)
        return PartialFile(final, relative)

    def remove(self, relative: str) -> None:
        """Remove a saved copy under ``refs/``: the registry's removal hook.

        Returns once no file is at the path (one already gone counts as removed). Never follows
        a symlink: a link is removed, not its target.

        Raises:
            OSError: the file stays (for example the path is a directory, or the file system
                refuses); the registry logs the path and retries at its next sweep.
            WorkspacePathError: the path isn't under ``refs/``.
        """
        path = self.resolve(relative)
        if not path.parent.is_relative_to(self.refs_dir):
            raise WorkspacePathError(f"{relative!r} is not a saved copy under {REFS_DIR}/")
        try:
            os.unlink(path)
        except FileNotFoundError:
            return

    def _remove_leftover_partials(self) -> None:
        for entry in os.scandir(self.refs_dir):
            if entry.name.startswith(".") and entry.name.endswith(_PARTIAL_SUFFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)


class PartialFile:
    """A file being written under a temporary name next to its final one.

    :meth:`write` appends and hashes; :meth:`commit` checks the size on disk and renames the file
    into place; :meth:`discard` (or leaving the ``with`` block without committing) removes it.
    :meth:`unlink` removes the temporary name at once while a writer may still hold the file open:
    it is the one method that may be called from the trio thread while another thread is inside
    :meth:`write`; everything else belongs to one thread at a time. After :meth:`unlink` or
    :meth:`discard`, :meth:`commit` raises and no file is left under either name.
    """

    def __init__(self, final: Path, relative: str) -> None:
        self.final: Final = final
        self.relative: Final = relative
        fd, temp = tempfile.mkstemp(
            prefix=f".{final.name}.", suffix=_PARTIAL_SUFFIX, dir=final.parent
        )
        self._fd: int | None = fd
        self.temp: Final = Path(temp)
        self._hash = hashlib.sha256()
        self._unlinked = False
        self._committed = False
        self.size = 0
        """Bytes written so far."""

    def __enter__(self) -> PartialFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not self._committed:
            self.discard()

    @property
    def sha256(self) -> str:
        """The hex SHA-256 of the bytes written so far."""
        return self._hash.hexdigest()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append ``data`` in full and fold it into the hash. Blocking; run it in a thread.

        Raises:
            OSError: the write failed (the file is then unusable: discard it).
            ValueError: the file was discarded or committed.
        """
        if self._fd is None or self._committed:
            raise ValueError("this partial file is closed")
        view = memoryview(data)
        self._hash.update(view)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self.size += len(data)

    def commit(self) -> str:
        """Close the file, check its size, make it 0644 and rename it to its final name.

        Returns the workspace-relative final name. Synchronous and short (no data is written
        here), so a caller can record the result in the same step with nothing awaited between.

        Raises:
            OSError: the file is not all there (unlinked, or its size on disk differs from what
                was written) or the rename failed; the temporary file is then removed.
            ValueError: the file was discarded or committed already.
        """
        if self._fd is None or self._committed:
            raise ValueError("this partial file is closed")
        fd, self._fd = self._fd, None
        try:
            on_disk = os.fstat(fd).st_size
            os.fchmod(fd, 0o644)
            os.close(fd)
            fd = -1
            if self._unlinked:
                raise FileNotFoundError(f"{self.temp} was removed before it was committed")
            if on_disk != self.size:
                raise OSError(f"{self.temp} holds {on_disk} bytes, {self.size} were written")
            os.replace(self.temp, self.final)
        except BaseException:
            if fd != -1:
                os.close(fd)
            self.unlink()
            raise
        self._committed = True
        return self.relative

    def unlink(self) -> None:
        """Remove the temporary name now; a thread inside :meth:`write` finishes harmlessly."""
        if self._unlinked:
            return
        self._unlinked = True
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.temp)

    def discard(self) -> None:
        """Remove the temporary file and close it. Idempotent; does nothing after a commit."""
        if self._committed:
            return
        self.unlink()
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
