"""The memory tools' definitions: names, descriptions, JSON schemas and the refusals.

This module owns what the model is told: the three :class:`MemoryTool` values
(``memory_store``, ``memory_recall``, ``memory_forget``), the limits on what
it may write (content length, categories, keys reserved for the conversation
log) and the one-line refusals it reads back. :mod:`.tools` binds them to a
store and a turn.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from attrs import frozen

from memory_inject.config import MemoryInjectConfig
from memory_inject.models import MemoryEntry
from memory_inject.stages.filters import skip_reason
from memory_inject.stages.threat import threat_scan_for

__all__ = [
    "CATEGORIES",
    "CATEGORY_HELP",
    "CURATED_REFUSED",
    "FORGET",
    "MAX_TOOL_CONTENT",
    "RECALL",
    "RESERVED",
    "SHARED_REFUSED",
    "STORE",
    "TOOLS",
    "TOOL_SOURCES",
    "MemoryTool",
    "refuse_unshown",
]

#: The longest text the ``memory_store`` tool writes (a fact, not a transcript).
MAX_TOOL_CONTENT = 2000
STORE, RECALL, FORGET = "memory_store", "memory_recall", "memory_forget"
CATEGORIES = ("core", "daily", "conversation")
#: What the model is told each category is for: a fact that lasts must not be stored as
#: ``daily``, which fades (a hunter's model stored a weekly event as daily and lost it).
CATEGORY_HELP = (
    "core (the default): a lasting fact, such as a preference, a name, an address or a "
    "recurring event; daily: a note that matters today and fades within days; "
    "conversation: part of this chat."
)


@frozen
class MemoryTool:
    """One tool: its name, what the model is told, and its arguments' JSON schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]


def _object(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


TOOLS: dict[str, MemoryTool] = {
    STORE: MemoryTool(
        STORE,
        "Remember a fact for later conversations. Use one self-contained sentence; "
        "storing the same key again replaces it.",
        _object(
            {
                "content": {"type": "string", "description": "The fact, as one sentence."},
                "key": {"type": "string", "description": "A short snake_case name (optional)."},
                "category": {
                    "type": "string",
                    "enum": list(CATEGORIES),
                    "description": CATEGORY_HELP,
                },
            },
            ["content"],
        ),
    ),
    RECALL: MemoryTool(
        RECALL,
        "Search long-term memory for facts relevant to a question.",
        _object({"query": {"type": "string", "description": "What to look for."}}, ["query"]),
    ),
    FORGET: MemoryTool(
        FORGET,
        "Forget a remembered fact by its key (shown before each fact as 'key:').",
        _object({"key": {"type": "string", "description": "The key to forget."}}, ["key"]),
    ),
}

#: Sources the memory tools stamp: a shared row with another one is curated (the host's).
TOOL_SOURCES = ("tool",)
#: Keys the model may not choose: the conversation log's (``user_msg_...``, ``a:b``) and
#: any holding a control character.
RESERVED = re.compile(r"^user_msg(_|$)|:|[\x00-\x1f\x7f]")

#: The shape of a key the tools derive (``memory_key``): the model may name one only to
#: update its own row, so no answer tells it whether another scope holds one.
DERIVED = re.compile(r"mem_[0-9a-f]{16}")
DERIVED_REFUSED = (
    "keys shaped 'mem_' and 16 hex digits are made by this tool; leave 'key' out to store "
    "a new memory, or give the key of one of yours"
)

SHARED_REFUSED = (
    "This memory is shared by every user; the host has not let the model change shared "
    "memories, so nothing was changed."
)
CURATED_REFUSED = (
    "That shared memory was written by the host; the model may not replace or forget it, "
    "so nothing was changed."
)


def refuse_unshown(key: str, text: object, key_given: bool, config: MemoryInjectConfig) -> None:
    """``ValueError`` (the model's one-line answer) for a write no block would ever show:
    a key of the conversation log's shape (chosen by the model), a key or text the skip
    rules drop (``USER_MSG_1``, ``tz_history``, ``[IMAGE: ...]``), or a memory the threat
    scan of ``config`` withholds (an instruction to the model): stored, it would be kept for
    nothing, and the model told "Remembered"."""
    if key_given and RESERVED.search(key):
        raise ValueError(
            "keys starting with 'user_msg' or holding ':' or control characters belong to "
            "the conversation log; choose another key"
        )
    if not isinstance(text, str):
        return
    if (rule := skip_reason(key, text)) is not None:
        raise ValueError(
            f"a memory like this is never shown ({rule}: the conversation log's keys, "
            "*_history, image markers and tool results are left out of every block); "
            "choose another key or write it as a plain fact"
        )
    scan = threat_scan_for(config)
    threat = scan.reason(MemoryEntry(key, text, "core", None)) if scan is not None else None
    if threat is not None:
        raise ValueError(
            f"a memory like this is never shown ({threat}: it reads as an instruction to the "
            "model, and every block withholds those); nothing was stored"
        )
