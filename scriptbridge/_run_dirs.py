"""The bridge's part of the workspace: one directory per run, the spares' and the trash.

:class:`RunDirs` is the one owner of this layout under a workspace root::

    runs/<run-id>/refs/     hard links to the payloads the run fetched (read-only to the child)
    runs/<run-id>/out/      the run's scratch space (writable; kept when it holds anything)
    .spares/<token>/        a spare child's directory, renamed to ``runs/<run-id>/`` when a run
                            takes the spare (the child's open working directory and its
                            landlock rules follow the rename)
    .trash/<run-id>/        a finished run's directory, out of ``runs/``, waiting to be removed

(the shared store of saved payloads, ``refs/`` at the root, belongs to
:class:`~scriptbridge.Workspace`.)

Guarantees:

- A run can't see another run's files: each has its own directory, made before its child
  starts.
- A payload whose record is marked never is unlinked from every live run at once
  (:meth:`RunDirs.unlink_everywhere`, the registry's key listener), whether or not its record
  still lives.
- When a run is finished (:meth:`RunDir.finish`), its payload links are gone; its ``out/`` stays
  when it holds anything, and otherwise the whole directory leaves ``runs/`` in one rename and
  is removed in the background (:meth:`RunDirs.sweep`): removing a directory tree costs far more
  than renaming it, and a run's result needn't wait for it.
- Listing what a run left (:meth:`RunDir.outputs`) never follows a symlink and reads at most
  one entry past the run's file quota.
- :meth:`RunDirs.close` removes the spares' directories and everything in the trash, including
  what a bridge that couldn't close left there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections import deque
from pathlib import Path
from typing import Final

import trio

from ._workspace import remove_tree

__all__ = ["RUNS_DIR", "SPARES_DIR", "TRASH_DIR", "RunDir", "RunDirs"]

log = logging.getLogger("scriptbridge.supervisor")

RUNS_DIR: Final = "runs"
SPARES_DIR: Final = ".spares"
TRASH_DIR: Final = ".trash"


class RunDir:
    """One run's directory (or a spare's, before a run takes it): ``refs/`` and ``out/``."""

    def __init__(self, dirs: RunDirs, path: Path) -> None:
        self._dirs = dirs
        self.path = path
        self._links: dict[str, Path] = {}
        """Payload links in ``refs/``, by the canonical key of the record's uri."""
        self._hidden: Path | None = None
        """Where :meth:`finish_unreaped` moved the directory, until :meth:`reaped`."""

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def id(self) -> str:
        return self.path.name

    def make(self) -> None:
        """Make the directory with an empty ``refs/`` and ``out/``, if it is missing."""
        if not self.path.is_dir():
            (self.path / "refs").mkdir(parents=True)
            (self.path / "out").mkdir()

    def link(self, key: str, payload: Path) -> str:
        """Hard-link a saved payload into ``refs/`` (under its own name) and return the path the
        script reads it by, ``refs/<name>``. Raises ``OSError`` when the link can't be made."""
        link = self.path / "refs" / payload.name
        if not link.exists():
            os.link(payload, link)
        self._links[key] = link
        return f"refs/{payload.name}"

    def unlink(self, key: str) -> None:
        """Remove the payload link under ``key``, if this run has one."""
        link = self._links.pop(key, None)
        if link is not None:
            with contextlib.suppress(FileNotFoundError):
                link.unlink()

    def finish(self) -> None:
        """Drop every payload link (``refs/`` goes), and throw the directory away unless its
        ``out/`` holds something."""
        self._drop_refs()
        if _holds_anything(self.path / "out"):
            with contextlib.suppress(OSError):
                os.rmdir(self.path / "refs")
        else:
            self.throw_away()

    def finish_unreaped(self) -> None:
        """:meth:`finish` for a run whose ``out/`` was empty when its child was killed, before
        the child is reaped: ``refs/`` goes and the directory leaves ``runs/`` at once, whatever
        ``out/`` holds by now; it is removed in the background once :meth:`reaped` is called
        (not while the child's last writes may still land in it)."""
        self._drop_refs()
        self._hidden = self._dirs.hide(self.path)

    def reaped(self) -> None:
        """The child of a :meth:`finish_unreaped` run has been reaped: remove its directory."""
        hidden, self._hidden = self._hidden, None
        if hidden is not None:
            self._dirs.remove_later(hidden)

    def is_empty_out(self) -> bool:
        """Whether ``out/`` on the disk holds nothing (or is gone)."""
        return not _holds_anything(self.path / "out")

    def _drop_refs(self) -> None:
        refs = self.path / "refs"
        if self._links or _holds_anything(refs):
            remove_tree(refs)
        self._links.clear()

    def throw_away(self) -> None:
        """Move the directory out of ``runs/`` at once, to be removed in the background."""
        self._dirs.throw_away(self.path)

    def outputs(self, max_files: int, max_bytes: int) -> tuple[list[str], str | None]:
        """The files the script left in ``out/``, relative to the workspace root and sorted, and
        why they pass the quota of ``max_files`` entries and ``max_bytes`` bytes (``None`` when
        they don't).

        The walk never follows a symlink, lists regular files only, and stops at the first entry
        past ``max_files``: what a child left can't make it long.
        """
        root = self._dirs.root
        found: list[str] = []
        size = entries = 0
        pending = [self.path / "out"]
        while pending:
            try:
                listing = os.scandir(pending.pop())
            except OSError:
                continue
            with listing:
                for entry in listing:
                    entries += 1
                    if entries > max_files:
                        return sorted(found), f"more than {max_files} files and directories"
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        size += entry.stat(follow_symlinks=False).st_size
                        found.append(str(Path(entry.path).relative_to(root)))
        if size > max_bytes:
            return sorted(found), f"more than {max_bytes} bytes"
        return sorted(found), None


class RunDirs:
    """The layout of the module doc under ``root``: runs, spares and the trash."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._live: dict[str, RunDir] = {}
        self._trash: deque[Path] = deque()
        self._trash_added = trio.Event()

    def open(self) -> None:
        """Make ``runs/``, ``.spares/`` and ``.trash/``; what an earlier bridge left in the trash
        is queued for removal."""
        for name in (RUNS_DIR, SPARES_DIR, TRASH_DIR):
            (self.root / name).mkdir(exist_ok=True)
        self._trash.extend((self.root / TRASH_DIR).iterdir())

    def new_spare(self) -> RunDir:
        """A new, made directory under ``.spares/``."""
        spare = RunDir(self, self.root / SPARES_DIR / secrets.token_hex(8))
        spare.make()
        return spare

    def for_run(self, run_id: str) -> RunDir:
        """The (not yet made) directory of run ``run_id``, live until it is released."""
        run_dir = self._live[run_id] = RunDir(self, self.root / RUNS_DIR / run_id)
        return run_dir

    def adopt(self, spare: RunDir, run_dir: RunDir) -> bool:
        """Rename a spare's directory to a run's; ``False`` (logged) when the rename failed."""
        try:
            os.rename(spare.path, run_dir.path)
        except OSError as exc:
            log.error("couldn't move spare %s to run %s: %s", spare.path, run_dir.id, exc)
            return False
        return True

    def release(self, run_dir: RunDir) -> None:
        """The run is over: marks no longer reach its directory."""
        self._live.pop(run_dir.id, None)

    def unlink_everywhere(self, key: str) -> None:
        """Unlink the payload under ``key`` from every live run (the registry's key listener)."""
        for run_dir in self._live.values():
            run_dir.unlink(key)

    def remove(self, directory: RunDir) -> None:
        """Remove a directory now (a spare that serves no run)."""
        remove_tree(directory.path)

    def throw_away(self, path: Path) -> None:
        """Move ``path`` into the trash at once, to be removed by :meth:`sweep`."""
        hidden = self.hide(path)
        if hidden is not None:
            self.remove_later(hidden)

    def hide(self, path: Path) -> Path | None:
        """Move ``path`` into the trash at once and return where it is now; ``None`` when it is
        gone already (or couldn't be moved, and was removed here). :meth:`close` removes it,
        unless :meth:`remove_later` does first."""
        trash = self.root / TRASH_DIR / path.name
        try:
            os.rename(path, trash)
        except FileNotFoundError:
            return None
        except OSError:  # no trash to move it to: removed here, as it must go either way
            remove_tree(path)
            return None
        return trash

    def remove_later(self, trash: Path) -> None:
        """Have :meth:`sweep` remove ``trash`` (a directory :meth:`hide` moved)."""
        self._trash.append(trash)
        self._trash_added.set()

    async def sweep(self) -> None:
        """Remove thrown-away directories, off the request path, until cancelled (a nursery
        task; what is left then is removed by :meth:`close`)."""
        while True:
            if not self._trash:
                self._trash_added = trio.Event()
                await self._trash_added.wait()
            await trio.lowlevel.checkpoint()  # let whoever threw it away go on first
            if self._trash:
                remove_tree(self._trash.popleft())

    def close(self) -> None:
        """Remove the spares' directories and the trash (the bridge is closing)."""
        remove_tree(self.root / SPARES_DIR)
        while self._trash:
            remove_tree(self._trash.popleft())
        with contextlib.suppress(OSError):
            (self.root / TRASH_DIR).rmdir()


def _holds_anything(directory: Path) -> bool:
    """Whether ``directory`` has an entry: ``False`` when it is gone, ``True`` when it can't be
    read (then it is treated as holding something, never thrown away unseen)."""
    try:
        with os.scandir(directory) as entries:
            return next(entries, None) is not None
    except FileNotFoundError:
        return False
    except OSError:
        return True
