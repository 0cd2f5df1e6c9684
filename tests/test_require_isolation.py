"""No layer lost in silence: ``require_isolation`` refuses, a missing layer is said once, a
run whose child lacks a required layer never runs its script.

The machine that lacks layers is real: an ordinary user's zygote under a seccomp filter that
refuses user namespaces, as a container's default profile does (:mod:`unprivileged`,
:mod:`seccomp_denial`), for the bridge (``ZygoteLauncher(python=...)``) and the command line.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from unprivileged import (
    DENY_USER_NAMESPACES,
    can_drop_to_user,
    hand_to_user,
    python_as_user,
    user_directory,
)

from sandbox import ChildLimits
from scriptbridge import Bridge, IsolationUnavailable, Limits, SyncBridge
from scriptbridge._launcher import Child, ZygoteLauncher
from scriptbridge._run_dirs import RunDir

NAMESPACE_LAYERS = ["netns", "pidns", "ipcns", "uid", "quota"]
cannot_drop = can_drop_to_user()
as_user = pytest.mark.skipif(cannot_drop is not None, reason=cannot_drop or "")


@pytest.fixture
def denied_python() -> Iterator[str]:
    """A command starting this Python as an ordinary user under a seccomp filter that refuses
    user namespaces."""
    with python_as_user(prelude=DENY_USER_NAMESPACES) as python:
        yield python


@pytest.fixture
def user_workspace() -> Iterator[Path]:
    """A workspace of the ordinary user's."""
    base = user_directory()
    hand_to_user(base)
    try:
        yield base / "ws"
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


@as_user
async def test_a_bridge_requiring_every_layer_refuses_to_open(
    denied_python: str, user_workspace: Path
) -> None:
    """``require_isolation="all"`` raises IsolationUnavailable naming each missing layer, the
    cause and the remedy; nothing is left running."""
    launcher = ZygoteLauncher(python=denied_python, max_spares=0)
    bridge = Bridge(user_workspace, require_isolation="all", launcher=launcher)
    with pytest.raises(IsolationUnavailable) as refused:
        async with bridge:
            pytest.fail("the bridge opened")
    assert [item.layer for item in refused.value.missing] == NAMESPACE_LAYERS
    for item in refused.value.missing:
        assert "a seccomp filter on this process refuses namespaces" in item.reason
        assert "contrib/seccomp-userns.json" in item.remedy
    message = str(refused.value)
    assert "netns, pidns, ipcns, uid, quota" in message and "to apply them" in message
    assert launcher.zygote_pid is None  # stopped


@as_user
async def test_a_bridge_requiring_present_layers_opens(
    denied_python: str, user_workspace: Path
) -> None:
    """Requiring only layers this machine gives opens, and runs have them."""
    launcher = ZygoteLauncher(python=denied_python, max_spares=0)
    async with Bridge(
        user_workspace, require_isolation=["seccomp", "landlock"], launcher=launcher
    ) as bridge:
        result = await bridge.run("1 + 1")
    assert result.value == 2
    assert {"seccomp", "landlock"} <= set(result.isolation)


@as_user
async def test_without_require_isolation_a_missing_layer_is_logged_once(
    denied_python: str, user_workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """By default the bridge opens, logs the missing layers once at WARNING (why, remedy),
    and each result says the layers that applied."""
    caplog.set_level(logging.WARNING, logger="scriptbridge")
    launcher = ZygoteLauncher(python=denied_python, max_spares=0)
    async with Bridge(user_workspace, launcher=launcher) as bridge:
        first = await bridge.run("1")
        second = await bridge.run("2")
    warnings = [r for r in caplog.records if "running scripts without" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    said = warnings[0].getMessage()
    assert "netns, pidns, ipcns, uid, quota (why: " in said
    assert "contrib/seccomp-userns.json" in said
    for result in (first, second):
        assert result.ok
        assert result.isolation == ["restricted-python", "rlimits", "seccomp", "landlock"]


@as_user
def test_a_sync_bridge_refuses_as_the_async_one(denied_python: str, user_workspace: Path) -> None:
    """``SyncBridge(require_isolation=[...])`` raises the same, and stops what it started."""
    launcher = ZygoteLauncher(python=denied_python, max_spares=0)
    bridge = SyncBridge(user_workspace, require_isolation=["uid"], launcher=launcher)
    with pytest.raises(IsolationUnavailable) as refused:
        bridge.__enter__()
    assert [item.layer for item in refused.value.missing] == ["uid"]
    assert launcher.zygote_pid is None


class LandlockOffLauncher(ZygoteLauncher):
    """Says (truly, from its zygote) that every layer applies, but forks each run's child
    with landlock off: a layer that failed in one child alone."""

    async def _fork(self, directory: RunDir, limits: ChildLimits) -> Child:
        link = self._live_link()
        from scriptbridge._launcher import ZygoteChild

        spawned = await link.spawn(directory.path, limits, disable=("landlock",))
        return ZygoteChild(link, spawned)


@pytest.mark.skipif(os.geteuid() != 0, reason="every layer applies only to root here")
async def test_a_child_lacking_a_required_layer_never_runs_the_script(tmp_path: Path) -> None:
    """With ``require_isolation``, a run whose child reports a required layer not applied ends
    ``SandboxCrashed`` naming it, and the script is never sent; without, it runs."""
    script = "write_text('out/ran.txt', 'yes')\n'ran'"
    async with Bridge(
        tmp_path / "strict", require_isolation="all", launcher=LandlockOffLauncher(max_spares=0)
    ) as bridge:
        refused = await bridge.run(script)
    assert refused.error is not None and refused.error.ending.value == "SandboxCrashed"
    assert "lacks required isolation layers: landlock (disabled)" in refused.error.message
    assert not list((tmp_path / "strict").glob("runs/*/out/ran.txt"))
    async with Bridge(tmp_path / "lax", launcher=LandlockOffLauncher(max_spares=0)) as bridge:
        ran = await bridge.run(script, limits=Limits(wall_s=20))
    assert ran.value == "ran" and "landlock" not in ran.isolation


def test_require_isolation_names_only_layers() -> None:
    """An unknown layer name, or a bare string other than 'all', is a ValueError listing the
    layers."""
    with pytest.raises(ValueError, match="no such layer: netnz"):
        Bridge("ws-unused", require_isolation=["netnz"])
    with pytest.raises(ValueError, match="'all' or a list"):
        Bridge("ws-unused", require_isolation="netns")


def cli(
    *args: str, python: str = sys.executable, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-m", "scriptbridge._cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={"PATH": os.environ.get("PATH", "")},
    )


@as_user
def test_the_command_line_refuses_or_says_once(denied_python: str, user_workspace: Path) -> None:
    """``run --require-isolation all`` exits 2 naming the missing layers; without it the
    script runs and stderr says the missing layers once, in the bridge's words."""
    user_workspace.mkdir()
    script = user_workspace / "job.py"
    script.write_text("6 * 7")
    hand_to_user(user_workspace)
    workspace = str(user_workspace / "w")
    refused = cli("run", str(script), "--workspace", workspace, "--require-isolation", "all",
                  python=denied_python)  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert "required isolation layers can't be applied here: netns, pidns, ipcns, uid, quota" in (
        refused.stderr
    )
    ran = cli("run", str(script), "--workspace", workspace, python=denied_python)
    assert ran.returncode == 0, ran.stderr
    assert "42" in ran.stdout
    said = [line for line in ran.stderr.splitlines() if "running scripts without" in line]
    assert len(said) == 1 and "contrib/seccomp-userns.json" in said[0], ran.stderr


def test_the_command_line_rejects_an_unknown_layer() -> None:
    """``--require-isolation netnz`` is a usage error naming the layers."""
    done = cli("run", "missing.py", "--require-isolation", "netns,netnz")
    assert done.returncode == 2
    assert "no such layer: netnz" in done.stderr


@as_user
def test_doctor_names_the_cause_and_remedy(denied_python: str) -> None:
    """doctor, as a user whose container refuses namespaces, names the cause and the remedy
    on each namespace layer's line, and how the others are given."""
    done = cli("doctor", python=denied_python)
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    for layer in NAMESPACE_LAYERS:
        assert "no: unshare(CLONE_NEWUSER): Operation not permitted" in lines[layer]
        assert "to apply it: run the container with the seccomp profile" in lines[layer]
    assert lines["seccomp"].split(None, 1)[1].startswith("yes: a BPF filter")


@as_user
def test_doctor_as_an_ordinary_user_lists_every_layer_applied() -> None:
    """doctor, as an ordinary user on this machine, gives every layer, the namespace ones
    through user namespaces."""
    with python_as_user() as python:
        done = cli("doctor", python=python)
    assert done.returncode == 0, done.stderr
    assert "every isolation layer can be applied on this machine" in done.stdout
    assert done.stdout.count("through user namespaces") == len(NAMESPACE_LAYERS)
