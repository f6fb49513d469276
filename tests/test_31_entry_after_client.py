"""An entry adapter after a wrapped client's tool loop that stopped on a tool call.

A Slack worker loops over messages in one frame: ``bot.handle(msg)``, then a wrapped
OpenAI client's tool loop. The client leaves its turn open after a reply that asks for a
tool (its next call continues the turn). When the tool raised and the worker went on to
the next message, the next ``handle`` (another user) found that mark live and was a
``sub_turn``: no block, no recall (a tester's repro, issue 29, thirty-first round). Called
from the very frame that opened the client's turn, an entry adapter is the host's loop
come round: that turn was left. Called from deeper (a tool relaying a message), it is
still a ``sub_turn``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from openai import AsyncOpenAI, OpenAI

from memory_inject import AgentConfig
from memory_inject.storage import InMemoryStore

if TYPE_CHECKING:
    from adapters import ChannelAdapter, InboundMessage, wrap_openai
else:
    from memory_inject.adapters import ChannelAdapter, InboundMessage, wrap_openai

AGENT = AgentConfig(agent="bot")
Q = "where do production deploys go?"


def reply(tool_call: bool) -> dict[str, Any]:
    """A chat completion: a tool call, or a plain answer."""
    msg: dict[str, Any] = {"role": "assistant", "content": "ok"}
    if tool_call:
        msg = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": msg, "finish_reason": "tool_calls" if tool_call else "stop"}
        ],
    }


def transport(first_asks_tool: Callable[[int], bool]) -> httpx2.MockTransport:
    calls = {"n": 0}

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls["n"] += 1
        return httpx2.Response(200, json=reply(first_asks_tool(calls["n"])))

    return httpx2.MockTransport(handler)


def message(who: str, i: int) -> InboundMessage:
    return InboundMessage(
        channel="slack",
        sender=who,
        text=Q,
        reply_target=who,
        message_id=str(i),
        history_key=f"slack_{who}",
    )


@pytest.fixture
def store() -> InMemoryStore:
    s = InMemoryStore()
    s.store("deploy_target", "Production deploys go to prod-3.", "core")
    return s


def test_the_next_message_of_a_worker_loop_is_a_turn_of_its_own(store: InMemoryStore) -> None:
    bot = ChannelAdapter(store, AGENT, channel_name="slack")
    client = wrap_openai(
        OpenAI(api_key="k", http_client=httpx2.Client(transport=transport(lambda n: n == 1))),
        store,
        AGENT,
    )
    seen = []
    for i, who in enumerate(["alice", "bob", "carol"]):
        turn = bot.handle(message(who, i))
        seen.append((who, turn.policy.reason, "prod-3" in turn.block))
        messages: list[Any] = [{"role": "user", "content": turn.prefixed(Q)}]
        try:
            while True:
                m = client.chat.completions.create(model="m", messages=messages).choices[0].message
                messages.append(m)
                if not m.tool_calls:
                    break
                raise RuntimeError("the tool's backend is down")
        except RuntimeError:
            pass  # the worker logs it and serves the next message
    assert [("alice", None, True), ("bob", None, True), ("carol", None, True)] == seen


def test_the_async_worker_too(store: InMemoryStore) -> None:
    bot = ChannelAdapter(store, AGENT, channel_name="slack")
    http = httpx2.AsyncClient(transport=transport(lambda n: n == 1))
    client = wrap_openai(AsyncOpenAI(api_key="k", http_client=http), store, AGENT)

    async def worker() -> list[str | None]:
        reasons = []
        for i, who in enumerate(["alice", "bob"]):
            turn = await bot.ahandle(message(who, i))
            reasons.append(turn.policy.reason)
            res = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": turn.prefixed(Q)}]
            )
            if res.choices[0].message.tool_calls:
                continue  # the tool failed: on to the next message
        return reasons

    assert [None, None] == asyncio.run(worker())


def test_a_tool_that_relays_a_message_is_still_a_sub_turn(store: InMemoryStore) -> None:
    """Inside the open tool loop, from a deeper frame (the tool's own code), a channel
    turn is the agent's nested work, as rule 5 says."""
    bot = ChannelAdapter(store, AGENT, channel_name="slack")
    client = wrap_openai(
        OpenAI(api_key="k", http_client=httpx2.Client(transport=transport(lambda n: n == 1))),
        store,
        AGENT,
    )

    def relay_tool() -> str | None:
        return bot.handle(message("general", 9)).policy.reason

    messages: list[Any] = [{"role": "user", "content": Q}]
    m = client.chat.completions.create(model="m", messages=messages).choices[0].message
    assert m.tool_calls
    assert "sub_turn" == relay_tool()
