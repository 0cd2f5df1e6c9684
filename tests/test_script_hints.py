"""The habits models bring meet errors that say what to do instead: ``time.sleep``, ``open``,
a misspelt tool, a limit hit (named with its ``Limits`` field), a workspace that can't be made.

Each runs a real script in a real sandbox child through one bridge.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scriptbridge import Bridge, Limits, python_tool


def lookup(item: str) -> dict[str, int]:
    """A price."""
    return {"price": 3}


def lookup_many(items: list[str]) -> dict[str, int]:
    """Prices."""
    return {"count": len(items)}


@pytest.fixture
async def bridge(tmp_path: Path) -> AsyncIterator[Bridge]:
    async with Bridge(tmp_path / "ws", limits=Limits(wall_s=30), max_spares=0) as opened:
        opened.add_tool(python_tool(lookup))
        opened.add_tool(python_tool(lookup_many))
        yield opened


async def message_of(bridge: Bridge, source: str, limits: Limits | None = None) -> str:
    result = await bridge.run(source, limits=limits)
    assert result.error is not None, result.value
    return result.error.message


async def test_time_sleep_points_to_asyncio_sleep(bridge: Bridge) -> None:
    """``time.sleep`` isn't there; the error says to ``await asyncio.sleep``."""
    said = await message_of(bridge, "import time\ntime.sleep(0.1)")
    assert "module 'time' has no attribute 'sleep'" in said
    assert "await asyncio.sleep(" in said


async def test_a_misspelt_module_name_names_the_closest(bridge: Bridge) -> None:
    """A name a listed module doesn't offer names the closest ones it does."""
    said = await message_of(bridge, "import math\nmath.sqr(4)")
    assert "module 'math' has no attribute 'sqr'" in said and "math.sqrt" in said


async def test_open_points_to_read_text_and_write_text(bridge: Bridge) -> None:
    """``open`` isn't defined; the error says ``read_text`` and ``write_text`` instead."""
    said = await message_of(bridge, "open('refs/a.txt').read()")
    assert "name 'open' is not defined" in said
    assert "read_text(" in said and "write_text(" in said


async def test_a_script_raising_its_own_name_error_gets_no_hint(bridge: Bridge) -> None:
    """Only the interpreter's own NameError for the name is hinted at: a script's message is
    its own."""
    said = await message_of(bridge, "raise NameError('my own words')")
    assert said == "my own words"


async def test_a_misspelt_tool_names_the_closest_tools(bridge: Bridge) -> None:
    """``tools.lookpu`` and ``call_tool('lookpu', ...)`` name the closest tools offered."""
    said = await message_of(bridge, "tools.lookpu(item='a')")
    assert "no tool is named like 'lookpu'" in said and "tools.lookup" in said
    said = await message_of(bridge, "call_tool('lookpu', {'item': 'a'})")
    assert "no tool is named 'lookpu'" in said and "'lookup'" in said


async def test_a_tool_name_far_from_every_tool_lists_none(bridge: Bridge) -> None:
    """A name like no tool's says so without a guess."""
    said = await message_of(bridge, "tools.zzzzzz()")
    assert said == "no tool is named like 'zzzzzz'"


async def test_running_out_of_memory_names_the_limit(bridge: Bridge) -> None:
    """A script past its memory is told the limit it passed, and its ``Limits`` field."""
    said = await message_of(bridge, "x = 'a' * (10 ** 9)", Limits(wall_s=30, memory_mb=64))
    assert "64 MiB" in said and "Limits.memory_mb" in said


async def test_printing_too_much_names_the_limit(bridge: Bridge) -> None:
    """A script past its output is told the limit it passed, and its ``Limits`` field."""
    source = "for i in range(100000):\n    print('x' * 100)"
    said = await message_of(bridge, source, Limits(wall_s=30, max_output_bytes=10_000))
    assert "10000 bytes" in said and "Limits.max_output_bytes" in said


def test_a_workspace_that_cant_be_made_says_workspace(tmp_path: Path) -> None:
    """A workspace path that can't be created is said to be the workspace, with why."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(OSError, match="couldn't create the workspace") as refused:
        Bridge(blocker / "ws")
    assert str(blocker / "ws") in str(refused.value) and "Not a directory" in str(refused.value)


async def test_sets_and_frozensets_come_back_as_lists(bridge: Bridge) -> None:
    """A set, a frozenset or a tuple, at the top or nested, comes back as a list: plain data,
    no note."""
    result = await bridge.run("{'a': {3, 1, 2}, 'b': frozenset({4}), 'c': (5, 6)}")
    assert result.ok and result.value_note is None
    assert sorted(result.value["a"]) == [1, 2, 3]
    assert result.value["b"] == [4] and result.value["c"] == [5, 6]


async def test_a_value_that_isnt_plain_data_is_said_so(bridge: Bridge) -> None:
    """An object that isn't plain data comes back as its repr, and ``value_note`` says so,
    naming its type and what to return instead; the run is still ok."""
    result = await bridge.run("class Foo:\n    pass\nFoo()")
    assert result.ok
    assert isinstance(result.value, str) and "Foo object at" in result.value
    assert result.value_note is not None
    assert "isn't plain data (a Foo)" in result.value_note
    assert "dict, list, str, int, float, bool, bytes or None" in result.value_note


async def test_a_value_too_large_to_send_is_said_so(bridge: Bridge) -> None:
    """A value past what a message may carry comes back cut, and ``value_note`` says why."""
    limits = Limits(wall_s=30, max_message_bytes=2**17)
    result = await bridge.run("'x' * 300000", limits=limits)
    assert result.ok and isinstance(result.value, str) and len(result.value) < 2**17
    assert result.value_note is not None and "Limits.max_message_bytes" in result.value_note
