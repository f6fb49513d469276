"""The plain Anthropic client with memory: ``messages.create``.

::

    from anthropic import Anthropic
    from memory_inject.adapters.anthropic_client import wrap_anthropic

    client = wrap_anthropic(Anthropic(), store, agent, sessions=["cli_main"])
    response = client.messages.create(model=MODEL, max_tokens=1024, system=SYSTEM,
                                      messages=messages, tools=tools)
    messages.append({"role": "assistant", "content": response.content})  # as Anthropic's docs do

Everything else is the SDK's client (``AsyncAnthropic`` works the same way
with ``await``). The block goes on the user's message, never into ``system``
and never onto a ``tool_result`` carrier; a new user message is a new turn,
tool-loop calls reuse the block, a nested agent inside a tool is
``sub_turn``. See :mod:`.openai_client` and :mod:`._client` for the rules.
"""

from __future__ import annotations

from typing import Any, TypeVar, Unpack, cast

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory

from ._client import ClientMemory, ClientOptions
from ._client_call import Client, Create, Endpoint, memory_of
from ._client_stream import Seen
from .messages import get_field

__all__ = ["AnthropicWithMemory", "memory_of", "wrap_anthropic"]

C = TypeVar("C")


def _wants_tools(resp: Any) -> bool:
    return bool(get_field(resp, "stop_reason") == "tool_use")


def _see(seen: Seen, event: Any) -> None:
    """A streamed event: a ``tool_use`` block's id, the stop reason, ``message_stop``."""
    kind = get_field(event, "type")
    if kind == "content_block_start":
        block = get_field(event, "content_block")
        if get_field(block, "type") == "tool_use":
            seen.add(get_field(block, "id"))
    elif kind == "message_delta":
        seen.asks = get_field(get_field(event, "delta"), "stop_reason") == "tool_use"
    elif kind == "message_stop":
        seen.done = True


MESSAGES = Endpoint("messages", "anthropic", _wants_tools, _see)


class AnthropicWithMemory(Client):
    """An ``Anthropic`` / ``AsyncAnthropic`` whose ``messages.create`` places the block."""

    @property
    def messages(self) -> Create:
        """``client.messages``, with ``create`` placing the block."""
        return Create(self._target.messages, self.memory, MESSAGES)


def wrap_anthropic(
    client: C, store: Memory, agent: AgentConfig, **options: Unpack[ClientOptions]
) -> C:
    """``client`` with memory, typed as the client itself (see :class:`ClientOptions`)."""
    return cast(C, AnthropicWithMemory(client, ClientMemory(store, agent, **options)))
