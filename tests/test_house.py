"""Tests for the house rules between the two packages: the host enters the child package by
one door (``sandbox`` and ``sandbox.protocol``), the protocol does no I/O, and the fork server
loads nothing of the host's side."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

from sandbox.protocol import MAX_DATA_DEPTH, check_plain
from scriptbridge import ReferenceRegistry, render_script_view
from scriptbridge._walk import MAX_DEPTH

ROOT = pathlib.Path(__file__).resolve().parent.parent

DOOR = frozenset({"sandbox", "sandbox.protocol"})
"""The only modules of the child package a host module may import."""


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """Every absolute import in ``path`` as (line, dotted name); ``from a import b`` gives both
    ``a`` and ``a.b`` (``b`` may be a submodule)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def _past_the_door(path: pathlib.Path) -> list[tuple[int, str]]:
    """The imports of ``path`` that reach a module of ``sandbox`` other than the door's two, or
    a private name of one of them (which may be a private submodule), as (line, name)."""
    wrong = []
    for line, name in _imports(path):
        if name.split(".")[0] != "sandbox" or name in DOOR:
            continue
        parent, _, last = name.rpartition(".")
        if parent in DOOR and not last.startswith("_"):
            continue
        wrong.append((line, name))
    return wrong


def _host_modules() -> list[pathlib.Path]:
    host = sorted((ROOT / "scriptbridge").rglob("*.py"))
    assert host, "no host modules found"
    return host


def test_the_host_imports_the_sandbox_only_through_its_door() -> None:
    """No host module imports a module of ``sandbox`` but ``sandbox`` and ``sandbox.protocol``."""
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: imports {name}"
        for path in _host_modules()
        for line, name in _past_the_door(path)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_door_check_sees_each_way_past_it(tmp_path: pathlib.Path) -> None:
    """The door check flags every spelling that reaches past the door, and nothing else."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import sandbox._zygote\nfrom sandbox._isolation import ChildLimits\n"
        "from sandbox import _runtime\nfrom sandbox.protocol import Ready\nimport sandbox\n"
        "from sandbox import ZygoteProcess\nimport trio\n"
    )
    assert _past_the_door(sample) == [
        (1, "sandbox._zygote"),
        (2, "sandbox._isolation"),
        (2, "sandbox._isolation.ChildLimits"),
        (3, "sandbox._runtime"),
    ]


def test_the_protocol_is_sans_io() -> None:
    """No module of ``sandbox.protocol`` imports a module that does I/O on fds or processes,
    or uses anything of ``os`` but its path functions."""
    io_modules = {"socket", "select", "selectors", "subprocess", "threading", "io", "fcntl"}
    package = ROOT / "sandbox" / "protocol"
    modules = sorted(package.rglob("*.py")) if package.is_dir() else [package.with_suffix(".py")]
    wrong = []
    for path in modules:
        tree = ast.parse(path.read_text())
        for line, name in _imports(path):
            if name.split(".")[0] in io_modules or (name.startswith("os.") and name != "os.path"):
                wrong.append(f"{path.name}:{line}: imports {name}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
                and node.attr not in {"path", "fspath", "PathLike"}
            ):
                wrong.append(f"{path.name}:{node.lineno}: uses os.{node.attr}")
    assert not wrong, "\n".join(wrong)


def test_the_fork_server_loads_nothing_of_the_host() -> None:
    """Importing the zygote (the fork server) loads neither the host-side launcher nor trio."""
    code = (
        "import sys; import sandbox._zygote; "
        "names = ('sandbox._launcher', 'trio', 'scriptbridge'); "
        "print(sorted(name for name in names if name in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def nested_lists(depth: int) -> object:
    """A list whose deepest container sits at ``depth`` (the value itself is at depth 0)."""
    value: object = []
    for _ in range(depth):
        value = [value]
    return value


def test_one_depth_limit_for_both_sides() -> None:
    """The host's walks and the channel share one depth limit: a container may sit at depth
    MAX_DATA_DEPTH, and none deeper, and the deepest view the host renders passes the check."""
    assert MAX_DEPTH == MAX_DATA_DEPTH
    assert check_plain(nested_lists(MAX_DATA_DEPTH))
    with pytest.raises(ValueError, match="deeper"):
        check_plain(nested_lists(MAX_DATA_DEPTH + 1))
    for depth in (MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1):
        view = render_script_view({"structuredContent": nested_lists(depth)}, ReferenceRegistry())
        check_plain(view)


def test_the_bridge_stays_thin() -> None:
    """Bridge composes the parts that own each job: its class body stays under 250 lines."""
    tree = ast.parse((ROOT / "scriptbridge" / "_supervisor.py").read_text())
    (bridge,) = [
        node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Bridge"
    ]
    assert bridge.end_lineno is not None and bridge.end_lineno - bridge.lineno < 250
