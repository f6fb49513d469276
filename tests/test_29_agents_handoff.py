"""A handoff is part of its run's turn: one recall, one block, whatever the handoff's input
filter keeps (issue 29). The SDK runs for real; the models are its ``ScriptedModel``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from agents import Agent, HandoffInputData, Runner, function_tool, handoff, set_tracing_disabled
from agents.extensions import handoff_filters
from agents.testing import ScriptedModel, assistant_message, function_call

from tests import _frameworks as fw

if TYPE_CHECKING:
    from adapters.openai_agents import AgentsMemory
else:
    from memory_inject.adapters.openai_agents import AgentsMemory


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    yield from fw.facts_store(tmp_path)


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)


def question_only(data: HandoffInputData) -> HandoffInputData:
    """A handoff filter that passes the user's question on and nothing else."""
    return data.clone(pre_handoff_items=(), new_items=())


FILTERS: dict[str, Any] = {
    "no filter": None,
    "remove_all_tools": handoff_filters.remove_all_tools,
    "question only": question_only,
}


def hands_off(to: str, call_id: str = "c1") -> ScriptedModel:
    """A model that hands off to ``to`` on its only call."""
    return ScriptedModel([[function_call(f"transfer_to_{to}", "{}", call_id=call_id)]])


def answers(text: str = "done") -> ScriptedModel:
    """A model that answers once."""
    return ScriptedModel([[assistant_message(text)]])


def run(agent: Agent[Any], question: str, memory: AgentsMemory, mode: str) -> None:
    """One run of ``agent`` by ``Runner.run``, ``Runner.run_sync`` or ``Runner.run_streamed``."""
    config = memory.run_config()
    if mode == "sync":
        loop = asyncio.new_event_loop()  # run_sync runs on the thread's loop and leaves it open
        asyncio.set_event_loop(loop)
        try:
            Runner.run_sync(agent, question, run_config=config)
        finally:
            loop.close()
            asyncio.set_event_loop(None)
        return

    async def go() -> None:
        if mode == "async":
            await Runner.run(agent, question, run_config=config)
            return
        result = Runner.run_streamed(agent, question, run_config=config)
        async for _ in result.stream_events():
            pass

    asyncio.run(go())


def newest_user_text(model: ScriptedModel) -> str:
    """The text of the newest user message of the model's only call."""
    [call] = model.calls
    [*_, item] = [i for i in call.input if isinstance(i, dict) and i.get("role") == "user"]
    return fw.user_text(item)


MODES = ["async", "sync", "streamed"]


class TestHandoffIsOneTurn:
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("name", list(FILTERS))
    def test_one_recall_and_the_same_block_in_both_agents(
        self, store: Any, mode: str, name: str
    ) -> None:
        """A hands off to B in one run: one ``memory_recall``, no skip, and B's request holds
        A's block once, in front of the question; a filter that kept the question alone made
        B's call a new turn (a second recall, or a ``sub_turn`` without the block)."""
        memory = AgentsMemory(store, fw.AGENT, sessions=["user_u1"])
        b_model, a_model = answers(), hands_off("b")
        b = Agent(name="b", instructions="B", model=b_model)
        target = b if FILTERS[name] is None else handoff(b, input_filter=FILTERS[name])
        a = Agent(name="a", instructions="A", model=a_model, handoffs=[target])
        with fw.events() as rec:
            run(a, fw.QUESTIONS[0], memory, mode)
        assert (1, []) == (len(rec.recalls), rec.skips)
        a_text, b_text = newest_user_text(a_model), newest_user_text(b_model)
        assert a_text.startswith(fw.BLOCK_START) and a_text.endswith(fw.QUESTIONS[0])
        assert a_text == b_text
        assert 1 == b_text.count(fw.BLOCK_START)
        assert "B" == b_model.calls[0].system_instructions

    @pytest.mark.parametrize("mode", MODES)
    def test_a_chain_of_filtered_handoffs_is_one_turn(self, store: Any, mode: str) -> None:
        """A -> B -> C, each handoff keeping the question alone: one recall, C gets the block."""
        memory = AgentsMemory(store, fw.AGENT)
        c_model = answers()
        c = Agent(name="c", instructions="C", model=c_model)
        b = Agent(
            name="b",
            instructions="B",
            model=hands_off("c", "c2"),
            handoffs=[handoff(c, input_filter=question_only)],
        )
        a = Agent(
            name="a",
            instructions="A",
            model=hands_off("b"),
            handoffs=[handoff(b, input_filter=question_only)],
        )
        with fw.events() as rec:
            run(a, fw.QUESTIONS[0], memory, mode)
        assert (1, []) == (len(rec.recalls), rec.skips)
        assert newest_user_text(c_model).startswith(fw.BLOCK_START)


class TestNewRunsStillRender:
    @pytest.mark.parametrize("mode", MODES)
    def test_the_same_question_run_twice_renders_twice(self, store: Any, mode: str) -> None:
        """Two runs of the same question (A hands off to B, filtered) are two turns: the second
        run's first call is not taken for the first run's handoff."""
        memory = AgentsMemory(store, fw.AGENT)

        def agent() -> Agent[Any]:
            b = Agent(name="b", instructions="B", model=answers())
            target = handoff(b, input_filter=question_only)
            return Agent(name="a", instructions="A", model=hands_off("b"), handoffs=[target])

        with fw.events() as rec:
            run(agent(), fw.QUESTIONS[0], memory, mode)
            run(agent(), fw.QUESTIONS[0], memory, mode)
        assert (2, []) == (len(rec.recalls), rec.skips)


class TestSubTurns:
    @pytest.mark.parametrize("mode", MODES)
    def test_a_handoff_inside_a_tools_run_stays_one_sub_turn(self, store: Any, mode: str) -> None:
        """A tool runs a child that hands off (keeping the user's own question alone): the
        child's run is one ``sub_turn`` and neither child agent gets the parent's block."""
        memory = AgentsMemory(store, fw.AGENT, sessions=["user_u1"])
        c2_model, c1_model = answers("child"), hands_off("c2", "k1")
        c2 = Agent(name="c2", instructions="C2", model=c2_model)
        c1 = Agent(
            name="c1",
            instructions="C1",
            model=c1_model,
            handoffs=[handoff(c2, input_filter=question_only)],
        )

        @function_tool
        async def ask_child(q: str) -> str:
            """Ask the child agent."""
            out = await Runner.run(c1, fw.QUESTIONS[0], run_config=memory.run_config())
            return str(out.final_output)

        parent_model = ScriptedModel(
            [[function_call("ask_child", '{"q": "x"}', call_id="p1")], [assistant_message("ok")]]
        )
        parent = Agent(name="p", instructions="P", model=parent_model, tools=[ask_child])
        with fw.events() as rec:
            run(parent, fw.QUESTIONS[0], memory, mode)
        assert 1 == len(rec.recalls)
        assert ["sub_turn"] == [e.reason for e in rec.skips]
        assert fw.QUESTIONS[0] == newest_user_text(c1_model) == newest_user_text(c2_model)
        assert fw.user_text(parent_model.calls[0].input[-1]).startswith(fw.BLOCK_START)
