"""Many conversations at once (issue 23): 32 concurrent turns through each adapter, run for
real against a mocked OpenAI transport, sharing one store and, where an adapter is meant to
be shared, one adapter object.

Each of the 32 users has a name no other user has (``zqaa``, ``zqab``...) and one memory,
in their own session, that names them. Every turn asks the same question under the asker's
name, so the request the server received is matched to its user by the name after the
block: it must carry a block naming that user and no other, the render must send exactly
one ``memory_recall`` event for that user's session (rendering that user's memory), and no
event may be degraded or partial. The default deadline (2000 ms) applies throughout.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from openai import AsyncOpenAI, OpenAI
from pydantic import SecretStr
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from memory_inject.storage.sqlite import SQLiteStore
from tests import _frameworks as fw

if TYPE_CHECKING:
    from adapters.langchain import MemoryMiddleware, with_memory
    from adapters.langgraph import LangGraphMemory, MemoryState
    from adapters.loop import MemoryLoop
    from adapters.openai_agents import AgentsMemory
    from adapters.openai_client import wrap_openai
    from adapters.pydantic_ai import PydanticAIMemory
else:
    from memory_inject.adapters.langchain import MemoryMiddleware, with_memory
    from memory_inject.adapters.langgraph import LangGraphMemory, MemoryState
    from memory_inject.adapters.loop import MemoryLoop
    from memory_inject.adapters.openai_agents import AgentsMemory
    from memory_inject.adapters.openai_client import wrap_openai
    from memory_inject.adapters.pydantic_ai import PydanticAIMemory

USERS = 32
MODEL = "gpt-4o-mini"
#: A bound on a whole batch of turns, so a hang fails the test instead of holding the run.
BOUND = 30.0
BLOCK_END = "[/Memory context]"


def word(i: int) -> str:
    """User ``i``'s name: letters only, so the keyword index keeps it one token."""
    return "zq" + chr(ord("a") + i // 26) + chr(ord("a") + i % 26)


WORDS = tuple(word(i) for i in range(USERS))


def session(i: int) -> str:
    return f"user{i}"


def question(i: int) -> str:
    """The same question for everyone, under the asker's name: every word of it is a keyword
    of the asker's memory (a bare suffix such as a ticket number would not be, and would pull
    the score under the default relevance floor)."""
    return f"I am {word(i)}: which colour do I prefer for dashboards?"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    """One keyword-only store: one memory per user, in that user's session."""
    s = SQLiteStore(tmp_path / ".memory" / "memory.db")
    for i in range(USERS):
        s.store(
            f"pref_{i}",
            f"User {word(i)} prefers the colour teal for dashboards.",
            "core",
            session_id=session(i),
        )
    yield s
    s.close()


def gather(turn: Callable[[int], Awaitable[Any]], close: Callable[[], Awaitable[Any]]) -> None:
    """``turn(i)`` for every user, all at once on one event loop; then ``close()`` on it."""

    async def main() -> None:
        try:
            await asyncio.wait_for(asyncio.gather(*(turn(i) for i in range(USERS))), BOUND)
        finally:
            await close()

    asyncio.run(main())


def in_threads(turn: Callable[[int], Any]) -> None:
    """``turn(i)`` for every user, each in a thread of its own."""
    with ThreadPoolExecutor(max_workers=USERS) as pool:
        for future in [pool.submit(turn, i) for i in range(USERS)]:
            future.result(timeout=BOUND)


def chat_seen(server: fw.ChatServer) -> list[tuple[str, str]]:
    """Each Chat Completions request: the text of its user message, and the whole body."""
    out = []
    for raw, body in zip(server.bodies, server.requests, strict=True):
        messages = body["messages"]
        out.append((fw.user_text(messages[fw.last_user_index(messages)]), raw.decode()))
    return out


def responses_seen(server: fw.ResponsesServer) -> list[tuple[str, str]]:
    """Each Responses request: the text of its newest user item, and the whole body."""
    out = []
    for raw, body in zip(server.bodies, server.requests, strict=True):
        newest = [item for item in body["input"] if item.get("role") == "user"][-1]
        content = newest["content"]
        text = content if isinstance(content, str) else "".join(p["text"] for p in content)
        out.append((text, raw.decode()))
    return out


def names(text: str) -> list[int]:
    """The users named in ``text``."""
    return [i for i, w in enumerate(WORDS) if w in text]


def asker(text: str) -> int:
    """The user whose question ``text`` is (read after the block, if there is one)."""
    found = names(text.rsplit(BLOCK_END, 1)[-1])
    assert 1 == len(found), text
    return found[0]


def assert_each_turn_got_its_own_block(seen: list[tuple[str, str]], rec: fw.Events) -> None:
    """No degraded or partial render; one event per user's session, rendering that user's
    memory; one request per user whose block names that user and whose body names no other."""
    spoiled = [(e.sessions, e.degraded, e.partial) for e in rec.recalls if e.degraded or e.partial]
    assert [] == spoiled
    assert [] == rec.skips
    rendered: defaultdict[tuple[str | None, ...], list[tuple[str, ...]]] = defaultdict(list)
    for e in rec.recalls:
        rendered[tuple(e.sessions)].append(tuple(e.rendered_keys))
    assert {(session(i),): [(f"pref_{i}",)] for i in range(USERS)} == dict(rendered)
    assert list(range(USERS)) == sorted(asker(text) for text, _ in seen)
    wrong = {}
    for text, body in seen:
        i = asker(text)
        block = text.split(BLOCK_END)[0] if text.startswith(fw.BLOCK_START) else ""
        if [i] != names(block) or [i] != names(body):
            wrong[i] = text
    assert {} == wrong


def chat_messages(i: int) -> list[Any]:
    return [{"role": "system", "content": fw.SYSTEM}, {"role": "user", "content": question(i)}]


class TestMemoryLoop:
    def test_32_async_turns_each_get_their_own_block(self, store: SQLiteStore) -> None:
        """32 tasks, each ``aturn`` + ``aprepare`` on one loop, then the model call: every
        request carries its own user's memory, with one clean event per user."""
        server = fw.ChatServer()
        loop = MemoryLoop(store, fw.AGENT, api="openai")
        client = AsyncOpenAI(api_key="test", http_client=server.aclient())

        async def turn(i: int) -> None:
            async with loop.aturn(sessions=[session(i)]):
                request = await loop.aprepare(chat_messages(i))
            await client.chat.completions.create(model=MODEL, messages=request)

        with fw.events() as rec:
            gather(turn, client.close)
        assert_each_turn_got_its_own_block(chat_seen(server), rec)

    def test_prepares_of_one_turn_made_at_once_render_once(self, store: SQLiteStore) -> None:
        """Two model calls for one user message at once (``gather`` of two ``aprepare`` in
        one ``aturn``), for each of 32 users: one event per turn, both lists carry the same
        block. Each used to recall and send its own event."""
        loop = MemoryLoop(store, fw.AGENT, api="openai")
        blocks: dict[int, list[str]] = {}

        async def turn(i: int) -> None:
            async with loop.aturn(sessions=[session(i)]):
                a, b = await asyncio.gather(
                    loop.aprepare(chat_messages(i)), loop.aprepare(chat_messages(i))
                )
            blocks[i] = [a[-1]["content"], b[-1]["content"]]

        async def nothing() -> None:
            return None

        with fw.events() as rec:
            gather(turn, nothing)
        assert sorted((session(i),) for i in range(USERS)) == sorted(
            tuple(e.sessions) for e in rec.recalls
        )
        for i, (a, b) in blocks.items():
            assert a == b
            assert 1 == a.count(BLOCK_END)
            assert word(i) in a.split(BLOCK_END)[0]

    def test_32_threads_each_get_their_own_block(self, store: SQLiteStore) -> None:
        """32 threads, each ``turn`` + ``prepare`` on one loop, then the model call."""
        server = fw.ChatServer()
        loop = MemoryLoop(store, fw.AGENT, api="openai")

        with OpenAI(api_key="test", http_client=server.client()) as client:

            def turn(i: int) -> None:
                with loop.turn(sessions=[session(i)]):
                    request = loop.prepare(chat_messages(i))
                client.chat.completions.create(model=MODEL, messages=request)

            with fw.events() as rec:
                in_threads(turn)
        assert_each_turn_got_its_own_block(chat_seen(server), rec)


class TestOpenAIClient:
    """A wrapper's sessions are fixed, so each user has one; the SDK client and store are shared."""

    def test_32_async_creates_each_get_their_own_block(self, store: SQLiteStore) -> None:
        """32 concurrent ``chat.completions.create`` through ``AsyncOpenAI`` wrappers."""
        server = fw.ChatServer()
        client = AsyncOpenAI(api_key="test", http_client=server.aclient())
        wrapped = [
            wrap_openai(client, store, fw.AGENT, sessions=[session(i)]) for i in range(USERS)
        ]

        async def turn(i: int) -> None:
            await wrapped[i].chat.completions.create(model=MODEL, messages=chat_messages(i))

        with fw.events() as rec:
            gather(turn, client.close)
        assert_each_turn_got_its_own_block(chat_seen(server), rec)

    def test_32_threads_each_get_their_own_block(self, store: SQLiteStore) -> None:
        """32 threads calling ``chat.completions.create`` through ``OpenAI`` wrappers."""
        server = fw.ChatServer()
        with OpenAI(api_key="test", http_client=server.client()) as client:
            wrapped = [
                wrap_openai(client, store, fw.AGENT, sessions=[session(i)]) for i in range(USERS)
            ]

            def turn(i: int) -> None:
                wrapped[i].chat.completions.create(model=MODEL, messages=chat_messages(i))

            with fw.events() as rec:
                in_threads(turn)
        assert_each_turn_got_its_own_block(chat_seen(server), rec)


class TestAgentsSDK:
    def test_32_concurrent_runs_share_one_adapter(self, store: SQLiteStore) -> None:
        """32 concurrent ``Runner.run`` of one agent with one ``AgentsMemory``, the session
        read from each run's ``context``."""
        set_tracing_disabled(True)
        server = fw.ResponsesServer()
        client = AsyncOpenAI(api_key="test", http_client=server.aclient())
        model = OpenAIResponsesModel(model=MODEL, openai_client=client)
        memory = AgentsMemory(store, fw.AGENT, sessions=lambda context: [context])
        agent: Agent[Any] = Agent(name="a", instructions=fw.SYSTEM, model=model)

        async def turn(i: int) -> None:
            await Runner.run(agent, question(i), context=session(i), run_config=memory.run_config())

        with fw.events() as rec:
            gather(turn, client.close)
        assert_each_turn_got_its_own_block(responses_seen(server), rec)


def langgraph_memory(store: SQLiteStore) -> LangGraphMemory:
    """One adapter for every thread: the session is the run's ``thread_id``."""
    return LangGraphMemory(
        store, fw.AGENT, sessions=lambda config: [config["configurable"]["thread_id"]]
    )


def thread(i: int) -> Any:
    return {"configurable": {"thread_id": session(i)}}


class TestLangGraph:
    def test_32_concurrent_ainvokes_share_one_graph_and_adapter(self, store: SQLiteStore) -> None:
        """32 concurrent ``ainvoke`` of one checkpointed graph whose first node is ``anode``."""
        server = fw.ChatServer()
        memory = langgraph_memory(store)
        http = server.aclient()
        llm = ChatOpenAI(model=MODEL, api_key=SecretStr("test"), http_async_client=http)

        async def call_model(state: MemoryState) -> dict[str, Any]:
            messages = [SystemMessage(fw.SYSTEM), *memory.messages(state)]
            return {"messages": [await llm.ainvoke(messages)]}

        builder = StateGraph(MemoryState)
        builder.add_node("memory", memory.anode)
        builder.add_node("model", call_model)
        builder.add_edge(START, "memory")
        builder.add_edge("memory", "model")
        builder.add_edge("model", END)
        graph = builder.compile(checkpointer=InMemorySaver())

        async def turn(i: int) -> None:
            await graph.ainvoke({"messages": [HumanMessage(question(i))]}, thread(i))

        with fw.events() as rec:
            gather(turn, http.aclose)
        assert_each_turn_got_its_own_block(chat_seen(server), rec)

    def test_32_threads_invoke_one_graph_and_adapter(self, store: SQLiteStore) -> None:
        """32 threads, each an ``invoke`` of one checkpointed graph whose first node is ``node``."""
        server = fw.ChatServer()
        memory = langgraph_memory(store)
        with server.client() as http:
            llm = ChatOpenAI(model=MODEL, api_key=SecretStr("test"), http_client=http)

            def call_model(state: MemoryState) -> dict[str, Any]:
                messages = [SystemMessage(fw.SYSTEM), *memory.messages(state)]
                return {"messages": [llm.invoke(messages)]}

            builder = StateGraph(MemoryState)
            builder.add_node("memory", memory.node)
            builder.add_node("model", call_model)
            builder.add_edge(START, "memory")
            builder.add_edge("memory", "model")
            builder.add_edge("model", END)
            graph = builder.compile(checkpointer=InMemorySaver())

            def turn(i: int) -> None:
                graph.invoke({"messages": [HumanMessage(question(i))]}, thread(i))

            with fw.events() as rec:
                in_threads(turn)
        assert_each_turn_got_its_own_block(chat_seen(server), rec)


@dataclass(frozen=True)
class Caller:
    """The ``create_agent`` run context: who is asking."""

    user: str


def middleware(store: SQLiteStore) -> MemoryMiddleware:
    """One middleware for every run: the session is the ``Runtime``'s context."""
    return MemoryMiddleware(store, fw.AGENT, sessions=lambda runtime: [runtime.context.user])


def user_input(i: int) -> Any:
    return {"messages": [{"role": "user", "content": question(i)}]}


class TestLangChain:
    def test_32_concurrent_ainvokes_share_one_agent_and_middleware(
        self, store: SQLiteStore
    ) -> None:
        """32 concurrent ``ainvoke`` of one ``create_agent`` graph with one middleware."""
        server = fw.ChatServer()
        http = server.aclient()
        llm = ChatOpenAI(model=MODEL, api_key=SecretStr("test"), http_async_client=http)
        graph = create_agent(
            llm,
            [],
            system_prompt=fw.SYSTEM,
            middleware=[middleware(store)],
            context_schema=Caller,
        )

        async def turn(i: int) -> None:
            await graph.ainvoke(user_input(i), context=Caller(session(i)))

        with fw.events() as rec:
            gather(turn, http.aclose)
        assert_each_turn_got_its_own_block(chat_seen(server), rec)

    def test_32_threads_invoke_one_agent_and_middleware(self, store: SQLiteStore) -> None:
        """32 threads, each an ``invoke`` of one ``create_agent`` graph with one middleware."""
        server = fw.ChatServer()
        with server.client() as http:
            llm = ChatOpenAI(model=MODEL, api_key=SecretStr("test"), http_client=http)
            graph = create_agent(
                llm,
                [],
                system_prompt=fw.SYSTEM,
                middleware=[middleware(store)],
                context_schema=Caller,
            )

            def turn(i: int) -> None:
                graph.invoke(user_input(i), context=Caller(session(i)))

            with fw.events() as rec:
                in_threads(turn)
        assert_each_turn_got_its_own_block(chat_seen(server), rec)


class TestPydanticAI:
    def test_32_concurrent_runs_share_one_agent_and_capability(self, store: SQLiteStore) -> None:
        """32 concurrent ``agent.run`` of one agent with one capability, the session read
        from each run's ``deps``."""
        server = fw.ChatServer()
        client = AsyncOpenAI(api_key="test", http_client=server.aclient())
        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
        memory = PydanticAIMemory(store, fw.AGENT, sessions=lambda ctx: [ctx.deps])
        agent = PydanticAgent(
            model, deps_type=str, system_prompt=fw.SYSTEM, capabilities=[memory.capability()]
        )

        async def turn(i: int) -> None:
            await agent.run(question(i), deps=session(i))

        with fw.events() as rec:
            gather(turn, client.close)
        assert_each_turn_got_its_own_block(chat_seen(server), rec)


class TestLangChainChatModel:
    """Issue 26: ``with_memory`` on one plain chat model, the user from each call's config."""

    @staticmethod
    def _chat(server: fw.ChatServer, store: SQLiteStore) -> Any:
        model = ChatOpenAI(
            model=MODEL,
            api_key=SecretStr("test"),
            http_client=server.client(),
            http_async_client=server.aclient(),
        )
        return with_memory(
            model, store, fw.AGENT, sessions=lambda config: [config["metadata"]["user"]]
        )

    def test_32_concurrent_ainvokes_share_one_chain(self, store: SQLiteStore) -> None:
        server = fw.ChatServer()
        chat = self._chat(server, store)

        async def turn(i: int) -> None:
            await chat.ainvoke(chat_messages(i), {"metadata": {"user": session(i)}})

        async def close() -> None:
            return None

        with fw.events() as rec:
            gather(turn, close)
        assert_each_turn_got_its_own_block(chat_seen(server), rec)

    def test_32_threads_invoke_one_chain(self, store: SQLiteStore) -> None:
        server = fw.ChatServer()
        chat = self._chat(server, store)

        def turn(i: int) -> None:
            chat.invoke(chat_messages(i), {"metadata": {"user": session(i)}})

        with fw.events() as rec:
            in_threads(turn)
        assert_each_turn_got_its_own_block(chat_seen(server), rec)
