"""The OpenAI Agents SDK with ``AgentsMemory`` as ``call_model_input_filter``, run for real
against a mocked Responses API transport (issue 11)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from agents import (
    Agent,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI
from openai.types.responses import ResponseInputParam
from pydantic import TypeAdapter

from memory_inject.models import TurnOrigin
from tests import _frameworks as fw

if TYPE_CHECKING:
    from adapters.loop import MemoryLoop
    from adapters.openai_agents import AgentsMemory, agents_tools, place_block
else:
    from memory_inject.adapters.loop import MemoryLoop
    from memory_inject.adapters.openai_agents import AgentsMemory, agents_tools, place_block


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    yield from fw.facts_store(tmp_path)


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)


@function_tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"looked up {q}"


def model(server: fw.ResponsesServer) -> OpenAIResponsesModel:
    client = AsyncOpenAI(api_key="test", http_client=server.aclient())
    return OpenAIResponsesModel(model="gpt-4o-mini", openai_client=client)


def user_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in body["input"] if i.get("role") == "user"]


def text_of(item: dict[str, Any]) -> str:
    content = item["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


def prefix(body: dict[str, Any]) -> str:
    items = body["input"]
    last = max(i for i, it in enumerate(items) if it.get("role") == "user")
    return json.dumps(items[:last], sort_keys=True)[:-1]


def run_turns(agent: Agent[Any], memory: AgentsMemory, questions: Any, parts: bool) -> None:
    async def go() -> None:
        history: list[Any] = []
        for q in questions:
            content: Any = [{"type": "input_text", "text": q}] if parts else q
            result = await Runner.run(
                agent,
                [*history, {"role": "user", "content": content}],
                run_config=memory.run_config(),
            )
            history = result.to_input_list()

    asyncio.run(go())


class TestToolLoop:
    @pytest.mark.parametrize("parts", [False, True], ids=["string", "input_text"])
    def test_three_turns_one_event_each_block_on_user_side(self, store: Any, parts: bool) -> None:
        """3 runs of a tool loop: one event per run, the block on the newest user message of
        both model calls (an ``input_text`` part for part lists), instructions untouched."""
        server = fw.ResponsesServer()
        memory = AgentsMemory(store, fw.AGENT, sessions=["user_u1"])
        agent = Agent(name="a", instructions=fw.SYSTEM, model=model(server), tools=[lookup])
        with fw.events() as rec:
            run_turns(agent, memory, fw.QUESTIONS[:3], parts)
        assert 3 == len(rec.recalls) and [] == rec.skips
        assert 6 == len(server.requests)
        validate = TypeAdapter(ResponseInputParam).validate_python
        for i, body in enumerate(server.requests):
            assert fw.SYSTEM == body["instructions"]
            newest = user_items(body)[-1]
            assert text_of(newest).startswith(fw.BLOCK_START)
            assert text_of(newest).endswith(fw.QUESTIONS[i // 2])
            if parts:
                assert "input_text" == newest["content"][0]["type"]
                assert newest["content"][0]["text"].startswith(fw.BLOCK_START)
            validate(body["input"])
            assert all(fw.BLOCK_START not in text_of(u) for u in user_items(body)[:-1])

    def test_the_query_is_read_from_input_text_parts(self, store: Any) -> None:
        """An ``input_text`` question is the query: the matching fact is in the block."""
        server = fw.ResponsesServer()
        memory = AgentsMemory(store, fw.AGENT)
        agent = Agent(name="a", instructions=fw.SYSTEM, model=model(server))
        with fw.events() as rec:
            run_turns(agent, memory, [fw.QUESTIONS[1]], parts=True)
        keys = rec.recalls[0].rendered_keys
        assert "approver" == keys[0] and "standup" not in keys
        assert "Dana approves" in text_of(user_items(server.requests[0])[-1])

    def test_a_new_run_with_a_host_note_after_the_question_renders_again(self, store: Any) -> None:
        """A second ``Runner.run`` of the same question with a developer note after it was
        taken for the first run going on: the first run's block (a fact forgotten since
        included) and no event (found by a helper)."""
        server = fw.ResponsesServer()
        memory = AgentsMemory(store, fw.AGENT)
        agent = Agent(name="a", instructions=fw.SYSTEM, model=model(server))
        question: Any = {"role": "user", "content": fw.QUESTIONS[0]}
        note: Any = {"role": "developer", "content": "Answer in one line."}

        async def go() -> None:
            await Runner.run(agent, [question], run_config=memory.run_config())
            store.forget("deploy_target")
            await Runner.run(agent, [question, note], run_config=memory.run_config())

        with fw.events() as rec:
            asyncio.run(go())
        assert [("deploy_target" in r.rendered_keys) for r in rec.recalls] == [True, False]
        assert "prod-3 (eu-west-1)" not in text_of(user_items(server.requests[-1])[-1])

    def test_prefix_before_newest_user_message_is_byte_identical_over_five_turns(
        self, store: Any
    ) -> None:
        """With the history from ``to_input_list()``, each run's input before the newest user
        message extends the previous run's byte for byte."""
        server = fw.ResponsesServer()
        memory = AgentsMemory(store, fw.AGENT, sessions=["user_u1"])
        agent = Agent(name="a", instructions=fw.SYSTEM, model=model(server))
        run_turns(agent, memory, fw.QUESTIONS, parts=False)
        bodies = server.requests
        assert 5 == len(bodies)
        for before, after in itertools.pairwise(bodies):
            assert prefix(after).startswith(prefix(before))
            assert len(after["input"]) > len(before["input"])

    def test_run_started_in_a_tool_is_a_sub_turn_without_the_parent_block(self, store: Any) -> None:
        """A function tool that runs a child agent with the same filter: the child's request
        has no block and its run sends one ``sub_turn`` event of its own."""
        server = fw.ResponsesServer()
        memory = AgentsMemory(store, fw.AGENT, sessions=["user_u1"])
        child = Agent(name="child", instructions="child", model=model(server))

        @function_tool
        async def ask_child(q: str) -> str:
            """Ask the child agent."""
            out = await Runner.run(child, q, run_config=memory.run_config())
            return str(out.final_output)

        parent = Agent(name="p", instructions=fw.SYSTEM, model=model(server), tools=[ask_child])
        with fw.events() as rec:
            run_turns(parent, memory, fw.QUESTIONS[:2], parts=False)
        child_bodies = [b for b in server.requests if b["instructions"] == "child"]
        assert 2 == len(child_bodies)
        for body in child_bodies:
            assert fw.CHILD_QUESTION == text_of(user_items(body)[-1])
        assert 2 == len(rec.recalls)
        assert ["sub_turn", "sub_turn"] == [e.reason for e in rec.skips]

    def test_a_child_asked_the_users_own_question_is_still_a_sub_turn(self, store: Any) -> None:
        """Passing the user's question on word for word (a common pattern) made the child's
        run the parent's own turn again: a second ``interactive`` event and the block."""
        server = fw.ResponsesServer()
        memory = AgentsMemory(store, fw.AGENT, sessions=["user_u1"])
        child = Agent(name="child", instructions="child", model=model(server))

        @function_tool
        async def ask_child(q: str) -> str:
            """Ask the child agent."""
            out = await Runner.run(child, fw.QUESTIONS[0], run_config=memory.run_config())
            return str(out.final_output)

        parent = Agent(name="p", instructions=fw.SYSTEM, model=model(server), tools=[ask_child])
        with fw.events() as rec:
            run_turns(parent, memory, fw.QUESTIONS[:1], parts=False)
        [child_body] = [b for b in server.requests if b["instructions"] == "child"]
        assert fw.QUESTIONS[0] == text_of(user_items(child_body)[-1])
        assert 1 == len(rec.recalls)
        assert ["sub_turn"] == [e.reason for e in rec.skips]

    def test_another_adapters_turn_in_a_tool_is_a_sub_turn(self, store: Any) -> None:
        """A ``MemoryLoop`` turn run by a function tool of an Agents run is the run's
        ``sub_turn`` (no block, no event of its own); once the run returned, the next turn
        in the same context is ``interactive`` again."""
        server = fw.ResponsesServer()
        memory = AgentsMemory(store, fw.AGENT, sessions=["user_u1"])
        loop = MemoryLoop(store, fw.AGENT)
        seen: list[Any] = []

        @function_tool
        def ask_loop(q: str) -> str:
            """Ask the loop's agent."""
            result = loop.inject([{"role": "user", "content": fw.QUESTIONS[1]}])
            seen.append(result)
            return "asked"

        parent = Agent(name="p", instructions=fw.SYSTEM, model=model(server), tools=[ask_loop])

        async def go() -> Any:
            await Runner.run(parent, fw.QUESTIONS[0], run_config=memory.run_config())
            return loop.inject([{"role": "user", "content": fw.QUESTIONS[1]}])

        with fw.events() as rec:
            after = asyncio.run(go())
        [inside] = seen
        assert (TurnOrigin.SUB_TURN, "") == (inside.injection.origin, inside.block)
        assert TurnOrigin.INTERACTIVE == after.injection.origin and after.block
        assert 2 == len(rec.recalls)
        assert after.injection.turn.turn_id == rec.recalls[1].turn_id

    def test_a_run_inside_a_loop_turn_leaves_that_turn_open(self, store: Any) -> None:
        """An Agents run inside a ``MemoryLoop`` turn is its ``sub_turn``, and once it
        returned the code is in the loop's turn still: a sub-agent asked after it is
        a ``sub_turn`` too, not a new interactive turn with the user's memory."""
        server = fw.ResponsesServer()
        memory = AgentsMemory(store, fw.AGENT, sessions=["user_u1"])
        loop, sub = MemoryLoop(store, fw.AGENT), MemoryLoop(store, fw.AGENT)
        child = Agent(name="child", instructions="child", model=model(server))

        async def go() -> tuple[Any, Any]:
            async with loop.aturn(sessions=["user_u1"]) as outer:
                await loop.aprepare([{"role": "user", "content": fw.QUESTIONS[0]}])
                await Runner.run(child, fw.QUESTIONS[1], run_config=memory.run_config())
                later = await sub.ainject([{"role": "user", "content": fw.QUESTIONS[2]}])
            return outer, later

        with fw.events() as rec:
            outer, later = asyncio.run(go())
        assert (TurnOrigin.SUB_TURN, "") == (later.injection.origin, later.block)
        assert [outer.turn_id] == [e.turn_id for e in rec.recalls]
        # the child run's and the sub-agent's
        assert ["sub_turn", "sub_turn"] == [e.reason for e in rec.skips]

    def test_earlier_blocks_keep_is_refused(self, store: Any) -> None:
        """The SDK drops what a filter returns, so keeping blocks cannot be honoured."""
        with pytest.raises(ValueError, match="'earlier_blocks' must be 'strip'"):
            AgentsMemory(store, fw.AGENT, earlier_blocks="keep")


class TestPlaceBlock:
    def test_string_and_parts_and_idempotence(self) -> None:
        """A string gets a prefix, a part list a first ``input_text`` part, a placed one nothing."""
        items: list[Any] = [{"role": "user", "content": "hi"}]
        assert fw.BLOCK + "hi" == place_block(items, fw.BLOCK)[0]["content"]
        parts: list[Any] = [
            {"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}
        ]
        placed = place_block(parts, fw.BLOCK)
        assert [
            {"type": "input_text", "text": fw.BLOCK},
            {"type": "input_image", "image_url": "u"},
        ] == placed[0]["content"]
        assert placed[0] is place_block(placed, fw.BLOCK)[0]
        assert "hi" == items[0]["content"]


class TestAgentsTools:
    def test_function_tools_carry_the_core_schema_and_call_the_core(self, store: Any) -> None:
        """``FunctionTool`` objects: the Responses request holds the core's schema, and the
        model's call is answered with the core's text as the function output."""
        core, server = fw.tool_call_setup(fw.ResponsesServer)
        memory = AgentsMemory(store, fw.AGENT)
        agent = Agent(
            name="a", instructions=fw.SYSTEM, model=model(server), tools=agents_tools(core)
        )
        run_turns(agent, memory, fw.QUESTIONS[:1], parts=False)
        spec = fw.RECALL_SPEC
        [tool] = server.requests[0]["tools"]
        assert (spec.name, spec.description, spec.parameters) == (
            tool["name"],
            tool["description"],
            tool["parameters"],
        )
        assert [("memory_recall", {"query": "deploy target"})] == core.calls
        output = server.requests[1]["input"][-1]
        assert ("function_call_output", "recalled: deploy target") == (
            output["type"],
            output["output"],
        )


class TestNeverFailsTheTurn:
    def test_a_placement_bug_sends_the_input_unchanged(
        self, store: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """If the filter's placement raises, the model gets the input as the SDK built it."""
        fw.break_placement(monkeypatch, "openai_agents")
        server = fw.ResponsesServer()
        agent = Agent(name="a", instructions=fw.SYSTEM, model=model(server))
        run_turns(agent, AgentsMemory(store, fw.AGENT), fw.QUESTIONS[:1], parts=False)
        assert fw.QUESTIONS[0] == text_of(user_items(server.requests[0])[-1])
