"""Helpers for tests that drive ``scriptbridge serve`` as a real subprocess: its command, its
environment, a free loopback port, and waiting until it listens."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
from typing import Any

import trio

ROOT = pathlib.Path(__file__).resolve().parent.parent
SERVE = [sys.executable, "-m", "scriptbridge._cli", "serve"]


def serve_env() -> dict[str, str]:
    """This environment, with the source tree on ``PYTHONPATH`` (a clean clone runs as is)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def free_port() -> int:
    """A loopback port free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def wait_listening(port: int, process: subprocess.Popen[Any]) -> None:
    """Return once ``process`` accepts connections on ``port`` (fail if it exits, or after
    30 s)."""
    with trio.fail_after(30):
        while True:
            assert process.poll() is None, process.communicate()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                await trio.sleep(0.05)
