"""Tests for the public surface: explicit re-exports, each once, and the child/host split."""

from __future__ import annotations

import ast
import pathlib

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
