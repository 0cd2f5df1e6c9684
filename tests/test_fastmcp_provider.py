"""FastMCP's code mode on this sandbox: ``CodeMode(sandbox_provider=BridgeSandboxProvider(...))``
on a real FastMCP server, called through FastMCP's own client, each ``execute`` a fresh child
of the bridge (issue 30, item 5)."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
from typing import Any

import pytest

fastmcp = pytest.importorskip("fastmcp")

from fastmcp import Client, FastMCP  # noqa: E402
from fastmcp.exceptions import ToolError  # noqa: E402
from fastmcp.experimental.transforms.code_mode import CodeMode  # noqa: E402

from scriptbridge import Bridge  # noqa: E402
from scriptbridge.integrations.fastmcp import BridgeSandboxProvider  # noqa: E402


def server_with(bridge: Bridge, seen_pids: list[int]) -> FastMCP:
    server = FastMCP("calc")

    @server.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @server.tool
    def whoami() -> int:
        """The process this tool runs in."""
        seen_pids.append(os.getpid())
        return os.getpid()

    server.add_transform(CodeMode(sandbox_provider=BridgeSandboxProvider(bridge)))
    return server


def execute(tmp_path: pathlib.Path, *codes: str) -> list[Any]:
    """Each of ``codes`` through the server's ``execute``: its value (read from the text the
    client gets), or the ToolError."""

    async def main() -> list[Any]:
        seen: list[int] = []
        async with (
            Bridge(tmp_path / "ws") as bridge,
            Client(server_with(bridge, seen)) as client,
        ):
            names = [tool.name for tool in await client.list_tools()]
            assert "execute" in names and "add" not in names, names
            answers: list[Any] = []
            for code in codes:
                try:
                    answer = await client.call_tool("execute", {"code": code})
                except ToolError as exc:
                    answers.append(exc)
                    continue
                # as with FastMCP's own provider: a dict value comes back structured, any
                # other as its JSON text
                (block,) = answer.content
                answers.append(json.loads(block.text))
            return answers

    return asyncio.run(main())


def test_a_call_tool_script_runs_in_a_sandbox_child(tmp_path: pathlib.Path) -> None:
    """As with FastMCP's own (Monty) provider, ``call_tool`` gives a tool's structured result:
    an int tool's is ``{"result": n}``."""
    whole, three = execute(
        tmp_path,
        'return await call_tool("add", {"a": 1, "b": 2})',
        'return (await call_tool("add", {"a": 1, "b": 2}))["result"]',
    )
    assert (whole, three) == ({"result": 3}, 3)


def test_a_script_chains_calls_and_its_tools_run_in_the_host(tmp_path: pathlib.Path) -> None:
    code = (
        "total = 0\n"
        "for n in range(4):\n"
        '    total = (await call_tool("add", {"a": total, "b": n}))["result"]\n'
        'host = (await call_tool("whoami", {}))["result"]\n'
        "return [total, host]"
    )
    ((total, host),) = execute(tmp_path, code)
    assert total == 6 and host == os.getpid()  # the tool ran in the host; the script didn't


def test_a_failing_script_raises_with_its_own_line(tmp_path: pathlib.Path) -> None:
    failed, unknown, escaped = execute(
        tmp_path,
        "x = 1\nraise ValueError('no')",
        'return await call_tool("nope", {})',
        "import os\nreturn os.getpid()",
    )
    assert isinstance(failed, ToolError) and "ValueError (line 2): no" in str(failed)
    assert isinstance(unknown, ToolError) and "nope" in str(unknown)
    assert isinstance(escaped, ToolError) and "os" in str(escaped)  # the sandbox's allowlist


def test_concurrent_runs_each_reach_only_their_own_functions(tmp_path: pathlib.Path) -> None:
    """Two runs at once, each handed its own ``f``: each calls its own, and a script naming the
    carrying tool with a key it made up reaches no run's functions."""

    def returning(value: str) -> Any:
        async def f() -> str:
            await asyncio.sleep(0.2)  # both runs are in flight at once
            return value

        return f

    async def main() -> list[Any]:
        async with Bridge(tmp_path / "ws") as bridge:
            provider = BridgeSandboxProvider(bridge)
            code = "first = await f()\nsecond = await f()\nreturn first + second"
            a, b = await asyncio.gather(
                provider.run(code, external_functions={"f": returning("A")}),
                provider.run(code, external_functions={"f": returning("B")}),
            )
            forged = await bridge.run(
                "await call_tool('fastmcp.f', {'run': '0' * 32, 'args': [], 'kwargs': {}})"
            )
            assert not forged.ok and forged.error is not None
            assert "isn't offered to this run" in forged.error.message
            return [a, b]

    assert asyncio.run(main()) == ["AA", "BB"]


def test_a_function_name_a_script_cant_call_is_refused(tmp_path: pathlib.Path) -> None:
    async def main() -> None:
        async with Bridge(tmp_path / "ws") as bridge:
            provider = BridgeSandboxProvider(bridge)
            for name in ("_private", "not an identifier", "return", "sb_sandbox_call_tool"):
                with pytest.raises(ValueError, match="can't be named"):
                    await provider.run("return 1", external_functions={name: print})

    asyncio.run(main())
