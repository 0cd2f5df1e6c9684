"""Tests for the command line: run (with servers, tools, JSON), doctor, usage errors."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from sandbox.protocol import LAYER_NAMES

ROOT = pathlib.Path(__file__).resolve().parent.parent


def cli(*args: str, cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scriptbridge._cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_run_with_a_server_and_host_tools_as_json(tmp_path: pathlib.Path) -> None:
    """run starts --mcp servers, imports --tools, and prints the ScriptResult with --json."""
    (tmp_path / "mytools.py").write_text("def double(n: int) -> int:\n    return n * 2\n")
    script = tmp_path / "s.py"
    script.write_text(
        "print('hi')\n[tools.double(n=21)['data'], tools.peer_text()['content'][0]['text']]\n"
    )
    done = cli(
        "run",
        str(script),
        "--mcp",
        f"{sys.executable} {ROOT / 'examples' / 'peer.py'}",
        "--tools",
        str(tmp_path / "mytools.py"),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["value"] == [42, "hello from the peer"]
    assert result["stdout"] == "hi\n" and result["ok"] is True


def test_run_reports_a_failure_and_keeps_outputs_in_a_workspace(tmp_path: pathlib.Path) -> None:
    """A failing script exits 1 with its error; --workspace keeps what it wrote."""
    script = tmp_path / "s.py"
    script.write_text("write_text('out/a.txt', 'kept')\n1 / 0\n")
    done = cli("run", str(script), "--workspace", str(tmp_path / "ws"), "--timeout", "5")
    assert done.returncode == 1
    assert "error: ZeroDivisionError (line 2)" in done.stdout
    (kept,) = (tmp_path / "ws" / "runs").glob("*/out/a.txt")
    assert kept.read_text() == "kept"


def test_doctor_lists_every_layer() -> None:
    """doctor prints one line per isolation layer, each one's name first."""
    done = cli("doctor")
    assert done.returncode == 0
    lines = [line.split()[0] for line in done.stdout.splitlines()[: len(LAYER_NAMES)]]
    assert lines == list(LAYER_NAMES)


def test_usage_errors_exit_2(tmp_path: pathlib.Path) -> None:
    """A missing script or no command is a usage error."""
    assert cli("run", str(tmp_path / "missing.py")).returncode == 2
    assert cli().returncode == 2


def test_json_holds_bytes_and_odd_file_names(tmp_path: pathlib.Path) -> None:
    """--json prints a result whose value is bytes and whose output name isn't UTF-8."""
    script = tmp_path / "s.py"
    script.write_text("write_text('out/\\udcff.txt', 'x')\nb'\\xff\\x00'\n")
    done = cli("run", str(script), "--json", "--workspace", str(tmp_path / "ws"))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["value"] == {"$bytes": "/wA="}
    assert result["outputs"][0].endswith("/out/\ufffd.txt")


def test_human_output_escapes_control_characters(tmp_path: pathlib.Path) -> None:
    """Without --json, what a script printed, its value, its error and its file names show
    control and escape characters escaped, never raw."""
    script = tmp_path / "s.py"
    script.write_text(
        "print('a\\x1b[31mred\\x07\\r')\nwrite_text('out/\\x1b]0;t\\x07.txt', 'x')\n"
        "raise ValueError('\\x1b[2Jgone')\n"
    )
    done = cli("run", str(script), "--workspace", str(tmp_path / "ws"))
    assert done.returncode == 1
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout and "\r" not in done.stdout
    assert "a\\x1b[31mred\\x07\\r" in done.stdout
    assert "\\x1b[2Jgone" in done.stdout and "out/\\x1b]0;t\\x07.txt" in done.stdout


HOSTILE = str(ROOT / "tests" / "servers" / "hostile_server.py")


def test_two_servers_tools_by_name_and_server_stderr_kept_off_stdout(
    tmp_path: pathlib.Path,
) -> None:
    """Two --mcp servers named with NAME= start (concurrently), --mcp-timeout and --allow are
    taken, --tools NAME finds NAME.py in the current directory, and a server's stderr never
    reaches the CLI's output raw."""
    (tmp_path / "mytools.py").write_text("def double(n: int) -> int:\n    return n * 2\n")
    script = tmp_path / "s.py"
    script.write_text(
        "call_tool('a.stderr', {})\n"
        "[tools.double(n=2)['data'], call_tool('b.echo', {'x': 1})['content'][0]['text']]\n"
    )
    done = cli(
        "run",
        str(script),
        "--mcp",
        f"a={sys.executable} {HOSTILE}",
        "--mcp",
        f"b={sys.executable} {HOSTILE}",
        "--mcp-timeout",
        "5",
        "--allow",
        "127.0.0.1",
        "--tools",
        "mytools",
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == [4, '{"x": 1}']
    assert "a line on stderr" not in done.stdout
    assert "\x1b" not in done.stderr


def test_a_server_name_clash_says_which_and_how_to_choose(tmp_path: pathlib.Path) -> None:
    """Two --mcp servers that would both be named after their command's script is a usage
    error naming the clash and NAME=CMD as the way out; nothing is started."""
    script = tmp_path / "s.py"
    script.write_text("1\n")
    spec = f"{sys.executable} {HOSTILE}"
    done = cli("run", str(script), "--mcp", spec, "--mcp", spec)
    assert done.returncode == 2
    assert "'hostile_server'" in done.stderr and "NAME=CMD" in done.stderr, done.stderr


def test_progress_line_shows_a_tools_progress() -> None:
    """The progress line counts calls and fetches and shows a tool's reported progress."""
    from scriptbridge._cli import progress_line
    from scriptbridge._run_state import RunProgress, ToolProgress

    running = RunProgress("r", 2.0, 3, 1, False, (ToolProgress("s.t\x1b", 2, 5, "step"),))
    line = progress_line([running], 2.0)
    assert "3 tool call(s), 1 fetch(es)" in line
    assert "s.t\\x1b 2/5 step" in line
