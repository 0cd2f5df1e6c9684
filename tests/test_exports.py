"""Tests for the public surface: explicit re-exports, each once, and the child/host split."""

from __future__ import annotations

import ast
import inspect
import itertools
import pathlib
import re
import types

import pytest

import sandbox
import scriptbridge

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_all_names_are_exported_and_resolve() -> None:
    """Every name in __all__ resolves, and __all__ lists each exactly once."""
    assert len(scriptbridge.__all__) == len(set(scriptbridge.__all__))
    for name in scriptbridge.__all__:
        assert getattr(scriptbridge, name) is not None


def test_api_md_core_names_are_public() -> None:
    """The pure core's names API.md gives are importable from scriptbridge."""
    for name in ("ReferenceRegistry", "render_script_view", "ScriptBridgeError"):
        assert name in scriptbridge.__all__
    assert issubclass(scriptbridge.ProtocolViolation, scriptbridge.ScriptBridgeError)


def test_init_only_reexports() -> None:
    """scriptbridge/__init__.py holds explicit `from ._x import y as y` re-exports only."""
    tree = ast.parse((ROOT / "scriptbridge" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            assert all(alias.asname == alias.name for alias in node.names), ast.dump(node)
        else:
            assert isinstance(node, ast.Expr | ast.Assign), ast.dump(node)


def test_sandbox_never_imports_the_host() -> None:
    """No module of the child package imports scriptbridge, trio, httpx or mcp."""
    forbidden = {"scriptbridge", "trio", "httpx", "mcp", "anyio"}
    for path in (ROOT / "sandbox").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in forbidden, f"{path}: imports {name}"


def _public(module: types.ModuleType) -> list[tuple[str, object]]:
    return [(name, getattr(module, name)) for name in module.__all__]


def _attribute_docstrings(package: str) -> set[str]:
    """Names assigned at a module's top level with a string right after them, in ``package``."""
    documented = set()
    for path in (ROOT / package).rglob("*.py"):
        body = ast.parse(path.read_text()).body
        for node, after in itertools.pairwise(body):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", 0)]
            if (
                isinstance(node, ast.Assign | ast.AnnAssign)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
                and after.value.value.strip()
            ):
                documented |= {target.id for target in targets if isinstance(target, ast.Name)}
    return documented


@pytest.mark.parametrize("module", [scriptbridge, sandbox], ids=["scriptbridge", "sandbox"])
def test_every_exported_name_is_documented(module: types.ModuleType) -> None:
    """Each name in __all__ has a docstring of its own (not one inherited or generated), and
    each exported value that isn't a class or function has one right after its assignment."""
    documented = _attribute_docstrings(module.__name__)
    for name, value in _public(module):
        if isinstance(value, type) or inspect.isroutine(value):
            doc = vars(value).get("__doc__") if isinstance(value, type) else value.__doc__
            assert doc and doc.strip(), f"{name} has no docstring"
            assert not doc.startswith(f"{name}("), f"{name}'s docstring is generated: {doc!r}"
        else:
            assert name in documented, f"{name} has no docstring after its assignment"


def _tree() -> dict[str, str | None]:
    """The classes drawn at the top of _exceptions.py, each with the class drawn above it."""
    import scriptbridge._exceptions

    drawn: dict[str, str | None] = {}
    above: list[str] = []
    for line in (scriptbridge._exceptions.__doc__ or "").splitlines():
        match = re.match(r"^(\s*)ScriptBridgeError\(Exception\)\s*$", line) or re.match(
            r"^([\s│]*[├└]── )(\w+)\b", line
        )
        if match is None:
            continue
        if not drawn:
            assert match.re.pattern.startswith(r"^(\s*)ScriptBridgeError"), line
            drawn["ScriptBridgeError"], above = None, ["ScriptBridgeError"]
            root = len(match.group(1))
            continue
        depth = (len(match.group(1)) - root) // 4
        name = match.group(2)
        above = [*above[:depth], name]
        drawn[name] = above[depth - 1]
    return drawn


def _raised_names() -> set[str]:
    """Every name a ``raise Name`` or ``raise Name(...)`` in scriptbridge/ raises."""
    raised = set()
    for path in (ROOT / "scriptbridge").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name):
                    raised.add(exc.id)
    return raised


def test_every_exported_exception_is_drawn_where_it_derives_and_raised() -> None:
    """Each exception scriptbridge exports is in the tree, drawn under its nearest exported base
    class, and the host's code raises it by name somewhere."""
    exceptions = {
        name: value
        for name, value in _public(scriptbridge)
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    drawn = _tree()
    assert set(drawn) == set(exceptions)
    for name, parent in drawn.items():
        mro = exceptions[name].__mro__[1:]
        nearest = next((base.__name__ for base in mro if base.__name__ in exceptions), None)
        assert nearest == parent, (name, mro)
    assert set(exceptions) - _raised_names() == set()


def test_every_exported_child_exception_is_raised() -> None:
    """Each exception sandbox exports is raised by name in sandbox/."""
    raised = set()
    for path in (ROOT / "sandbox").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name):
                    raised.add(exc.id)
    exported = {
        name
        for name, value in _public(sandbox)
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    assert exported and exported - raised == set()
