"""Tests for the workspace: layout, names, atomic saves, confinement and removal."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from scriptbridge._workspace import Workspace, WorkspacePathError, extension_for


def test_creates_refs_and_out(tmp_path: Path) -> None:
    """A new workspace makes its root, refs/ and out/."""
    ws = Workspace(tmp_path / "ws")
    assert ws.refs_dir.is_dir() and ws.out_dir.is_dir()
    assert ws.refs_dir == (tmp_path / "ws" / "refs").resolve()


@pytest.mark.parametrize(
    ("media_type", "extension"),
    [
        ("image/png", ".png"),
        ("IMAGE/PNG; charset=binary", ".png"),
        ("application/pdf", ".pdf"),
        ("text/plain;charset=utf-8", ".txt"),
        ("application/json", ".json"),
        ("image/svg+xml", ".bin"),
        ("text/html", ".bin"),
        ("../../etc/passwd", ".bin"),
        ("image/png\x00.sh", ".bin"),
        ("", ".bin"),
        (None, ".bin"),
        (42, ".bin"),
    ],
)
def test_extension_comes_from_the_allowlist(media_type: object, extension: str) -> None:
    """Only allowlisted media types get their extension; anything else is .bin."""
    assert extension_for(media_type) == extension


def test_saved_name_is_the_id_and_an_allowlisted_extension(tmp_path: Path) -> None:
    """A saved copy's name is refs/<id><ext>, and an id that isn't one is refused."""
    ws = Workspace(tmp_path)
    assert ws.saved_name("ref_ab12", "image/png") == "refs/ref_ab12.png"
    assert ws.saved_name("ref_ab12", "text/x-unknown") == "refs/ref_ab12.bin"
    for bad in ("../x", "a/b", "", "x" * 65, "ref_1.png"):
        with pytest.raises(WorkspacePathError):
            ws.saved_name(bad, "image/png")


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "refs/../../x", "", "refs/\x00", "."])
def test_paths_outside_the_workspace_are_refused(tmp_path: Path, path: str) -> None:
    """Absolute paths, .. parts and NULs are refused."""
    ws = Workspace(tmp_path / "ws")
    with pytest.raises(WorkspacePathError):
        ws.resolve(path)


def test_a_symlinked_directory_leading_out_is_refused(tmp_path: Path) -> None:
    """A directory inside the workspace that links outside it can't be used to escape."""
    outside = tmp_path / "outside"
    outside.mkdir()
    ws = Workspace(tmp_path / "ws")
    os.symlink(outside, ws.out_dir / "escape")
    with pytest.raises(WorkspacePathError):
        ws.resolve("out/escape/file.txt")
    with pytest.raises(WorkspacePathError):
        ws.open_partial("out/escape/file.txt")


def test_partial_is_invisible_until_committed(tmp_path: Path) -> None:
    """Bytes go to a temporary name; the final name appears only at commit, complete."""
    ws = Workspace(tmp_path)
    data = os.urandom(100_000)
    with ws.open_partial("refs/ref_1.bin") as partial:
        partial.write(data[:50_000])
        assert not (ws.refs_dir / "ref_1.bin").exists()
        assert partial.temp.parent == ws.refs_dir and partial.temp.name.endswith(".part")
        partial.write(data[50_000:])
        assert partial.commit() == "refs/ref_1.bin"
    final = ws.refs_dir / "ref_1.bin"
    assert final.read_bytes() == data
    assert partial.size == len(data)
    assert partial.sha256 == hashlib.sha256(data).hexdigest()
    assert oct(final.stat().st_mode & 0o777) == oct(0o644)
    assert os.listdir(ws.refs_dir) == ["ref_1.bin"]


def test_discarded_partial_leaves_nothing(tmp_path: Path) -> None:
    """Leaving the with block without committing (or on an error) removes the temporary file."""
    ws = Workspace(tmp_path)
    with pytest.raises(RuntimeError), ws.open_partial("refs/ref_1.bin") as partial:
        partial.write(b"abc")
        raise RuntimeError
    assert os.listdir(ws.refs_dir) == []


def test_unlinked_partial_cannot_be_committed(tmp_path: Path) -> None:
    """After unlink (a mark's abort), a writer still writing is harmless and commit refuses."""
    ws = Workspace(tmp_path)
    partial = ws.open_partial("refs/ref_1.bin")
    partial.write(b"abc")
    partial.unlink()
    partial.write(b"def")
    with pytest.raises(FileNotFoundError):
        partial.commit()
    partial.discard()
    assert os.listdir(ws.refs_dir) == []


def test_leftover_partials_are_removed_when_a_workspace_opens(tmp_path: Path) -> None:
    """A temporary file left by a process that died is removed by the next Workspace."""
    ws = Workspace(tmp_path)
    ws.open_partial("refs/ref_1.bin").write(b"half")  # never committed nor discarded
    (ws.refs_dir / "ref_2.txt").write_text("kept")
    Workspace(tmp_path)
    assert os.listdir(ws.refs_dir) == ["ref_2.txt"]


def test_remove(tmp_path: Path) -> None:
    """remove deletes a saved copy, counts a missing one as removed, and stays under refs/."""
    ws = Workspace(tmp_path)
    (ws.refs_dir / "ref_1.png").write_bytes(b"x")
    ws.remove("refs/ref_1.png")
    assert not (ws.refs_dir / "ref_1.png").exists()
    ws.remove("refs/ref_1.png")
    (ws.out_dir / "keep.txt").write_text("x")
    with pytest.raises(WorkspacePathError):
        ws.remove("out/keep.txt")
    with pytest.raises(WorkspacePathError):
        ws.remove("refs/../out/keep.txt")
    assert (ws.out_dir / "keep.txt").exists()


def test_remove_raises_oserror_when_the_file_stays(tmp_path: Path) -> None:
    """A path that can't be unlinked (here a directory) raises OSError for the registry to retry."""
    ws = Workspace(tmp_path)
    (ws.refs_dir / "ref_1.png").mkdir()
    with pytest.raises(OSError):
        ws.remove("refs/ref_1.png")


def test_remove_never_follows_a_symlink(tmp_path: Path) -> None:
    """Removing a saved path that is a symlink removes the link, not its target."""
    target = tmp_path / "precious"
    target.write_text("keep me")
    ws = Workspace(tmp_path / "ws")
    os.symlink(target, ws.refs_dir / "ref_1.png")
    ws.remove("refs/ref_1.png")
    assert target.read_text() == "keep me"
    assert not os.path.lexists(ws.refs_dir / "ref_1.png")
