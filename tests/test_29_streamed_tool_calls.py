"""A streamed reply's tool calls are read as the caller reads the stream, as a whole reply's are.

With ``stream=True`` (and the SDKs' ``stream`` helpers) the wrapped clients ended the turn
the moment the call returned, before any event was read. So an agent that a tool ran was a
turn of its own (its own recall and block, where a non-streamed loop gives a ``sub_turn``),
the turn was not open while the tools ran, and a conversation's tool step got the block
last rendered for its words, not its own. Each stream is now watched as it is read: the
reply's last event settles the turn exactly as the same reply unstreamed would. Real SDK
clients, sync and async, against SSE bodies in each provider's wire format.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import openai
import pytest
from anthropic import Anthropic, AsyncAnthropic
from openai import AsyncOpenAI, OpenAI

from memory_inject.config import AgentConfig, parse_agent_config
from memory_inject.storage.sqlite import SQLiteStore
from tests import _sse
from tests._frameworks import events
from tests._stream_drivers import CHAT_TOOLS, atool_loop, tool_loop

if TYPE_CHECKING:
    from adapters.anthropic_client import wrap_anthropic
    from adapters.loop import current_turn
    from adapters.openai_client import memory_of, wrap_openai
else:
    from memory_inject.adapters.anthropic_client import wrap_anthropic
    from memory_inject.adapters.loop import current_turn
    from memory_inject.adapters.openai_client import memory_of, wrap_openai

Q1 = "where do production deploys go?"
Q2 = "who approves production deploys?"
CHILD = "summarise the incident report"
STREAMED = [
    "chat_create",
    "chat_stream",
    "responses_create",
    "responses_stream",
    "anthropic_create",
    "anthropic_stream",
]
PLAIN = ["chat_plain", "responses_plain", "anthropic_plain"]
SERVERS: dict[str, type[_sse.StreamServer]] = {
    "chat": _sse.ChatStreams,
    "responses": _sse.ResponsesStreams,
    "anthropic": _sse.AnthropicStreams,
}
#: Per request: (deploy, approver, incident) facts in it. The tool's agent is a sub_turn
#: (nothing), the tool step has the turn's block, the next turn both turns' blocks.
EXPECTED = [(1, 1, 1), (0, 0, 0), (1, 1, 1), (2, 2, 2)]


def pi_agent() -> AgentConfig:
    """An agent that records sessions (``preset: pi``), so the tools are on the row."""
    memory = {"preset": "pi", "governance": {"profile_id": "project:p"}, "sessions": {}}
    return parse_agent_config({"agent": "pi", "memory": memory})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "m.db") as s:
        s.store("deploy_target", "Production deploys go to prod-3.", session_id="ana")
        s.store("approver", "Dana approves every production deploy.", session_id="ana")
        s.store("incident", "The incident report is due on Monday.", session_id="ana")
        yield s


@pytest.fixture(autouse=True)
def no_turn_left_open() -> Iterator[None]:
    """Every loop here ends with a text answer, so no turn may stay open after a test."""
    yield
    assert current_turn() is None


def _facts(body: dict[str, Any]) -> tuple[int, int, int]:
    text = json.dumps(body)
    return text.count("go to prod-3."), text.count("Dana approves"), text.count("due on Monday")


def _client(style: str, server: _sse.StreamServer, store: SQLiteStore, *, aio: bool) -> Any:
    api = style.split("_", maxsplit=1)[0]
    http: Any = server.aclient() if aio else server.client()
    if api == "anthropic":
        sdk: Any = (AsyncAnthropic if aio else Anthropic)(api_key="k", http_client=http)
        return wrap_anthropic(sdk, store, pi_agent(), sessions=["ana"])
    sdk = (AsyncOpenAI if aio else OpenAI)(api_key="k", http_client=http)
    return wrap_openai(sdk, store, pi_agent(), sessions=["ana"])


def _two_turns(style: str, store: SQLiteStore, mode: str) -> dict[str, Any]:
    """Turn 1: a tool call (the tool runs an agent of its own), the tool's result, a text
    answer; turn 2: the next user message. What each request carried, and the events."""
    api = style.split("_", maxsplit=1)[0]
    server = SERVERS[api]()
    seen: dict[str, Any] = {}
    with events() as rec:
        if mode == "sync":
            client = _client(style, server, store, aio=False)

            def tool() -> None:
                seen["open_in_tool"] = current_turn() is not None
                child = [{"role": "user", "content": CHILD}]
                tool_loop(client, f"{api}_plain", child, False, lambda: None)

            msgs: list[Any] = [{"role": "user", "content": Q1}]
            tool_loop(client, style, msgs, True, tool)
            seen["open_after"] = current_turn() is not None
            tool_loop(client, style, [*msgs, {"role": "user", "content": Q2}], False, tool)
        else:

            async def main() -> None:
                client = _client(style, server, store, aio=True)

                async def nothing() -> None:
                    return None

                async def tool() -> None:
                    seen["open_in_tool"] = current_turn() is not None
                    child = [{"role": "user", "content": CHILD}]
                    await atool_loop(client, f"{api}_plain", child, False, nothing)

                msgs: list[Any] = [{"role": "user", "content": Q1}]
                await atool_loop(client, style, msgs, True, tool)
                seen["open_after"] = current_turn() is not None
                await atool_loop(
                    client, style, [*msgs, {"role": "user", "content": Q2}], False, tool
                )

            asyncio.run(main())
    row = store.get("session:ana")
    return {
        "facts": [_facts(b) for b in server.bodies],
        "recalls": [e.query_summary for e in rec.recalls],
        "skips": [str(e.origin) for e in rec.skips],
        "tools": (row.metadata or {}).get("tools") if row is not None else None,
        **seen,
    }


class TestATurnWithAStreamedToolCall:
    @pytest.mark.parametrize("mode", ["sync", "async"])
    @pytest.mark.parametrize("style", STREAMED + PLAIN)
    def test_it_goes_as_a_non_streamed_one(self, store: SQLiteStore, style: str, mode: str) -> None:
        """One recall per user turn, the tool's agent a sub_turn, the turn open while the
        tools run and closed after the text answer, the session row with the tool."""
        got = _two_turns(style, store, mode)
        assert {
            "facts": EXPECTED,
            "recalls": [Q1, Q2],
            "skips": ["sub_turn"],
            "tools": ["lookup"],
            "open_in_tool": True,
            "open_after": False,
        } == got

    @pytest.mark.parametrize("style", STREAMED)
    def test_each_conversations_step_gets_its_own_block(
        self, store: SQLiteStore, style: str
    ) -> None:
        """Tab B asks tab A's words while A's tool runs and gets a new fact; A's tool step
        still carries A's block (found by the streamed calls' ids), not B's."""
        api = style.split("_", maxsplit=1)[0]
        server = SERVERS[api]()
        client = _client(style, server, store, aio=False)

        def tab_b() -> None:
            store.store("window", "Production deploys happen on Tuesdays.", session_id="ana")
            tool_loop(client, style, [{"role": "user", "content": Q1}], False, lambda: None)

        tool_loop(client, style, [{"role": "user", "content": Q1}], True, tab_b)
        key = "input" if api == "responses" else "messages"
        assert [0, 1, 0] == [json.dumps(b[key][0]).count("Tuesdays") for b in server.bodies]


def _chat(store: SQLiteStore, server: httpx2.MockTransport) -> Any:
    http = httpx2.Client(transport=server)
    return wrap_openai(OpenAI(api_key="k", http_client=http), store, pi_agent(), sessions=["ana"])


class TestTheStreamItself:
    def test_events_reach_the_caller_as_they_arrive(self, store: SQLiteStore) -> None:
        """Nothing is buffered: the first chunk is the caller's before the body's rest is read."""
        parts = _sse.ChatStreams().streamed("call_1", 1).split(b"\n\n")
        sent: list[bytes] = []

        def body() -> Iterator[bytes]:
            for part in parts:
                sent.append(part)
                yield part + b"\n\n"

        def reply(request: httpx2.Request) -> httpx2.Response:
            headers = {"content-type": "text/event-stream"}
            return httpx2.Response(200, content=body(), headers=headers)

        client = _chat(store, httpx2.MockTransport(reply))
        messages = [{"role": "user", "content": Q1}]
        with client.chat.completions.create(
            model="m", messages=messages, tools=CHAT_TOOLS, stream=True
        ) as stream:
            first = next(stream)
            assert len(sent) < len(parts)
            assert isinstance(stream, openai.Stream)
            assert isinstance(first, openai.types.chat.ChatCompletionChunk)
            assert current_turn() is not None
            assert 3 == 1 + len(list(stream))
            assert current_turn() is not None  # the reply asked for a tool
        memory_of(client).end_turn()

    def test_a_stream_left_early_ends_its_turn(self, store: SQLiteStore) -> None:
        """A caller that breaks out after the first chunk leaves no turn open, and the
        tool step it may still send is the same turn: the same block, no second event."""
        client = _chat(store, httpx2.MockTransport(_sse.ChatStreams()))
        messages: list[Any] = [{"role": "user", "content": Q1}]
        with events() as rec:
            with client.chat.completions.create(
                model="m", messages=messages, tools=CHAT_TOOLS, stream=True
            ) as stream:
                first = next(iter(stream))
            assert current_turn() is None
            call = first.choices[0].delta.tool_calls[0]
            step = [
                *messages,
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": "lookup", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": call.id, "content": "ok"},
            ]
            for _ in client.chat.completions.create(model="m", messages=step, stream=True):
                pass
        assert [Q1] == [e.query_summary for e in rec.recalls]

    def test_an_async_for_left_by_break_ends_its_turn_at_once(self, store: SQLiteStore) -> None:
        """``async for ... break`` closed the watch only when the event loop finalised it:
        a call made right after the break was a sub_turn with no memory (round 29)."""
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(_sse.ChatStreams()))
        sdk = AsyncOpenAI(api_key="k", http_client=http)
        client = wrap_openai(sdk, store, pi_agent(), sessions=["ana"])

        async def run() -> Any:
            messages: Any = [{"role": "user", "content": Q1}]
            stream: Any = await client.chat.completions.create(
                model="m", messages=messages, stream=True
            )
            async for _ in stream:
                break
            return current_turn()

        assert asyncio.run(run()) is None

    def test_a_stream_dropped_unread_ends_its_turn(self, store: SQLiteStore) -> None:
        """A stream never read kept its turn open for good: every later conversation of
        that code was a sub_turn with no memory (round 29)."""
        client = _chat(store, httpx2.MockTransport(_sse.ChatStreams()))
        messages = [{"role": "user", "content": Q1}]
        stream = client.chat.completions.create(model="m", messages=messages, stream=True)
        assert current_turn() is not None
        del stream
        assert current_turn() is None

    def test_a_helper_left_early_ends_its_turn(self, store: SQLiteStore) -> None:
        """Anthropic's ``messages.stream`` left after one event: the turn ends at its exit."""
        http = httpx2.Client(transport=httpx2.MockTransport(_sse.AnthropicStreams()))
        client = wrap_anthropic(
            Anthropic(api_key="k", http_client=http), store, pi_agent(), sessions=["ana"]
        )
        with client.messages.stream(
            model="m",
            max_tokens=9,
            messages=[{"role": "user", "content": Q1}],
            tools=[{"name": "lookup", "input_schema": {"type": "object"}}],
        ) as stream:
            next(stream)  # the stream is still being read: the turn is open
            assert current_turn() is not None
        assert current_turn() is None

    def test_a_failure_in_memory_never_fails_the_stream(
        self, store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Settling the turn raises: the caller still reads every chunk; the turn ends."""
        client = _chat(store, httpx2.MockTransport(_sse.ChatStreams()))

        def boom(*_: Any) -> None:
            raise RuntimeError("boom")

        monkeypatch.setattr(memory_of(client), "note_calls", boom)
        chunks = list(
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": Q1}], stream=True
            )
        )
        assert 3 == len(chunks)
