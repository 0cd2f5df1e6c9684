"""Tools found on demand (``scriptbridge._tool_search``): a BM25 ranking of tool specs that is
deterministic and finds a tool by a word of its name or description, and an index of tools
within a byte budget."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scriptbridge._tool_search import ToolIndex, brief, index_lines, words
from scriptbridge._tool_spec import ToolSpec


def spec(name: str, description: str = "") -> ToolSpec:
    return ToolSpec(
        name=name,
        attribute=name.replace(".", "_").replace("-", "_"),
        description=description,
        input_schema={"type": "object"},
    )


SPECS = [
    spec("weather.get_forecast", "Forecast for a city, by day.\n\nDays: 1 to 7."),
    spec("weather.get_alerts", "Storm and flood alerts for a region."),
    spec("crm.find_customer", "Find a customer by e-mail or name."),
    spec("crm.create_invoice", "Create an invoice for a customer."),
    spec("files.read", "Read a file of the shared drive."),
    *[spec(f"filler.tool_{n:03d}", f"Filler tool number {n} about nothing.") for n in range(200)],
]


def names(found: list[ToolSpec]) -> list[str]:
    return [s.name for s in found]


def test_words_split_names_as_people_read_them() -> None:
    assert words("weather.getForecast_v2-HTTPServer") == [
        "weather", "get", "forecast", "v", "2", "http", "server",
    ]  # fmt: skip


def test_a_tool_is_found_by_a_word_of_its_description_or_name() -> None:
    index = ToolIndex(SPECS)
    assert names(index.search("storm"))[0] == "weather.get_alerts"
    assert names(index.search("invoice"))[0] == "crm.create_invoice"
    assert names(index.search("forecast city"))[0] == "weather.get_forecast"
    assert set(names(index.search("customer"))) == {"crm.find_customer", "crm.create_invoice"}
    assert index.search("zebra") == [] and index.search("") == []


def test_a_search_returns_at_most_its_limit_best_first() -> None:
    index = ToolIndex(SPECS)
    found = index.search("filler tool", limit=10)
    assert len(found) == 10
    assert names(found) == sorted(names(found))  # equal scores: name order


@given(st.text(max_size=40), st.permutations(SPECS[:5]))
def test_ranking_is_deterministic_and_order_free(query: str, shuffled: list[ToolSpec]) -> None:
    assert names(ToolIndex(SPECS[:5]).search(query)) == names(ToolIndex(shuffled).search(query))


def test_an_index_fits_its_budget_and_says_what_it_left_out() -> None:
    everything = index_lines(SPECS[:5], 10_000)  # every tool with its first line
    assert everything.splitlines()[0] == "# " + brief(SPECS[3])  # crm.create_invoice first
    assert "more" not in everything and len(everything.splitlines()) == 5
    assert brief(SPECS[0]) == "weather.get_forecast: Forecast for a city, by day."
    names = index_lines(SPECS, 5000)  # too many for first lines: every name
    assert len(names.encode()) <= 5000 and "more" not in names and ":" not in names
    assert all(spec.name in names for spec in SPECS)
    cut = index_lines(SPECS, 2000)  # too many even for names: as many as fit
    assert len(cut.encode()) <= 2000 and cut.endswith("more: search for them\n")
    shown = sum(line.count(",") + 1 for line in cut.splitlines()[:-1])
    assert f"and {len(SPECS) - shown} more" in cut


@given(st.integers(min_value=0, max_value=5000))
def test_an_index_never_passes_its_budget_by_more_than_its_last_line(budget: int) -> None:
    text = index_lines(SPECS, budget)
    last = text.splitlines(keepends=True)[-1] if text else ""
    assert len(text.encode()) <= max(budget, len(last.encode()))


# --- through a bridge and serve -------------------------------------------------------------

import pathlib  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

from mcp import Client  # noqa: E402

from scriptbridge import Bridge, python_tool  # noqa: E402
from scriptbridge._serve import INDEXED, SEARCH_TOOL, RunPythonServer  # noqa: E402


def filler(n: int) -> Callable[..., Any]:
    def tool(x: int) -> int:
        return x

    tool.__name__ = f"filler_{n:03d}"
    tool.__doc__ = f"Filler tool number {n}: it returns what it is given."
    return tool


def get_forecast(city: str, days: int = 1) -> dict[str, Any]:
    """Forecast for a city, by day (1 to 7 days)."""
    return {"city": city, "days": days, "sky": "clear"}


def get_alerts(region: str) -> list[str]:
    """Storm and flood alerts for a region."""
    return [f"storm over {region}"]


async def many_tools(bridge: Bridge) -> None:
    for tool in [get_forecast, get_alerts, *(filler(n) for n in range(200))]:
        bridge.add_tool(python_tool(tool))


async def test_a_script_finds_a_tool_and_calls_it_in_one_run(tmp_path: pathlib.Path) -> None:
    async with Bridge(tmp_path / "ws") as bridge:
        await many_tools(bridge)
        code = (
            "stubs = tools.search('storm alerts')\n"
            "name = stubs[0].split('def ')[-1].split('(')[0]\n"
            "[len(stubs), name, call_tool(name, {'region': 'north'})['data'],"
            " [l for l in tools.describe('get_forecast').splitlines() if l.startswith('def')]]"
        )
        result = await bridge.run(code)
        assert result.ok, result.error
        count, name, alerts, (signature,) = result.value
        assert (name, alerts) == ("get_alerts", ["storm over north"]) and 1 <= count <= 10
        assert signature.startswith("def get_forecast(*, city: str, days: int = 1)")
        awaited = await bridge.run("import asyncio\nlen(await tools.search('filler tool'))")
        assert awaited.value == 10  # at most ten, however many match


async def test_a_run_searches_only_the_tools_it_is_offered(tmp_path: pathlib.Path) -> None:
    async with Bridge(tmp_path / "ws") as bridge:
        await many_tools(bridge)
        found = await bridge.run("tools.search('storm')", tools=["get_forecast"])
        assert found.ok and found.value == [], found
        described = await bridge.run("tools.describe('get_alerts')", tools=["get_forecast"])
        assert described.error is not None and "no tool is named" in described.error.message
        bad = await bridge.run("tools.search(3)")
        assert bad.error is not None and bad.error.type == "TypeError"


async def test_serve_indexes_its_tools_past_the_budget_and_offers_search(
    tmp_path: pathlib.Path,
) -> None:
    """With 202 tools the stubs are past the 8 KB budget: run_python's description carries
    an index within it, and search_tools finds a tool by a word of its description."""
    async with Bridge(tmp_path / "ws") as bridge:
        await many_tools(bridge)
        served = RunPythonServer(bridge, max_concurrent=2, max_queued=4)
        async with Client(served.server) as client:
            listed = (await client.list_tools()).tools
            assert [tool.name for tool in listed] == ["run_python", SEARCH_TOOL]
            description = listed[0].description or ""
            index = description.split(INDEXED, 1)[1]
            assert len(index.encode()) <= 8192 and "get_alerts, get_forecast" in index
            found = await client.call_tool(SEARCH_TOOL, {"query": "storm"})
            assert found.structured_content is not None
            assert found.structured_content["tools"][0].startswith("get_alerts: Storm")
            full = await client.call_tool(SEARCH_TOOL, {"query": "forecast", "detail": "full"})
            assert "def get_forecast(*, city: str" in (full.structured_content or {})["tools"][0]


async def test_serve_with_few_tools_shows_them_in_full(tmp_path: pathlib.Path) -> None:
    async with Bridge(tmp_path / "ws") as bridge:
        bridge.add_tool(python_tool(get_forecast))
        served = RunPythonServer(bridge, max_concurrent=2, max_queued=4)
        async with Client(served.server) as client:
            listed = (await client.list_tools()).tools
            assert [tool.name for tool in listed] == ["run_python"]
            assert "def get_forecast(*, city: str" in (listed[0].description or "")
            refused = await client.call_tool(SEARCH_TOOL, {"query": "x"})
            assert refused.is_error
