"""``serve``'s session handles: minted by the server, carried by every answer, bound to the
caller (a token's name, an MCP session, the stdio process), expiring, and refused with one
error that never tells whose a handle is (SPEC section 8, issue 30 item 1).

In process through the SDK's client on ``RunPythonServer``'s own server, and over HTTP against
the real ``serve`` command, with the SDK's client in the 2026-07-28 (stateless) mode and in the
legacy (handshake) mode."""

from __future__ import annotations

import pathlib
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

import httpx2
import pytest
import trio
import trio.testing
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation
from mcp_types import SERVER_INFO_META_KEY
from serving import ROOT, http_serve

from scriptbridge import Bridge
from scriptbridge._handles import PREFIX
from scriptbridge._serve import RunPythonServer

UNKNOWN = "this `session` is unknown here"
EXPIRED = "this `session` has expired"


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def step(client: Client, code: str, session: str | None = None) -> tuple[Any, str, Any]:
    """One ``run_python`` call: (value, text, the session handle the answer carries)."""
    arguments: dict[str, Any] = {"code": code}
    if session is not None:
        arguments["session"] = session
    result = await client.call_tool("run_python", arguments)
    structured = result.structured_content or {}
    return structured.get("value"), text_of(result), structured.get("session")


@asynccontextmanager
async def in_process(
    tmp_path: pathlib.Path, **options: Any
) -> AsyncIterator[tuple[Client, RunPythonServer]]:
    """A client on a ``RunPythonServer`` in this process (a stdio-like caller: ``stdio``)."""
    async with Bridge(tmp_path / "ws") as bridge:
        settings = {"max_concurrent": 2, "max_queued": 4, **options}
        served = RunPythonServer(bridge, **settings)
        async with Client(served.server) as client:
            yield client, served


async def test_every_answer_carries_a_handle_that_continues_its_session(
    tmp_path: pathlib.Path,
) -> None:
    async with in_process(tmp_path) as (client, _):
        _, text, handle = await step(client, "total = 40")
        assert isinstance(handle, str) and handle.startswith(PREFIX) and len(handle) >= 40
        assert handle in text  # in the text too, for a client that shows only text
        assert (await step(client, "total += 1", handle))[2] == handle
        value, _, again = await step(client, "total + 1", handle)
        assert (value, again) == (42, handle)
        value, text, other = await step(client, "total")  # no session: a new one
        assert other != handle and "NameError" in text


async def test_a_name_a_client_picks_is_no_session(tmp_path: pathlib.Path) -> None:
    """The old way (a client-chosen ``session_id``, or a made-up ``session``) opens nothing."""
    async with in_process(tmp_path) as (client, _):
        _, text, handle = await step(client, "secret = 'mine'", "s1")
        assert UNKNOWN in text and handle is None
        gone = await client.call_tool("run_python", {"code": "1", "session_id": "s1"})
        assert gone.is_error and "`session_id` is gone" in text_of(gone)
        for bogus in ("", PREFIX, PREFIX + "A" * 43, "x" * 10_000):
            assert UNKNOWN in (await step(client, "1", bogus))[1]


async def test_an_expired_handle_says_so(tmp_path: pathlib.Path) -> None:
    async with (
        in_process(tmp_path, session_idle_s=0.3) as (client, served),
        trio.open_nursery() as tasks,
    ):
        _, _, handle = await step(client, "x = 1")
        tasks.start_soon(served.expire_sessions)
        with trio.fail_after(30):
            while served.open_sessions:
                await trio.sleep(0.01)
        _, text, carried = await step(client, "x", handle)
        assert EXPIRED in text and carried is None
        tasks.cancel_scope.cancel()


async def test_making_room_closes_the_callers_longest_idle_session(
    tmp_path: pathlib.Path,
) -> None:
    async with in_process(tmp_path, max_sessions=2) as (client, served):
        a = (await step(client, "x = 'a'"))[2]
        b = (await step(client, "x = 'b'"))[2]
        assert (await step(client, "x", a))[0] == "a"  # b is now the longest idle
        c = (await step(client, "x = 'c'"))[2]
        assert sorted(served.open_sessions) == sorted([a, c])
        assert EXPIRED in (await step(client, "x", b))[1]


async def test_the_description_says_when_a_session_expires(tmp_path: pathlib.Path) -> None:
    async with in_process(tmp_path, session_idle_s=600) as (client, _):
        (tool,) = (await client.list_tools()).tools
        assert "unused for 10 min is closed" in (tool.description or "")
        assert set(tool.input_schema["properties"]) == {"code", "inputs", "session"}


@asynccontextmanager
async def http_client(url: str, mode: str, token: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


MODES = ["2026-07-28", "legacy"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_second_client_cant_pick_the_first_ones_session(
    tmp_path: pathlib.Path, mode: str
) -> None:
    """The issue's case: client A keeps a secret in "its" session; client B, another
    connection, asks for that session by a name it picks and gets nothing of A's."""
    async with (
        http_serve("--workspace", str(tmp_path), exits_cleanly=True) as url,
        http_client(url, mode) as a,
        http_client(url, mode) as b,
    ):
        _, _, handle = await step(a, "secret = 'from-A'")
        _, text, _ = await step(b, "secret", "s1")
        assert UNKNOWN in text and "from-A" not in text
        if mode == "legacy":  # an MCP session of its own: A's handle isn't B's either
            _, text, _ = await step(b, "secret", handle)
            assert UNKNOWN in text and "from-A" not in text
        assert (await step(a, "secret", handle))[0] == "from-A"


@pytest.mark.parametrize("mode", MODES)
async def test_a_handle_of_token_a_is_refused_for_token_b(
    tmp_path: pathlib.Path, mode: str
) -> None:
    """With ``--token-file`` lines ``NAME TOKEN``, a handle belongs to its token's name: B
    holding A's handle gets exactly the refusal of a made-up one."""
    tokens = tmp_path / "tokens"
    tokens.write_text("# clients\nalice token-of-alice\nbob token-of-bob\n")
    args = ("--workspace", str(tmp_path / "ws"), "--token-file", str(tokens))
    async with (
        http_serve(*args, exits_cleanly=True) as url,
        http_client(url, mode, "token-of-alice") as alice,
        http_client(url, mode, "token-of-bob") as bob,
    ):
        _, _, handle = await step(alice, "secret = 'alice'")
        _, stolen, _ = await step(bob, "secret", handle)
        _, made_up, _ = await step(bob, "secret", PREFIX + "x" * 43)
        assert UNKNOWN in stolen and "alice" not in stolen
        assert stolen == made_up
        assert (await step(alice, "secret", handle))[0] == "alice"
        # another connection with alice's token is alice: her handle works there
        async with http_client(url, mode, "token-of-alice") as alice_again:
            assert (await step(alice_again, "secret", handle))[0] == "alice"


def test_a_token_file_names_each_client(tmp_path: pathlib.Path) -> None:
    from scriptbridge._cli import LONE_TOKEN_NAME, read_tokens

    path = tmp_path / "tokens"
    path.write_text("# who may call\n\nalice  t-alice\nbob t-bob\n")
    assert read_tokens(path) == {"t-alice": "alice", "t-bob": "bob"}
    path.write_text("just-a-token\n")  # the one-token file of old
    assert read_tokens(path) == {"just-a-token": LONE_TOKEN_NAME}
    for bad, why in [
        ("", "holds no token"),
        ("# only a comment\n", "holds no token"),
        ("alice t1 extra\n", "NAME TOKEN"),
        ("alice t1\nbob t1\n", "given twice"),
    ]:
        path.write_text(bad)
        with pytest.raises(ValueError, match=why):
            read_tokens(path)


@pytest.mark.parametrize("mode", ["2026-07-28", "auto", "legacy"])
async def test_a_client_learns_the_servers_real_name_and_version(
    tmp_path: pathlib.Path, mode: str
) -> None:
    """``server/discover`` (2026-07-28; ``auto`` probes it) and ``initialize`` (legacy) give
    this server's name and installed version; ``tools/list`` is in a fixed order,
    ``run_python`` first, then the exposed tools by name, and says how long it may be cached."""
    catalog = f"catalog={sys.executable} {ROOT / 'examples' / 'catalog_server.py'}"
    args = ("--workspace", str(tmp_path), "--mcp", catalog, "--expose-tools")
    async with (
        http_serve(*args, exits_cleanly=True) as url,
        http_client(url, mode) as client,
    ):
        info = client.server_info
        if mode == "2026-07-28":  # pinned: no probe was made, so ask
            discovered = await client.session.send_discover(mode)
            info = Implementation.model_validate(discovered["_meta"][SERVER_INFO_META_KEY])
        assert info is not None and (info.name, info.version) == (
            "scriptbridge",
            version("scriptbridge"),
        )
        listed = await client.list_tools()
        names = [tool.name for tool in listed.tools]
        assert names[0] == "run_python" and names[1:] == sorted(names[1:]) and len(names) > 2
        if mode != "legacy":
            assert listed.ttl_ms is not None and listed.ttl_ms > 0


async def test_a_call_granted_a_slot_is_not_counted_as_waiting(tmp_path: pathlib.Path) -> None:
    """One slot, a queue of one: A holds the slot, B waits for it. A lets it go, so B has it
    (B's task not yet resumed): the queue is empty, so C must wait in it, not be refused as
    busy. It was, while B was still counted as waiting (the flake of serve's concurrency test:
    a cancelled run let its slot go as two new calls came)."""
    from scriptbridge._serve import Busy

    async with Bridge(tmp_path / "ws") as bridge:
        served = RunPythonServer(bridge, max_concurrent=1, max_queued=1)
        release_a = await served._take_slot()
        got: list[str] = []

        async def take(name: str) -> None:
            try:
                release = await served._take_slot()
            except Busy:
                got.append(f"{name} busy")
                return
            got.append(f"{name} has it")
            release()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(take, "B")
            await trio.testing.wait_all_tasks_blocked()  # B waits in the queue
            release_a()  # B is granted the slot; its task hasn't run yet
            with trio.fail_after(10):
                await take("C")  # asks before B's task runs: waits for B to let it go
        assert got == ["B has it", "C has it"], got
