"""Compile one script with RestrictedPython (:func:`compile_script`); errors come back as data.

The run's value is the value of the script's *last statement* when that statement is an
expression statement; otherwise ``None``. It is compiled separately in ``eval`` mode, to be
evaluated in the same globals after the rest of the script.

``name <op>= value`` compiles to a native in-place operation, where RestrictedPython would call
an ``_inplacevar_`` hook that could only apply the same operator (see :class:`_Policy`).
Augmented assignment of attributes and items is refused, as RestrictedPython does.
"""

from __future__ import annotations

import ast
import re
import types
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from RestrictedPython.compile import compile_restricted_eval, compile_restricted_exec
from RestrictedPython.transformer import RestrictingNodeTransformer

from ._values import MESSAGE_CHARS, cut, describe
from ._wire import RunError

__all__ = ["SCRIPT_FILENAME", "compile_script", "script_line"]

SCRIPT_FILENAME: Final = "<script>"
"""The file name of a script's code objects (and of its frames in a traceback)."""

_LINE_PREFIX: Final = re.compile(r"^Line (\d+):")


def script_line(exc: BaseException) -> int | None:
    """The last line of the script that ``exc``'s traceback passes through, or ``None``."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == SCRIPT_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class _Dialect:
    """The async dialect's rewrites (module doc of :mod:`sandbox._dialect`), shared by the
    restricted policy and the plain compile: ``await x`` -> ``_await_(x)``, ``async def`` ->
    ``def``, a top-level ``return v`` -> ``raise _return_(v)``. The names it makes are never
    checked as the script's own (a script can't write a name starting with ``_``)."""

    _depth = 0
    """How many function or class bodies the visit is inside (0: the script's top level)."""

    def _scoped(self, visit: Callable[[Any], Any], node: Any) -> Any:
        self._depth += 1
        try:
            return visit(node)
        finally:
            self._depth -= 1

    def _await(self, node: ast.Await, visit: Callable[[Any], Any]) -> ast.Call:
        hook = _located(ast.Name("_await_", ast.Load()), node)
        return _located(ast.Call(func=hook, args=[visit(node.value)], keywords=[]), node)

    @staticmethod
    def _plain_def(node: ast.AsyncFunctionDef) -> ast.FunctionDef:
        plain = ast.FunctionDef(
            name=node.name,
            args=node.args,
            body=node.body,
            decorator_list=node.decorator_list,
            returns=node.returns,
            type_comment=node.type_comment,
        )
        return _located(plain, node)

    def _top_return(self, node: ast.Return, visit: Callable[[Any], Any]) -> ast.Raise:
        value = visit(node.value) if node.value is not None else _located(ast.Constant(None), node)
        hook = _located(ast.Name("_return_", ast.Load()), node)
        call = _located(ast.Call(func=hook, args=[value], keywords=[]), node)
        return _located(ast.Raise(exc=call, cause=None), node)


N = TypeVar("N", bound=ast.AST)


def _located(new: N, old: ast.AST) -> N:
    """``new`` at ``old``'s place in the source (a node the rewrite made has none of its own)."""
    return ast.copy_location(new, old)


class _Policy(_Dialect, RestrictingNodeTransformer):
    """RestrictedPython's policy with the async dialect rewritten (:class:`_Dialect`) and one
    rewrite left out: ``name <op>= value`` stays a native in-place operation instead of
    becoming ``name = _inplacevar_("<op>=", name, value)``.

    The hook would only apply the same operator and check nothing else, so the result is the
    same, and a loop's ``total += i`` costs no Python call per iteration. Every other check of
    the policy runs: the target name and the value are visited, and augmented assignment of
    attributes and items is refused. ``async for`` and ``async with`` stay refused.
    """

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        if isinstance(node.target, ast.Name):
            return self.node_contents_visit(node)
        return super().visit_AugAssign(node)

    def visit_Await(self, node: ast.Await) -> Any:
        return self._await(node, self.visit)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> Any:
        return self.visit_FunctionDef(self._plain_def(node))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        return self._scoped(super().visit_FunctionDef, node)

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        return self._scoped(super().visit_Lambda, node)

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        return self._scoped(super().visit_ClassDef, node)

    def visit_Return(self, node: ast.Return) -> Any:
        if self._depth == 0:
            return self._top_return(node, self.visit)
        return super().visit_Return(node)


class _PlainDialect(_Dialect, ast.NodeTransformer):
    """For the plain compile (the language layer off), the rewrites plain Python needs to
    compile the dialect at all: an ``await`` and a ``return`` at the script's top level. An
    ``async def`` stays a real one there (the security suite's controls show what a real
    coroutine would give a script)."""

    def visit_Await(self, node: ast.Await) -> Any:
        if self._depth == 0:
            return self._await(node, self.visit)
        return self.generic_visit(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> Any:
        return self._scoped(self.generic_visit, node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        return self._scoped(self.generic_visit, node)

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        return self._scoped(self.generic_visit, node)

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        return self._scoped(self.generic_visit, node)

    def visit_Return(self, node: ast.Return) -> Any:
        if self._depth == 0:
            return self._top_return(node, self.visit)
        return self.generic_visit(node)


def _compile_error(errors: Sequence[str]) -> RunError:
    line = None
    for error in errors:
        match = _LINE_PREFIX.match(error)
        if match:
            line = int(match.group(1))
            break
    kind = "SyntaxError" if any("SyntaxError" in error for error in errors) else "CompileError"
    return RunError(
        type=kind, message=cut("\n".join(errors), MESSAGE_CHARS), line=line, phase="compile"
    )


Compiled = tuple[types.CodeType, types.CodeType | None, bool]
"""A compiled script: its body, its last expression (or ``None``), and whether it uses
``await`` (then its tool calls are pending until awaited, :mod:`sandbox._dialect`)."""


def compile_script(source: str, *, restricted: bool) -> Compiled | RunError:
    """Compile ``source`` into (body, last expression or ``None``, uses ``await``), or return
    the errors.

    With ``restricted`` the RestrictedPython policy applies to both parts; without it the
    plain compiler is used (the security suite's "language layer off" mode). Never raises for
    a bad script: syntax and policy errors come back as a ``RunError`` of phase ``compile``.
    """
    try:
        tree = ast.parse(source, SCRIPT_FILENAME, "exec")
    except SyntaxError as exc:
        return RunError(
            type=type(exc).__name__,
            message=cut(exc.msg or str(exc), MESSAGE_CHARS),
            line=exc.lineno,
            phase="compile",
        )
    except (ValueError, RecursionError, MemoryError) as exc:
        return RunError(type="SyntaxError", message=describe(exc), line=None, phase="compile")
    awaits = any(isinstance(node, ast.Await) for node in ast.walk(tree))
    last: ast.Expression | None = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        final = tree.body.pop()
        assert isinstance(final, ast.Expr)
        last = ast.Expression(body=final.value)
    try:
        if not restricted:
            tree = ast.fix_missing_locations(_PlainDialect().visit(tree))
            if last is not None:
                last = ast.fix_missing_locations(_PlainDialect().visit(last))
            body = compile(tree, SCRIPT_FILENAME, "exec", dont_inherit=True)
            tail = None if last is None else compile(last, SCRIPT_FILENAME, "eval")
            return body, tail, awaits
        result = compile_restricted_exec(tree, filename=SCRIPT_FILENAME, policy=_Policy)
        errors = list(result.errors)
        tail_result = (
            None if last is None else compile_restricted_eval(last, SCRIPT_FILENAME, policy=_Policy)
        )
        if tail_result is not None:
            errors.extend(tail_result.errors)
        if errors or result.code is None:
            return _compile_error(errors or ["the script could not be compiled"])
        return result.code, None if tail_result is None else tail_result.code, awaits
    except SyntaxError as exc:  # the compiler's own late checks
        return RunError(type="SyntaxError", message=describe(exc), line=exc.lineno, phase="compile")
    except (ValueError, TypeError, RecursionError, MemoryError) as exc:
        return RunError(type="CompileError", message=describe(exc), line=None, phase="compile")
