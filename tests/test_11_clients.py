"""Issue 11, the thin client wrappers: a 3-turn tool loop through each real SDK.

Requests go through ``httpx2.MockTransport`` (the SDKs' HTTP client), so what is
asserted is what the SDK serialised: the block on the user side, the system
prompt untouched, one event per turn, every request starting with the exact
bytes of the previous one, and no parent block for an agent run inside a tool.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from anthropic import Anthropic, AsyncAnthropic
from openai import AsyncOpenAI, OpenAI

from memory_inject import AgentConfig
from memory_inject.signals import MemorySkipped, memory_skipped
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording

if TYPE_CHECKING:
    from adapters.anthropic_client import wrap_anthropic
    from adapters.loop import current_turn
    from adapters.openai_client import memory_of, wrap_openai
    from adapters.tools import memory_tools
else:
    from memory_inject.adapters.anthropic_client import wrap_anthropic
    from memory_inject.adapters.loop import current_turn
    from memory_inject.adapters.openai_client import memory_of, wrap_openai
    from memory_inject.adapters.tools import memory_tools

SYSTEM = "You are the deploy assistant."
QUESTIONS = (
    "where do production deploys go?",
    "when is the daily standup now?",
    "who approves deploys to prod-3?",
)
EXPECTED_KEYS = ("deploy_target", "standup", "approver")
CHILD = "summarise the incident report"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "memory.db")
    s.store("deploy_target", "Production deploys go to prod-3 (eu-west-1).", "core")
    s.store("standup", "The daily standup moved to 10:00 CET.", "daily")
    s.store("approver", "Dana approves every deploy to prod-3.", "core")
    s.store("incident", "The incident report is due on Monday.", "core")
    yield s
    s.close()


@pytest.fixture
def agent() -> AgentConfig:
    return AgentConfig(agent="alice")


@pytest.fixture(autouse=True)
def no_turn_left_open() -> Iterator[None]:
    """Every loop here ends with a text answer, so no turn may stay open after a test."""
    yield
    assert current_turn() is None


class Recorder:
    """The mock server: answers a tool call first, then text once the tool result is in."""

    def __init__(self, reply: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.raw: list[bytes] = []
        self.reply = reply

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.raw.append(request.content)
        return httpx2.Response(200, json=self.reply(json.loads(request.content)))

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r) for r in self.raw]


def raw_array(raw: bytes, key: str) -> bytes:
    """The exact bytes of the ``key`` array in a serialised request body."""
    start = raw.index(f'"{key}":['.encode()) + len(key) + 3
    text = raw.decode()
    _, end = json.JSONDecoder().raw_decode(text, len(raw[:start].decode()))
    return text[len(raw[:start].decode()) : end].encode()


def assert_each_request_extends_the_last(raws: list[bytes], key: str) -> None:
    """Every request's list starts with the previous request's list, byte for byte."""
    arrays = [raw_array(r, key) for r in raws]
    for before, after in itertools.pairwise(arrays):
        assert after.startswith(before[:-1] + b","), (before, after)


def skipped_events() -> tuple[list[MemorySkipped], Callable[..., None]]:
    events: list[MemorySkipped] = []

    def receiver(sender: object, *, event: MemorySkipped) -> None:
        events.append(event)

    return events, receiver


# -- OpenAI Chat Completions -------------------------------------------------------------


def chat_reply(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]
    if last["role"] == "tool" or CHILD in json.dumps(body["messages"]):
        message: dict[str, Any] = {"role": "assistant", "content": "Done."}
        finish = "stop"
    else:
        n = len(body["messages"])
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": "{}"},
                }
            ],
        }
        finish = "tool_calls"
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
    }


class TestOpenAIChat:
    def test_a_three_turn_tool_loop(self, store: SQLiteStore, agent: AgentConfig) -> None:
        """The function-calling guide's loop, with the SDK's message objects appended."""
        server = Recorder(chat_reply)
        http = httpx2.Client(transport=httpx2.MockTransport(server))
        client = wrap_openai(OpenAI(api_key="k", http_client=http), store, agent, sessions=["s"])
        child_requests: list[int] = []

        def run_tool(turn: int) -> str:
            if turn == 1:  # a tool that runs another agent through the same client
                child_requests.append(len(server.raw))
                child = client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": CHILD}]
                )
                return child.choices[0].message.content or ""
            return "prod-3"

        messages: list[Any] = [{"role": "system", "content": SYSTEM}]
        skipped, receiver = skipped_events()
        memory_skipped.connect(receiver)
        try:
            with recording() as rec:
                for turn, question in enumerate(QUESTIONS):
                    messages.append({"role": "user", "content": question})
                    while True:
                        reply = client.chat.completions.create(model="m", messages=messages)
                        message = reply.choices[0].message
                        messages.append(message)
                        if not message.tool_calls:
                            break
                        for tc in message.tool_calls:
                            messages.append(
                                {"role": "tool", "tool_call_id": tc.id, "content": run_tool(turn)}
                            )
        finally:
            memory_skipped.disconnect(receiver)

        bodies = server.bodies()
        parent = [i for i in range(len(bodies)) if i not in child_requests]
        assert 6 == len(parent)
        assert list(QUESTIONS) == [e.query_summary for e in rec.events]
        assert ["sub_turn"] == [e.reason for e in skipped]
        child = bodies[child_requests[0]]["messages"]
        assert [{"role": "user", "content": CHILD}] == child
        for turn in range(3):
            for i in parent[2 * turn : 2 * turn + 2]:
                sent = bodies[i]["messages"]
                assert {"role": "system", "content": SYSTEM} == sent[0]
                users = [m for m in sent if m["role"] == "user"]
                assert len(users) == turn + 1
                assert users[-1]["content"].startswith("[Memory context]\n")
                assert users[-1]["content"].endswith(QUESTIONS[turn])
                assert f"- {EXPECTED_KEYS[turn]}: " in users[-1]["content"]
        assert_each_request_extends_the_last([server.raw[i] for i in parent], "messages")
        assert {"role": "user", "content": QUESTIONS[0]} == messages[1]  # the caller's list

    def test_strip_sends_only_this_turns_block(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """earlier_blocks="strip": earlier user messages go out as the caller wrote them."""
        server = Recorder(lambda body: chat_reply({"messages": [{"role": "tool"}]}))
        http = httpx2.Client(transport=httpx2.MockTransport(server))
        client = wrap_openai(
            OpenAI(api_key="k", http_client=http), store, agent, earlier_blocks="strip"
        )
        messages: list[Any] = []
        for question in QUESTIONS[:2]:
            messages.append({"role": "user", "content": question})
            messages.append(
                client.chat.completions.create(model="m", messages=messages).choices[0].message
            )
        last = server.bodies()[-1]["messages"]
        assert {"role": "user", "content": QUESTIONS[0]} == last[0]
        assert last[2]["content"].startswith("[Memory context]")

    def test_the_async_client_is_wrapped_the_same_way(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """AsyncOpenAI: create is awaited, the block is placed, one event."""
        server = Recorder(lambda body: chat_reply({"messages": [{"role": "tool"}]}))
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
        client = wrap_openai(AsyncOpenAI(api_key="k", http_client=http), store, agent)

        async def main() -> None:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": QUESTIONS[0]}]
            )

        with recording() as rec:
            asyncio.run(main())
        assert 1 == len(rec.events)
        assert server.bodies()[0]["messages"][0]["content"].startswith("[Memory context]")

    def test_a_wrong_store_fails_at_wrapping(self, agent: AgentConfig) -> None:
        """wrap_openai(client, "m.db", agent) is a TypeError naming what a store needs."""
        with pytest.raises(TypeError, match="'store' must be a memory store with 'name' and"):
            wrap_openai(OpenAI(api_key="k"), "m.db", agent)  # type: ignore[arg-type]

    def test_a_turn_left_open_is_closed_by_end_turn(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """A loop that stops on a tool call leaves its turn open; end_turn() closes it, so the
        next, unrelated conversation is a turn of its own, not a sub-turn."""
        server = Recorder(chat_reply)
        http = httpx2.Client(transport=httpx2.MockTransport(server))
        client = wrap_openai(OpenAI(api_key="k", http_client=http), store, agent)
        with recording() as rec:
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": QUESTIONS[0]}]
            )
            memory_of(client).end_turn()
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": QUESTIONS[1]}]
            )
            memory_of(client).end_turn()
        assert list(QUESTIONS[:2]) == [e.query_summary for e in rec.events]

    def test_two_conversations_that_start_alike_each_get_a_turn(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """One client serving two chats: the same first message is two turns, two events."""
        server = Recorder(lambda body: chat_reply({"messages": [{"role": "tool"}]}))
        http = httpx2.Client(transport=httpx2.MockTransport(server))
        client = wrap_openai(OpenAI(api_key="k", http_client=http), store, agent)
        with recording() as rec:
            for _ in range(2):
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": QUESTIONS[0]}]
                )
        assert [QUESTIONS[0]] * 2 == [e.query_summary for e in rec.events]
        assert all(b["messages"][0]["content"].startswith("[Memory") for b in server.bodies())

    def test_tool_loop_steps_in_worker_threads_are_one_turn(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """Each call in its own thread (asyncio.to_thread): still one recall for the turn."""
        server = Recorder(chat_reply)
        http = httpx2.Client(transport=httpx2.MockTransport(server))
        client = wrap_openai(OpenAI(api_key="k", http_client=http), store, agent)
        messages: list[Any] = [{"role": "user", "content": QUESTIONS[0]}]

        async def main() -> None:
            while True:
                reply = await asyncio.to_thread(
                    client.chat.completions.create, model="m", messages=messages
                )
                messages.append(reply.choices[0].message)
                if not reply.choices[0].message.tool_calls:
                    return
                call_id = reply.choices[0].message.tool_calls[0].id
                messages.append({"role": "tool", "tool_call_id": call_id, "content": "prod-3"})

        with recording() as rec:
            asyncio.run(main())
        assert (1, 2) == (len(rec.events), len(server.raw))
        first, second = (b["messages"][0]["content"] for b in server.bodies())
        assert first == second and first.startswith("[Memory context]")

    def test_the_engine_is_reachable(self, store: SQLiteStore, agent: AgentConfig) -> None:
        """memory_of(client) gives the wrapper's options back; other attributes are the SDK's."""
        raw = OpenAI(api_key="k")
        client = wrap_openai(raw, store, agent, sessions=["s"])
        assert (("s",), raw.models) == (memory_of(client).sessions, client.models)


# -- OpenAI Responses -----------------------------------------------------------------------


def responses_reply(body: dict[str, Any]) -> dict[str, Any]:
    items = body["input"]
    done = isinstance(items, str) or items[-1].get("type") == "function_call_output"
    n = len(items)
    output: list[dict[str, Any]]
    if done:
        output = [
            {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
            }
        ]
    else:
        output = [
            {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": "lookup",
                "arguments": "{}",
                "status": "completed",
            }
        ]
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 0,
        "model": "m",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


class TestOpenAIResponses:
    def test_a_three_turn_tool_loop(self, store: SQLiteStore, agent: AgentConfig) -> None:
        """input_text parts are read, the block is an input_text part, output items appended."""
        server = Recorder(responses_reply)
        http = httpx2.Client(transport=httpx2.MockTransport(server))
        client = wrap_openai(OpenAI(api_key="k", http_client=http), store, agent)
        child_requests: list[int] = []
        items: list[Any] = []
        with recording() as rec:
            for turn, question in enumerate(QUESTIONS):
                items.append(
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": question}],
                    }
                )
                while True:
                    response = client.responses.create(model="m", instructions=SYSTEM, input=items)
                    items += response.output
                    calls = [i for i in response.output if i.type == "function_call"]
                    if not calls:
                        break
                    for fc in calls:
                        out = "prod-3"
                        if turn == 1:
                            child_requests.append(len(server.raw))
                            out = client.responses.create(model="m", input=CHILD).output_text
                        items.append(
                            {"type": "function_call_output", "call_id": fc.call_id, "output": out}
                        )
        bodies = server.bodies()
        parent = [i for i in range(len(bodies)) if i not in child_requests]
        assert QUESTIONS == tuple(e.query_summary for e in rec.events)
        assert CHILD == bodies[child_requests[0]]["input"]
        for turn in range(3):
            for i in parent[2 * turn : 2 * turn + 2]:
                assert SYSTEM == bodies[i]["instructions"]
                users = [m for m in bodies[i]["input"] if m.get("role") == "user"]
                first = users[-1]["content"][0]
                assert "input_text" == first["type"] and first["text"].startswith(
                    "[Memory context]"
                )
                assert f"- {EXPECTED_KEYS[turn]}: " in first["text"]
        assert_each_request_extends_the_last([server.raw[i] for i in parent], "input")

    def test_a_string_input_stays_a_string(self, store: SQLiteStore, agent: AgentConfig) -> None:
        """input="..." is one user message: it goes out as block + text."""
        server = Recorder(responses_reply)
        http = httpx2.Client(transport=httpx2.MockTransport(server))
        client = wrap_openai(OpenAI(api_key="k", http_client=http), store, agent)
        client.responses.create(model="m", input=CHILD + " " + QUESTIONS[0])
        sent = server.bodies()[0]["input"]
        assert sent.startswith("[Memory context]\n") and sent.endswith(QUESTIONS[0])


# -- Anthropic Messages ---------------------------------------------------------------------


def anthropic_reply(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]["content"]
    done = (isinstance(last, list) and last[0].get("type") == "tool_result") or CHILD in json.dumps(
        body["messages"]
    )
    n = len(body["messages"])
    content: list[dict[str, Any]] = [{"type": "text", "text": "Done." if done else "Checking."}]
    if not done:
        content.append({"type": "tool_use", "id": f"tu_{n}", "name": "lookup", "input": {}})
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": content,
        "stop_reason": "end_turn" if done else "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


class TestAnthropic:
    def test_a_three_turn_tool_loop(self, store: SQLiteStore, agent: AgentConfig) -> None:
        """Anthropic's tool-use loop: response.content appended, tool_result carriers skipped."""
        server = Recorder(anthropic_reply)
        http = httpx2.Client(transport=httpx2.MockTransport(server))
        client = wrap_anthropic(Anthropic(api_key="k", http_client=http), store, agent)
        child_requests: list[int] = []
        messages: list[Any] = []
        skipped, receiver = skipped_events()
        memory_skipped.connect(receiver)
        try:
            with recording() as rec:
                for turn, question in enumerate(QUESTIONS):
                    messages.append(
                        {"role": "user", "content": [{"type": "text", "text": question}]}
                    )
                    while True:
                        response = client.messages.create(
                            model="m", max_tokens=100, system=SYSTEM, messages=messages
                        )
                        messages.append({"role": "assistant", "content": response.content})
                        if response.stop_reason != "tool_use":
                            break
                        results = []
                        for block in response.content:
                            if block.type != "tool_use":
                                continue
                            out = "prod-3"
                            if turn == 1:
                                child_requests.append(len(server.raw))
                                child = client.messages.create(
                                    model="m",
                                    max_tokens=100,
                                    messages=[{"role": "user", "content": CHILD}],
                                )
                                out = child.content[0].text  # type: ignore[union-attr]
                            results.append(
                                {"type": "tool_result", "tool_use_id": block.id, "content": out}
                            )
                        messages.append({"role": "user", "content": results})
        finally:
            memory_skipped.disconnect(receiver)
        bodies = server.bodies()
        parent = [i for i in range(len(bodies)) if i not in child_requests]
        assert QUESTIONS == tuple(e.query_summary for e in rec.events)
        assert ["sub_turn"] == [e.reason for e in skipped]
        assert [{"role": "user", "content": CHILD}] == bodies[child_requests[0]]["messages"]
        for turn in range(3):
            for i in parent[2 * turn : 2 * turn + 2]:
                assert SYSTEM == bodies[i]["system"]
                users = [
                    m
                    for m in bodies[i]["messages"]
                    if m["role"] == "user" and m["content"][0]["type"] == "text"
                ]
                first = users[-1]["content"][0]["text"]
                assert (
                    first.startswith("[Memory context]") and f"- {EXPECTED_KEYS[turn]}: " in first
                )
        assert_each_request_extends_the_last([server.raw[i] for i in parent], "messages")


class _Opaque:
    """No role, no type: nothing an SDK sends."""


class TestWrapperEdges:
    def client(
        self, store: SQLiteStore, agent: AgentConfig, server: Recorder, **options: Any
    ) -> OpenAI:
        http = httpx2.Client(transport=httpx2.MockTransport(server))
        return wrap_openai(
            OpenAI(api_key="k", http_client=http, max_retries=0), store, agent, **options
        )

    def test_an_unreadable_message_goes_out_untouched_and_is_reported(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """The request is sent as the caller built it; one memory_skipped says why."""
        create = self.client(store, agent, Recorder(chat_reply)).chat.completions
        messages: list[Any] = [{"role": "user", "content": "x"}, _Opaque()]
        skipped, receiver = skipped_events()
        memory_skipped.connect(receiver)
        try:
            with pytest.raises(TypeError, match="not JSON serializable"):  # the SDK's json, not us
                create.create(model="m", messages=messages)
        finally:
            memory_skipped.disconnect(receiver)
        assert ["unreadable_message"] == [e.reason for e in skipped]

    def test_no_user_message_means_no_turn(self, store: SQLiteStore, agent: AgentConfig) -> None:
        """A request without a user message is sent as is, with no event."""
        server = Recorder(lambda body: chat_reply({"messages": [{"role": "tool"}]}))
        with recording() as rec:
            self.client(store, agent, server).chat.completions.create(
                model="m", messages=[{"role": "system", "content": SYSTEM}]
            )
        assert ([], [{"role": "system", "content": SYSTEM}]) == (
            rec.events,
            server.bodies()[0]["messages"],
        )

    def test_a_failing_call_closes_its_turn(self, store: SQLiteStore, agent: AgentConfig) -> None:
        """The SDK's error is the caller's; the turn it opened does not outlive it."""

        def fail(request: httpx2.Request) -> httpx2.Response:
            return httpx2.Response(500, json={"error": {"message": "down"}})

        http = httpx2.Client(transport=httpx2.MockTransport(fail))
        client = wrap_openai(OpenAI(api_key="k", http_client=http, max_retries=0), store, agent)
        with pytest.raises(Exception, match="down"):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": QUESTIONS[0]}]
            )
        assert current_turn() is None

    def test_a_bug_in_placing_never_fails_the_call(
        self, store: SQLiteStore, agent: AgentConfig, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Should placing raise, the request goes out as the caller built it."""
        server = Recorder(lambda body: chat_reply({"messages": [{"role": "tool"}]}))
        client = self.client(store, agent, server)

        def boom(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("bug")

        monkeypatch.setattr(memory_of(client), "prepare", boom)
        sent = [{"role": "user", "content": QUESTIONS[0]}]
        client.chat.completions.create(model="m", messages=sent)  # type: ignore[arg-type]
        assert sent == server.bodies()[0]["messages"]

    def test_the_message_placement_inserts_a_user_message(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """placement="message": the block is its own user message before the user's."""
        server = Recorder(anthropic_reply)
        http = httpx2.Client(transport=httpx2.MockTransport(server))
        claude = wrap_anthropic(
            Anthropic(api_key="k", http_client=http),
            store,
            agent,
            placement="message",
            channel="slack",
        )
        with recording() as rec:
            claude.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": CHILD + "?"}]
            )
        sent = server.bodies()[0]["messages"]
        assert 2 == len(sent) and sent[0]["content"].startswith("[Memory context]")
        assert {"role": "user", "content": CHILD + "?"} == sent[1]
        assert ["slack"] == [e.channel for e in rec.events]

    def test_bad_options_and_unwrapped_clients_are_named(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """A typo in earlier_blocks is a ValueError; memory_of needs a wrapped client."""
        with pytest.raises(ValueError, match="'earlier_blocks' must be one of"):
            wrap_openai(OpenAI(api_key="k"), store, agent, earlier_blocks="drop")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="'client' must be a wrapped client"):
            memory_of(OpenAI(api_key="k"))


class TestMemoryToolsInTheLoop:
    def test_a_fact_the_model_stores_is_injected_next_turn(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """Turn 1: the model calls memory_store and the host routes it; turn 2 gets the fact."""
        tools = memory_tools(store, agent, sessions=["s"])
        args = json.dumps({"content": "The release train leaves on Thursdays.", "key": "train"})

        def reply(body: dict[str, Any]) -> dict[str, Any]:
            if body["messages"][-1]["role"] == "tool" or len(body["messages"]) > 3:
                return chat_reply({"messages": [{"role": "tool"}]})
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "memory_store", "arguments": args},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            choice = {"index": 0, "finish_reason": "tool_calls", "message": message}
            return {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [choice],
            }

        server = Recorder(reply)
        http = httpx2.Client(transport=httpx2.MockTransport(server))
        client = wrap_openai(OpenAI(api_key="k", http_client=http), store, agent, sessions=["s"])
        messages: list[Any] = [
            {"role": "user", "content": "remember: the release train leaves Thursdays"}
        ]
        for question in (None, "when does the release train leave?"):
            if question is not None:
                messages.append({"role": "user", "content": question})
            while True:
                message = (
                    client.chat.completions.create(
                        model="m", messages=messages, tools=tools.openai()
                    )
                    .choices[0]
                    .message
                )
                messages.append(message)
                if not message.tool_calls:
                    break
                for tc in message.tool_calls:
                    assert tc.type == "function" and tools.handles(tc.function.name)
                    result = tools.call(tc.function.name, tc.function.arguments)
                    messages.append({"role": "tool", "tool_call_id": tc.id, "content": result})
        last = server.bodies()[-1]
        assert "Remembered as 'train'." == last["messages"][2]["content"]
        assert "- train: The release train leaves on Thursdays." in last["messages"][-1]["content"]
        assert tools.openai() == last["tools"]


class TestAsyncClients:
    def test_async_anthropic_and_responses_tool_loops(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """AsyncAnthropic and AsyncOpenAI.responses: one event per turn, each request extends
        the last, the tool-loop step reuses the block."""
        claude_server, openai_server = Recorder(anthropic_reply), Recorder(responses_reply)
        claude = wrap_anthropic(
            AsyncAnthropic(
                api_key="k",
                http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(claude_server)),
            ),
            store,
            agent,
        )
        gpt = wrap_openai(
            AsyncOpenAI(
                api_key="k",
                http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(openai_server)),
            ),
            store,
            agent,
        )

        async def main() -> None:
            messages: list[Any] = []
            items: list[Any] = []
            for question in QUESTIONS[:2]:
                messages.append({"role": "user", "content": question})
                items.append({"role": "user", "content": question})
                while True:
                    response = await claude.messages.create(
                        model="m", max_tokens=10, messages=messages
                    )
                    messages.append({"role": "assistant", "content": response.content})
                    if response.stop_reason != "tool_use":
                        break
                    use = next(b for b in response.content if b.type == "tool_use")
                    messages.append(
                        {
                            "role": "user",
                            "content": [
                                {"type": "tool_result", "tool_use_id": use.id, "content": "x"}
                            ],
                        }
                    )
                while True:
                    r = await gpt.responses.create(model="m", input=items)
                    items += r.output
                    calls = [i for i in r.output if i.type == "function_call"]
                    if not calls:
                        break
                    items.append(
                        {"type": "function_call_output", "call_id": calls[0].call_id, "output": "x"}
                    )

        with recording() as rec:
            asyncio.run(main())
        assert 4 == len(rec.events) and (4, 4) == (len(claude_server.raw), len(openai_server.raw))
        assert_each_request_extends_the_last(claude_server.raw, "messages")
        assert_each_request_extends_the_last(openai_server.raw, "input")


class TestTwoConversationsWithTheSameWords:
    """Two tabs of one user open the same question on one wrapper: the second renders its
    own block (a fact was written meanwhile), and the first tab's tool-loop step must still
    carry the first tab's block. It was sent the second's: the fingerprint of the words is
    the same, so the later block took its place (found by a helper under load)."""

    @staticmethod
    def _unique(reply: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[..., Any]:
        """``reply`` with every tool-call id made unique, as a provider makes them."""
        count = itertools.count()

        def unique(body: dict[str, Any]) -> dict[str, Any]:
            text = json.dumps(reply(body))
            for old in ("call_", "tu_"):
                text = text.replace(f': "{old}', f': "{old}{next(count)}x')
            return dict(json.loads(text))

        return unique

    def _run(
        self, store: SQLiteStore, send: Callable[[list[Any]], Any], step: Callable[..., Any]
    ) -> None:
        first_a = [{"role": "user", "content": QUESTIONS[0]}]
        reply_a = send(first_a)
        store.store("deploy_window", "Production deploys happen on Tuesdays.", "core")
        send([{"role": "user", "content": QUESTIONS[0]}])  # tab B: a turn of its own
        send(step(first_a, reply_a))  # tab A's tool-loop step

    def _blocks(
        self, bodies: list[dict[str, Any]], text: Callable[[dict[str, Any]], str]
    ) -> list[str]:
        return [text(b).split("[/Memory context]")[0] for b in bodies]

    def test_anthropic(self, store: SQLiteStore, agent: AgentConfig) -> None:
        server = Recorder(self._unique(anthropic_reply))
        client = wrap_anthropic(
            Anthropic(
                api_key="k", http_client=httpx2.Client(transport=httpx2.MockTransport(server))
            ),
            store,
            agent,
        )

        def send(msgs: list[Any]) -> Any:
            return client.messages.create(model="m", max_tokens=9, messages=msgs)

        def step(msgs: list[Any], reply: Any) -> list[Any]:
            use = next(b for b in reply.content if b.type == "tool_use")
            return [
                *msgs,
                {"role": "assistant", "content": [b.model_dump() for b in reply.content]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "ok"}],
                },
            ]

        self._run(store, send, step)
        a1, b1, a2 = self._blocks(server.bodies(), lambda b: json.dumps(b["messages"][0]))
        assert "deploy_window" not in a1
        assert "deploy_window" in b1
        assert a1 == a2

    def test_openai_chat(self, store: SQLiteStore, agent: AgentConfig) -> None:
        server = Recorder(self._unique(chat_reply))
        client = wrap_openai(
            OpenAI(api_key="k", http_client=httpx2.Client(transport=httpx2.MockTransport(server))),
            store,
            agent,
        )

        def send(msgs: list[Any]) -> Any:
            return client.chat.completions.create(model="m", messages=msgs)

        def step(msgs: list[Any], reply: Any) -> list[Any]:
            message = reply.choices[0].message
            return [
                *msgs,
                message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "ok"},
            ]

        self._run(store, send, step)
        a1, b1, a2 = self._blocks(server.bodies(), lambda b: json.dumps(b["messages"][0]))
        assert "deploy_window" not in a1
        assert "deploy_window" in b1
        assert a1 == a2

    def test_openai_responses(self, store: SQLiteStore, agent: AgentConfig) -> None:
        server = Recorder(self._unique(responses_reply))
        client = wrap_openai(
            OpenAI(api_key="k", http_client=httpx2.Client(transport=httpx2.MockTransport(server))),
            store,
            agent,
        )

        def send(msgs: list[Any]) -> Any:
            return client.responses.create(model="m", input=msgs)

        def step(msgs: list[Any], reply: Any) -> list[Any]:
            call = reply.output[0]
            return [
                *msgs,
                call.model_dump(exclude_none=True),
                {"type": "function_call_output", "call_id": call.call_id, "output": "ok"},
            ]

        self._run(store, send, step)
        a1, b1, a2 = self._blocks(server.bodies(), lambda b: json.dumps(b["input"][0]))
        assert "deploy_window" not in a1
        assert "deploy_window" in b1
        assert a1 == a2
