"""The agent-framework adapters, driven as their frameworks drive them."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

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


def test_a_smolagents_code_agent_runs_its_steps_in_the_bridge(tmp_path: pathlib.Path) -> None:
    """A real smolagents CodeAgent, its model a scripted one (the one fake: no LLM runs
    here), takes three steps through BridgeExecutor: state from step 1 is used in step 3, a
    tool is called through the bridge, and final_answer ends the run with the right answer."""
    smolagents = pytest.importorskip("smolagents", reason="the smolagents extra isn't installed")
    from scriptbridge.integrations.smolagents import BridgeExecutor

    class Price(smolagents.Tool):  # type: ignore[misc]
        name = "price"
        description = "The price of an item, in euros."
        inputs = {"item": {"type": "string", "description": "what to price"}}  # noqa: RUF012
        output_type = "integer"

        def forward(self, item: str) -> int:
            priced.append(item)
            return {"apple": 3, "pear": 4}.get(item, 0)

    priced: list[str] = []
    actions = [
        "basket = ['apple', 'pear']\nprint(len(basket), 'items')",
        "prices = [price(item=i) for i in basket]\nprint(prices)",
        "final_answer(sum(prices) * 2)",
    ]

    class Scripted(smolagents.Model):  # type: ignore[misc]
        def generate(self, messages: Any, **kwargs: Any) -> Any:
            code = actions[min(len(seen), len(actions) - 1)]
            seen.append(code)
            return smolagents.ChatMessage(
                role="assistant", content=f"Thought: next.\n<code>\n{code}\n</code>"
            )

    seen: list[str] = []
    with SyncBridge(tmp_path / "ws") as bridge:
        agent = smolagents.CodeAgent(
            tools=[Price()], model=Scripted(), executor=BridgeExecutor(bridge), max_steps=5
        )
        answer = agent.run("What do an apple and a pear cost, twice over?")
    assert answer == 14
    assert isinstance(agent.python_executor, BridgeExecutor)  # no code ran in smolagents' own
    assert priced == ["apple", "pear"]
    assert len(seen) == 3


def test_a_smolagents_tool_called_positionally_answers(tmp_path: pathlib.Path) -> None:
    """A CodeAgent whose model calls its tool positionally, as smolagents' prompts teach
    (``price('apple')``), finishes with the right answer; a step whose tool raises says so
    with no line number outside the step's own code; its prompt offers the sandbox's imports,
    not smolagents' own."""
    smolagents = pytest.importorskip("smolagents", reason="the smolagents extra isn't installed")
    from scriptbridge.integrations.smolagents import BridgeExecutor, offer_sandbox_imports

    class Price(smolagents.Tool):  # type: ignore[misc]
        name = "price"
        description = "The price of an item, in euros."
        inputs = {"item": {"type": "string", "description": "what to price"}}  # noqa: RUF012
        output_type = "integer"

        def forward(self, item: str) -> int:
            if item == "boom":
                raise ValueError("no such item")
            return {"apple": 3, "pear": 4}.get(item, 0)

    actions = ["price('boom')", "y = price('apple') + price('pear')\nfinal_answer(y * 2)"]
    observed: list[str] = []

    class Scripted(smolagents.Model):  # type: ignore[misc]
        def generate(self, messages: Any, **kwargs: Any) -> Any:
            observed.append(str(messages[-1]))
            code = actions[min(len(observed) - 1, len(actions) - 1)]
            return smolagents.ChatMessage(
                role="assistant", content=f"Thought: next.\n<code>\n{code}\n</code>"
            )

    with SyncBridge(tmp_path / "ws") as bridge:
        agent = offer_sandbox_imports(
            smolagents.CodeAgent(
                tools=[Price()], model=Scripted(), executor=BridgeExecutor(bridge), max_steps=4
            )
        )
        answer = agent.run("What do an apple and a pear cost, twice over?")
    assert answer == 14
    assert "'queue'" not in agent.system_prompt and "'statistics'" in agent.system_prompt
    failed_step = observed[1]
    assert "price failed: no such item" in failed_step
    assert "(line -" not in failed_step


def test_a_langgraph_codeact_agent_calls_its_tools_as_its_prompt_teaches(
    tmp_path: pathlib.Path,
) -> None:
    """A real LangGraph CodeAct agent (its model a scripted one) whose code calls
    ``price(item="apple")``, as create_codeact's prompt teaches, gets the price: the tools
    given to create_codeact are callable by name in the sandbox, returning what they return;
    a failing tool is said, with no line outside the step's own code."""
    codeact = pytest.importorskip("langgraph_codeact", reason="the langgraph extra isn't installed")
    fake = pytest.importorskip("langchain_core.language_models.fake_chat_models")

    calls: list[str] = []

    def price(item: str) -> int:
        """The price of an item, in euros."""
        calls.append(item)
        return {"apple": 3, "pear": 4}[item]

    replies = [
        "```python\nprice(item='fig')\n```",
        "```python\ntotal = price(item='apple') + price('pear')\nprint('total', total)\n```",
        "The two cost 7 euros.",
    ]
    model = fake.FakeListChatModel(responses=replies)
    with SyncBridge(tmp_path / "ws") as bridge:
        agent = codeact.create_codeact(model, [price], eval_fn(bridge)).compile()
        state = agent.invoke({"messages": [{"role": "user", "content": "apple and pear?"}]})
    said = [str(message.content) for message in state["messages"]]
    assert said[2].startswith("ToolError: KeyError: 'fig'") and "(line -" not in said[2], said
    assert "total 7" in said[4], said
    assert state["context"]["total"] == 7
    assert calls == ["fig", "apple", "pear"]
