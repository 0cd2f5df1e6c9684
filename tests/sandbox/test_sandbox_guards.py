"""The language layer's hooks, called directly: names, imports, proxies, builtins, writes."""

from __future__ import annotations

import json
import os
import textwrap
import types
from typing import Any

import pytest

from sandbox import _guards
from sandbox._guards import (
    ALLOWED_IMPORTS,
    DENIED_ATTRIBUTES,
    SCRIPT_MODULE,
    ModuleProxy,
    guard_hooks,
    guarded_getattr,
    guarded_import,
    safe_builtins,
    script_build_class,
)

FORBIDDEN_BUILTINS = (
    "type", "getattr", "setattr", "delattr", "hasattr", "vars", "dir", "globals", "locals",
    "eval", "exec", "compile", "open", "input", "breakpoint", "help", "memoryview", "object",
    "super", "exit", "quit", "copyright", "license", "credits",
)  # fmt: skip


def test_underscore_names_are_denied() -> None:
    """Any attribute name starting with an underscore is denied."""
    for name in ("__class__", "__globals__", "_private", "__subclasses__"):
        with pytest.raises(AttributeError):
            guarded_getattr(1, name)


@pytest.mark.parametrize("name", sorted(DENIED_ATTRIBUTES))
def test_internal_names_are_denied(name: str) -> None:
    """Frame, code, generator and traceback internals are denied by name."""
    with pytest.raises(AttributeError):
        guarded_getattr((x for x in ()), name)


def test_format_is_denied_on_strings() -> None:
    """``str.format``/``format_map`` are denied on instances, subclasses and the type."""

    class Sub(str):
        pass

    for target in ("{0.__class__}", Sub("x"), str, Sub):
        for name in ("format", "format_map"):
            with pytest.raises(AttributeError):
                guarded_getattr(target, name)
    assert guarded_getattr("a b", "split")() == ["a", "b"]


def test_values_that_are_internals_are_denied() -> None:
    """An attribute whose value is a module or frame is denied whatever its name."""
    holder = types.SimpleNamespace(anything=os, frame=None)
    with pytest.raises(AttributeError):
        guarded_getattr(holder, "anything")
    with pytest.raises(AttributeError):
        guarded_getattr(os, "path")


def test_getattr_default() -> None:
    """A missing attribute gives the default when one is passed."""
    assert guarded_getattr(1, "nope", "dflt") == "dflt"
    with pytest.raises(AttributeError):
        guarded_getattr(1, "nope")


@pytest.mark.parametrize("name", sorted(ALLOWED_IMPORTS))
def test_imports_give_proxies_without_modules(name: str) -> None:
    """Each allowlisted import is a proxy; nothing it exposes is a module, and no attribute
    reachable one step further through the guard is one either."""
    proxy = guarded_import(name)
    assert isinstance(proxy, ModuleProxy) and not isinstance(proxy, types.ModuleType)
    module, names = ALLOWED_IMPORTS[name]
    for attribute in names:
        if not hasattr(module, attribute):
            continue
        value = guarded_getattr(proxy, attribute)
        assert not isinstance(value, types.ModuleType)
        for inner in dir(value):
            if inner.startswith("_"):
                continue
            try:
                reached = guarded_getattr(value, inner)
            except (AttributeError, TypeError, ValueError):
                continue
            assert not isinstance(reached, types.ModuleType | types.FrameType | types.CodeType)


@pytest.mark.parametrize(
    "name",
    ["os", "sys", "subprocess", "importlib", "builtins", "json.decoder", "os.path", "ctypes", ""],
)
def test_other_imports_are_refused(name: str) -> None:
    """Modules off the allowlist, and submodules, raise ImportError."""
    with pytest.raises(ImportError):
        guarded_import(name)


def test_relative_imports_are_refused() -> None:
    """Relative imports raise ImportError."""
    with pytest.raises(ImportError):
        guarded_import("json", None, None, (), 1)


def test_proxy_is_read_only_and_limited() -> None:
    """A proxy refuses writes and names it doesn't list."""
    proxy = guarded_import("json")
    with pytest.raises(TypeError):
        proxy.dumps = None  # type: ignore[misc]
    for name in ("decoder", "scanner", "codecs", "JSONDecoder", "load"):
        with pytest.raises(AttributeError):
            guarded_getattr(proxy, name)
    assert guarded_getattr(proxy, "dumps") is json.dumps


def test_time_exposes_clocks_only() -> None:
    """``time`` exposes clock functions, not sleep or the conversions."""
    proxy = guarded_import("time")
    guarded_getattr(proxy, "monotonic")
    for name in ("sleep", "strftime", "localtime", "tzset"):
        with pytest.raises(AttributeError):
            guarded_getattr(proxy, name)


def test_builtins_allowlist() -> None:
    """Forbidden builtins are absent; ``__import__`` is the guarded one; print is ours."""

    def printer(*args: object) -> None:
        pass

    allowed = safe_builtins(printer)
    for name in FORBIDDEN_BUILTINS:
        assert name not in allowed
    assert allowed["__import__"] is guarded_import
    assert allowed["print"] is printer


def test_write_guard() -> None:
    """Writes to modules, proxies, foreign classes and foreign functions are refused, even to a
    class that claims the script's module; data and the script's classes and functions are
    fine."""
    write = guard_hooks()["_write_"]
    impostor = type("Mine", (), {"__module__": SCRIPT_MODULE})
    for target in (os, guarded_import("math"), str, ModuleProxy, impostor, textwrap.dedent):
        with pytest.raises(TypeError):
            write(target)
    namespace: dict[str, Any] = {
        "__name__": SCRIPT_MODULE,
        "__builtins__": {"__build_class__": script_build_class},
    }
    exec("class Mine:\n    pass\ndef function():\n    pass\n", namespace)
    script_class = namespace["Mine"]
    for target in ({}, [], script_class, script_class(), namespace["function"]):
        assert write(target) is target


def test_proxy_has_no_module_identity() -> None:
    """A proxy has no ``__name__``/``__path__``/``__spec__``, so ``from m import x`` can't
    fall back to a real submodule in ``sys.modules``."""
    proxy = guarded_import("json")
    for name in ("__name__", "__path__", "__spec__", "__loader__", "__dict__"):
        assert not hasattr(proxy, name)
    namespace = {"__builtins__": {"__import__": guarded_import}}
    with pytest.raises(ImportError):
        exec("from json import decoder", namespace)


def test_package_exports() -> None:
    """``sandbox.__all__`` names exactly the package's public, non-module names (those it
    loads on first use, the launcher's, included)."""
    import sandbox

    public = {
        name
        for name in dir(sandbox)
        if not name.startswith("_") and not isinstance(getattr(sandbox, name), types.ModuleType)
    }
    assert public == set(sandbox.__all__)


def test_sandbox_never_imports_the_host() -> None:
    """Importing every sandbox module (as the zygote does) loads no host-side package."""
    import subprocess
    import sys

    code = (
        "import sys, sandbox, sandbox.protocol, sandbox._runtime, sandbox._guards, "
        "sandbox._isolation, sandbox._zygote, sandbox.testing, sandbox.__main__\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'scriptbridge', 'trio', 'httpx', 'mcp', 'anyio'}))"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True, cwd="/"
    )
    assert result.stdout.strip() == "[]"


def test_a_class_statement_records_only_the_class_it_made() -> None:
    """A metaclass other than ``type``, or a body that hands back an existing class, is
    refused, so no stdlib class can be recorded as the script's (and become writable)."""
    import fractions

    def body() -> None:
        pass

    with pytest.raises(TypeError, match="no metaclass"):
        script_build_class(body, "X", metaclass=lambda *a: fractions.Fraction)

    class Adopting(type):
        def __new__(mcs, *args: Any, **kwargs: Any) -> Any:
            return fractions.Fraction

    with pytest.raises(TypeError, match="didn't write"):
        script_build_class(body, "Y", Adopting("B", (), {}), metaclass=type)
    with pytest.raises(TypeError):
        guard_hooks()["_write_"](fractions.Fraction)


def test_str_format_is_denied_however_it_is_reached() -> None:
    """``str.format`` is denied by value too: bound or unbound, under any owner or name."""
    holder = types.SimpleNamespace(fmt=str.format, bound="{0}".format, mapped="".format_map)
    _guards._SCRIPT_CLASSES.add(types.SimpleNamespace)  # every name readable: value checks only
    try:
        for name in ("fmt", "bound", "mapped"):
            with pytest.raises(AttributeError, match="not available"):
                guarded_getattr(holder, name)
    finally:
        _guards._SCRIPT_CLASSES.discard(types.SimpleNamespace)


def test_methods_and_properties_are_not_read_off_stdlib_classes() -> None:
    """A Python method or property read off a class the script didn't write is denied (it
    would run on any ``self``); off an instance it is bound and fine; metaclasses are denied."""
    import collections
    import fractions

    with pytest.raises(AttributeError, match="on an instance"):
        guarded_getattr(collections.Counter, "copy")
    with pytest.raises(AttributeError, match="on an instance"):
        guarded_getattr(fractions.Fraction, "numerator")
    assert guarded_getattr(collections.Counter("aab"), "copy")() == {"a": 2, "b": 1}
    assert guarded_getattr(str, "upper")("a") == "A"  # C methods check their self
    holder = types.SimpleNamespace(meta=type)
    _guards._SCRIPT_CLASSES.add(types.SimpleNamespace)
    try:
        with pytest.raises(AttributeError, match="interpreter internal"):
            guarded_getattr(holder, "meta")
    finally:
        _guards._SCRIPT_CLASSES.discard(types.SimpleNamespace)


def test_sandbox_objects_are_read_only() -> None:
    """Instances of the sandbox's own classes (a tool error, a limit stop) can't be written."""
    from sandbox._session import ToolError

    with pytest.raises(TypeError, match="read-only"):
        guard_hooks()["_write_"](ToolError("x"))
