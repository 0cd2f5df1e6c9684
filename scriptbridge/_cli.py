"""The ``scriptbridge`` command line: ``run``, ``demo`` and ``doctor``.

``scriptbridge run SCRIPT.py [--mcp "CMD ARGS"]... [--tools MODULE] [--workspace DIR]
[--timeout S] [--json]`` runs one script in a fresh sandbox child. Each ``--mcp`` starts a tool
server over stdio, named after its script's file name (``python docs_server.py`` is ``docs_server``;
write ``NAME=CMD ARGS`` to choose); ``--tools`` imports a module (a dotted name or a ``.py``
path) and offers its public functions as host tools (or the callables in its ``TOOLS`` list).
Without ``--workspace`` a temporary one is used and removed afterwards. While a script runs
longer than a second, a progress line on stderr says how long, and how many tool calls and
fetches it made. Exit status: 0 when the script ran to its end, 1 when it didn't, 2 for a usage
error.

``scriptbridge demo`` runs the bundled end-to-end demo (:mod:`scriptbridge._demo`).
``scriptbridge doctor`` prints which isolation layers this machine can apply, and why not.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import trio

from sandbox import probe_layers

from ._demo import run_demo
from ._exceptions import ToolServerError
from ._limits import Limits
from ._mcp import McpServer
from ._results import ScriptResult
from ._supervisor import Bridge
from ._tools import python_tool
from ._workspace import remove_tree

__all__ = ["main"]

PROGRESS_AFTER_S = 1.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scriptbridge",
        description="Run agent-written Python scripts in a fresh, restricted, isolated child.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run one script")
    run.add_argument("script", type=Path, help="the script to run")
    run.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar='"CMD ARGS"',
        help="a tool server to start over stdio (repeatable); NAME=CMD ARGS names it",
    )
    run.add_argument("--tools", metavar="MODULE", help="a module whose functions become tools")
    run.add_argument("--workspace", type=Path, help="workspace directory (default: a temp one)")
    run.add_argument("--timeout", type=float, metavar="S", help="wall-time limit in seconds")
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    commands.add_parser("demo", help="run the bundled end-to-end demo")
    commands.add_parser("doctor", help="which isolation layers this machine can apply")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "doctor":
            return _doctor(sys.stdout)
        if args.command == "demo":
            return trio.run(run_demo)
        return trio.run(_run, args)
    except (ValueError, OSError, ToolServerError, ImportError) as exc:
        print(f"scriptbridge {args.command}: {exc}", file=sys.stderr)
        return 2


def _doctor(out: TextIO) -> int:
    probes = probe_layers()
    for probe in probes:
        state = "yes" if probe.available else f"no: {probe.reason}"
        print(f"{probe.layer:18} {state}", file=out)
    missing = [probe.layer for probe in probes if not probe.available]
    if missing:
        print(f"scripts still run; without: {', '.join(missing)}", file=out)
    else:
        print("every isolation layer can be applied on this machine", file=out)
    return 0


def _server_spec(spec: str) -> McpServer:
    name: str | None = None
    head, sep, rest = spec.partition("=")
    if sep and head.isidentifier() and " " not in head:
        name, spec = head, rest
    words = shlex.split(spec)
    if not words:
        raise ValueError(f"--mcp {spec!r} names no command")
    if name is None:
        scripts = [Path(word).stem for word in words[1:] if word.endswith(".py")]
        name = scripts[0] if scripts else Path(words[0]).stem
    return McpServer(words[0], words[1:], name=name.replace(".", "_"))


def _tools_of(module_name: str) -> list[Callable[..., Any]]:
    module: ModuleType
    if module_name.endswith(".py"):
        path = Path(module_name).resolve()
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"can't import {module_name}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    listed = getattr(module, "TOOLS", None)
    if listed is not None:
        return list(listed)
    return [
        value
        for name, value in vars(module).items()
        if not name.startswith("_")
        and inspect.isfunction(value)
        and value.__module__ == module.__name__
    ]


async def _run(args: argparse.Namespace) -> int:
    source = args.script.read_text()
    limits = Limits(wall_s=args.timeout) if args.timeout else Limits()
    scratch = Path(tempfile.mkdtemp(prefix="scriptbridge-"))
    try:
        workspace = args.workspace or scratch
        async with Bridge(workspace, limits=limits) as bridge:
            if args.tools:
                for function in _tools_of(args.tools):
                    bridge.add_tool(python_tool(function))
            for spec in args.mcp:
                await bridge.add_server(_server_spec(spec))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_progress, bridge, sys.stderr)
                result = await bridge.run(source)
                nursery.cancel_scope.cancel()
        _report(result, as_json=args.json, out=sys.stdout)
        if result.outputs and args.workspace is None:
            print("(its out/ went with the temporary workspace: pass --workspace to keep it)")
    finally:
        remove_tree(scratch)  # iterative: a script's out/ may be a thousand directories deep
    return 0 if result.ok else 1


async def _progress(bridge: Bridge, err: TextIO) -> None:
    """Every second after the first, one line on stderr about the running script."""
    started = time.monotonic()
    await trio.sleep(PROGRESS_AFTER_S)
    try:
        while True:
            progress = bridge.progress()
            calls = sum(run.tool_calls for run in progress)
            fetches = sum(run.fetches for run in progress)
            fetching = " (fetching a payload)" if any(run.fetching for run in progress) else ""
            err.write(
                f"\rscriptbridge: running {time.monotonic() - started:.0f} s, "
                f"{calls} tool call(s), {fetches} fetch(es){fetching}   "
            )
            err.flush()
            await trio.sleep(1.0)
    finally:
        err.write("\r\x1b[K")
        err.flush()


def shown(text: str, *, keep: str = "") -> str:
    """``text`` safe for a terminal: every character that isn't printable (controls, escape
    sequences' ESC, format and bidi characters, lone surrogates) is escaped as ``repr`` would
    escape it, except those in ``keep``."""
    if text.isprintable():
        return text
    return "".join(
        char if char.isprintable() or char in keep else repr(char)[1:-1] for char in text
    )


def _report(result: ScriptResult, *, as_json: bool, out: TextIO) -> None:
    """Print ``result``: as JSON, or for a person, with nothing raw a script chose reaching
    the terminal (what it printed keeps its newlines and tabs; all else is :func:`shown`)."""
    if as_json:
        print(json.dumps(result.model_dump(mode="json"), ensure_ascii=False), file=out)
        return
    if result.stdout:
        text = shown(result.stdout, keep="\n\t")
        out.write(text if text.endswith("\n") else text + "\n")
    if result.error is not None:
        line = f" (line {result.error.line})" if result.error.line else ""
        error = result.error
        print(f"error: {shown(error.type)}{line}: {shown(error.message, keep=chr(10))}", file=out)
    elif result.value is not None:
        print(f"value: {shown(repr(result.value))}", file=out)
    for output in result.outputs:
        print(f"wrote: {shown(output)}", file=out)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
