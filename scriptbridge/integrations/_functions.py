"""Tools as plain functions of a step: the source both agent adapters put before each step."""

from __future__ import annotations

__all__ = ["tool_functions"]


def tool_functions(names: list[str]) -> list[str]:
    """Source lines defining each tool of ``names`` (identifiers, each a bridge tool of that
    name) as a plain function: it takes keywords or positionals (``tools.<name>`` binds them)
    and returns what the tool returned, its structured result or else its text."""
    lines: list[str] = []
    for name in names:
        lines += [
            f"def {name}(*args, **arguments):",
            f"    result = tools.{name}(*args, **arguments)",
            "    if result['data'] is not None:",
            "        return result['data']",
            "    return ''.join(b.get('text', '') for b in result['content'])",
        ]
    return lines
