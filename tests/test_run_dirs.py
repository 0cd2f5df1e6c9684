"""Tests of the run directories (scriptbridge._run_dirs): the one owner of runs/, .spares/ and
.trash/, on real files."""

from __future__ import annotations

import os
import pathlib

import trio
import trio.testing

from scriptbridge._run_dirs import RUNS_DIR, SPARES_DIR, TRASH_DIR, RunDirs


def opened(root: pathlib.Path) -> RunDirs:
    root.mkdir(exist_ok=True)
    dirs = RunDirs(root)
    dirs.open()
    return dirs


def test_open_makes_the_layout_and_queues_old_trash(tmp_path: pathlib.Path) -> None:
    """Opening makes runs/, .spares/ and .trash/; what an earlier bridge left in the trash is
    removed on close."""
    (tmp_path / TRASH_DIR / "old" / "out").mkdir(parents=True)
    dirs = opened(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {RUNS_DIR, SPARES_DIR, TRASH_DIR}
    dirs.close()
    assert not (tmp_path / TRASH_DIR).exists() and not (tmp_path / SPARES_DIR).exists()


def test_a_mark_unlinks_a_payload_from_every_live_run(tmp_path: pathlib.Path) -> None:
    """unlink_everywhere removes the payload's link from each live run, and none from a run
    that was released."""
    dirs = opened(tmp_path)
    payload = tmp_path / "payload.bin"
    payload.write_bytes(b"secret")
    live = [dirs.for_run(f"run{n}") for n in range(3)]
    for run_dir in live:
        run_dir.make()
        assert run_dir.link("key", payload) == "refs/payload.bin"
    dirs.release(live[2])
    dirs.unlink_everywhere("key")
    assert [(d.path / "refs" / "payload.bin").exists() for d in live] == [False, False, True]
    assert payload.read_bytes() == b"secret"  # the shared copy is the registry's to remove


def test_finish_keeps_out_only_when_it_holds_something(tmp_path: pathlib.Path) -> None:
    """A finished run loses refs/; its directory stays only if out/ holds a file, otherwise it
    leaves runs/ at once and the sweeper removes it."""
    dirs = opened(tmp_path)
    payload = tmp_path / "p.txt"
    payload.write_text("x")
    kept, dropped = dirs.for_run("kept"), dirs.for_run("dropped")
    for run_dir in (kept, dropped):
        run_dir.make()
        run_dir.link("k", payload)
    (kept.path / "out" / "report.md").write_text("done")
    kept.finish()
    dropped.finish()
    assert sorted(p.name for p in kept.path.iterdir()) == ["out"]
    assert not dropped.path.exists()
    assert [p.name for p in (tmp_path / TRASH_DIR).iterdir()] == ["dropped"]

    async def sweep() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(dirs.sweep)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()

    trio.run(sweep)
    assert list((tmp_path / TRASH_DIR).iterdir()) == []


def test_outputs_follow_no_symlink_and_stop_past_the_quota(tmp_path: pathlib.Path) -> None:
    """outputs lists regular files only (a symlink is never followed or listed), relative to
    the root, and says why a run passed its file or byte quota."""
    dirs = opened(tmp_path)
    run_dir = dirs.for_run("r")
    run_dir.make()
    out = run_dir.path / "out"
    (out / "sub").mkdir()
    (out / "sub" / "a.txt").write_text("aaaa")
    (out / "b.txt").write_text("bb")
    os.symlink("/etc", out / "link")
    files, passed = run_dir.outputs(max_files=10, max_bytes=100)
    assert files == ["runs/r/out/b.txt", "runs/r/out/sub/a.txt"] and passed is None
    assert run_dir.outputs(max_files=10, max_bytes=5)[1] == "more than 5 bytes"
    assert run_dir.outputs(max_files=2, max_bytes=100)[1] == "more than 2 files and directories"


def test_adopting_a_spare_renames_its_directory(tmp_path: pathlib.Path) -> None:
    """A spare's directory becomes the run's in one rename; a failed rename says so."""
    dirs = opened(tmp_path)
    spare = dirs.new_spare()
    (spare.path / "out" / "left.txt").write_text("y")
    run_dir = dirs.for_run("r")
    assert dirs.adopt(spare, run_dir)
    assert (run_dir.path / "out" / "left.txt").read_text() == "y" and not spare.path.exists()
    assert not dirs.adopt(spare, dirs.for_run("again"))  # the spare's directory is gone
