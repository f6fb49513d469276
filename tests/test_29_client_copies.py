"""A wrapped SDK client's copies and its ``beta`` namespace keep the memory.

``wrap_openai(...).with_options(timeout=30)`` (the SDKs' own idiom for a per-request
timeout or retries), ``.copy(...)``, and Anthropic's ``beta.messages`` returned the
SDK's own objects: the request went out with no block and no event (found by a helper
using the real SDKs). Requests go through the SDKs' HTTP client with a mock transport.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from anthropic import Anthropic
from openai import OpenAI

from memory_inject import AgentConfig, InMemoryStore
from memory_inject.testing import recording
from tests.test_11_tools import _anthropic_reply

if TYPE_CHECKING:
    from adapters.anthropic_client import wrap_anthropic
    from adapters.openai_client import wrap_openai
else:
    from memory_inject.adapters.anthropic_client import wrap_anthropic
    from memory_inject.adapters.openai_client import wrap_openai

ASK = [{"role": "user", "content": "where does Alice deploy?"}]

_CHAT = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ],
}
_MESSAGE = _anthropic_reply()


class _Server:
    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        return httpx2.Response(200, json=self.reply)


def _store() -> InMemoryStore:
    store = InMemoryStore()
    store.store("deploy", "Alice deploys to prod-alice.", session_id="alice")
    return store


def _openai(server: _Server) -> Any:
    client = OpenAI(api_key="x", http_client=httpx2.Client(transport=httpx2.MockTransport(server)))
    return wrap_openai(client, _store(), AgentConfig(agent="t"), sessions=["alice"])


def _anthropic(server: _Server) -> Any:
    client = Anthropic(
        api_key="x", http_client=httpx2.Client(transport=httpx2.MockTransport(server))
    )
    return wrap_anthropic(client, _store(), AgentConfig(agent="t"), sessions=["alice"])


CALLS: dict[str, tuple[dict[str, Any], Callable[[_Server], Any], Callable[[Any], Any]]] = {
    "openai with_options": (
        _CHAT,
        _openai,
        lambda c: c.with_options(timeout=30).chat.completions.create(model="m", messages=ASK),
    ),
    "openai copy": (
        _CHAT,
        _openai,
        lambda c: c.copy(max_retries=0).chat.completions.create(model="m", messages=ASK),
    ),
    "anthropic with_options": (
        _MESSAGE,
        _anthropic,
        lambda c: c.with_options(max_retries=5).messages.create(
            model="c", max_tokens=5, messages=ASK
        ),
    ),
    "anthropic beta.messages": (
        _MESSAGE,
        _anthropic,
        lambda c: c.beta.messages.create(model="c", max_tokens=5, messages=ASK),
    ),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_copy_or_the_beta_namespace_sends_the_block_and_one_event(name: str) -> None:
    reply, make, ask = CALLS[name]
    server = _Server(reply)
    client = make(server)
    with recording() as rec:
        ask(client)
    [body] = server.bodies
    assert str(body["messages"][0]["content"]).startswith("[Memory context]\n- deploy: ")
    assert [("deploy",)] == [tuple(e.rendered_keys) for e in rec.events]


@pytest.mark.parametrize("shape", ["generator", "map", "tuple"])
def test_messages_given_as_any_iterable_get_the_block_and_one_event(shape: str) -> None:
    """The SDKs type ``messages`` as an ``Iterable``: a generator or a ``map`` was forwarded
    untouched, with no block and no event."""
    server = _Server(_CHAT)
    client = _openai(server)
    history = [{"role": "system", "content": "sys"}, *ASK]
    given: Any = {
        "generator": (m for m in history),
        "map": map(dict, history),
        "tuple": tuple(history),
    }[shape]
    with recording() as rec:
        client.chat.completions.create(model="m", messages=given)
    [body] = server.bodies
    assert "sys" == body["messages"][0]["content"]
    assert str(body["messages"][1]["content"]).startswith("[Memory context]\n- deploy: ")
    assert [("deploy",)] == [tuple(e.rendered_keys) for e in rec.events]
