"""The agent-framework adapters, driven as their frameworks drive them."""

from __future__ import annotations

import pathlib

from scriptbridge import SyncBridge, python_tool
from scriptbridge.integrations.langgraph import eval_fn


def test_langgraph_eval_fn_keeps_state_across_steps(tmp_path: pathlib.Path) -> None:
    """Three CodeAct steps, as create_codeact calls eval_fn: state made in step 1 is used in
    step 3, a tool is called through the bridge, and a failing step says why in its output."""
    calls: list[int] = []

    def price(item: str) -> int:
        calls.append(1)
        return {"apple": 3, "pear": 4}.get(item, 0)

    with SyncBridge(tmp_path / "ws") as bridge:
        bridge.add_tool(python_tool(price))
        evaluate = eval_fn(bridge)
        out1, new1 = evaluate("basket = ['apple', 'pear']\nprint('two items')\n", {})
        out2, new2 = evaluate("1 / 0\n", {"print": print})
        out3, new3 = evaluate(
            "total = sum(tools.price(item=i)['data'] for i in basket)\nprint(total)\n", {}
        )
    assert (out1, new1) == ("two items\n", {"basket": ["apple", "pear"]})
    assert "ZeroDivisionError" in out2 and new2 == {}
    assert (out3, new3) == ("7\n", {"total": 7})
    assert len(calls) == 2  # step 3's two calls; none made again
