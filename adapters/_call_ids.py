"""The ids of the tool calls a model's reply makes, read alike from a response and from
the messages a host sends back: what tells two conversations with the same words apart.

Two conversations of one wrapper and sessions that start with the same user message have
the same fingerprint (``_client``); each step of their tool loops carries the calls the
model made in that conversation, whose ids the provider makes unique (Chat Completions'
``tool_calls[].id``, Anthropic's ``tool_use`` block ``id``, the Responses API's
``call_id``). A block is remembered under those ids when the reply asks for tools, so the
next step of each conversation gets the block that conversation was sent.

The same ids tie a step to its turn when the step carries no user message: a Responses
loop on server-side state (``previous_response_id``, ``conversation=``) sends only the
tools' ``function_call_output`` items, so their ``call_id`` is all that says which turn
they continue, and which turn the model's answer to them ends (:class:`Steps`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

from .messages import get_field

__all__ = ["Steps", "call_ids", "reply_items"]


class Steps:
    """The tool calls a wrapper's turns asked for, by id: the turn's fingerprint and the
    block sent with the request whose reply made the call (the oldest forgotten first)."""

    def __init__(self, size: int) -> None:
        """Remember at most ``size`` calls."""
        self._size = size
        self._by_id: OrderedDict[str, tuple[str, str | None]] = OrderedDict()

    def note(self, fingerprint: str, block: str | None, ids: Iterable[str]) -> None:
        """The reply to the turn of ``fingerprint``, sent with ``block``, made calls ``ids``."""
        for cid in ids:
            self._by_id[cid] = (fingerprint, block)
        while len(self._by_id) > self._size:
            self._by_id.popitem(last=False)

    def _found(self, items: Iterable[Any]) -> Iterator[tuple[str, str | None]]:
        if not self._by_id:
            return iter(())
        found = (self._by_id.get(c) for c in sorted(call_ids(items)))
        return (f for f in found if f is not None)  # another thread may have trimmed it

    def block(self, items: Iterable[Any]) -> str | None:
        """The block the calls answered in ``items`` were made under (None: not known)."""
        return next((b for _, b in self._found(items) if b is not None), None)

    def turns(self, items: Iterable[Any]) -> frozenset[str]:
        """The fingerprints of the turns whose calls ``items`` answer (or repeat)."""
        return frozenset(fp for fp, _ in self._found(items))


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
