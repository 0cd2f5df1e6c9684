"""Tests for ``scriptbridge serve``: the real command as a subprocess, driven over stdio by the
``mcp`` SDK's client, with ``examples/catalog_server.py`` as its upstream server."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from processes import alive, descendants, rss_kib
from serving import ROOT, SERVE, http_serve, raw_serve, serve_env

from scriptbridge import markers
from scriptbridge._cli import main
from scriptbridge._demo import payload_server

CATALOG = f"catalog={sys.executable} {ROOT / 'examples' / 'catalog_server.py'}"


@asynccontextmanager
async def serving(
    *args: str, logging_callback: Any = None, transport: str = "stdio"
) -> AsyncIterator[ClientSession]:
    """A ``scriptbridge serve`` subprocess with ``args`` over ``transport`` (``stdio``, or
    ``http`` on a free loopback port), and a client session on it (opted in to log messages at
    ``info``)."""
    if transport == "http":
        async with serving_http(*args, logging_callback=logging_callback) as session:
            yield session
        return
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "scriptbridge._cli", "serve", *args], env=env
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, logging_callback=logging_callback, log_level="info") as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def serving_http(*args: str, logging_callback: Any = None) -> AsyncIterator[ClientSession]:
    async with (
        http_serve(*args, exits_cleanly=True) as url,
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, logging_callback=logging_callback, log_level="info") as session,
    ):
        await session.initialize()
        yield session


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def test_lists_stubs_runs_upstream_tools_and_keeps_sessions(tmp_path: pathlib.Path) -> None:
    """run_python's description carries the upstream stubs; a script calls an upstream tool and
    its result is text, structuredContent and isError; a session keeps state; progress comes."""
    async with serving("--mcp", CATALOG, "--workspace", str(tmp_path)) as session:
        listed = await session.list_tools()
        assert [tool.name for tool in listed.tools] == ["run_python"]
        tool = listed.tools[0]
        assert tool.description is not None
        assert "def catalog_search(" in tool.description, tool.description
        assert "def catalog_add_item(" in tool.description
        assert set(tool.input_schema["properties"]) == {"code", "inputs", "session"}

        result = await session.call_tool(
            "run_python",
            {
                "code": 'print("hi")\n'
                'tools.catalog_set_status(name=inputs["n"], status="published")',
                "inputs": {"n": "lamp"},
            },
        )
        assert not result.is_error, text_of(result)
        assert result.structured_content is not None
        assert result.structured_content["ok"] is True
        assert result.structured_content["value"]["data"] == {"name": "lamp", "status": "published"}
        assert "hi" in text_of(result) and "lamp" in text_of(result)

        failed = await session.call_tool("run_python", {"code": "x = 1\nraise ValueError('no')"})
        assert failed.is_error
        assert "ValueError" in text_of(failed) and "line 2" in text_of(failed)
        assert failed.structured_content is not None
        assert failed.structured_content["error"]["type"] == "ValueError"

        bad = await session.call_tool("run_python", {"code": 3})
        assert bad.is_error and "code" in text_of(bad)

        first = await session.call_tool("run_python", {"code": "total = 40"})
        handle = (first.structured_content or {})["session"]
        carried = await session.call_tool("run_python", {"code": "total + 2", "session": handle})
        assert carried.structured_content is not None
        assert carried.structured_content["value"] == 42, text_of(carried)
        other = await session.call_tool("run_python", {"code": "total"})
        assert other.is_error and "NameError" in text_of(other)

        seen: list[tuple[float, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, message))

        slow = await session.call_tool(
            "run_python",
            {
                "code": "import asyncio\nawait tools.catalog_search(query='x')\n"
                "await asyncio.sleep(1.3)\n1"
            },
            progress_callback=on_progress,
        )
        assert not slow.is_error, text_of(slow)
        assert seen, "no progress notification for a 1.3 s run"
        assert any("1 tool call" in (message or "") for _, message in seen), seen


GATE_TOOLS = """
import os
import time

GATE = {gate!r}


def is_open() -> dict:
    \"\"\"Whether the test has opened the gate.\"\"\"
    return {{"open": os.path.exists(GATE)}}


def wait_open() -> dict:
    \"\"\"Return once the test opens the gate (a file appearing).\"\"\"
    while not os.path.exists(GATE):
        time.sleep(0.01)
    return {{"open": True}}
"""

HELD = "opened = tools.is_open()['data']['open']\nprint('started-{n}')\ntools.wait_open()\nopened"
"""A script (``{n}`` its number) held until the test opens the gate; its value: whether the
gate was open when it started (it printed ``started-{n}`` then)."""


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_cancel_kills_a_run_and_concurrency_is_bounded(
    tmp_path: pathlib.Path, transport: str
) -> None:
    """With --max-concurrent 2 --max-queued 1, two runs go at once, one waits (it starts only
    once a slot is free), the next fails at once; a client's cancellation ends a long run and
    frees its slot. Runs are held by a tool until the test lets them go: no sleeps."""
    gate = tmp_path / "gate"
    tools = tmp_path / "gate_tools.py"
    tools.write_text(GATE_TOOLS.format(gate=str(gate)))
    logged: list[str] = []

    async def on_log(params: Any) -> None:
        logged.append(str(params.data))

    def started(*numbers: int) -> bool:
        return all(f"started-{n}" in "".join(logged) for n in numbers)

    args = ["--workspace", str(tmp_path / "ws"), "--tools", str(tools), "--timeout", "120"]
    async with serving(
        *args,
        "--max-concurrent",
        "2",
        "--max-queued",
        "1",
        logging_callback=on_log,
        transport=transport,
    ) as session:
        results: dict[int, Any] = {}

        async def call(n: int, code: str) -> None:
            results[n] = await session.call_tool("run_python", {"code": code})

        async with trio.open_nursery() as nursery:
            for n in range(4):
                nursery.start_soon(call, n, HELD.format(n=n))
            with trio.fail_after(30):
                while not results or "".join(logged).count("started-") < 2:
                    await trio.sleep(0.01)
            (refused,) = results.values()  # answered while the gate is shut: at once
            assert refused.is_error and "busy" in text_of(refused), text_of(refused)
            assert "".join(logged).count("started-") == 2, logged
            gate.touch()
        values = [r.structured_content["value"] for r in results.values() if not r.is_error]
        assert sorted(values) == [False, False, True], [text_of(r) for r in results.values()]

        gate.unlink()
        async with trio.open_nursery() as nursery:  # an endless run, cancelled as it runs
            cancelled = trio.CancelScope()

            async def endless() -> None:
                with cancelled:
                    # what it printed goes out at its next call (a loop never sends it)
                    endless = "print('spinning')\ntools.is_open()\nwhile True:\n    pass"
                    await call(9, endless)

            nursery.start_soon(endless)
            with trio.fail_after(30):
                while "spinning" not in "".join(logged):
                    await trio.sleep(0.01)
            cancelled.cancel()
        # its slot is free again (the run ended, its child reaped): two held runs go at once
        # (were it still running, one would wait in the queue until its wall time of 120 s)
        async with trio.open_nursery() as nursery:
            for n in (13, 14):
                nursery.start_soon(call, n, HELD.format(n=n))
            with trio.fail_after(30):
                while not started(13, 14):
                    await trio.sleep(0.01)
            gate.touch()
        assert all(results[n].structured_content["value"] is False for n in (13, 14)), results


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_never_references_printed_output_and_exposed_tools(
    tmp_path: pathlib.Path, transport: str
) -> None:
    """Through serve, a never reference's fetch is refused with PAYLOAD_NEVER and no request;
    what a script prints comes as notifications/message while it runs and as the progress
    message's last line; --expose-tools offers each upstream tool beside run_python, its
    results shown through the model's live lane (no never uri, no payload)."""
    logged: list[Any] = []
    progress: list[str | None] = []

    async def on_log(params: Any) -> None:
        logged.append(params)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    with payload_server() as (base, hits):
        peer = f"peer={sys.executable} {ROOT / 'examples' / 'peer.py'} --payload-base {base}"
        args = ["--mcp", peer, "--allow", "127.0.0.1", "--workspace", str(tmp_path)]
        async with serving(
            *args, "--expose-tools", logging_callback=on_log, transport=transport
        ) as session:
            names = [tool.name for tool in (await session.list_tools()).tools]
            assert names[0] == "run_python" and "peer.never_reference" in names, names
            assert "peer.text" in names

            code = (
                "import asyncio\n"
                "print('looking')\n"
                "ref = (await call_tool('peer.never_reference', {}))['content'][0]\n"
                "await asyncio.sleep(1.2)\n"
                "try:\n    fetch(ref)\n    why = 'fetched'\n"
                "except Unfetchable as exc:\n    why = str(exc)\n"
                "print('done')\n"
                "[why, ref['savedTo'], 'uri' in ref]"
            )
            result = await session.call_tool(
                "run_python", {"code": code}, progress_callback=on_progress
            )
            assert not result.is_error, text_of(result)
            assert result.structured_content is not None
            assert result.structured_content["value"] == [markers.PAYLOAD_NEVER, None, False]
            assert hits["/payroll.csv"] == 0
            printed = "".join(str(params.data) for params in logged)
            assert printed == "looking\ndone\n", logged
            assert all(params.level == "info" for params in logged)
            assert any("looking" in (message or "") for message in progress), progress

            direct = await session.call_tool("peer.never_reference", {})
            shown = json.dumps(direct.model_dump(mode="json"))
            assert base not in shown and markers.PAYLOAD_NEVER in shown, shown
            assert direct.structured_content is None
            text = await session.call_tool("peer.text", {})
            assert text_of(text) == "hello from the peer" and not text.is_error
            failed = await session.call_tool("peer.fail", {})
            assert failed.is_error and "on purpose" in text_of(failed)
            assert hits["/payroll.csv"] == 0


async def test_twenty_calls_with_four_at_a_time(tmp_path: pathlib.Path) -> None:
    """20 concurrent calls with --max-concurrent 4: every one is answered ok, and they take at
    least five rounds of the 0.5 s each script sleeps (never more than 4 ran at once)."""
    async with serving("--workspace", str(tmp_path), "--max-concurrent", "4") as session:
        results: dict[int, Any] = {}

        async def call(n: int) -> None:
            code = "import asyncio\nawait asyncio.sleep(0.5)\ninputs['n'] * 2"
            results[n] = await session.call_tool("run_python", {"code": code, "inputs": {"n": n}})

        started = time.monotonic()
        async with trio.open_nursery() as nursery:
            for n in range(20):
                nursery.start_soon(call, n)
        elapsed = time.monotonic() - started
    values = {n: (r.structured_content or {}).get("value") for n, r in results.items()}
    assert values == {n: n * 2 for n in range(20)}, [text_of(r) for r in results.values()]
    assert elapsed >= 5 * 0.5, elapsed


def test_print_config_prints_a_stdio_snippet(capsys: pytest.CaptureFixture[str]) -> None:
    """--print-config claude prints JSON that starts this same command over stdio."""
    assert main(["serve", "--mcp", CATALOG, "--print-config", "claude"]) == 0
    server = json.loads(capsys.readouterr().out)["mcpServers"]["scriptbridge"]
    assert server["command"] == sys.executable
    assert server["args"] == ["-m", "scriptbridge._cli", "serve", "--mcp", CATALOG]


async def test_http_with_a_token_file_serves_only_requests_bearing_it(
    tmp_path: pathlib.Path,
) -> None:
    """Over streamable HTTP at /mcp with --token-file, a request without or with a wrong token
    gets 401; with it, the SDK's client lists run_python and runs a script; SIGTERM exits 0."""
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\nignored\n")
    args = ["--workspace", str(tmp_path), "--token-file", str(token_file)]
    async with http_serve(*args, exits_cleanly=True) as url:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        async with httpx2.AsyncClient() as plain:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                response = await plain.post(url, json=body, headers=headers)
                assert response.status_code == 401, (headers, response.text)
        client = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret-token"})
        async with (
            client,
            streamable_http_client(url, http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = await session.list_tools()
            assert [tool.name for tool in listed.tools] == ["run_python"]
            result = await session.call_tool("run_python", {"code": "print('over http')\n6 * 7"})
            assert result.structured_content is not None
            assert result.structured_content["value"] == 42, text_of(result)
            assert "over http" in text_of(result)


def test_a_bind_beyond_loopback_needs_a_token_file(capsys: pytest.CaptureFixture[str]) -> None:
    """--http 0.0.0.0:PORT without --token-file refuses to start (exit 2, saying why)."""
    assert main(["serve", "--http", "0.0.0.0:8765"]) == 2
    assert "--token-file" in capsys.readouterr().err


async def test_sigterm_drains_answers_every_call_and_leaves_no_child(
    tmp_path: pathlib.Path,
) -> None:
    """SIGTERM during two runs: the short one finishes and is answered, the endless one is
    cancelled at --drain-s and answered with an error, a new call is refused, and the server
    exits 0 within its deadline (long before the endless run's wall time) with no process of
    its own left."""
    args = ["--workspace", str(tmp_path), "--mcp", CATALOG, "--drain-s", "1.5", "--timeout", "60"]
    with raw_serve(*args) as raw:
        await trio.to_thread.run_sync(raw.initialize)
        raw.call(2, "run_python", {"code": "import asyncio\nprint('short')\n"
                                  "await asyncio.sleep(0.6)\n'short'"})  # fmt: skip
        endless = "print('endless')\ntools.catalog_search(query='x')\nwhile True:\n    pass"
        raw.call(3, "run_python", {"code": endless})  # printed, sent on at its tool call
        with trio.fail_after(30):  # both runs are under way
            while not ("short" in raw.printed() and "endless" in raw.printed()):
                await trio.to_thread.run_sync(raw.read_one, abandon_on_cancel=True)
        below = descendants(raw.process.pid)
        assert below, "no child processes seen"
        raw.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        refused, asked = None, 100
        with trio.fail_after(30):  # calls are refused once the signal is taken: ask until one is
            while refused is None:
                raw.call(asked, "run_python", {"code": "1"})
                answer = await trio.to_thread.run_sync(raw.receive, asked)
                if "shut" in json.dumps(answer):
                    refused = answer
                else:  # sent before serve took the signal: it ran
                    assert answer["result"]["structuredContent"]["value"] == 1, answer
                    asked += 1
        assert refused["result"]["isError"], refused
        answers = {n: await trio.to_thread.run_sync(raw.receive, n) for n in (2, 3)}
        assert answers[2]["result"]["structuredContent"]["value"] == "short", answers[2]
        assert answers[3]["result"]["isError"] and "shut" in json.dumps(answers[3]), answers[3]
        code = await trio.to_thread.run_sync(lambda: raw.process.wait(timeout=30))
        assert code == 0, raw.process.communicate()
        assert time.monotonic() - signalled < 1.5 + 20, "the drain waited for the endless run"
        assert not [pid for pid in below if alive(pid)], below


async def test_a_endless_stdin_line_is_dropped_in_bounded_memory(tmp_path: pathlib.Path) -> None:
    """A client that writes 96 MiB with no newline costs serve at most its line bound (16 MiB)
    of memory, not the line: the line is dropped, and the next request is answered."""
    process = subprocess.Popen(
        [*SERVE, "--workspace", str(tmp_path)],
        env=serve_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    try:
        info = {"name": "test", "version": "0"}
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info}
        request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}
        stdin.write(json.dumps(request).encode() + b"\n")
        stdin.flush()
        assert json.loads(await trio.to_thread.run_sync(stdout.readline))["id"] == 1
        before = rss_kib(process.pid)
        chunk = b"x" * 2**20

        def flood() -> None:
            for _ in range(96):
                stdin.write(chunk)
            stdin.flush()

        await trio.to_thread.run_sync(flood)  # read by serve, but for what the pipe holds
        grown = rss_kib(process.pid) - before
        stdin.write(b"\n" + json.dumps({**request, "id": 2, "method": "ping"}).encode() + b"\n")
        stdin.flush()
        with trio.fail_after(30):
            answer = json.loads(await trio.to_thread.run_sync(stdout.readline))
        assert answer["id"] == 2, answer
        assert grown < 48 * 1024, f"serve grew by {grown} KiB for one unfinished line"
    finally:
        process.kill()
        process.communicate(timeout=30)


async def test_an_http_body_past_the_bound_gets_413_and_runs_nothing(
    tmp_path: pathlib.Path,
) -> None:
    """A request body past 16 MiB (declared, or streamed with no length) is refused with 413
    before the server reads it; the server goes on serving."""
    async with http_serve("--workspace", str(tmp_path), exits_cleanly=True) as url:
        code = "print('ran')\n#" + "x" * (17 * 2**20)
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "run_python", "arguments": {"code": code}}}  # fmt: skip
        headers = {"Accept": "application/json, text/event-stream"}
        data = json.dumps(body).encode()

        async def streamed() -> AsyncIterator[bytes]:
            for start in range(0, len(data), 2**20):
                yield data[start : start + 2**20]

        async with httpx2.AsyncClient(timeout=30) as plain:
            declared = await plain.post(url, content=data, headers=headers)
            assert declared.status_code == 413, declared.text
            chunked = await plain.post(url, content=streamed(), headers=headers)
            assert chunked.status_code == 413, chunked.text
        async with (
            streamable_http_client(url) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("run_python", {"code": "6 * 7"})
            assert (result.structured_content or {}).get("value") == 42
