"""What a process loads before it does anything: ``import scriptbridge``, and ``scriptbridge
run`` of a script that calls no tool server, load none of the heavy libraries only a tool
server, a payload fetch or ``serve`` needs (issue 28, item 9). The times are measured in
``benchmarks/startup.py``; here only what is imported, which no machine's speed changes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scriptbridge import _cli, _serve_defaults

HEAVY = ("mcp", "mcp_types", "httpx", "httpx2", "httpcore", "h11", "starlette", "uvicorn", "rich")
"""Top-level packages of what only a tool server (the ``mcp`` SDK), a payload fetch (httpx)
or ``serve`` (starlette, uvicorn) needs."""

REPORT = (
    "heavy = sorted({m.split('.')[0] for m in sys.modules} & set(HEAVY))\n"
    "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
)


def heavy_loaded(code: str) -> list[str]:
    """The :data:`HEAVY` packages loaded once ``code`` ran in a fresh interpreter."""
    program = f"import sys\nHEAVY = {HEAVY!r}\ntry:\n    {code}\nfinally:\n" + "".join(
        f"    {line}\n" for line in REPORT.splitlines()
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("HEAVY=")]
    assert lines, done.stderr
    return [name for name in lines[-1].removeprefix("HEAVY=").split(",") if name]


def test_import_scriptbridge_loads_no_heavy_library() -> None:
    assert heavy_loaded("import scriptbridge") == []


def test_the_public_names_load_no_heavy_library() -> None:
    code = "from scriptbridge import Bridge, SyncBridge, McpServer, Limits, python_tool"
    assert heavy_loaded(code) == []


def test_run_of_a_script_without_tool_servers_loads_no_heavy_library(tmp_path: Path) -> None:
    """The whole ``scriptbridge run``, a script run in a sandbox included."""
    script = tmp_path / "hello.py"
    script.write_text('print("hello")\n')
    code = (
        "from scriptbridge._cli import main; "
        f"sys.argv = ['scriptbridge', 'run', {str(script)!r}]; main()"
    )
    assert heavy_loaded(code) == []


def test_a_tool_server_loads_the_sdk_when_it_opens(tmp_path: Path) -> None:
    """The check above can see the SDK: a run with a tool server loads it."""
    script = tmp_path / "hello.py"
    script.write_text('print("hello")\n')
    server = Path(__file__).resolve().parents[1] / "examples" / "peer.py"
    code = (
        "from scriptbridge._cli import main; "
        f"sys.argv = ['scriptbridge', 'run', '--mcp', {f'{sys.executable} {server}'!r}, "
        f"{str(script)!r}]; main()"
    )
    assert "mcp" in heavy_loaded(code)


def test_serve_help_names_serves_own_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    """The help says serve's defaults, which come from serve's defaults module (the command
    line doesn't import serve, and its SDK, to say them)."""
    with pytest.raises(SystemExit):
        _cli.main(["serve", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for said in (
        f"sessions kept at once ({_serve_defaults.MAX_SESSIONS})",
        f"answers expired ({_serve_defaults.SESSION_IDLE_S:g} s)",
        f"a search_tools tool ({_serve_defaults.DESCRIBE_BUDGET})",
    ):
        assert said in shown, shown
