"""LangChain v1 ``create_agent`` + ``MemoryMiddleware`` and LangGraph ``StateGraph`` +
``LangGraphMemory``, run for real against a mocked OpenAI transport (issue 11)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import SecretStr

from memory_inject import TurnOrigin
from tests import _frameworks as fw

if TYPE_CHECKING:
    from adapters.langchain import MemoryMiddleware, langchain_tools
    from adapters.langgraph import LangGraphMemory, MemoryState, place_block
else:
    from memory_inject.adapters.langchain import MemoryMiddleware, langchain_tools
    from memory_inject.adapters.langgraph import LangGraphMemory, MemoryState, place_block


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"looked up {q}"


def model(server: fw.ChatServer) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", api_key=SecretStr("test"), http_client=server.client())


THREAD: Any = {"configurable": {"thread_id": "t1"}}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    yield from fw.facts_store(tmp_path)


def checkpointed(server: fw.ChatServer, memory: MemoryMiddleware, tools: list[Any]) -> Any:
    """A ``create_agent`` graph with the middleware and an in-memory checkpointer."""
    return create_agent(
        model(server),
        tools,
        system_prompt=fw.SYSTEM,
        middleware=[memory],
        checkpointer=InMemorySaver(),
    )


def ask(graph: Any, questions: Any, config: Any = None) -> None:
    """One ``invoke`` per question on thread ``t1``."""
    for q in questions:
        graph.invoke({"messages": [HumanMessage(q)]}, config or THREAD)


class TestMiddlewareToolLoop:
    def test_three_turns_block_on_user_side_system_untouched_one_event_each(
        self, store: Any
    ) -> None:
        """Each of 3 turns (a tool call, then an answer) gets one event and the block on the
        user's message of both model calls; the system prompt is sent as given."""
        server = fw.ChatServer()
        graph = checkpointed(server, MemoryMiddleware(store, fw.AGENT, sessions=["u1"]), [lookup])
        with fw.events() as rec:
            ask(graph, fw.QUESTIONS[:3])
        fw.assert_chat_tool_loop(server, rec, 3)
        # the tool-loop request of a turn starts with the exact bytes of the turn's first one
        for first, second in zip(server.bodies[::2], server.bodies[1::2], strict=True):
            fw.assert_each_starts_with_previous(
                [json.loads(first)["messages"], json.loads(second)["messages"]]
            )

    def test_prefix_before_newest_user_message_is_byte_identical_over_five_turns(
        self, store: Any
    ) -> None:
        """With a checkpointer, the request prefix before the newest user message of turn N
        extends turn N-1's byte for byte, and holds no earlier block (the default strips)."""
        server = fw.ChatServer()
        graph = checkpointed(server, MemoryMiddleware(store, fw.AGENT, sessions=["u1"]), [])
        ask(graph, fw.QUESTIONS)
        firsts = fw.first_requests(server)
        assert 5 == len(firsts)
        fw.assert_prefix_stable(firsts)
        assert 1 == json.dumps(firsts[-1]).count(fw.BLOCK_START)
        state = graph.get_state(THREAD).values
        assert all(fw.BLOCK_START not in m.text for m in state["messages"])

    def test_earlier_blocks_keep_makes_each_request_start_with_the_previous_one(
        self, store: Any
    ) -> None:
        """``earlier_blocks="keep"`` writes the block into the checkpointed message (same id), so
        turn N's request starts with all of turn N-1's request."""
        server = fw.ChatServer()
        memory = MemoryMiddleware(store, fw.AGENT, sessions=["u1"], earlier_blocks="keep")
        graph = checkpointed(server, memory, [])
        ids = [f"id-{i}" for i in range(len(fw.QUESTIONS))]
        for q, msg_id in zip(fw.QUESTIONS, ids, strict=True):
            graph.invoke({"messages": [HumanMessage(q, id=msg_id)]}, THREAD)
        fw.assert_each_starts_with_previous(fw.first_requests(server))
        humans = [m for m in graph.get_state(THREAD).values["messages"] if m.type == "human"]
        assert ids == [m.id for m in humans]
        assert all(m.text.startswith(fw.BLOCK_START) for m in humans)

    def test_agent_run_by_a_tool_is_a_sub_turn_without_the_parent_block(self, store: Any) -> None:
        """A tool that invokes a child agent with the same middleware: the child's request has
        no block and its turn is one ``sub_turn`` event of its own."""
        server = fw.ChatServer()
        memory = MemoryMiddleware(store, fw.AGENT, sessions=["user_u1"])
        child = create_agent(model(server), [], system_prompt="child", middleware=[memory])

        @tool
        def ask_child(q: str) -> str:
            """Ask the child agent."""
            out = child.invoke({"messages": [{"role": "user", "content": q}]})
            return str(out["messages"][-1].text)

        parent = create_agent(
            model(server), [ask_child], system_prompt=fw.SYSTEM, middleware=[memory]
        )
        with fw.events() as rec:
            parent.invoke({"messages": [{"role": "user", "content": fw.QUESTIONS[0]}]})
        child_requests = [r for r in server.requests if r["messages"][0]["content"] == "child"]
        assert 1 == len(child_requests)
        assert fw.CHILD_QUESTION == fw.user_text(child_requests[0]["messages"][-1])
        assert 1 == len(rec.recalls) and 1 == len(rec.skips)
        assert "sub_turn" == rec.skips[0].reason

    def test_async_agent_gets_one_event_and_the_block(self, store: Any) -> None:
        """``ainvoke`` takes the async hooks: one event, the block on the user's message."""
        server = fw.ChatServer()
        memory = MemoryMiddleware(store, fw.AGENT, sessions=["user_u1"])
        llm = ChatOpenAI(
            model="gpt-4o-mini", api_key=SecretStr("test"), http_async_client=server.aclient()
        )
        graph = create_agent(llm, [lookup], system_prompt=fw.SYSTEM, middleware=[memory])
        with fw.events() as rec:
            asyncio.run(graph.ainvoke({"messages": [{"role": "user", "content": fw.QUESTIONS[0]}]}))
        assert 1 == len(rec.recalls)
        assert all(
            fw.user_text(r["messages"][fw.last_user_index(r["messages"])]).startswith(
                fw.BLOCK_START
            )
            for r in server.requests
        )

    def test_a_failing_store_never_fails_the_run(self, store: Any) -> None:
        """A store that raises gives a request without a block and one failed event."""
        server = fw.ChatServer()
        memory = MemoryMiddleware(store, fw.AGENT, sessions=["user_u1"])
        store.close()
        graph = create_agent(model(server), [], system_prompt=fw.SYSTEM, middleware=[memory])
        with fw.events() as rec:
            out = graph.invoke({"messages": [{"role": "user", "content": fw.QUESTIONS[0]}]})
        assert out["messages"][-1].text.startswith("answer")
        assert [False] == [e.success for e in rec.recalls]
        assert fw.QUESTIONS[0] == fw.user_text(server.requests[0]["messages"][-1])

    def test_a_wrong_store_is_refused_at_construction(self) -> None:
        """A path instead of a store is a ``TypeError`` naming what was passed."""
        with pytest.raises(TypeError, match="'store' must be a memory store"):
            MemoryMiddleware("m.db", fw.AGENT)  # type: ignore[arg-type]


class TestStateGraphNode:
    def build(
        self, server: fw.ChatServer, memory: LangGraphMemory, tools: list[Any], system: str
    ) -> Any:
        llm = model(server).bind_tools(tools) if tools else model(server)

        def call_model(state: MemoryState) -> dict[str, Any]:
            return {"messages": [llm.invoke([SystemMessage(system), *memory.messages(state)])]}

        builder = StateGraph(MemoryState)
        builder.add_node("memory", memory.node)
        builder.add_node("model", call_model)
        builder.add_node("tools", ToolNode(tools or [lookup], wrap_tool_call=memory.wrap_tool_call))
        builder.add_edge(START, "memory")
        builder.add_edge("memory", "model")
        builder.add_conditional_edges("model", tools_condition, ["tools", END])
        builder.add_edge("tools", "model")
        return builder.compile(checkpointer=InMemorySaver())

    def test_node_renders_once_per_invoke_and_prefix_stays_stable(self, store: Any) -> None:
        """Five checkpointed turns through a hand-built graph: one event per turn, the block on
        the newest user message only, the prefix before it byte-identical turn to turn."""
        server = fw.ChatServer()
        memory = LangGraphMemory(
            store, fw.AGENT, sessions=lambda config: [config["configurable"]["thread_id"]]
        )
        graph = self.build(server, memory, [lookup], fw.SYSTEM)
        with fw.events() as rec:
            ask(graph, fw.QUESTIONS, {"configurable": {"thread_id": "user_u1"}})
        assert 5 == len(rec.recalls)
        assert [("user_u1",)] * 5 == [tuple(e.sessions) for e in rec.recalls]
        fw.assert_prefix_stable(fw.first_requests(server))
        for body in server.requests:
            messages = body["messages"]
            assert {"role": "system", "content": fw.SYSTEM} == messages[0]
            assert fw.user_text(messages[fw.last_user_index(messages)]).startswith(fw.BLOCK_START)

    def test_a_graph_run_by_a_tool_is_a_sub_turn(self, store: Any) -> None:
        """A ``ToolNode`` tool (wrapped) that invokes a child graph with the same node: the
        child's request has no block and its turn is one ``sub_turn`` event."""
        server = fw.ChatServer()
        memory = LangGraphMemory(store, fw.AGENT, sessions=["u1"])
        child = self.build(server, memory, [], "child")

        @tool
        def ask_child(q: str) -> str:
            """Ask the child graph."""
            out = child.invoke(
                {"messages": [HumanMessage(q)]}, {"configurable": {"thread_id": "c"}}
            )
            return str(out["messages"][-1].text)

        parent = self.build(server, memory, [ask_child], fw.SYSTEM)
        with fw.events() as rec:
            parent.invoke({"messages": [HumanMessage(fw.QUESTIONS[0])]}, THREAD)
        [child_body] = [b for b in server.requests if b["messages"][0]["content"] == "child"]
        assert fw.CHILD_QUESTION == fw.user_text(child_body["messages"][-1])
        assert 1 == len(rec.recalls) and ["sub_turn"] == [e.reason for e in rec.skips]


class TestPlaceBlock:
    def test_ids_and_other_messages_are_kept(self) -> None:
        """The placed message is a copy with the same id; the others are the same objects."""
        system, human = SystemMessage("sys", id="s"), HumanMessage("hi there", id="h1")
        out = place_block([system, human], "[Memory context]\n- x\n\n")
        assert out[0] is system
        assert "h1" == out[1].id and "[Memory context]\n- x\n\nhi there" == out[1].content
        assert "hi there" == human.content

    def test_list_content_gets_a_first_text_block_and_placing_twice_adds_nothing(self) -> None:
        """Multimodal content keeps its blocks; a message that starts with a block is left."""
        human = HumanMessage([{"type": "text", "text": "look"}], id="h")
        once = place_block([human], "[Memory context]\n- x\n\n")
        assert [
            {"type": "text", "text": "[Memory context]\n- x\n\n"},
            {"type": "text", "text": "look"},
        ] == once[0].content
        assert once[0] is place_block(once, "[Memory context]\n- y\n\n")[0]

    def test_origin_is_sub_turn_inside_a_marked_turn(self, store: Any) -> None:
        """A run begun while the adapter's tool mark is set is a sub-turn."""
        memory = LangGraphMemory(store, fw.AGENT)
        with memory.running(None):
            assert TurnOrigin.SUB_TURN == memory.begin(fw.QUESTIONS[0]).origin
        assert TurnOrigin.INTERACTIVE == memory.begin(fw.QUESTIONS[0]).origin


class TestLangChainTools:
    def test_memory_tools_are_sent_with_the_core_schema_and_run_through_the_core(
        self, store: Any
    ) -> None:
        """``langchain_tools`` serialises the core's name, description and JSON schema, and the
        model's call reaches the core, whose text is the tool message."""
        core, server = fw.tool_call_setup(fw.ChatServer)
        graph = create_agent(
            model(server),
            langchain_tools(core),
            system_prompt=fw.SYSTEM,
            middleware=[MemoryMiddleware(store, fw.AGENT)],
        )
        graph.invoke({"messages": [HumanMessage(fw.QUESTIONS[0])]})
        spec = fw.RECALL_SPEC
        expected = {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        }
        assert [{"type": "function", "function": expected}] == server.requests[0]["tools"]
        assert [("memory_recall", {"query": "deploy target"})] == core.calls
        assert "recalled: deploy target" == server.requests[1]["messages"][-1]["content"]


class TestNeverFailsTheTurn:
    def test_a_placement_bug_sends_the_request_unchanged(
        self, store: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """If placing the block raises, the model call goes out without it and the run answers."""
        fw.break_placement(monkeypatch, "langchain")
        server = fw.ChatServer()
        graph = create_agent(
            model(server),
            [],
            system_prompt=fw.SYSTEM,
            middleware=[MemoryMiddleware(store, fw.AGENT)],
        )
        out = graph.invoke({"messages": [HumanMessage(fw.QUESTIONS[0])]})
        assert out["messages"][-1].text.startswith("answer")
        assert fw.QUESTIONS[0] == fw.user_text(server.requests[0]["messages"][-1])

    def test_a_resumed_turn_renders_nothing_again(self, store: Any) -> None:
        """The same human message seen again (an interrupt resumed) gives no update, no event."""
        memory = LangGraphMemory(store, fw.AGENT)
        state: dict[str, Any] = {"messages": [HumanMessage(fw.QUESTIONS[0], id="h1")]}
        with fw.events() as rec:
            first = memory.update(state)
            again = memory.update({**state, **first})
        assert "h1" == first["memory_block_for"] and first["memory_block"]
        assert {} == again
        assert 1 == len(rec.recalls)


class TestOptions:
    def test_bad_earlier_blocks_and_sessions_are_refused_naming_the_value(self, store: Any) -> None:
        """``earlier_blocks`` outside keep/strip and a bare string as ``sessions`` are errors."""
        with pytest.raises(ValueError, match=r"'earlier_blocks' must be one of .* \(got 'all'\)"):
            LangGraphMemory(store, fw.AGENT, earlier_blocks="all")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="'sessions' must be a list of session ids"):
            LangGraphMemory(store, fw.AGENT, sessions="u1")

    def test_async_graph_node_renders_once(self, store: Any) -> None:
        """``anode`` in an ``ainvoke`` graph: one event, the block on the user's message."""
        server = fw.ChatServer()
        memory = LangGraphMemory(store, fw.AGENT, sessions=["u1"])
        llm = ChatOpenAI(
            model="gpt-4o-mini", api_key=SecretStr("test"), http_async_client=server.aclient()
        )

        async def call_model(state: MemoryState) -> dict[str, Any]:
            return {"messages": [await llm.ainvoke(memory.messages(state))]}

        builder = StateGraph(MemoryState)
        builder.add_node("memory", memory.anode)
        builder.add_node("model", call_model)
        builder.add_edge(START, "memory")
        builder.add_edge("memory", "model")
        graph = builder.compile()
        with fw.events() as rec:
            asyncio.run(graph.ainvoke({"messages": [HumanMessage(fw.QUESTIONS[0])]}))
        assert 1 == len(rec.recalls)
        assert fw.user_text(server.requests[0]["messages"][-1]).startswith(fw.BLOCK_START)
