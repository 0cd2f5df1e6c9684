"""``tools.x(a, b)``: positionals bound to the tool's arguments in its schema's order; where
that can't be done, a ``TypeError`` that shows the keyword call to make.

Real scripts in real children; a host tool and a real MCP server over stdio.
"""

from __future__ import annotations

import pathlib
import sys
from collections.abc import AsyncIterator

import pytest

from scriptbridge import Bridge, Limits, McpServer, python_tool

HOSTILE = str(pathlib.Path(__file__).resolve().parent / "servers" / "hostile_server.py")


def price(item: str, count: int = 1) -> dict[str, object]:
    """The price of ``count`` of ``item``."""
    return {"item": item, "total": 3 * count}


@pytest.fixture
async def bridge(tmp_path: pathlib.Path) -> AsyncIterator[Bridge]:
    async with Bridge(tmp_path / "ws", limits=Limits(wall_s=30), max_spares=0) as opened:
        opened.add_tool(python_tool(price))
        await opened.add_server(McpServer(sys.executable, [HOSTILE], name="h", timeout_s=60))
        yield opened


async def test_positionals_bind_in_schema_order(bridge: Bridge) -> None:
    """``tools.price('apple', 2)`` is ``price(item='apple', count=2)``; positionals and
    keywords mix; the dialect's ``await`` takes them too."""
    result = await bridge.run(
        "a = tools.price('apple', 2)['data']\n"
        "b = tools.price('pear', count=3)['data']\n"
        "c = tools.price('fig')['data']\n"
        "[a, b, c]"
    )
    assert result.value == [
        {"item": "apple", "total": 6},
        {"item": "pear", "total": 9},
        {"item": "fig", "total": 3},
    ], result.error
    awaited = await bridge.run("r = await tools.price('kiwi', 4)\nreturn r['data']")
    assert awaited.value == {"item": "kiwi", "total": 12}, awaited.error


async def test_a_lone_dict_is_still_the_arguments(bridge: Bridge) -> None:
    """``tools.price({'item': 'apple'})`` passes the dict as the arguments, as before."""
    result = await bridge.run("tools.price({'item': 'apple', 'count': 5})['data']")
    assert result.value == {"item": "apple", "total": 15}, result.error


async def test_too_many_positionals_show_the_keyword_call(bridge: Bridge) -> None:
    """More positionals than the tool has arguments is a TypeError showing its keywords."""
    result = await bridge.run("tools.price('apple', 2, 3)")
    assert result.error is not None and result.error.type == "TypeError"
    assert result.error.message == (
        "tools.price() takes 2 positional arguments but 3 were given: "
        "call it as tools.price(item=..., count=...)"
    )


async def test_a_positional_and_a_keyword_for_one_argument_is_refused(bridge: Bridge) -> None:
    """An argument given both ways is a TypeError, and nothing is called."""
    result = await bridge.run("tools.price('apple', item='pear')")
    assert result.error is not None and result.error.type == "TypeError"
    assert "got multiple values for argument 'item'" in result.error.message
    assert result.tool_calls == 0


async def test_a_tool_without_named_arguments_takes_keywords_only(bridge: Bridge) -> None:
    """A server's tool whose schema names no properties can't bind positionals: the error
    says it takes none."""
    result = await bridge.run("tools.h_echo('x')")
    assert result.error is not None and result.error.type == "TypeError"
    assert "tools.h_echo() takes no positional arguments but 1 was given" in result.error.message
