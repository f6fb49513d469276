"""The plain OpenAI client with memory: ``chat.completions.create`` and ``responses.create``.

::

    from openai import OpenAI
    from memory_inject.adapters.openai_client import wrap_openai

    client = wrap_openai(OpenAI(), store, agent, sessions=["cli_main"])
    reply = client.chat.completions.create(model=MODEL, messages=history, tools=tools)
    history.append(reply.choices[0].message)  # the SDK's own object, as OpenAI's guide does

The wrapped client is the SDK's client in everything else (attributes are
forwarded, ``AsyncOpenAI`` works the same way with ``await``). Each call's
``messages`` (or Responses ``input``, a string or a list of items) gets the
block of its turn on the user's message: a new user message is a new turn
(one recall, one event), tool-loop calls reuse the block, a nested agent
inside a tool is ``sub_turn``. The caller's list is never changed; earlier
turns' blocks are re-placed byte for byte (``earlier_blocks="keep"``) or
left out (``"strip"``). The system prompt and ``instructions`` are never
touched. See :mod:`._client` for the rules and docs/adapters.md for the costs.

``parse`` and the ``stream`` helper of both resources place the block as ``create``
does, and so do the client's copies (``with_options``, ``copy``) and ``beta``. Not
intercepted: ``with_raw_response`` / ``with_streaming_response`` calls.
``previous_response_id`` and ``conversation=`` chains see only the new input (the
server holds the rest, with the block it was sent): a request of the tools' outputs
alone continues the turn whose calls they answer, and the answer to it ends that turn.
"""

from __future__ import annotations

from typing import Any, TypeVar, Unpack, cast

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory

from ._client import ClientMemory, ClientOptions
from ._client_call import Client, Create, Endpoint, Forward, memory_of
from ._client_stream import Seen
from .messages import get_field

__all__ = ["CLIENT_TOOL_CALLS", "OpenAIWithMemory", "memory_of", "wrap_openai"]

C = TypeVar("C")

#: Responses output items the caller must answer (a turn stays open after them).
CLIENT_TOOL_CALLS: frozenset[str] = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
    }
)


def _chat_wants_tools(resp: Any) -> bool:
    return any(
        get_field(get_field(c, "message"), "tool_calls")
        or get_field(c, "finish_reason") == "tool_calls"
        for c in get_field(resp, "choices") or ()
    )


def _responses_wants_tools(resp: Any) -> bool:
    return any(
        get_field(item, "type") in CLIENT_TOOL_CALLS for item in get_field(resp, "output") or ()
    )


def _chat_see(seen: Seen, event: Any) -> None:
    """A streamed chunk (or the stream helper's ``chunk`` event): the calls' ids in the
    first delta of each call, ``finish_reason`` per choice; done once all have one."""
    if get_field(event, "type") == "chunk":
        event = get_field(event, "chunk")
    for choice in get_field(event, "choices") or ():
        for tc in get_field(get_field(choice, "delta"), "tool_calls") or ():
            seen.asks = True
            seen.add(get_field(tc, "id"))
        finish = get_field(choice, "finish_reason")
        if finish is None:
            seen.pending.add(get_field(choice, "index"))
            continue
        seen.pending.discard(get_field(choice, "index"))
        seen.asks = seen.asks or finish == "tool_calls"
        seen.done = not seen.pending


_RESPONSE_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _responses_see(seen: Seen, event: Any) -> None:
    """A Responses event: an output item the caller must answer, and the reply's end."""
    kind = get_field(event, "type")
    item = get_field(event, "item")
    if kind in {"response.output_item.added", "response.output_item.done"}:
        if get_field(item, "type") in CLIENT_TOOL_CALLS:
            seen.asks = True
            seen.add(get_field(item, "call_id"))
    elif kind in _RESPONSE_ENDS or kind == "error":
        seen.done = True


CHAT = Endpoint("messages", "openai", _chat_wants_tools, _chat_see)
RESPONSES = Endpoint("input", "openai", _responses_wants_tools, _responses_see)


class _Chat(Forward):
    @property
    def completions(self) -> Create:
        return Create(self._target.completions, self.memory, CHAT)


class OpenAIWithMemory(Client):
    """An ``OpenAI`` / ``AsyncOpenAI`` whose create calls place the turn's block."""

    @property
    def chat(self) -> _Chat:
        """``client.chat``, with ``completions.create`` placing the block."""
        return _Chat(self._target.chat, self.memory)

    @property
    def responses(self) -> Create:
        """``client.responses``, with ``create`` placing the block in ``input``."""
        return Create(self._target.responses, self.memory, RESPONSES)


def wrap_openai(
    client: C, store: Memory, agent: AgentConfig, **options: Unpack[ClientOptions]
) -> C:
    """``client`` with memory, typed as the client itself (see :class:`ClientOptions`).

    The store is checked here: a path or ``None`` is a ``TypeError`` naming it.
    """
    return cast(C, OpenAIWithMemory(client, ClientMemory(store, agent, **options)))
