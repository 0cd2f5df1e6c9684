"""The ``scriptbridge`` command line: ``run``, ``demo`` and ``doctor``.

``scriptbridge run SCRIPT.py [--mcp "CMD ARGS"]... [--mcp-http NAME=URL]... [--tools MODULE]
[--workspace DIR] [--timeout S] [--mcp-timeout S] [--allow HOST]... [--json]`` runs one script
in a fresh sandbox child. Each ``--mcp`` starts a tool server over stdio, named after its
script (``python docs_server.py`` is ``docs_server``, ``npx -y @scope/server-x`` is
``server-x``; write ``NAME=CMD ARGS`` to choose), and each ``--mcp-http`` connects a streamable
HTTP server; all of them start at once, and two with one name are a usage error saying so.
``--mcp-timeout`` bounds each request to a server (60 s by default), and ``--allow`` adds a
host or network the fetcher may reach beyond public addresses (repeatable; the servers
themselves aren't subject to it). ``--tools`` imports a module (a dotted name, a ``.py`` path,
or ``NAME`` for ``NAME.py`` in the current directory) and offers its public functions as host
tools (or the callables in its ``TOOLS`` list). Without ``--workspace`` a temporary one is used
and removed afterwards. While a script runs longer than a second, a progress line on stderr
says how long, how many tool calls and fetches it made, and what a tool last said of its
progress. Warnings (a server's dropped line, a restart) go to stderr, one line each; a
server's own stderr goes to logging at ``INFO``, not shown. Exit status: 0 when the script ran
to its end, 1 when it didn't, 2 for a usage error or a server that couldn't be started.

``scriptbridge demo`` runs the bundled end-to-end demo (:mod:`scriptbridge._demo`).
``scriptbridge doctor`` prints which isolation layers this machine can apply, and why not.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import inspect
import json
import logging
import os
import re
import shlex
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import anyio
import trio

from sandbox import probe_layers

from ._demo import run_demo
from ._exceptions import IsolationUnavailable, ToolServerError
from ._isolation_policy import required_layers
from ._limits import Limits
from ._mcp import McpServer
from ._results import ScriptResult
from ._run_state import RunProgress
from ._serve_defaults import DESCRIBE_BUDGET, MAX_SESSIONS, SESSION_IDLE_S
from ._server_retries import ServerRetries
from ._spares import usable_cpus
from ._supervisor import Bridge
from ._tools import python_tool
from ._workspace import remove_tree

__all__ = ["main"]

PROGRESS_AFTER_S = 1.0
LAUNCHERS = frozenset({"node", "npx", "uvx", "uv", "python", "python3", "deno", "bun", "pipx"})
NOT_NAME = re.compile(r"[^A-Za-z0-9_\-]+")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scriptbridge",
        description="Run agent-written Python scripts in a fresh, restricted, isolated child.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run one script")
    run.add_argument("script", type=Path, help="the script to run")
    _bridge_arguments(run)
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    serve = commands.add_parser("serve", help="an MCP server offering run_python (stdio)")
    _bridge_arguments(serve)
    serve.add_argument(
        "--max-concurrent",
        type=int,
        default=usable_cpus() * 2,
        metavar="N",
        help="runs at once (default: CPU count x 2)",
    )
    serve.add_argument(
        "--max-queued", type=int, default=64, metavar="N", help="calls waiting for a run (64)"
    )
    serve.add_argument(
        "--max-sessions",
        type=int,
        default=MAX_SESSIONS,
        metavar="N",
        help=f"sessions kept at once ({MAX_SESSIONS})",
    )
    serve.add_argument(
        "--session-idle",
        type=float,
        default=SESSION_IDLE_S,
        metavar="S",
        help=f"close a session unused this long; its handle then answers expired "
        f"({SESSION_IDLE_S:g} s)",
    )
    serve.add_argument(
        "--drain-s",
        type=float,
        default=30.0,
        metavar="S",
        help="on SIGTERM, how long running calls may finish before they're cancelled (30 s)",
    )
    serve.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at /mcp on HOST:PORT instead of stdio (HOST: 127.0.0.1)",
    )
    serve.add_argument(
        "--token-file",
        type=Path,
        metavar="F",
        help="with --http: lines NAME TOKEN, one per client (or one lone TOKEN); every "
        "request must carry Authorization: Bearer TOKEN, and its sessions are NAME's",
    )
    serve.add_argument(
        "--result-detail",
        choices=["brief", "full"],
        default="brief",
        help="what run_python's structuredContent holds: what a model needs (brief, the "
        "default), or every field of the result, isolation and timings too (full)",
    )
    serve.add_argument(
        "--describe-budget",
        type=int,
        default=DESCRIBE_BUDGET,
        metavar="BYTES",
        help="bytes of tool stubs run_python's description carries; past it, an index of the "
        f"tools and a search_tools tool ({DESCRIBE_BUDGET})",
    )
    serve.add_argument(
        "--expose-tools",
        action="store_true",
        help="also offer the tools themselves beside run_python (their results as a model sees "
        "them)",
    )
    serve.add_argument(
        "--print-config",
        choices=["claude", "cursor"],
        help="print the JSON a desktop client needs to start this server, and exit",
    )
    commands.add_parser("demo", help="run the bundled end-to-end demo")
    commands.add_parser("doctor", help="which isolation layers this machine can apply")
    return parser


def _bridge_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that set up a bridge: servers, host tools, workspace, limits, fetches."""
    parser.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar='"CMD ARGS"',
        help="a tool server to start over stdio (repeatable); NAME=CMD ARGS names it",
    )
    parser.add_argument(
        "--mcp-http",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="a streamable HTTP tool server to connect (repeatable)",
    )
    parser.add_argument(
        "--mcp-timeout", type=float, metavar="S", help="each server request's timeout (60 s)"
    )
    parser.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="HOST",
        help="a host or network the fetcher may reach beyond public ones (repeatable)",
    )
    parser.add_argument(
        "--tools", metavar="MODULE", help="a module (or NAME.py here) whose functions become tools"
    )
    parser.add_argument("--workspace", type=Path, help="workspace directory (default: a temp one)")
    parser.add_argument("--timeout", type=float, metavar="S", help="wall-time limit in seconds")
    parser.add_argument(
        "--require-isolation",
        type=_layer_list,
        metavar="all|LAYER,...",
        help="refuse to start unless these isolation layers apply (all: every one); without "
        "it, a layer that can't apply is said once on stderr",
    )


def _layer_list(text: str) -> str | list[str]:
    """``--require-isolation``'s value: ``all``, or comma-separated layer names (checked)."""
    spec: str | list[str] = "all" if text == "all" else [n.strip() for n in text.split(",") if n]
    try:
        required_layers(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return spec


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "doctor":
            return _doctor(sys.stdout)
        if args.command == "demo":
            return trio.run(run_demo)
        if args.command == "serve":
            if args.print_config:
                return _print_config(args.print_config, argv, sys.stdout)
            if args.http:
                return asyncio.run(_serve(args))
            return trio.run(_serve, args)
        return trio.run(_run, args)
    except (ValueError, OSError, ToolServerError, ImportError, IsolationUnavailable) as exc:
        print(f"scriptbridge {args.command}: {exc}", file=sys.stderr)
        return 2


def _doctor(out: TextIO) -> int:
    """One line per layer: how it is given here, or why not and what would give it."""
    probes = probe_layers()
    for probe in probes:
        if probe.available:
            state = f"yes: {probe.mechanism}"
        else:
            state = f"no: {probe.reason}; to apply it: {probe.remedy}"
        print(f"{probe.layer:18} {state}", file=out)
    missing = [probe.layer for probe in probes if not probe.available]
    if missing:
        print(f"scripts still run; without: {', '.join(missing)}", file=out)
    else:
        print("every isolation layer can be applied on this machine", file=out)
    return 0


def _server_spec(spec: str, timeout_s: float) -> McpServer:
    """An ``--mcp`` server: ``NAME=CMD ARGS``, or ``CMD ARGS`` named after its script."""
    name: str | None = None
    head, sep, rest = spec.partition("=")
    if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", head):
        name, spec = head, rest
    words = shlex.split(spec)
    if not words:
        raise ValueError(f"--mcp {spec!r} names no command")
    return McpServer(words[0], words[1:], name=name or _name_of(words), timeout_s=timeout_s)


def _name_of(words: Sequence[str]) -> str:
    """A server's name from its command: its script's or package's stem (``python
    docs_server.py`` is ``docs_server``; ``npx -y @scope/server-x@1`` is ``server-x``), else
    the command's own."""
    scripts = [w for w in words[1:] if w.endswith((".py", ".js", ".mjs", ".ts"))]
    if scripts:
        stem = Path(scripts[0]).stem
    elif Path(words[0]).name in LAUNCHERS and any(not w.startswith("-") for w in words[1:]):
        package = next(w for w in words[1:] if not w.startswith("-"))
        stem = package.rsplit("/", 1)[-1].split("@", 1)[0] or package
    else:
        stem = Path(words[0]).stem
    return NOT_NAME.sub("_", stem).lstrip("-") or "server"


def _http_spec(spec: str, timeout_s: float) -> McpServer:
    name, sep, url = spec.partition("=")
    if not sep or not name or not url:
        raise ValueError(f"--mcp-http {spec!r} isn't NAME=URL")
    return McpServer.http(url, name=name, timeout_s=timeout_s)


def _servers(args: argparse.Namespace) -> list[McpServer]:
    """Every server of the command line; raises ``ValueError`` naming any name clash."""
    timeout_s = args.mcp_timeout if args.mcp_timeout else 60.0
    servers = [_server_spec(spec, timeout_s) for spec in args.mcp]
    servers += [_http_spec(spec, timeout_s) for spec in args.mcp_http]
    given: dict[str, list[str]] = {}
    for server, spec in zip(servers, [*args.mcp, *args.mcp_http], strict=True):
        given.setdefault(server.name, []).append(spec)
    clashes = {name: specs for name, specs in given.items() if len(specs) > 1}
    if clashes:
        said = "; ".join(
            f"{name!r} for " + ", ".join(repr(spec) for spec in specs)
            for name, specs in clashes.items()
        )
        raise ValueError(
            f"two servers would have one name: {said}. "
            'Write NAME=CMD ARGS (--mcp "docs=node server.js") to choose each one\'s name'
        )
    return servers


def _tools_of(module_name: str) -> list[Callable[..., Any]]:
    module: ModuleType
    here = Path(module_name + ".py")
    if module_name.endswith(".py") or (module_name.isidentifier() and here.is_file()):
        path = (Path(module_name) if module_name.endswith(".py") else here).resolve()
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


@asynccontextmanager
async def _open_bridge(
    args: argparse.Namespace, failed: list[tuple[McpServer, str]] | None = None
) -> AsyncIterator[Bridge]:
    """The bridge the command line describes, open, with its host tools and its servers
    started; a temporary workspace (without ``--workspace``) is removed when it closes. A
    server that can't start raises ``ToolServerError``, or, given ``failed``, goes into it
    with why and the bridge opens without it."""
    limits = Limits(wall_s=args.timeout) if args.timeout else Limits()
    servers = _servers(args)
    _log_warnings(sys.stderr)
    scratch = Path(tempfile.mkdtemp(prefix="scriptbridge-"))
    try:
        workspace = args.workspace or scratch
        async with Bridge(
            workspace,
            limits=limits,
            fetch_allow=args.allow,
            require_isolation=args.require_isolation,
        ) as bridge:
            if args.tools:
                for function in _tools_of(args.tools):
                    bridge.add_tool(python_tool(function))
            await _add_servers(bridge, servers, failed)
            yield bridge
    finally:
        remove_tree(scratch)  # iterative: a script's out/ may be a thousand directories deep


async def _run(args: argparse.Namespace) -> int:
    source = args.script.read_text()
    async with _open_bridge(args) as bridge, trio.open_nursery() as nursery:
        nursery.start_soon(_progress, bridge, sys.stderr)
        result = await bridge.run(source)
        nursery.cancel_scope.cancel()
    _report(result, as_json=args.json, out=sys.stdout)
    if result.outputs and args.workspace is None:
        print("(its out/ went with the temporary workspace: pass --workspace to keep it)")
    return 0 if result.ok else 1


async def _serve(args: argparse.Namespace) -> int:
    """``serve``: over stdio under trio, or over HTTP (``--http``) under asyncio."""
    from ._serve import RunPythonServer

    where = _http_address(args.http, args.token_file) if args.http else None
    failed: list[tuple[McpServer, str]] = []
    async with _open_bridge(args, failed) as bridge, anyio.create_task_group() as retrying:
        retries = ServerRetries(bridge, failed)
        retrying.start_soon(retries.run)
        server = RunPythonServer(
            bridge,
            max_concurrent=args.max_concurrent,
            max_queued=args.max_queued,
            session_idle_s=args.session_idle,
            max_sessions=args.max_sessions,
            expose_tools=args.expose_tools,
            unavailable=retries.unavailable,
            result_detail=args.result_detail,
            describe_budget=args.describe_budget,
        )
        if where is None:
            await server.serve_stdio(drain_s=args.drain_s)
        else:
            await server.serve_http(
                where[0],
                where[1],
                tokens=where[2],
                drain_s=args.drain_s,
                on_listening=lambda url: print(f"scriptbridge serve: listening on {url}",
                                               file=sys.stderr, flush=True),
            )  # fmt: skip
        retrying.cancel_scope.cancel()
    return 0


LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def _http_address(spec: str, token_file: Path | None) -> tuple[str, int, dict[str, str] | None]:
    """``--http HOST:PORT`` (or ``PORT``, on 127.0.0.1) and the tokens of ``--token-file``
    (:func:`read_tokens`). Raises ``ValueError`` for a malformed address or token file, or a
    bind beyond loopback without a token file; ``OSError`` for a token file that can't be
    read."""
    host, sep, port = spec.rpartition(":")
    host = host.strip("[]") if sep else "127.0.0.1"
    if not port.isdigit() or not host or int(port) > 65535:
        raise ValueError(f"--http {spec!r} isn't HOST:PORT")
    tokens = read_tokens(token_file) if token_file is not None else None
    if host not in LOOPBACK and tokens is None:
        raise ValueError(
            f"--http {spec}: binding {host}, beyond loopback, requires --token-file "
            "(every request must then carry Authorization: Bearer <token>)"
        )
    return host, int(port), tokens


LONE_TOKEN_NAME = "default"
"""The name of a token given alone on its line (the one-token file of old)."""


def read_tokens(path: Path) -> dict[str, str]:
    """``--token-file``: each line ``NAME TOKEN`` (one per client; the name is who its session
    handles belong to) or a lone ``TOKEN`` (named :data:`LONE_TOKEN_NAME`); blank lines and
    lines starting with ``#`` are skipped. Returns token -> name. Raises ``ValueError`` for a
    file with no token, a line of more than two words, or a token given twice."""
    tokens: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) > 2:
            raise ValueError(f"--token-file {path}, line {number}: write NAME TOKEN or TOKEN")
        name, token = (LONE_TOKEN_NAME, words[0]) if len(words) == 1 else words
        if token in tokens:
            raise ValueError(f"--token-file {path}, line {number}: this token is given twice")
        tokens[token] = name
    if not tokens:
        raise ValueError(f"--token-file {path}: it holds no token")
    return tokens


PATH_OPTIONS = frozenset({"--workspace", "--token-file", "--tools", "--mcp"})
"""The options whose paths ``--print-config`` makes absolute: a desktop client starts the
server from a directory of its own."""


def _absolute(option: str, value: str) -> str:
    """``value`` of ``option`` with its relative paths made absolute (``--mcp``: each word
    that names a file here; ``--tools``: a ``.py`` path or a file here, not a module name)."""
    if option in ("--workspace", "--token-file"):
        return os.path.abspath(value)
    if option == "--tools":
        named_a_path = value.endswith(".py") or os.sep in value
        return os.path.abspath(value) if named_a_path or os.path.exists(value) else value
    head, sep, rest = value.partition("=")  # --mcp NAME=CMD ARGS
    if not (sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", head)):
        head, sep, rest = "", "", value
    words = [
        os.path.abspath(w) if not os.path.isabs(w) and os.path.exists(w) else w
        for w in shlex.split(rest)
    ]
    return f"{head}{sep}{shlex.join(words)}"


def _print_config(client: str, argv: Sequence[str] | None, out: TextIO) -> int:
    """The ``mcpServers`` JSON a desktop client (``claude``, ``cursor``) needs to start this
    same ``serve`` command over stdio: this interpreter, and every option but
    ``--print-config``, its relative paths made absolute (:data:`PATH_OPTIONS`)."""
    given = list(sys.argv[1:] if argv is None else argv)
    kept: list[str] = []
    words = iter(given)
    for word in words:
        if word == "--print-config":
            next(words, None)
        elif word in PATH_OPTIONS:
            kept += [word, _absolute(word, next(words, ""))]
        elif "=" in word and word.split("=", 1)[0] in PATH_OPTIONS:
            option, value = word.split("=", 1)
            kept.append(f"{option}={_absolute(option, value)}")
        elif not word.startswith("--print-config="):
            kept.append(word)
    entry: dict[str, Any] = {"command": sys.executable, "args": ["-m", "scriptbridge._cli", *kept]}
    if client == "cursor":
        entry = {"type": "stdio", **entry}
    print(json.dumps({"mcpServers": {"scriptbridge": entry}}, indent=2), file=out)
    return 0


async def _add_servers(
    bridge: Bridge,
    servers: Sequence[McpServer],
    keep: list[tuple[McpServer, str]] | None = None,
) -> None:
    """Start every server at once; raises ``ToolServerError`` saying which couldn't start,
    unless ``keep`` is given: each server that couldn't goes into it, with why."""
    failed: list[str] = []

    async def add(server: McpServer) -> None:
        try:
            await bridge.add_server(server)
        except ToolServerError as exc:
            if keep is None:
                failed.append(str(exc))
            else:
                keep.append((server, str(exc)))
        except ValueError as exc:  # its name is taken: no try would do better
            failed.append(str(exc))

    async with anyio.create_task_group() as nursery:
        for server in servers:
            nursery.start_soon(add, server)
    if failed:
        raise ToolServerError("; ".join(failed))


def _log_warnings(err: TextIO) -> None:
    """Warnings from scriptbridge (and the SDK under it) on ``err``, one line each."""
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("scriptbridge: %(message)s"))
    handler.setLevel(logging.WARNING)
    for name in ("scriptbridge", "mcp"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.propagate = False


async def _progress(bridge: Bridge, err: TextIO) -> None:
    """Every second after the first, one line on stderr about the running script."""
    started = time.monotonic()
    await trio.sleep(PROGRESS_AFTER_S)
    try:
        while True:
            err.write("\r" + progress_line(bridge.progress(), time.monotonic() - started))
            err.flush()
            await trio.sleep(1.0)
    finally:
        err.write("\r\x1b[K")
        err.flush()


def progress_line(progress: Sequence[RunProgress], elapsed_s: float) -> str:
    """The progress line for ``progress`` (pure): time, calls, fetches, a tool's progress."""
    calls = sum(run.tool_calls for run in progress)
    fetches = sum(run.fetches for run in progress)
    fetching = " (fetching a payload)" if any(run.fetching for run in progress) else ""
    tools = [tool for run in progress for tool in run.tool_progress]
    said = ""
    if tools:
        tool = tools[0]
        of = f"/{tool.total:g}" if tool.total is not None else ""
        message = f" {tool.message}" if tool.message else ""
        said = shown(f", {tool.tool} {tool.progress:g}{of}{message}"[:120])
    return (
        f"scriptbridge: running {elapsed_s:.0f} s, {calls} tool call(s), "
        f"{fetches} fetch(es){fetching}{said}   "
    )


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
