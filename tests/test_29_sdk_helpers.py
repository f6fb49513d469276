"""The SDKs' helper methods place the block as ``create`` does: ``parse`` and ``stream``.

``chat.completions.parse`` / ``.stream``, ``responses.parse`` and Anthropic's
``messages.stream`` send the user's messages like ``create``, but the wrapped clients
forwarded them untouched: no block, no event (found by trying the real SDKs). Each now
goes through the same turn: one recall, the block on the user's message, one event.
Real SDK objects, a mocked HTTP transport.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from anthropic import Anthropic
from openai import AsyncOpenAI, OpenAI
from pydantic import BaseModel

from memory_inject import AgentConfig
from memory_inject.signals import MemoryRecall, MemorySkipped
from memory_inject.storage.sqlite import SQLiteStore
from tests._frameworks import chat_completion, events

if TYPE_CHECKING:
    from adapters.anthropic_client import wrap_anthropic
    from adapters.openai_client import wrap_openai
else:
    from memory_inject.adapters.anthropic_client import wrap_anthropic
    from memory_inject.adapters.openai_client import wrap_openai

QUESTION = "where do production deploys go?"
AGENT = AgentConfig(agent="helpers")


class Answer(BaseModel):
    a: str


def _sse(events_: list[tuple[str | None, dict[str, Any]]]) -> httpx2.Response:
    body = "".join(
        (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
        for name, data in events_
    )
    if all(name is None for name, _ in events_):
        body += "data: [DONE]\n\n"
    return httpx2.Response(
        200, content=body.encode(), headers={"content-type": "text/event-stream"}
    )


_CHUNK = {
    "id": "c",
    "object": "chat.completion.chunk",
    "created": 0,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "delta": {"role": "assistant", "content": '{"a": "x"}'},
            "finish_reason": "stop",
        }
    ],
}
_CHAT = chat_completion('{"a": "x"}')
_RESPONSE = {
    "id": "r",
    "object": "response",
    "created_at": 0,
    "status": "completed",
    "model": "m",
    "output": [
        {
            "type": "message",
            "id": "m",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": '{"a": "x"}', "annotations": []}],
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}
_MESSAGE_EVENTS: list[tuple[str | None, dict[str, Any]]] = [
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        },
    ),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 1},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
]


class Server:
    """Answers each endpoint as the real API would, and keeps every request body."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        path = request.url.path
        if path.endswith("/chat/completions"):
            return (
                _sse([(None, _CHUNK)]) if body.get("stream") else httpx2.Response(200, json=_CHAT)
            )
        if path.endswith("/responses"):
            return httpx2.Response(200, json=_RESPONSE)
        return _sse(_MESSAGE_EVENTS)

    def sent_block(self) -> bool:
        last = self.bodies[-1]
        return "prod-3" in json.dumps(last.get("messages", last.get("input")))

    async def areply(self, request: httpx2.Request) -> httpx2.Response:
        return self(request)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "m.db") as s:
        s.store("deploy_target", "Production deploys go to prod-3.", session_id="ana")
        yield s


def _openai(store: SQLiteStore, server: Server) -> Any:
    http = httpx2.Client(transport=httpx2.MockTransport(server))
    return wrap_openai(OpenAI(api_key="k", http_client=http), store, AGENT, sessions=["ana"])


def _chat_stream(client: Any) -> None:
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    with client.chat.completions.stream(model="m", messages=messages) as stream:
        for _ in stream:
            pass


def _anthropic_stream(store: SQLiteStore, server: Server) -> None:
    http = httpx2.Client(transport=httpx2.MockTransport(server))
    client = wrap_anthropic(
        Anthropic(api_key="k", http_client=http), store, AGENT, sessions=["ana"]
    )
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    with client.messages.stream(model="m", max_tokens=5, messages=messages) as stream:
        stream.get_final_message()


CALLS: dict[str, Callable[[SQLiteStore, Server], Any]] = {
    "chat.completions.parse": lambda store, server: _openai(store, server).chat.completions.parse(
        model="m", messages=[{"role": "user", "content": QUESTION}], response_format=Answer
    ),
    "chat.completions.stream": lambda store, server: _chat_stream(_openai(store, server)),
    "responses.parse": lambda store, server: _openai(store, server).responses.parse(
        model="m", input=QUESTION, text_format=Answer
    ),
    "anthropic messages.stream": _anthropic_stream,
}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_helper_sends_the_block_with_one_event(store: SQLiteStore, name: str) -> None:
    server = Server()
    with events() as rec:
        CALLS[name](store, server)
    assert server.sent_block()
    assert 1 == len([e for e in rec.all if isinstance(e, MemoryRecall)])
    assert not [e for e in rec.all if isinstance(e, MemorySkipped)]


def test_a_parsed_reply_is_the_sdks_own(store: SQLiteStore) -> None:
    reply = _openai(store, Server()).chat.completions.parse(
        model="m", messages=[{"role": "user", "content": QUESTION}], response_format=Answer
    )
    assert Answer(a="x") == reply.choices[0].message.parsed


def test_the_async_clients_helpers_await_the_recall(store: SQLiteStore) -> None:
    """The async stream helper recalls when the stream is entered; parse is awaited."""
    server = Server()

    async def run() -> None:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(server.areply))
        client = wrap_openai(
            AsyncOpenAI(api_key="k", http_client=http), store, AGENT, sessions=["ana"]
        )
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        async with client.chat.completions.stream(model="m", messages=messages) as stream:
            async for _ in stream:
                pass
        assert server.sent_block()
        parsed = await client.chat.completions.parse(
            model="m",
            messages=[{"role": "user", "content": "and staging?"}],
            response_format=Answer,
        )
        assert Answer(a="x") == parsed.choices[0].message.parsed

    with events() as rec:
        asyncio.run(run())
    assert ["where do production deploys go?", "and staging?"] == [
        e.query_summary for e in rec.all if isinstance(e, MemoryRecall)
    ]
    assert not [e for e in rec.all if isinstance(e, MemorySkipped)]
