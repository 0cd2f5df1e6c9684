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
from collections.abc import Sequence
from typing import Any, Final

from RestrictedPython.compile import compile_restricted_eval, compile_restricted_exec
from RestrictedPython.transformer import RestrictingNodeTransformer

from ._values import MESSAGE_CHARS, cut, describe
from .protocol import (
    RunError,
)

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


class _Policy(RestrictingNodeTransformer):
    """RestrictedPython's policy with one rewrite left out: ``name <op>= value`` stays a native
    in-place operation instead of becoming ``name = _inplacevar_("<op>=", name, value)``.

    The hook would only apply the same operator and check nothing else, so the result is the
    same, and a loop's ``total += i`` costs no Python call per iteration. Every other check of
    the policy runs: the target name and the value are visited, and augmented assignment of
    attributes and items is refused.
    """

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        if isinstance(node.target, ast.Name):
            return self.node_contents_visit(node)
        return super().visit_AugAssign(node)


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


def compile_script(
    source: str, *, restricted: bool
) -> tuple[types.CodeType, types.CodeType | None] | RunError:
    """Compile ``source`` into (body, last expression or ``None``), or return the errors.

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
    last: ast.Expression | None = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        final = tree.body.pop()
        assert isinstance(final, ast.Expr)
        last = ast.Expression(body=final.value)
    try:
        if not restricted:
            body = compile(tree, SCRIPT_FILENAME, "exec", dont_inherit=True)
            tail = None if last is None else compile(last, SCRIPT_FILENAME, "eval")
            return body, tail
        result = compile_restricted_exec(tree, filename=SCRIPT_FILENAME, policy=_Policy)
        errors = list(result.errors)
        tail_result = (
            None if last is None else compile_restricted_eval(last, SCRIPT_FILENAME, policy=_Policy)
        )
        if tail_result is not None:
            errors.extend(tail_result.errors)
        if errors or result.code is None:
            return _compile_error(errors or ["the script could not be compiled"])
        return result.code, None if tail_result is None else tail_result.code
    except SyntaxError as exc:  # the compiler's own late checks
        return RunError(type="SyntaxError", message=describe(exc), line=exc.lineno, phase="compile")
    except (ValueError, TypeError, RecursionError, MemoryError) as exc:
        return RunError(type="CompileError", message=describe(exc), line=None, phase="compile")
