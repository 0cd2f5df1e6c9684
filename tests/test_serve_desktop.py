"""``serve`` as a desktop client starts it: ``--print-config`` gives paths the client can use
from its own directory, and ``--http`` says where it listens."""

from __future__ import annotations

import json
import os
import pathlib
import queue
import signal
import socket
import subprocess
import sys
import threading

import pytest

from scriptbridge._cli import main


def test_print_config_makes_relative_paths_absolute(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workspace, the token file, a tools file and a server's script, given relative to
    where the command runs, are absolute in the snippet; a module name and a command on the
    PATH are left as they are."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "server.py").write_text("")
    (tmp_path / "mytools.py").write_text("")
    argv = [
        "serve", "--workspace", "ws", "--tools", "mytools.py", "--mcp", "docs=python server.py",
        "--mcp=npx -y @scope/x", "--token-file=token.txt", "--print-config", "cursor",
    ]  # fmt: skip
    assert main(argv) == 0
    entry = json.loads(capsys.readouterr().out)["mcpServers"]["scriptbridge"]
    args = entry["args"]
    assert args[args.index("--workspace") + 1] == str(tmp_path / "ws")
    assert args[args.index("--tools") + 1] == str(tmp_path / "mytools.py")
    assert args[args.index("--mcp") + 1] == f"docs=python {tmp_path / 'server.py'}"
    assert "--mcp=npx -y @scope/x" in args
    assert f"--token-file={tmp_path / 'token.txt'}" in args
    assert "--print-config" not in args and "cursor" not in args


def test_serve_http_says_where_it_listens(tmp_path: pathlib.Path) -> None:
    """``serve --http 127.0.0.1:0`` prints the URL it listens on, with the port the kernel
    chose, and that port takes connections."""
    process = subprocess.Popen(
        [sys.executable, "-m", "scriptbridge._cli", "serve", "--http", "127.0.0.1:0",
         "--workspace", str(tmp_path / "ws")],
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": os.environ.get("PATH", "")},
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    assert process.stderr is not None
    threading.Thread(
        target=lambda: [lines.put(line) for line in process.stderr], daemon=True
    ).start()  # type: ignore[union-attr]
    try:
        said = ""
        while "listening on" not in said:
            said = lines.get(timeout=60)  # queue.Empty: it never said where it listens
        assert said.startswith("scriptbridge serve: listening on http://127.0.0.1:"), said
        port = int(said.rsplit(":", 1)[1].split("/")[0])
        assert port > 0 and said.rstrip().endswith("/mcp")
        socket.create_connection(("127.0.0.1", port), timeout=30).close()
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
