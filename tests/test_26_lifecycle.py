"""Issue 26, item 1: a turn's mark never outlives its request.

Through the real SDKs (a mocked HTTP transport), the shapes a web server meets
every day: a tool that raises, a host that stops on an unanswered tool call, a
pooled worker thread or a long-lived task that serves the next user, a
sub-agent that reuses the loop, a consumer task started inside a turn. Each
failed before the issue: the next unrelated request on that thread or task was
a ``sub_turn`` with no memory, or a sub-agent got its parent's block.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from anthropic import Anthropic
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from openai import AsyncOpenAI, OpenAI
from pydantic import SecretStr

from memory_inject import AgentConfig
from memory_inject.signals import MemoryRecall, MemorySkipped
from memory_inject.storage.sqlite import SQLiteStore
from tests import _frameworks as fw
from tests._frameworks import events

if TYPE_CHECKING:
    from adapters.anthropic_client import wrap_anthropic
    from adapters.langchain import MemoryMiddleware, memory_step, with_memory
    from adapters.langgraph import LangGraphMemory
    from adapters.loop import MemoryLoop, current_turn
    from adapters.openai_agents import AgentsMemory
    from adapters.openai_client import memory_of, wrap_openai
else:
    from memory_inject.adapters.anthropic_client import wrap_anthropic
    from memory_inject.adapters.langchain import MemoryMiddleware, memory_step, with_memory
    from memory_inject.adapters.langgraph import LangGraphMemory
    from memory_inject.adapters.loop import MemoryLoop, current_turn
    from memory_inject.adapters.openai_agents import AgentsMemory
    from memory_inject.adapters.openai_client import memory_of, wrap_openai

USERS = ("ana", "ben", "cyd", "dan")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "m.db") as s:
        for user in USERS:
            s.store(
                f"{user}_deploys", f"{user}'s deploys go to the {user}-cluster", session_id=user
            )
        yield s


AGENT = AgentConfig(agent="lifecycle")


def _chat(tools_first: bool) -> Callable[[httpx2.Request], httpx2.Response]:
    """An OpenAI server: a tool call for a fresh question (when asked), text after a result."""

    def reply(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        last = body["messages"][-1]
        message: dict[str, Any]
        if tools_first and last["role"] == "user":
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            }
        else:
            message = {"role": "assistant", "content": "done"}
        return httpx2.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            },
        )

    return reply


def _sent_user_text(server: list[bytes], i: int) -> str:
    users = [m for m in json.loads(server[i])["messages"] if m["role"] == "user"]
    return str(users[-1]["content"])


class _Server:
    def __init__(self, handler: Callable[[httpx2.Request], httpx2.Response]) -> None:
        self.raw: list[bytes] = []
        self.handler = handler

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.raw.append(request.content)
        return self.handler(request)


def _handle(client: Any, user: str, tool: Callable[[], str]) -> str:
    """A request handler of a web app: the function-calling loop for one message."""
    messages: list[Any] = [{"role": "user", "content": f"where do {user}'s deploys go?"}]
    while True:
        reply = client.chat.completions.create(model="m", messages=messages)
        message = reply.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            return str(message.content)
        for call in message.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": tool()})


def _raises() -> str:
    raise RuntimeError("the tool failed")


@pytest.mark.parametrize("stop", ["tool raises", "host returns the pending call"])
def test_a_pooled_thread_is_never_left_inside_a_turn(store: SQLiteStore, stop: str) -> None:
    """One worker thread, reused: a request that ended on a tool call leaves nothing behind."""
    server = _Server(_chat(tools_first=True))
    http = httpx2.Client(transport=httpx2.MockTransport(server))

    def first() -> None:
        client = wrap_openai(OpenAI(api_key="k", http_client=http), store, AGENT, sessions=["ana"])
        messages: list[Any] = [{"role": "user", "content": "where do ana's deploys go?"}]
        reply = client.chat.completions.create(model="m", messages=messages)
        assert reply.choices[0].message.tool_calls  # the model asked for a tool ...
        if stop == "tool raises":
            _raises()  # ... which raised: the handler fails, the pool thread lives on
        # ... or the host returns the pending call to its user; the turn is left open.

    def later(user: str) -> str:
        server.handler = _chat(tools_first=False)
        client = wrap_openai(OpenAI(api_key="k", http_client=http), store, AGENT, sessions=[user])
        return _handle(client, user, lambda: "unused")

    with ThreadPoolExecutor(max_workers=1) as pool, events() as rec:
        with pytest.raises(RuntimeError) if stop == "tool raises" else nullcontext():
            pool.submit(first).result()
        answers = [pool.submit(later, u).result() for u in USERS[1:]]
    assert ["done"] * 3 == answers
    recalls = [e for e in rec.all if isinstance(e, MemoryRecall)]
    skipped = [e for e in rec.all if isinstance(e, MemorySkipped)]
    assert [] == [e.reason for e in skipped]  # before: ["sub_turn"] x 3
    assert ["ana", *USERS[1:]] == [e.sessions[0] for e in recalls]
    for i, user in enumerate(USERS[1:], start=1):
        text = _sent_user_text(server.raw, i)
        assert f"{user}-cluster" in text and "ana-cluster" not in text


def test_anthropic_a_raised_tool_leaves_the_thread_clean(store: SQLiteStore) -> None:
    def reply(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        fresh = isinstance(body["messages"][-1]["content"], str)
        content: list[dict[str, Any]] = [{"type": "text", "text": "ok"}]
        if fresh and "ana" in json.dumps(body):
            content.append({"type": "tool_use", "id": "t1", "name": "f", "input": {}})
        return httpx2.Response(
            200,
            json={
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": content,
                "stop_reason": "tool_use" if len(content) > 1 else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )

    http = httpx2.Client(transport=httpx2.MockTransport(reply))

    def ask(user: str) -> None:
        client = wrap_anthropic(
            Anthropic(api_key="k", http_client=http), store, AGENT, sessions=[user]
        )
        msg = client.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": f"{user} deploys?"}]
        )
        if any(b.type == "tool_use" for b in msg.content):
            _raises()

    with ThreadPoolExecutor(max_workers=1) as pool, events() as rec:
        with pytest.raises(RuntimeError):
            pool.submit(ask, "ana").result()
        for user in USERS[1:]:
            pool.submit(ask, user).result()
    assert ["ana", *USERS[1:]] == [e.sessions[0] for e in rec.all if isinstance(e, MemoryRecall)]
    assert not [e for e in rec.all if isinstance(e, MemorySkipped)]


def test_a_nested_agent_in_a_tool_is_still_a_sub_turn(store: SQLiteStore) -> None:
    """The rule that frees the stale marks keeps the live one: the host's loop is running."""
    server = _Server(_chat(tools_first=True))
    http = httpx2.Client(transport=httpx2.MockTransport(server))
    client = wrap_openai(OpenAI(api_key="k", http_client=http), store, AGENT, sessions=["ana"])
    inner: list[str] = []

    def tool() -> str:
        server.handler = _chat(tools_first=False)
        child = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "summarise ben's deploys"}]
        )
        inner.append(_sent_user_text(server.raw, len(server.raw) - 1))
        return str(child.choices[0].message.content)

    with events() as rec:
        assert "done" == _handle(client, "ana", tool)
    assert ["summarise ben's deploys"] == inner  # no block: neither the parent's nor one of its own
    assert ["sub_turn"] == [e.reason for e in rec.all if isinstance(e, MemorySkipped)]
    assert current_turn() is None


def test_a_long_lived_task_serves_the_next_message_with_memory(store: SQLiteStore) -> None:
    """A websocket-style task: one message's tool raised (caught); the next gets memory."""

    async def session() -> list[str]:
        server = _Server(_chat(tools_first=True))
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
        client = wrap_openai(
            AsyncOpenAI(api_key="k", http_client=http), store, AGENT, sessions=["ana"]
        )

        async def handle(text: str) -> None:
            messages: list[Any] = [{"role": "user", "content": text}]
            reply = await client.chat.completions.create(model="m", messages=messages)
            if reply.choices[0].message.tool_calls:
                _raises()

        for text in ("ana deploys?", "where do ana's deploys go now?"):
            with suppress(RuntimeError):
                await handle(text)
            server.handler = _chat(tools_first=False)
        return [_sent_user_text(server.raw, i) for i in range(len(server.raw))]

    with events() as rec:
        sent = asyncio.run(session())
    assert 2 == len([e for e in rec.all if isinstance(e, MemoryRecall)])
    assert not [e for e in rec.all if isinstance(e, MemorySkipped)]
    assert "ana-cluster" in sent[1]


@pytest.mark.parametrize("kind", ["thread", "task"])
def test_a_worker_loop_in_one_frame_serves_every_request_with_memory(
    store: SQLiteStore, kind: str
) -> None:
    """A worker whose one frame loops over a queue: the first request stops on a tool call
    (the host returns the pending call to its user); the next requests, from the same call
    in the same frame, are turns of their own. Before, the open turn's frame was still
    running, so every later request of every user was a sub-turn without memory."""
    server = _Server(_chat(tools_first=True))
    requests = [("ana", "where do ana's deploys go?"), ("ben", "where do ben's deploys go?")]
    requests.append(("cyd", "where do cyd's deploys go?"))
    if kind == "thread":
        http = httpx2.Client(transport=httpx2.MockTransport(server))
        client = wrap_openai(OpenAI(api_key="k", http_client=http), store, AGENT, sessions=USERS)

        def worker() -> None:
            for _user, text in requests:
                client.chat.completions.create(model="m", messages=_msgs(text))
                server.handler = _chat(tools_first=False)

        with events() as rec, ThreadPoolExecutor(1) as pool:
            pool.submit(worker).result()
    else:
        ahttp = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
        aclient = wrap_openai(
            AsyncOpenAI(api_key="k", http_client=ahttp), store, AGENT, sessions=USERS
        )

        async def aworker() -> None:
            for _user, text in requests:
                await aclient.chat.completions.create(model="m", messages=_msgs(text))
                server.handler = _chat(tools_first=False)

        with events() as rec:
            asyncio.run(aworker())
    assert not [e for e in rec.all if isinstance(e, MemorySkipped)]
    recalls = [e for e in rec.all if isinstance(e, MemoryRecall)]
    assert [text for _, text in requests] == [e.query_summary for e in recalls]
    for i, (user, _text) in enumerate(requests):
        assert f"{user}-cluster" in _sent_user_text(server.raw, i)


def test_another_call_in_the_turns_own_frame_is_still_a_sub_turn(store: SQLiteStore) -> None:
    """The turn is left only when the same call comes round: a sub-agent the host's loop
    runs inline, from another line of the same frame, is inside the open turn."""
    server = _Server(_chat(tools_first=True))
    http = httpx2.Client(transport=httpx2.MockTransport(server))
    client = wrap_openai(OpenAI(api_key="k", http_client=http), store, AGENT, sessions=["ana"])
    with events() as rec:
        client.chat.completions.create(model="m", messages=_msgs("where do ana's deploys go?"))
        server.handler = _chat(tools_first=False)
        client.chat.completions.create(model="m", messages=_msgs("summarise the incident"))
    assert "ana-cluster" in _sent_user_text(server.raw, 0)
    assert "summarise the incident" == _sent_user_text(server.raw, 1)
    assert ["sub_turn"] == [e.reason for e in rec.all if isinstance(e, MemorySkipped)]
    memory_of(client).end_turn()
    assert current_turn() is None


# -- MemoryLoop -------------------------------------------------------------------


def _msgs(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("way", ["same thread", "a task made in the turn", "asyncio.to_thread"])
def test_a_sub_agent_reusing_the_loop_gets_no_parent_block(store: SQLiteStore, way: str) -> None:
    loop = MemoryLoop(store, AGENT)

    async def run() -> tuple[list[Any], list[Any]]:
        async with loop.aturn(sessions=["ana"]):
            parent = await loop.aprepare(_msgs("where do ana's deploys go?"))
            child_msgs = _msgs("summarise the incident")
            if way == "same thread":
                child = loop.prepare(child_msgs)
            elif way == "a task made in the turn":
                child = await asyncio.create_task(loop.aprepare(child_msgs))
            else:
                child = await asyncio.to_thread(loop.prepare, child_msgs)
            again = await loop.aprepare(parent)  # the parent's next step: its own block again
            assert again == parent
        return parent, child

    with events() as rec:
        parent, child = asyncio.run(run())
    assert "ana-cluster" in parent[0]["content"]
    assert _msgs("summarise the incident") == child  # before: the parent's block
    assert ["sub_turn"] == [e.reason for e in rec.all if isinstance(e, MemorySkipped)]
    assert 1 == len([e for e in rec.all if isinstance(e, MemoryRecall)])


def test_a_task_started_inside_a_turn_does_not_stay_inside_it(store: SQLiteStore) -> None:
    """A consumer started on the first message serves later users with their own memory."""
    loop = MemoryLoop(store, AGENT)

    async def run() -> list[list[Any]]:
        inbox: asyncio.Queue[str | None] = asyncio.Queue()
        out: list[list[Any]] = []

        async def consumer() -> None:
            while (user := await inbox.get()) is not None:
                out.append(await loop.aprepare(_msgs(f"{user} deploys?"), sessions=[user]))

        async with loop.aturn(sessions=["ana"]):
            await loop.aprepare(_msgs("ana deploys?"))
            worker = asyncio.create_task(consumer())  # inherits the turn's context
        for user in USERS[1:]:
            await inbox.put(user)
        await inbox.put(None)
        await worker
        return out

    with events() as rec:
        out = asyncio.run(run())
    for user, sent in zip(USERS[1:], out, strict=True):
        assert f"{user}-cluster" in sent[0]["content"]  # before: no memory, or a TypeError
    assert not [e for e in rec.all if isinstance(e, MemorySkipped)]
    assert 4 == len([e for e in rec.all if isinstance(e, MemoryRecall)])


# -- item 2: one true event per turn, never a stale block --------------------------


def test_a_sessions_function_that_raises_sends_no_earlier_block(tmp_path: Path) -> None:
    """create_agent + MemoryMiddleware, sessions from the run's context: the second request
    has no user id, the function raises; the first user's private fact must not be sent."""
    with SQLiteStore(tmp_path / "m.db") as s:
        s.store("secret", "ana's door code is 4711", session_id="ana")

        def sessions(runtime: Any) -> list[str]:
            return [runtime.context["user"]]  # a request without a user id raises

        server = fw.ChatServer()
        graph = create_agent(
            ChatOpenAI(model="m", api_key=SecretStr("k"), http_client=server.client()),
            [],
            middleware=[MemoryMiddleware(s, AGENT, sessions=sessions)],
            checkpointer=InMemorySaver(),
        )
        thread: Any = {"configurable": {"thread_id": "t"}}
        with events() as rec:
            graph.invoke(
                {"messages": [HumanMessage("what is ana's door code?")]},
                thread,
                context={"user": "ana"},
            )
            graph.invoke(
                {"messages": [HumanMessage("and the door code again?")]}, thread, context={}
            )
    first, second = (json.dumps(b["messages"]) for b in server.requests)
    assert "4711" in first
    assert "4711" not in second  # before: the first turn's block, on the new message
    assert [type(e).__name__ for e in rec.all] == ["MemoryRecall", "MemorySkipped"]
    skipped = rec.all[1]
    assert "host_callback_failed" == skipped.reason
    assert (skipped.detail or "").startswith("host_callback_failed: sessions raised ")


def test_a_plain_messages_state_graph_sends_the_block_its_event_reports(
    store: SQLiteStore,
) -> None:
    """LangGraphMemory in a graph whose state has no memory_block key: the block still
    reaches the model request (before: the event said rendered, the request had none)."""
    memory = LangGraphMemory(store, AGENT, sessions=["ana"])
    sent: list[list[Any]] = []

    def call_model(state: MessagesState) -> dict[str, Any]:
        sent.append(memory.messages(state))
        return {}

    builder = StateGraph(MessagesState)
    builder.add_node("memory", memory.node)
    builder.add_node("model", call_model)
    builder.add_edge(START, "memory")
    builder.add_edge("memory", "model")
    builder.add_edge("model", END)
    graph = builder.compile()
    with events() as rec:
        graph.invoke({"messages": [HumanMessage("where do ana's deploys go?")]})
    (event,) = rec.all
    assert isinstance(event, MemoryRecall) and event.rendered_keys == ("ana_deploys",)
    assert "ana-cluster" in str(sent[0][-1].content)


# -- item 3: LangChain messages everywhere ------------------------------------------


def test_memory_loop_reads_langchain_messages(store: SQLiteStore) -> None:
    """HumanMessage / SystemMessage / AIMessage / ToolMessage: the block on the human one,
    ids kept, the other messages the same objects (before: untouched, no event)."""
    from langchain_core.messages import AIMessage, SystemMessage, ToolMessage

    loop = MemoryLoop(store, AGENT)
    msgs: list[Any] = [
        SystemMessage("you help"),
        HumanMessage("where do ana's deploys go?", id="h1"),
        AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
        ToolMessage("ok", tool_call_id="c1"),
    ]
    with events() as rec:
        out = loop.prepare(msgs, sessions=["ana"])
    (event,) = rec.all
    assert isinstance(event, MemoryRecall)
    assert isinstance(out[1], HumanMessage) and "h1" == out[1].id
    assert str(out[1].content).startswith("[Memory context]") and "ana-cluster" in str(
        out[1].content
    )
    assert all(a is b for i, (a, b) in enumerate(zip(out, msgs, strict=True)) if i != 1)


def test_with_memory_gives_a_plain_chat_model_and_a_chain_memory(store: SQLiteStore) -> None:
    from langchain_core.prompts import ChatPromptTemplate

    server = fw.ChatServer()
    model = ChatOpenAI(
        model="m",
        api_key=SecretStr("k"),
        http_client=server.client(),
        http_async_client=server.aclient(),
    )
    chat = with_memory(model, store, AGENT, sessions=["ana"])
    prompt = ChatPromptTemplate.from_messages([("system", "be brief"), ("human", "{q}")])
    chain = (
        prompt
        | memory_step(store, AGENT, sessions=lambda config: [config["metadata"]["u"]])
        | model
    )
    with events() as rec:
        chat.invoke("where do ana's deploys go?")
        chain.invoke({"q": "where do ben's deploys go?"}, {"metadata": {"u": "ben"}})
        asyncio.run(chat.ainvoke("where do ana's deploys go now?"))
        with pytest.raises(
            ValueError, match=r"[Ii]nvalid input"
        ):  # not a chat model input: the model's own error ...
            chat.invoke(42)  # ... after one event naming it
    bodies = server.requests
    users = [[m for m in b["messages"] if m["role"] == "user"][-1]["content"] for b in bodies[:3]]
    assert "ana-cluster" in users[0] and "ben-cluster" in users[1] and "ana-cluster" in users[2]
    assert {"role": "system", "content": "be brief"} == bodies[1]["messages"][0]
    kinds = [(type(e).__name__, getattr(e, "reason", None)) for e in rec.all]
    assert kinds[:3] == [("MemoryRecall", None)] * 3
    assert kinds[3] == ("MemorySkipped", "unreadable_message")


@pytest.mark.parametrize(
    "given",
    [
        [("system", "be brief"), ("human", "where do ana's deploys go?")],
        ["where do ana's deploys go?"],
    ],
    ids=["tuples", "strings"],
)
def test_with_memory_reads_the_message_likes_a_chat_model_takes(
    store: SQLiteStore, given: list[Any]
) -> None:
    """``("human", "...")`` tuples and plain strings (LangChain's own docs' shapes) got no
    memory: one ``memory_skipped`` (``unreadable_message``)."""
    server = fw.ChatServer()
    model = ChatOpenAI(model="m", api_key=SecretStr("k"), http_client=server.client())
    with events() as rec:
        with_memory(model, store, AGENT, sessions=["ana"]).invoke(given)
    [body] = server.requests
    user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    assert user.startswith("[Memory context]") and "ana-cluster" in user
    assert [type(e).__name__ for e in rec.all] == ["MemoryRecall"]


def test_four_pooled_workers_serve_120_users_with_tool_failures(tmp_path: Path) -> None:
    """The issue's shape: 4 pooled workers, a tool call in 20% of the responses, and that
    tool raises. Before: 119 of 120 requests were sub_turns without memory."""
    users = [f"user{i}" for i in range(120)]
    tools_for = {u for i, u in enumerate(users) if i % 5 == 0}
    bodies: list[dict[str, Any]] = []

    def reply(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        bodies.append(body)
        asker = body["messages"][-1]["content"].split("where do ")[-1].split("'s")[0]
        ask_tool = body["messages"][-1]["role"] == "user" and asker in tools_for
        return _chat(tools_first=ask_tool)(request)

    with SQLiteStore(tmp_path / "m.db") as s:
        for user in users:
            s.store(
                f"{user}_deploys", f"{user}'s deploys go to the {user}-cluster", session_id=user
            )
        http = httpx2.Client(transport=httpx2.MockTransport(reply))

        def request(user: str) -> str:
            client = wrap_openai(OpenAI(api_key="k", http_client=http), s, AGENT, sessions=[user])
            return _handle(client, user, _raises)

        with ThreadPoolExecutor(max_workers=4) as pool, events() as rec:
            futures = [pool.submit(request, u) for u in users]
            failed = sum(1 for f in futures if f.exception() is not None)
    assert len(tools_for) == failed
    assert not [e.reason for e in rec.all if isinstance(e, MemorySkipped)]
    assert 120 == len([e for e in rec.all if isinstance(e, MemoryRecall)]) == len(bodies)
    for body in bodies:
        (user_msg,) = [m for m in body["messages"] if m["role"] == "user"]
        who = user_msg["content"].split("where do ")[-1].split("'s")[0]
        assert user_msg["content"].startswith("[Memory context]")
        assert f"{who}-cluster" in user_msg["content"]
        others = {u for u in users if f"{u}-cluster" in user_msg["content"]}
        assert {who} == others


# -- item 4: keep never resends a forgotten fact ----------------------------------------


@pytest.mark.parametrize("change", ["forgotten", "rewritten"])
def test_keep_never_resends_a_forgotten_fact(store: SQLiteStore, change: str) -> None:
    server = _Server(_chat(tools_first=False))
    http = httpx2.Client(transport=httpx2.MockTransport(server))
    client = wrap_openai(OpenAI(api_key="k", http_client=http), store, AGENT, sessions=["ana"])
    messages: list[Any] = []
    for turn, question in enumerate(
        ["where do ana's deploys go?", "please forget that", "and what about ben?"]
    ):
        messages.append({"role": "user", "content": question})
        reply = client.chat.completions.create(model="m", messages=messages)
        messages.append(reply.choices[0].message)
        if turn == 0:
            if change == "forgotten":
                store.forget("ana_deploys")
            else:
                store.store("ana_deploys", "ana's deploys moved to the moon", session_id="ana")
    sent = [json.dumps(json.loads(raw)["messages"]) for raw in server.raw]
    assert "ana-cluster" in sent[0]
    assert "ana-cluster" not in sent[1] and "ana-cluster" not in sent[2]  # before: re-sent
    # From then on the prefix is stable again: request 3 starts with request 2's bytes.
    first_two = json.loads(server.raw[1])["messages"]
    assert json.loads(server.raw[2])["messages"][: len(first_two)] == first_two


# -- item 5: the Agents SDK through its public API only --------------------------------


def test_no_adapter_imports_a_private_name_of_a_framework() -> None:
    """Every ``from <sdk> import name`` and module path of the adapters is public."""
    import ast

    sdks = ("agents", "langchain", "langchain_core", "langgraph", "pydantic_ai", "openai")
    root = Path(__file__).resolve().parents[1] / "adapters"
    private = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in sdks:
                parts = (node.module or "").split(".")
                names = [a.name for a in node.names]
                if any(p.startswith("_") for p in parts + names):
                    private.append(f"{path.name}: from {node.module} import {names}")
    assert [] == private


def test_agents_runs_are_told_apart_through_public_api(store: SQLiteStore) -> None:
    """Without the SDK's private run object (the test above keeps it so): one event per run
    (a tool loop of two model calls), a run started in a tool is a sub_turn, and a run whose
    tool raised leaves nothing behind for the next run in the same task."""
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    server = fw.ResponsesServer()

    def model() -> Any:
        client = AsyncOpenAI(api_key="k", http_client=server.aclient())
        return OpenAIResponsesModel(model="gpt-4o-mini", openai_client=client)

    memory = AgentsMemory(store, AGENT, sessions=["ana"])
    child = Agent(name="child", instructions="child", model=model())
    fail = {"on": False}

    @function_tool
    async def ask_child(q: str) -> str:
        """Ask the child agent."""
        if fail["on"]:
            raise RuntimeError("the tool failed")
        out = await Runner.run(child, q, run_config=memory.run_config())
        return str(out.final_output)

    parent = Agent(name="p", instructions=fw.SYSTEM, model=model(), tools=[ask_child])

    async def runs() -> None:
        await Runner.run(parent, "where do ana's deploys go?", run_config=memory.run_config())
        fail["on"] = True
        with suppress(Exception):
            await Runner.run(
                parent, "where do ana's deploys go now?", run_config=memory.run_config()
            )
        fail["on"] = False
        await Runner.run(parent, "and ana's deploys today?", run_config=memory.run_config())

    with events() as rec:
        asyncio.run(runs())
    kinds = [(type(e).__name__, getattr(e, "reason", None)) for e in rec.all]
    # run 1: its own recall, then the child's sub_turn; run 2: a recall (its tool raised);
    # run 3: a recall with memory again, then its child's sub_turn.
    assert kinds == [
        ("MemoryRecall", None),
        ("MemorySkipped", "sub_turn"),
        ("MemoryRecall", None),
        ("MemoryRecall", None),
        ("MemorySkipped", "sub_turn"),
    ]
    parent_bodies = [b for b in server.requests if b["instructions"] == fw.SYSTEM]
    firsts = [b for b in parent_bodies if b["input"][-1].get("role") == "user"]
    assert 3 == len(firsts)
    assert all("ana-cluster" in json.dumps(b["input"]) for b in firsts)
