"""The ids of the tool calls a model's reply makes, read alike from a response and from
the messages a host sends back: what tells two conversations with the same words apart.

Two conversations of one wrapper and sessions that start with the same user message have
the same fingerprint (``_client``); each step of their tool loops carries the calls the
model made in that conversation, whose ids the provider makes unique (Chat Completions'
``tool_calls[].id``, Anthropic's ``tool_use`` block ``id``, the Responses API's
``call_id``). A block is remembered under those ids when the reply asks for tools, so the
next step of each conversation gets the block that conversation was sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .messages import get_field

__all__ = ["call_ids", "reply_items"]


def reply_items(resp: Any) -> list[Any]:
    """The messages and output items of a response, whatever its API: Chat Completions'
    ``choices[].message``, the Anthropic message itself, the Responses API's ``output``."""
    try:
        choices = get_field(resp, "choices") or ()
        output = get_field(resp, "output") or ()
        return [*(get_field(c, "message") for c in choices), resp, *output]
    except TypeError:  # not iterable: a response of another shape holds no calls
        return [resp]


def call_ids(items: Iterable[Any]) -> frozenset[str]:
    """The tool-call ids the messages or output items hold."""
    out: set[str] = set()
    for item in items:
        _add(out, get_field(item, "call_id"))
        for tc in _seq(get_field(item, "tool_calls")):
            _add(out, get_field(tc, "id"))
        for block in _seq(get_field(item, "content")):
            if get_field(block, "type") == "tool_use":
                _add(out, get_field(block, "id"))
    return frozenset(out)


def _seq(value: Any) -> Iterable[Any]:
    return value if isinstance(value, list | tuple) else ()


def _add(out: set[str], value: Any) -> None:
    if isinstance(value, str) and value:
        out.add(value)
