"""Attacks on ``scriptbridge serve`` as a hostile MCP client: the real command as a subprocess,
driven over stdio (raw JSON-RPC lines, or the ``mcp`` SDK's client) and over streamable HTTP,
with real upstream servers and real children. No mocks.

Each test's docstring tells an attack; the test holds it stopped. Those under "weaknesses"
once got through (each was red before its fix); those under "what held" never did.
"""

from __future__ import annotations

import array
import fcntl
import json
import pathlib
import select
import socket
import subprocess
import sys
import termios
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio
from loopback_http import Handler, Request, body, start_server
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from processes import rss_kib
from serving import (
    ROOT,
    SERVE,
    free_port,
    http_serve,
    raw_serve,
    seconds_to_exit_after_sigterm,
    serve_env,
    wait_listening,
)

from scriptbridge import markers

HOSTILE = f"hostile={sys.executable} {ROOT / 'tests' / 'servers' / 'hostile_server.py'}"


def unread_bytes(fd: int) -> int:
    """How many bytes wait in the pipe ``fd`` reads from."""
    waiting = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, waiting)
    return waiting[0]


# --- weaknesses ----------------------------------------------------------------------------


async def test_an_exposed_tool_call_in_flight_does_not_hold_the_drain(
    tmp_path: pathlib.Path,
) -> None:
    """SIGTERM drain. ``--drain-s 0.5`` should stop the server within about a second, but a
    call of an *exposed* tool isn't among the scopes the drain cancels (``_call_exposed`` is
    counted in flight, never cancelled), so a client that calls a tool whose server doesn't
    answer holds the shutdown for the whole ``--mcp-timeout`` (60 s by default)."""
    record = tmp_path / "hostile-received.jsonl"  # what the tool server received
    hostile = f"hostile=env HOSTILE_RECORD={record} {HOSTILE.split('=', 1)[1]}"
    args = ["--workspace", str(tmp_path), "--mcp", hostile, "--expose-tools"]
    with raw_serve(*args, "--drain-s", "0.5", "--mcp-timeout", "60") as raw:
        await trio.to_thread.run_sync(raw.initialize)
        raw.call(2, "hostile.hang", {})
        with trio.fail_after(30):  # the call is in flight once the server has it
            while not record.exists() or '"hang"' not in record.read_text():
                await trio.sleep(0.01)
        waited = await seconds_to_exit_after_sigterm(raw.process, 20)  # a third of the timeout
        assert raw.process.poll() is not None, (
            f"serve --drain-s 0.5 still running {waited:.1f} s after SIGTERM: an exposed "
            "tool's call in flight holds the drain"
        )


FLOOD_TOOLS = '''
import time

BIG = {"content": [{"type": "resource_link", "uri": f"https://big.example/{n}", "name": "x"}
                   for n in range(20_000)]}


def big(delay: float = 0.0) -> dict:
    """A big listing (20,000 links), after ``delay`` seconds."""
    time.sleep(delay)
    return BIG


def doc(url: str) -> dict:
    """A link to ``url``."""
    return {"content": [{"type": "resource_link", "uri": url, "name": "p.txt"}]}
'''


@asynccontextmanager
async def client(url: str) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def slow_body(asked: trio.Event) -> Handler:
    """Answer ``payload`` a second after the request came, setting ``asked`` as it comes."""

    async def answer(stream: trio.SocketStream, request: Request) -> None:
        asked.set()
        await trio.sleep(1.0)
        await body(b"payload", content_type="text/plain")(stream, request)

    return answer


async def test_one_client_cannot_keep_another_clients_run_past_its_wall_time(
    tmp_path: pathlib.Path, nursery: trio.Nursery
) -> None:
    """Availability across clients (and SPEC 7.6). A hostile client keeps two runs going, one
    after another, each a batch of calls to a tool with a big (not hostile) result; the marks
    gate then never settles. Another client's run, whose download ended meanwhile, waits for
    it in a shielded scope: with ``--timeout 3`` it should be answered within about 3 s, but
    it lasts as long as the hostile client goes on, holding its run slot: it must end (on its
    download or its wall time) while the hostile client still starts runs (for about 26 s)."""
    payloads = await start_server(nursery)
    asked = trio.Event()
    payloads.routes["/slow.txt"] = slow_body(asked)
    tools = tmp_path / "flood_tools.py"
    tools.write_text(FLOOD_TOOLS)
    args = ["--workspace", str(tmp_path / "ws"), "--tools", str(tools), "--allow", "127.0.0.1"]
    batch = "call_tools([('big', {'delay': 0.05 * (n % 8)}) for n in range(400)])"
    async with (
        http_serve(*args, "--timeout", "3", "--max-concurrent", "6") as url,
        client(url) as victim,
        client(url) as attacker,
    ):
        answered: list[str] = []
        outcome: dict[str, Any] = {}

        async def victim_run() -> None:
            code = f"ref = tools.doc(url={payloads.url('/slow.txt')!r})['content'][0]\n"
            code += "read_text(fetch(ref))"
            started = time.monotonic()
            result = await victim.call_tool("run_python", {"code": code})
            outcome["result"] = result.structured_content or {}
            outcome["seconds"] = time.monotonic() - started
            answered.append("victim")
            inner.cancel_scope.cancel()  # the attack has had its chance

        async def attack() -> None:
            await asked.wait()  # the victim's download is in flight
            async with trio.open_nursery() as runs:
                for _ in range(20):  # about 26 s of runs, each overlapping the next
                    runs.start_soon(attacker.call_tool, "run_python", {"code": batch})
                    await trio.sleep(1.3)
                answered.append("attacker")  # no more runs: the gate can settle now

        async with trio.open_nursery() as inner:
            inner.start_soon(victim_run)
            inner.start_soon(attack)
    result = outcome["result"]
    ending = "ok" if result.get("ok") else (result.get("error") or {}).get("type")
    # Its download's own ending, its wall time's, or its reference gone from the host (the
    # flood's records can push it out of the registry): each ends it at once.
    endings = {("ok", "payload"), ("WallTimeExceeded", None), ("Unfetchable", None)}
    assert (ending, result.get("value")) in endings, result
    assert answered == ["victim"], (
        f"a run with a 3 s wall time was answered after {outcome['seconds']:.1f} s, once the "
        "hostile client stopped starting runs"
    )


def too_deep(depth: int = 120) -> list[Any]:
    """Inputs nested past the channel's depth limit: refused by ``Bridge.run`` before any child
    starts, but only once ``serve`` has opened the call's session."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


async def test_a_client_cannot_close_another_clients_session(tmp_path: pathlib.Path) -> None:
    """Sessions across clients. Over HTTP a session belongs to its MCP session, but the cap
    on sessions (here ``--max-sessions 8``) is one for the whole server and opening one more
    closed the longest idle, whoever owned it. A client opens as many sessions as the cap (each
    call without a ``session`` opens one) and another client's session, with its state, was
    gone."""
    async with (
        http_serve("--workspace", str(tmp_path / "ws"), "--max-sessions", "8") as url,
        client(url) as victim,
        client(url) as attacker,
    ):
        kept = await victim.call_tool("run_python", {"code": "secret = 'the victim keeps this'"})
        assert not kept.is_error
        mine = (kept.structured_content or {})["session"]
        for _ in range(8):
            await attacker.call_tool("run_python", {"code": ""})
        later = await victim.call_tool("run_python", {"code": "secret", "session": mine})
        assert (later.structured_content or {}).get("value") == "the victim keeps this", (
            later.content
        )


async def test_inputs_too_deep_are_refused_as_an_error_result(tmp_path: pathlib.Path) -> None:
    """Malformed requests. ``inputs`` that aren't plain data should get the documented
    ``isError`` refusal; the ``ValueError`` from ``Bridge.run`` is raised inside the call's task
    groups, so it reaches ``_call_tool`` as an ``ExceptionGroup``, passes its ``except
    ValueError`` and the client gets a JSON-RPC error ("Exceptions from Trio nursery" over
    stdio, "unhandled errors in a TaskGroup" over HTTP) instead. The server survives."""
    with raw_serve("--workspace", str(tmp_path)) as raw:
        await trio.to_thread.run_sync(raw.initialize)
        raw.call(2, "run_python", {"code": "1", "inputs": {"x": too_deep()}})
        answer = await trio.to_thread.run_sync(raw.receive, 2)
        assert "result" in answer and answer["result"]["isError"], answer
        assert "plain data" in json.dumps(answer["result"]), answer


async def test_session_handles_passed_in_are_not_kept(tmp_path: pathlib.Path) -> None:
    """Memory. A ``session_id`` was kept as a key for as long as its session lived (600 s
    idle), with no bound on its length: 256 sessions of 16 MiB ids pinned about 4 GiB; 24
    calls with 8 MiB ids grew the server by about 190 MiB. A ``session`` is now a handle the
    server minted: what a client passes is looked up, never kept (each refused at once)."""
    with raw_serve("--workspace", str(tmp_path)) as raw:
        await trio.to_thread.run_sync(raw.initialize)
        raw.call(1, "run_python", {"code": "1"})
        await trio.to_thread.run_sync(raw.receive, 1)
        before = rss_kib(raw.process.pid)

        def flood() -> None:
            for n in range(24):
                handle = chr(ord("a") + n) * (8 * 2**20)
                raw.call(100 + n, "run_python", {"code": "", "session": handle})
                assert "unknown" in json.dumps(raw.receive(100 + n))

        await trio.to_thread.run_sync(flood)
        grown = rss_kib(raw.process.pid) - before
        assert grown < 64 * 1024, f"serve kept {grown // 1024} MiB for 24 session handles"


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def tools_call(rid: int, code: str) -> dict[str, Any]:
    params = {"name": "run_python", "arguments": {"code": code}}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def http_initialize(http: httpx.Client, url: str) -> dict[str, str]:
    """Open an MCP session over plain HTTP; returns the headers its requests carry."""
    info = {"name": "raw", "version": "0"}
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info}
    opened = http.post(
        url,
        headers=HEADERS,
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
    )
    headers = {
        **HEADERS,
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-06-18",
    }
    http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


async def test_a_client_that_never_reads_its_answer_does_not_pin_a_run_slot(
    tmp_path: pathlib.Path,
) -> None:
    """Exhaustion. What a script prints is sent on as ``notifications/message`` from a task
    of the call's run slot, and the slot is released only once all of it was sent. A client
    that posts a call whose script prints 1 MB of control characters (6 MB of JSON escapes)
    and then never reads its event stream blocks that send, so the slot stays taken though
    the run ended at once; ``--max-concurrent`` such connections shut every other client out.
    (A client that reads gets its slot back at once.)"""
    async with http_serve(
        "--workspace", str(tmp_path / "ws"), "--max-concurrent", "1", "--max-queued", "0"
    ) as url:
        host, port = url.split("//")[1].split("/")[0].split(":")

        def attack_then_call() -> dict[str, Any]:
            with httpx.Client(timeout=30) as http:
                headers = http_initialize(http, url)
                code = "print('\\x01' * 999_000)\n1"
                data = json.dumps(tools_call(2, code)).encode()
                head = f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n"
                head += f"Content-Length: {len(data)}\r\n"
                head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
                with socket.create_connection((host, int(port))) as never_read:
                    never_read.sendall(head.encode() + data)
                    readable, _, _ = select.select([never_read], [], [], 30)
                    assert readable, "no answer began: the call never took the slot"
                    other = http_initialize(http, url)
                    # busy while that run goes (a few milliseconds), never once it has ended
                    deadline = time.monotonic() + 30
                    while True:
                        answer = http.post(url, headers=other, json=tools_call(3, "6 * 7"))
                        data_line = next(
                            line for line in answer.text.splitlines() if line.startswith("data:")
                        )
                        reply = dict(json.loads(data_line[5:]))
                        if "busy" not in json.dumps(reply) or time.monotonic() > deadline:
                            return reply
                        time.sleep(0.05)

        answer = await trio.to_thread.run_sync(attack_then_call)
        assert not answer["result"]["isError"], answer


async def test_a_value_is_cut_in_the_text_content(tmp_path: pathlib.Path) -> None:
    """Memory amplification. The text content cuts what a script printed at 20,000 characters
    (all of it being in ``structuredContent``), but puts the value's ``repr`` in whole: a
    script whose value is 4 MiB of control characters (within the 16 MiB message bound) gets
    an answer of about 46 MB, its repr (4 characters each) then JSON-escaped, beside its JSON
    escapes in ``structuredContent`` (6 bytes each): about 11 times the value, built in the
    server's memory per call."""
    with raw_serve("--workspace", str(tmp_path)) as raw:
        await trio.to_thread.run_sync(raw.initialize)
        raw.call(2, "run_python", {"code": "'\\x01' * (4 * 2**20)"})
        answer = await trio.to_thread.run_sync(raw.receive, 2)
        text = answer["result"]["content"][0]["text"]
        assert len(text) <= 100_000, f"the text content holds {len(text):,} characters"


# --- weaknesses (second pass) ------------------------------------------------------------


async def test_a_client_whose_request_never_ends_cannot_hold_the_shutdown(
    tmp_path: pathlib.Path,
) -> None:
    """Shutdown (``serve --http``, SIGTERM). The drain ends the runs, then uvicorn's graceful
    shutdown waits for every open connection's request to complete, with no deadline
    (``uvicorn.Config`` gets no ``timeout_graceful_shutdown``). A client that sends a
    ``tools/call`` whose body never ends (its ``Content-Length`` a few bytes more than it
    sends) keeps the server running after SIGTERM for as long as it keeps the socket open;
    so does one that never reads the answer of a call that printed a megabyte (and over stdio,
    a client that doesn't read stdout). ``--drain-s 0.5`` should exit within a few seconds."""
    port = free_port()
    args = ["--workspace", str(tmp_path / "ws"), "--drain-s", "0.5", "--http", f"127.0.0.1:{port}"]
    process = subprocess.Popen(
        [*SERVE, *args], env=serve_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        await wait_listening(port, process)
        url = f"http://127.0.0.1:{port}/mcp"
        with httpx.Client(timeout=30) as http, socket.create_connection(("127.0.0.1", port)) as s:
            headers = await trio.to_thread.run_sync(http_initialize, http, url)
            data = json.dumps(tools_call(2, "1")).encode()
            head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            head += f"Content-Length: {len(data) + 10}\r\n"  # ten bytes that never come
            head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
            s.sendall(head.encode() + data)
            # a request answered on a connection opened later: the server has taken this one
            ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
            pong = await trio.to_thread.run_sync(lambda: http.post(url, headers=headers, json=ping))
            assert pong.status_code == 200, pong.text
            waited = await seconds_to_exit_after_sigterm(process, 20)  # held, it never exits
            assert process.poll() is not None, (
                f"serve --http --drain-s 0.5 still running {waited:.1f} s after SIGTERM: a "
                "request whose body never ends holds uvicorn's graceful shutdown"
            )
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


async def test_a_client_with_many_mcp_sessions_cannot_close_another_clients_session(
    tmp_path: pathlib.Path,
) -> None:
    """Sessions across clients (``_make_room``'s fair eviction). When the server holds
    ``MAX_SESSIONS`` sessions, opening one more closes the longest idle of the MCP session
    that holds the most; but an MCP session costs one ``initialize``, so a client that opens
    each of its sessions in an MCP session of its own holds one per MCP session, as its
    victim does, and the tie went to the longest idle: the victim's. As many MCP sessions as
    the cap (here ``--max-sessions 8``), each running one empty step, and the victim's
    session, with its state, was gone."""
    async with http_serve("--workspace", str(tmp_path / "ws"), "--max-sessions", "8") as url:

        def attack() -> Any:
            with httpx.Client(timeout=30) as http:
                victim = http_initialize(http, url)
                kept = {"code": "secret = 'the victim keeps this'"}
                params = {"name": "run_python", "arguments": kept}
                call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
                first = http.post(url, headers=victim, json=call).text
                assert 'isError":false' in first
                line = next(line for line in first.splitlines() if line.startswith("data:"))
                mine = json.loads(line[5:])["result"]["structuredContent"]["session"]
                for _ in range(8):
                    other = http_initialize(http, url)
                    params = {"name": "run_python", "arguments": {"code": ""}}
                    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
                    http.post(url, headers=other, json=call)
                params = {"name": "run_python", "arguments": {"code": "secret", "session": mine}}
                call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}
                answer = http.post(url, headers=victim, json=call).text
                line = next(line for line in answer.splitlines() if line.startswith("data:"))
                return json.loads(line[5:])["result"]

        later = await trio.to_thread.run_sync(attack)
        assert (later.get("structuredContent") or {}).get("value") == "the victim keeps this", (
            later["content"]
        )


# --- what held -----------------------------------------------------------------------------

PEER = f"peer={sys.executable} {ROOT / 'examples' / 'peer.py'} --payload-base http://127.0.0.1:9"


async def test_output_stays_with_its_client_and_exposed_embeds_hide_uris(
    tmp_path: pathlib.Path,
) -> None:
    """Held: over HTTP, what one client's script prints (``notifications/message``) reaches
    that client only, while another client's run prints at the same time; an exposed tool's
    embedded resources (text, image, PDF) show their contents or marker, never their uri."""
    heard: dict[str, list[str]] = {"a": [], "b": []}

    def hearing(who: str) -> Any:
        async def on_log(params: Any) -> None:
            heard[who].append(str(params.data))

        return on_log

    args = ["--workspace", str(tmp_path / "ws"), "--mcp", PEER, "--expose-tools"]
    code = "import asyncio\nfor n in range(3):\n    print('{0}', n)\n    await asyncio.sleep(0.1)\n"
    async with (
        http_serve(*args) as url,
        streamable_http_client(url) as (read_a, write_a),
        ClientSession(read_a, write_a, logging_callback=hearing("a"), log_level="info") as a,
        streamable_http_client(url) as (read_b, write_b),
        ClientSession(read_b, write_b, logging_callback=hearing("b"), log_level="info") as b,
    ):
        await a.initialize()
        await b.initialize()
        async with trio.open_nursery() as runs:
            runs.start_soon(a.call_tool, "run_python", {"code": code.format("from-a")})
            runs.start_soon(b.call_tool, "run_python", {"code": code.format("from-b")})
        shown = [
            json.dumps((await b.call_tool(f"peer.{name}", {})).model_dump(mode="json"))
            for name in ("embedded_text", "embedded_image", "embedded_pdf")
        ]
    assert "from-a" in "".join(heard["a"]) and "from-b" not in "".join(heard["a"]), heard
    assert "from-b" in "".join(heard["b"]) and "from-a" not in "".join(heard["b"]), heard
    assert all("peer://" not in text for text in shown), shown
    assert "embedded words" in shown[0] and '"image"' in shown[1], shown
    assert "application/pdf" in shown[2] and markers.PAYLOAD_NEVER not in shown[2], shown


async def test_a_stdio_client_that_never_reads_cannot_hold_the_shutdown(
    tmp_path: pathlib.Path,
) -> None:
    """Shutdown over stdio. A client that calls a script printing a megabyte (sent on as
    notifications) and never reads stdout fills the pipe; the server's writes then wait for
    it. After SIGTERM with ``--drain-s 0.5`` the server must still exit within a few seconds
    (its writes are cancellable: no thread blocked in ``write``)."""
    with raw_serve("--workspace", str(tmp_path), "--drain-s", "0.5") as raw:
        await trio.to_thread.run_sync(raw.initialize)
        raw.call(2, "run_python", {"code": "for _ in range(1000):\n    print('x' * 1000)\n1"})
        capacity = fcntl.fcntl(raw.stdout.fileno(), fcntl.F_GETPIPE_SZ)
        # its output fills the unread pipe: half of it is there (a megabyte is on its way)
        with trio.fail_after(30):
            while unread_bytes(raw.stdout.fileno()) < capacity // 2:
                await trio.sleep(0.01)
        waited = await seconds_to_exit_after_sigterm(raw.process, 20)  # held, it never exits
        assert raw.process.poll() is not None, (
            f"serve --drain-s 0.5 still running {waited:.1f} s after SIGTERM: a client that "
            "doesn't read stdout holds it"
        )


def stateless_call(rid: int, arguments: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """A 2026-07-28 (stateless) ``tools/call`` of ``run_python``: its headers and body."""
    headers = {
        **HEADERS,
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "run_python",
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": "run_python", "arguments": arguments, "_meta": meta}
    return headers, {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


async def test_a_stateless_request_cant_claim_another_clients_mcp_session(
    tmp_path: pathlib.Path,
) -> None:
    """Identity. A session handle belongs to the MCP session that was given it; a stateless
    (2026-07-28) request carries no MCP session, yet the server takes whatever
    ``Mcp-Session-Id`` header it carries without checking it. With the victim's session id
    and handle, a stateless request was the victim."""
    async with http_serve("--workspace", str(tmp_path / "ws")) as url:

        def attack() -> tuple[str, str]:
            with httpx.Client(timeout=30) as http:
                victim = http_initialize(http, url)
                kept = http.post(url, headers=victim, json=tools_call(2, "secret = 'kept'"))
                line = next(line for line in kept.text.splitlines() if line.startswith("data:"))
                handle = json.loads(line[5:])["result"]["structuredContent"]["session"]
                headers, body = stateless_call(3, {"code": "secret", "session": handle})
                headers["Mcp-Session-Id"] = victim["mcp-session-id"]
                stolen = http.post(url, headers=headers, json=body).text
                again = http.post(
                    url,
                    headers=victim,
                    json={
                        "jsonrpc": "2.0",
                        "id": 4,
                        "method": "tools/call",
                        "params": {
                            "name": "run_python",
                            "arguments": {"code": "secret", "session": handle},
                        },
                    },
                ).text
                return stolen, again

        stolen, again = await trio.to_thread.run_sync(attack)
        assert "kept" not in stolen and "unknown" in stolen, stolen
        assert '"value":"kept"' in again.replace(" ", ""), again  # the victim still has it
