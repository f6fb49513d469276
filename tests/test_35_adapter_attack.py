"""What a helper using the real SDKs and frameworks found (round 35), each fixed here.

* ``with wrap_openai(OpenAI(...)) as client:`` raised ``TypeError`` (a ``__getattr__``
  forward never reaches ``__enter__``), and ``isinstance(wrapped, openai.OpenAI)`` was False.
* ``sessions=[42]`` (a user id from a database) was taken by the client wrappers, then
  every turn went out without memory and without an event.
* ``with_memory`` in LangChain's manual tool loop saved the user's message once per model
  call.
* A lone surrogate in the user's message: the client wrapper's turn sent no event.
* ``remember()`` of such a text raised ``UnicodeEncodeError`` instead of the store's error.

Requests go through the SDKs' own HTTP clients with a mock transport.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, cast

import httpx2
import openai
import pytest
from anthropic import Anthropic, AsyncAnthropic
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from openai import AsyncOpenAI, OpenAI

from memory_inject import AgentConfig, InMemoryStore
from memory_inject.testing import recording
from tests._frameworks import events
from tests.test_11_tools import _anthropic_reply
from tests.test_29_client_copies import _CHAT, _Server, _store

if TYPE_CHECKING:
    from adapters import MemoryLoop, remember
    from adapters.anthropic_client import wrap_anthropic
    from adapters.langchain import MemoryMiddleware, with_memory
    from adapters.langgraph import LangGraphMemory
    from adapters.openai_agents import AgentsMemory
    from adapters.openai_client import wrap_openai
    from adapters.pydantic_ai import PydanticAIMemory
else:
    from memory_inject.adapters import MemoryLoop, remember
    from memory_inject.adapters.anthropic_client import wrap_anthropic
    from memory_inject.adapters.langchain import MemoryMiddleware, with_memory
    from memory_inject.adapters.langgraph import LangGraphMemory
    from memory_inject.adapters.openai_agents import AgentsMemory
    from memory_inject.adapters.openai_client import wrap_openai
    from memory_inject.adapters.pydantic_ai import PydanticAIMemory

ASK: Any = [{"role": "user", "content": "where does Alice deploy?"}]
AGENT = AgentConfig(agent="t")


def _first_content(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else json.dumps(content)


class TestTheWrapperIsTheClient:
    def test_with_closes_the_client_and_its_calls_get_the_block(self) -> None:
        server = _Server(_CHAT)
        raw = OpenAI(api_key="x", http_client=httpx2.Client(transport=httpx2.MockTransport(server)))
        wrapped = wrap_openai(raw, _store(), AGENT, sessions=["alice"])
        with recording() as rec, wrapped as client:
            assert client is wrapped  # not the SDK's own client, which has no memory
            client.chat.completions.create(model="m", messages=ASK)
        assert raw.is_closed()
        assert _first_content(server.bodies[0]).startswith("[Memory context]\n- deploy: ")
        assert [("deploy",)] == [tuple(e.rendered_keys) for e in rec.events]

    def test_anthropic_with_closes_the_client_and_its_calls_get_the_block(self) -> None:
        server = _Server(_anthropic_reply())
        raw = Anthropic(
            api_key="x", http_client=httpx2.Client(transport=httpx2.MockTransport(server))
        )
        with wrap_anthropic(raw, _store(), AGENT, sessions=["alice"]) as client:
            client.messages.create(model="c", max_tokens=5, messages=ASK)
        assert raw.is_closed()
        assert "[Memory context]\n- deploy: " in _first_content(server.bodies[0])

    @pytest.mark.parametrize("sdk", ["openai", "anthropic"])
    def test_async_with_closes_the_async_client(self, sdk: str) -> None:
        server = _Server(_CHAT if sdk == "openai" else _anthropic_reply())
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(server))

        async def main() -> Any:
            if sdk == "openai":
                raw: Any = AsyncOpenAI(api_key="x", http_client=http)
                wrapped: Any = wrap_openai(raw, _store(), AGENT, sessions=["alice"])
                async with wrapped as client:
                    assert client is wrapped
                    await client.chat.completions.create(model="m", messages=ASK)
            else:
                raw = AsyncAnthropic(api_key="x", http_client=http)
                async with wrap_anthropic(raw, _store(), AGENT, sessions=["alice"]) as client:
                    await client.messages.create(model="c", max_tokens=5, messages=ASK)
            return raw

        raw = asyncio.run(main())
        assert raw.is_closed()
        assert "[Memory context]\n- deploy: " in _first_content(server.bodies[0])

    def test_with_on_an_async_client_is_the_error_python_gives(self) -> None:
        wrapped: Any = wrap_openai(AsyncOpenAI(api_key="x"), _store(), AGENT)
        with (
            pytest.raises(TypeError, match="'AsyncOpenAI' object does not support the context"),
            wrapped,
        ):
            pass

    def test_isinstance_of_the_sdk_classes(self) -> None:
        wrapped = wrap_openai(OpenAI(api_key="x"), _store(), AGENT)
        assert isinstance(wrapped, openai.OpenAI)
        assert not isinstance(wrapped, openai.AsyncOpenAI)
        assert isinstance(wrap_anthropic(Anthropic(api_key="x"), _store(), AGENT), Anthropic)
        assert type(wrapped).__name__ == "OpenAIWithMemory"  # the wrapper it still is


BAD_SESSIONS: list[Any] = [[42], b"alice", ["ok", 3.5], [["nested"]]]


class TestSessionsCheckedWhenBuilt:
    @pytest.mark.parametrize("sessions", BAD_SESSIONS, ids=repr)
    @pytest.mark.parametrize(
        "build",
        [
            lambda s: wrap_openai(OpenAI(api_key="x"), _store(), AGENT, sessions=s),
            lambda s: wrap_anthropic(Anthropic(api_key="x"), _store(), AGENT, sessions=s),
            lambda s: with_memory(
                FakeMessagesListChatModel(responses=[]), _store(), AGENT, sessions=s
            ),
            lambda s: LangGraphMemory(_store(), AGENT, sessions=s),
            lambda s: MemoryMiddleware(_store(), AGENT, sessions=s),
            lambda s: AgentsMemory(_store(), AGENT, sessions=s),
            lambda s: PydanticAIMemory(_store(), AGENT, sessions=s),
        ],
        ids=["openai", "anthropic", "with_memory", "langgraph", "middleware", "agents", "pydantic"],
    )
    def test_a_session_that_is_not_a_str_is_refused(self, build: Any, sessions: Any) -> None:
        with pytest.raises(TypeError, match="'sessions'"):
            build(sessions)

    def test_a_sessions_function_giving_ints_is_reported_on_the_turn(self) -> None:
        model = FakeMessagesListChatModel(responses=[AIMessage("ok")])
        chat = with_memory(model, _store(), AGENT, sessions=lambda config: [cast(Any, 42)])
        with events() as rec:
            chat.invoke([HumanMessage("where does Alice deploy?")])
        assert [] == rec.recalls
        [skip] = rec.skips
        assert skip.reason == "host_callback_failed"
        assert "'sessions' items must be str or None" in skip.detail


class TestToolLoopSavesOnce:
    def test_with_memory_in_a_manual_tool_loop_saves_the_message_once(self) -> None:
        store = _store()
        model = FakeMessagesListChatModel(
            responses=[
                AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": "c1"}]),
                AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "y"}, "id": "c2"}]),
                AIMessage("prod-alice"),
            ]
        )
        chat = with_memory(model, store, AGENT, sessions=["alice"], autosave=True)
        msgs: list[Any] = [HumanMessage("where does Alice deploy?")]
        calls = 0
        while True:
            ai = chat.invoke(msgs)
            calls += 1
            msgs.append(ai)
            if not ai.tool_calls:
                break
            msgs.append(ToolMessage("runbook", tool_call_id=ai.tool_calls[0]["id"]))
        assert calls == 3
        saved = [r.content for r in store.list(category="conversation")]
        assert ["where does Alice deploy?"] == saved
        # the next question of the conversation is saved, once
        msgs.append(HumanMessage("and where does Bob deploy?"))
        model.responses.append(AIMessage("no idea"))
        model.i = 2
        chat.invoke(msgs)
        saved = sorted(r.content for r in store.list(category="conversation"))
        assert ["and where does Bob deploy?", "where does Alice deploy?"] == saved


class TestLoneSurrogates:
    def test_the_client_wrapper_turn_has_its_one_event(self) -> None:
        wrapped = wrap_openai(OpenAI(api_key="x"), _store(), AGENT, sessions=["alice"])
        memory = wrapped.memory  # type: ignore[attr-defined]
        msgs = [{"role": "user", "content": "where does Alice deploy? \ud83d"}]
        with recording() as rec:
            prepared = memory.prepare(msgs, api="openai")
        assert [("deploy",)] == [tuple(e.rendered_keys) for e in rec.events]
        assert "[Memory context]" in str(prepared.messages[0]["content"])

    def test_remember_names_the_surrogate(self) -> None:
        store = InMemoryStore()
        done = remember(store, AGENT, "my cat \ud83d is Tom")
        assert done.key is None
        assert done.error is not None and "lone surrogate" in done.error
        assert [] == store.list()


class TestMiddlewareSessionsFunction:
    """docs/adapters.md's table: ``MemoryMiddleware`` calls a sessions function with
    LangGraph's ``Runtime``; the thread id is ``runtime.execution_info.thread_id``."""

    def _ask(self, sessions: Any) -> tuple[Any, str]:
        from langchain.agents import create_agent
        from langchain_openai import ChatOpenAI
        from langgraph.checkpoint.memory import InMemorySaver

        server = _Server(_CHAT)
        http = httpx2.Client(transport=httpx2.MockTransport(server))
        store = _store()
        graph = create_agent(
            ChatOpenAI(model="m", api_key="x", http_client=http),  # type: ignore[arg-type]
            [],
            middleware=[MemoryMiddleware(store, AGENT, sessions=sessions)],
            checkpointer=InMemorySaver(),
        )
        with events() as rec:
            graph.invoke(
                {"messages": [{"role": "user", "content": "where does Alice deploy?"}]},
                {"configurable": {"thread_id": "alice"}},
            )
        return rec, json.dumps(server.bodies[-1]["messages"])

    def test_the_documented_runtime_function_gets_the_threads_block(self) -> None:
        rec, sent = self._ask(lambda runtime: [runtime.execution_info.thread_id])
        assert "prod-alice" in sent
        assert [("alice",)] == [tuple(e.sessions) for e in rec.recalls]

    def test_a_config_shaped_function_says_so_on_the_turn(self) -> None:
        rec, sent = self._ask(lambda config: [config["configurable"]["thread_id"]])
        assert "prod-alice" not in sent
        assert ["host_callback_failed"] == [e.reason for e in rec.skips]


class TestRoundsOwnFixesAttacked:
    """What a helper found attacking this round's fixes (round 35)."""

    def test_a_sessions_function_giving_none_is_no_unscoped_turn(self) -> None:
        """``None`` from a lookup that found no user made an unscoped turn, which sees every
        session's rows; ``[]`` is the way to say "no session"."""
        model = FakeMessagesListChatModel(responses=[AIMessage("ok")])
        chat = with_memory(model, _store(), AGENT, sessions=lambda config: None)  # type: ignore[arg-type,return-value]
        with events() as rec:
            chat.invoke([HumanMessage("where does Alice deploy?")])
        assert [] == rec.recalls
        assert ["host_callback_failed"] == [e.reason for e in rec.skips]

    def test_sessions_none_is_refused_when_built(self) -> None:
        with pytest.raises(TypeError, match=r"got None\); \[\] is a turn with no session"):
            wrap_openai(OpenAI(api_key="x"), _store(), AGENT, sessions=None)  # type: ignore[arg-type]

    def test_a_turns_first_prepare_after_a_host_tool_call_saves_the_message(self) -> None:
        store = InMemoryStore()
        loop = MemoryLoop(store, AGENT, autosave=True)
        call = {"id": "c1", "type": "function", "function": {"name": "profile", "arguments": "{}"}}
        history = [
            {"role": "user", "content": "where does Alice deploy?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "profile: alice"},
        ]
        with loop.turn(sessions=["alice"]):
            assert loop.inject(history).injection is not None
            loop.inject(history)  # the turn's next step saves nothing more
        assert ["where does Alice deploy?"] == [
            r.content for r in store.list(category="conversation")
        ]
