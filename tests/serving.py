"""Helpers for tests that drive ``scriptbridge serve`` as a real subprocess: its command, its
environment, a free loopback port, and waiting until it listens."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
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


async def seconds_to_exit_after_sigterm(process: subprocess.Popen[Any], timeout: float) -> float:
    """Send ``process`` SIGTERM and wait at most ``timeout`` s for it to exit; the seconds
    waited (the caller checks ``process.poll()``: still ``None`` if it hasn't exited)."""
    process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    with contextlib.suppress(subprocess.TimeoutExpired):
        await trio.to_thread.run_sync(lambda: process.wait(timeout=timeout))
    return time.monotonic() - signalled


def rss_kib(pid: int) -> int:
    """``pid``'s resident set (``VmRSS``), in KiB."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")
