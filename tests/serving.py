"""Helpers for tests that drive ``scriptbridge serve`` as a real subprocess: its command, its
environment, a free loopback port, waiting until it listens; the command over stdio spoken to
in raw JSON-RPC lines (:class:`Raw`) and over streamable HTTP (:func:`http_serve`)."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
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


class Raw:
    """A ``serve`` subprocess over stdio (``args`` after ``serve``), spoken to in raw JSON-RPC
    lines. Notifications it sends are kept, in order, in ``notifications`` as they are read."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [*SERVE, *args],
            env=serve_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.seen: dict[object, dict[str, Any]] = {}
        self.notifications: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        self.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.stdin.flush()

    def read_one(self) -> None:
        """Read one line: an answer is kept for :meth:`receive`, a notification noted."""
        line = self.stdout.readline()
        assert line, self.process.communicate()
        message: dict[str, Any] = json.loads(line)
        if "id" in message and "method" not in message:
            self.seen[message["id"]] = message
        elif "id" not in message:
            self.notifications.append(message)

    def receive(self, wanted: object) -> dict[str, Any]:
        """The answer to request ``wanted`` (blocking: call it in a thread)."""
        while wanted not in self.seen:
            self.read_one()
        return self.seen.pop(wanted)

    def printed(self) -> str:
        """What the scripts printed, as far as read (``notifications/message`` data)."""
        return "".join(
            str(note["params"]["data"])
            for note in self.notifications
            if note.get("method") == "notifications/message"
        )

    def initialize(self) -> None:
        info = {"name": "attacker", "version": "0"}
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info}
        self.send({"id": "init", "method": "initialize", "params": init})
        self.receive("init")
        self.send({"method": "notifications/initialized"})

    def call(self, rid: object, name: str, arguments: dict[str, Any]) -> None:
        params = {"name": name, "arguments": arguments}
        self.send({"id": rid, "method": "tools/call", "params": params})


@contextlib.contextmanager
def raw_serve(*args: str) -> Iterator[Raw]:
    """A :class:`Raw` server, killed (if still running) and reaped as the block ends."""
    raw = Raw(*args)
    try:
        yield raw
    finally:
        if raw.process.poll() is None:
            raw.process.kill()
        raw.process.communicate(timeout=30)


@contextlib.asynccontextmanager
async def http_serve(*args: str, exits_cleanly: bool = False) -> AsyncIterator[str]:
    """A ``serve --http`` subprocess with ``args`` on a free loopback port; yields its
    ``/mcp`` url. With ``exits_cleanly``, a block that ends without raising then sends it
    SIGTERM, and it must exit 0 (within 30 s); otherwise it is killed. Reaped either way."""
    port = free_port()
    process = subprocess.Popen(
        [*SERVE, *args, "--http", f"127.0.0.1:{port}"],
        env=serve_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        await wait_listening(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
        if exits_cleanly:
            process.send_signal(signal.SIGTERM)
            assert await trio.to_thread.run_sync(lambda: process.wait(timeout=30)) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)
