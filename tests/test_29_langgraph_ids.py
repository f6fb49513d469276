"""LangGraph and LangChain: a message id is the host's, not a user's.

The adapters kept each turn's block in process by its human message's id alone, for a
graph whose state drops ``memory_block`` (a plain ``MessagesState``), and fell back to
that table whenever the state's own block was empty. A chat frontend that numbers each
conversation's messages gives every user a message "1": concurrent runs were sent each
other's blocks (the helper's 8 threads x 200 ``create_agent`` calls: 45-51 carried another
user's memory), while every event named the right user's block. And an edited message
(the same id, a new text: LangGraph's way to replace a message) was taken for a resumed
run: no render, no event, the old question's block on the new question.

The table is now keyed by the run's scopes, the message's id and its text; a state that
records this message's turn (its block empty too) is never looked past.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from memory_inject import AgentConfig, InMemoryStore
from memory_inject.signals import memory_recall

if TYPE_CHECKING:
    from adapters.langchain import MemoryMiddleware
    from adapters.langgraph import LangGraphMemory, MemoryState
else:
    from memory_inject.adapters.langchain import MemoryMiddleware
    from memory_inject.adapters.langgraph import LangGraphMemory, MemoryState

ASK = "what is my bank PIN hint?"


def _pins(users: range, *, every: int = 1) -> InMemoryStore:
    store = InMemoryStore()
    for i in users:
        if i % every == 0:
            store.store(f"pin_u{i}", f"User u{i}'s bank PIN hint is secret{i}.", session_id=f"u{i}")
    return store


def _by_user(config: Any) -> list[str]:
    return [config["configurable"]["user"]]


def _user(config: RunnableConfig) -> str:
    return str(config.get("configurable", {})["user"])


def _graph(state: type, memory: LangGraphMemory, model: Callable[..., Any], **kw: Any) -> Any:
    b: Any = StateGraph(state)
    b.add_node("memory", memory.node)
    b.add_node("model", model)
    b.add_edge(START, "memory")
    b.add_edge("memory", "model")
    b.add_edge("model", END)
    return b.compile(**kw)


def _both_users(graph: Any) -> None:
    """u0 and u1 ask at once, each their conversation's message "1"."""

    def run(user: str) -> None:
        graph.invoke({"messages": [HumanMessage(ASK, id="1")]}, {"configurable": {"user": user}})

    threads = [threading.Thread(target=run, args=(u,)) for u in ("u0", "u1")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)


def _leaks(sent: dict[str, str]) -> list[str]:
    """Users whose request held a PIN that is not theirs, or lacks theirs."""
    out = []
    for user, content in sent.items():
        others = [
            w for w in content.split() if w.startswith("secret") and w != f"secret{user[1:]}."
        ]
        if others:
            out.append(user)
    return out


def test_a_plain_messages_state_sends_each_user_their_own_block_under_one_message_id() -> None:
    store = _pins(range(2))
    memory = LangGraphMemory(store, AgentConfig(agent="t"), sessions=_by_user)
    both = threading.Barrier(2)
    sent: dict[str, str] = {}

    def call_model(state: Any, config: RunnableConfig) -> dict[str, Any]:
        both.wait(10)  # both users' memory nodes have run
        sent[_user(config)] = str(memory.messages(state)[-1].content)
        return {"messages": [AIMessage("ok")]}

    graph = _graph(MessagesState, memory, call_model)

    _both_users(graph)
    assert "secret0." in sent["u0"]
    assert "secret1." in sent["u1"]
    assert _leaks(sent) == []


def test_an_empty_block_of_ones_own_is_not_replaced_by_another_users() -> None:
    """Bob has no memory: his state's empty block is his turn's answer."""
    store = _pins(range(2), every=2)  # u0 has a PIN, u1 none
    memory = LangGraphMemory(store, AgentConfig(agent="t"), sessions=_by_user)
    u1_rendered, u0_rendered = threading.Event(), threading.Event()
    sent: dict[str, str] = {}

    def memory_node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        user = _user(config)
        if user == "u0":
            assert u1_rendered.wait(10)
        out = memory.node(state, config)
        (u1_rendered if user == "u1" else u0_rendered).set()
        return out

    def call_model(state: Any, config: RunnableConfig) -> dict[str, Any]:
        user = _user(config)
        if user == "u1":
            assert u0_rendered.wait(10)  # u0's block for message "1" is kept by now
        sent[user] = str(memory.messages(state)[-1].content)
        return {"messages": [AIMessage("ok")]}

    b = StateGraph(MemoryState)
    b.add_node("memory", memory_node)
    b.add_node("model", call_model)
    b.add_edge(START, "memory")
    b.add_edge("memory", "model")
    b.add_edge("model", END)
    graph = b.compile()

    _both_users(graph)
    assert sent["u1"] == ASK
    assert "secret0." in sent["u0"]


@dataclass
class _Ctx:
    user: str


def test_create_agent_middleware_never_sends_another_users_block_under_one_message_id() -> None:
    store = _pins(range(20), every=2)  # even users have a PIN, odd ones none
    sent: list[tuple[str, str]] = []
    lock = threading.Lock()

    class Recording(MemoryMiddleware):
        def wrap_model_call(self, request: Any, handler: Callable[..., Any]) -> Any:
            time.sleep(random.random() * 0.005)  # latency between the render and the call

            def capture(req: Any) -> Any:
                with lock:
                    sent.append((req.runtime.context.user, req.messages[-1].content))
                return handler(req)

            return super().wrap_model_call(request, capture)

    memory = Recording(store, AgentConfig(agent="t"), sessions=lambda rt: [rt.context.user])
    model = FakeListChatModel(responses=["ok"] * 200)
    graph = create_agent(model, [], middleware=[memory], context_schema=_Ctx)

    def run(i: int) -> None:
        graph.invoke({"messages": [HumanMessage(ASK, id="1")]}, context=_Ctx(f"u{i % 20}"))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(run, range(120)))
    assert len(sent) == 120
    for user, content in sent:
        mine = int(user[1:]) % 2 == 0
        assert (f"secret{user[1:]}." in content) == mine, (user, content)
        assert not _leaks({user: content}), (user, content)


def test_an_edited_message_is_a_new_turn_with_its_own_block_and_event() -> None:
    store = InMemoryStore()
    store.store("deploy", "Production deploys go to prod-3.", session_id="s1")
    store.store("dentist", "Dentist appointment is on Tuesday at 9.", session_id="s1")
    memory = LangGraphMemory(store, AgentConfig(agent="t"), sessions=["s1"])
    sent: list[str] = []
    events: list[tuple[str, ...]] = []

    def seen(_sender: Any, event: Any) -> None:
        events.append(tuple(event.rendered_keys))

    def call_model(state: Any) -> dict[str, Any]:
        sent.append(str([m.content for m in memory.messages(state) if m.type == "human"][-1]))
        return {"messages": [AIMessage("ok")]}

    graph = _graph(MemoryState, memory, call_model, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t1"}}
    with memory_recall.connected_to(seen):
        graph.invoke(
            {"messages": [HumanMessage("where do production deploys go?", id="m1")]}, config
        )
        # The user edits the message: the same id replaces it (add_messages).
        graph.invoke(
            {"messages": [HumanMessage("when is my dentist appointment?", id="m1")]}, config
        )
        # Resumed on the same message (a retry): nothing is rendered again.
        graph.invoke(None, config)
    assert events == [("deploy",), ("dentist",)]
    assert "prod-3" in sent[0]
    assert "Tuesday" in sent[1]
    assert "prod-3" not in sent[1]


def test_messages_outside_a_run_place_no_block_kept_for_a_sessions_function() -> None:
    """With ``sessions`` a function of the run, a block kept in process is placed only
    for a run whose scopes are known: outside a graph node, none is."""
    store = _pins(range(1))
    memory = LangGraphMemory(store, AgentConfig(agent="t"), sessions=_by_user)
    update = memory.update(
        {"messages": [HumanMessage(ASK, id="1")]}, {"configurable": {"user": "u0"}}
    )
    assert "secret0." in update["memory_block"]
    plain = {"messages": [HumanMessage(ASK, id="1")]}  # a state without the block
    assert memory.messages(plain)[-1].content == ASK
    assert "secret0." in memory.block_for(
        plain, plain["messages"], {"configurable": {"user": "u0"}}
    )
    assert memory.block_for(plain, plain["messages"], {"configurable": {"user": "u1"}}) == ""
