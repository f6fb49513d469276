"""``copy.copy`` of a wrapped SDK client is a working wrapper; copy, deepcopy and pickle
never recurse (issue 36).

``copy.copy(wrap_openai(OpenAI(...)))`` raised ``RecursionError``: copy builds a bare
instance and probes it (``__setstate__``) before filling it, and the wrapper's
``__getattr__`` looked up its own ``_target`` on it, which was not set yet. The SDK's
clients copy (a shallow copy sharing the HTTP client) and refuse ``deepcopy`` and
``pickle`` with a ``TypeError``: a wrapper now does the same, its copies keeping the
memory. Requests go through the SDKs' HTTP client with a mock transport.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from anthropic import Anthropic
from openai import AsyncOpenAI, OpenAI

from memory_inject import AgentConfig, InMemoryStore
from memory_inject.testing import recording
from tests.test_11_tools import _anthropic_reply
from tests.test_29_client_copies import _CHAT
from tests.test_29_client_copies import _Server as _SyncServer

if TYPE_CHECKING:
    from adapters._client_call import memory_of
    from adapters.anthropic_client import wrap_anthropic
    from adapters.openai_client import wrap_openai
else:
    from memory_inject.adapters._client_call import memory_of
    from memory_inject.adapters.anthropic_client import wrap_anthropic
    from memory_inject.adapters.openai_client import wrap_openai

ASK: Any = [{"role": "user", "content": "where does Alice deploy?"}]
BLOCK = "[Memory context]\n- deploy: "


class _Server(_SyncServer):
    """test_29's mock server, answering async clients too."""

    async def areply(self, request: httpx2.Request) -> httpx2.Response:
        return self(request)


def _store() -> InMemoryStore:
    store = InMemoryStore()
    store.store("deploy", "Alice deploys to prod-alice.", session_id="alice")
    return store


def _openai(server: _Server) -> Any:
    http = httpx2.Client(transport=httpx2.MockTransport(server))
    client = OpenAI(api_key="sk-test", base_url="http://mock/v1", http_client=http)
    return wrap_openai(client, _store(), AgentConfig(agent="t"), sessions=["alice"])


def _assert_one_block(server: _Server, key: str = "messages") -> None:
    [body] = server.bodies
    assert str(body[key][0]["content"]).startswith(BLOCK), body


def test_copy_of_a_wrapped_openai_client_is_a_working_wrapper() -> None:
    server = _Server(_CHAT)
    client = _openai(server)
    dup = copy.copy(client)
    assert isinstance(dup, OpenAI)
    assert dup is not client
    assert "sk-test" == dup.api_key
    assert str(dup.base_url).startswith("http://mock/v1")
    assert memory_of(dup) is memory_of(client)  # the same memory, as client.copy() keeps
    assert vars(dup)["_target"] is not vars(client)["_target"]  # the SDK client copied too
    with recording() as rec:
        reply = dup.chat.completions.create(model="m", messages=ASK)
    assert "ok" == reply.choices[0].message.content
    _assert_one_block(server)
    assert [("deploy",)] == [tuple(e.rendered_keys) for e in rec.events]
    # the original still works, and a copy of the copy as well
    server.bodies.clear()
    client.chat.completions.create(model="m", messages=ASK)
    _assert_one_block(server)
    server.bodies.clear()
    copy.copy(dup).responses  # noqa: B018 - the wrapped resource, reachable
    copy.copy(dup).chat.completions.create(model="m", messages=ASK)
    _assert_one_block(server)


def test_copy_of_a_wrapped_async_client_and_of_a_resource() -> None:
    server = _Server(_CHAT)
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(server.areply))
    base = AsyncOpenAI(api_key="sk-test", base_url="http://mock/v1", http_client=http)
    client = wrap_openai(base, _store(), AgentConfig(agent="t"), sessions=["alice"])
    dup = copy.copy(client)
    completions = copy.copy(client.chat.completions)
    assert isinstance(dup, AsyncOpenAI)

    async def main() -> None:
        await dup.chat.completions.create(model="m", messages=ASK)
        await completions.create(model="m", messages=ASK)

    with recording() as rec:
        asyncio.run(main())
    assert 2 == len(server.bodies)
    for body in server.bodies:
        assert str(body["messages"][0]["content"]).startswith(BLOCK)
    assert 2 == len(rec.events)


def test_copy_of_a_wrapped_anthropic_client() -> None:
    server = _Server(_anthropic_reply())
    http = httpx2.Client(transport=httpx2.MockTransport(server))
    base = Anthropic(api_key="x", http_client=http)
    client = wrap_anthropic(base, _store(), AgentConfig(agent="t"), sessions=["alice"])
    dup = copy.copy(client)
    assert isinstance(dup, Anthropic)
    dup.messages.create(model="c", max_tokens=5, messages=ASK)
    _assert_one_block(server)


def test_deepcopy_and_pickle_fail_as_the_sdks_own_not_by_recursion() -> None:
    """The SDK's client has no deep copy and no pickle (its HTTP client holds a lock):
    the wrapper gives the same error type, and never a ``RecursionError``."""
    client = _openai(_Server(_CHAT))
    base = vars(client)["_target"]
    for attempt in (copy.deepcopy, pickle.dumps):
        with pytest.raises(Exception) as sdk:  # noqa: PT011 - whatever the SDK raises
            attempt(base)
        with pytest.raises(type(sdk.value)):
            attempt(client)
        with pytest.raises(type(sdk.value)):
            attempt(client.chat.completions)


def test_deepcopy_of_a_wrapper_whose_target_copies() -> None:
    """A wrapped object that has a deep copy: the copy is a wrapper of it, same memory."""
    client = _openai(_Server(_CHAT))
    chat = client.chat
    vars(chat)["_target"] = {"completions": ["x"]}  # a stand-in that deep-copies
    dup = copy.deepcopy(chat)
    assert type(dup) is type(chat)
    assert vars(dup)["_target"] == vars(chat)["_target"]
    assert vars(dup)["_target"] is not vars(chat)["_target"]
    assert vars(dup)["memory"] is vars(chat)["memory"]


def test_a_bare_wrapper_has_no_attributes_instead_of_recursing() -> None:
    """What copy and pickle probe on the instance they make before filling it."""
    client = _openai(_Server(_CHAT))
    for wrapper in (client, client.chat, client.chat.completions):
        bare = object.__new__(type(wrapper))
        assert not hasattr(bare, "__setstate__")
        assert not hasattr(bare, "_target")
        assert not hasattr(bare, "memory")
        assert not hasattr(bare, "api_key")
