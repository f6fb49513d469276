"""pydantic-ai with ``PydanticAIMemory.capability()``, run for real through ``OpenAIChatModel``
against a mocked Chat Completions transport (issue 11)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from openai import AsyncOpenAI
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelRequest, SystemPromptPart, UserPromptPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests import _frameworks as fw

if TYPE_CHECKING:
    from adapters.pydantic_ai import PydanticAIMemory, place_block, pydantic_ai_tools
else:
    from memory_inject.adapters.pydantic_ai import PydanticAIMemory, place_block, pydantic_ai_tools


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    yield from fw.facts_store(tmp_path)


def model(server: fw.ChatServer) -> OpenAIChatModel:
    client = AsyncOpenAI(api_key="test", http_client=server.aclient())
    return OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))


def with_memory(
    server: fw.ChatServer, memory: PydanticAIMemory, tools: list[Any] | None = None
) -> Agent[None, str]:
    """An agent on the mocked model with the adapter's capability."""
    return Agent(
        model(server),
        system_prompt=fw.SYSTEM,
        tools=tools or [],
        capabilities=[memory.capability()],
    )


def lookup(q: str) -> str:
    """Look something up."""
    return f"looked up {q}"


def run_turns(agent: Agent[Any, Any], questions: Any) -> list[Any]:
    async def go() -> list[Any]:
        history: list[Any] = []
        for q in questions:
            result = await agent.run(q, message_history=history)
            history = result.all_messages()
        return history

    return asyncio.run(go())


class TestToolLoop:
    def test_three_turns_one_event_each_block_on_user_side(self, store: Any) -> None:
        """3 runs of a tool loop: one event per run, the block on the user's prompt of both
        model calls, the system prompt sent as given, no block kept in the history."""
        server = fw.ChatServer()
        memory = PydanticAIMemory(store, fw.AGENT, sessions=["user_u1"])
        agent = with_memory(server, memory, [lookup])
        with fw.events() as rec:
            history = run_turns(agent, fw.QUESTIONS[:3])
        fw.assert_chat_tool_loop(server, rec, 3)
        prompts = [
            p for m in history for p in getattr(m, "parts", []) if isinstance(p, UserPromptPart)
        ]
        assert list(fw.QUESTIONS[:3]) == [p.content for p in prompts]

    def test_prefix_before_newest_user_message_is_byte_identical_over_five_turns(
        self, store: Any
    ) -> None:
        """Each run's request before the newest user message extends the previous run's."""
        server = fw.ChatServer()
        memory = PydanticAIMemory(store, fw.AGENT, sessions=["user_u1"])
        agent = with_memory(server, memory)
        run_turns(agent, fw.QUESTIONS)
        firsts = fw.first_requests(server)
        assert 5 == len(firsts)
        fw.assert_prefix_stable(firsts)
        assert 1 == json.dumps(firsts[-1]).count(fw.BLOCK_START)

    def test_earlier_blocks_keep_makes_each_request_start_with_the_previous_one(
        self, store: Any
    ) -> None:
        """``earlier_blocks="keep"`` writes the block into the run's history, so turn N's request
        starts with all of turn N-1's."""
        server = fw.ChatServer()
        memory = PydanticAIMemory(store, fw.AGENT, sessions=["user_u1"], earlier_blocks="keep")
        agent = with_memory(server, memory)
        run_turns(agent, fw.QUESTIONS)
        fw.assert_each_starts_with_previous(fw.first_requests(server))

    def test_agent_run_by_a_tool_is_a_sub_turn_without_the_parent_block(self, store: Any) -> None:
        """A tool that runs a child agent with the same capability: no block in the child's
        request, one ``sub_turn`` event of its own."""
        server = fw.ChatServer()
        memory = PydanticAIMemory(store, fw.AGENT, sessions=["user_u1"])
        child = Agent(model(server), system_prompt="child", capabilities=[memory.capability()])

        async def ask_child(ctx: RunContext[None], q: str) -> str:
            """Ask the child agent."""
            return str((await child.run(q)).output)

        parent = with_memory(server, memory, [ask_child])
        with fw.events() as rec:
            run_turns(parent, fw.QUESTIONS[:1])
        child_bodies = [b for b in server.requests if b["messages"][0]["content"] == "child"]
        assert 1 == len(child_bodies)
        assert fw.CHILD_QUESTION == fw.user_text(child_bodies[0]["messages"][-1])
        assert 1 == len(rec.recalls) and ["sub_turn"] == [e.reason for e in rec.skips]

    def test_a_failing_store_never_fails_the_run(self, store: Any) -> None:
        """A store that raises: the run answers, without a block, and one failed event."""
        server = fw.ChatServer()
        memory = PydanticAIMemory(store, fw.AGENT)
        store.close()
        agent = with_memory(server, memory)
        with fw.events() as rec:
            run_turns(agent, fw.QUESTIONS[:1])
        assert [False] == [e.success for e in rec.recalls]
        assert fw.QUESTIONS[0] == fw.user_text(server.requests[0]["messages"][-1])


class TestPlaceBlock:
    def test_only_the_newest_prompt_changes_and_placing_twice_adds_nothing(self) -> None:
        """The system part and older prompts stay the same objects; a placed prompt is left."""
        old = ModelRequest(parts=[SystemPromptPart("sys"), UserPromptPart("first")])
        new = ModelRequest(parts=[UserPromptPart(["look", "here"])])
        out = place_block([old, new], fw.BLOCK)
        assert out[0] is old
        part = out[1].parts[0]
        assert isinstance(part, UserPromptPart) and [fw.BLOCK, "look", "here"] == part.content
        assert out[1] is place_block(out, fw.BLOCK)[1]


class TestPydanticAITools:
    def test_tools_from_schema_carry_the_core_schema_and_call_the_core(self, store: Any) -> None:
        """``Tool.from_schema`` tools: the request names the core's tool with its properties,
        and the model's call is answered with the core's text."""
        core, server = fw.tool_call_setup(fw.ChatServer)
        memory = PydanticAIMemory(store, fw.AGENT)
        run_turns(with_memory(server, memory, pydantic_ai_tools(core)), fw.QUESTIONS[:1])
        spec = fw.RECALL_SPEC
        [tool] = server.requests[0]["tools"]
        function = tool["function"]
        assert (spec.name, spec.description) == (function["name"], function["description"])
        assert spec.parameters["properties"] == function["parameters"]["properties"]
        assert [("memory_recall", {"query": "deploy target"})] == core.calls
        assert "recalled: deploy target" == server.requests[1]["messages"][-1]["content"]


class TestNeverFailsTheTurn:
    def test_a_placement_bug_sends_the_request_unchanged(
        self, store: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """If placing the block raises, the request goes out without it and the run answers."""
        fw.break_placement(monkeypatch, "pydantic_ai")
        server = fw.ChatServer()
        run_turns(with_memory(server, PydanticAIMemory(store, fw.AGENT)), fw.QUESTIONS[:1])
        assert fw.QUESTIONS[0] == fw.user_text(server.requests[0]["messages"][-1])


class TestHistoryOnly:
    def test_a_run_without_a_prompt_takes_the_query_from_its_history(self, store: Any) -> None:
        """``agent.run(message_history=...)`` with no new prompt: the newest user prompt of
        the history is the query, and it gets the block."""
        server = fw.ChatServer()
        agent = with_memory(server, PydanticAIMemory(store, fw.AGENT))
        history = [ModelRequest(parts=[UserPromptPart(fw.QUESTIONS[1])])]
        with fw.events() as rec:
            asyncio.run(agent.run(None, message_history=history))
        assert "approver" == rec.recalls[0].rendered_keys[0]
        text = fw.user_text(server.requests[0]["messages"][-1])
        assert text.startswith(fw.BLOCK_START) and text.endswith(fw.QUESTIONS[1])
