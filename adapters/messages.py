"""Where the block goes in a chat request: OpenAI chat and Anthropic messages lists.

The system prompt is never touched, so the provider's cached prefix survives
every turn (seed 000). Two placements:

``prefix_user`` (default, zeroclaw's wire format)
    The block goes in front of the user's message. A string content becomes
    ``block + content``. A list of content blocks gets the block as a NEW
    first text block (``{"type": "text", "text": block}``); the user's own
    blocks, their ``cache_control`` marks, images and documents stay exactly
    as they were.

``message``
    The block is a separate user-role message inserted right before the
    user's message (never a system message). Anthropic merges consecutive
    user turns into one, OpenAI accepts them as they are.

Both return a NEW list: no message is mutated, untouched messages are the
same objects, and only the user's message (or the inserted one) is new. Both
are idempotent, the way zeroclaw guards a model-switch retry: when the user's
message already starts with ``[Memory context]`` (or another renderer's
header, :data:`BLOCK_MARKERS`), or the message right before it is a block
message (a user message holding only a block), nothing is added.

"The user's message" is the last user-role message that is not a carrier
of Anthropic ``tool_result`` blocks, so a tool loop keeps pointing at the
message that started the turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar, cast

from memory_inject.render import MEMORY_CONTEXT_OPEN, RELEVANT_MEMORIES_HEADER, SECTIONED_TITLE

__all__ = [
    "APIS",
    "BLOCK_MARKERS",
    "PLACEMENTS",
    "Api",
    "Placement",
    "has_block",
    "inject_block",
    "message_text",
    "starts_with_block",
    "user_message_index",
]

Placement = Literal["prefix_user", "message"]
Api = Literal["openai", "anthropic", "auto"]
PLACEMENTS: tuple[str, ...] = ("prefix_user", "message")
APIS: tuple[str, ...] = ("openai", "anthropic", "auto")
#: How each renderer's block starts (bracket, sectioned, relevant_memories).
BLOCK_MARKERS: tuple[str, ...] = (MEMORY_CONTEXT_OPEN, SECTIONED_TITLE, RELEVANT_MEMORIES_HEADER)

M = TypeVar("M", bound=Mapping[str, Any])


def check_placement(placement: str) -> None:
    """Raise ``ValueError`` unless ``placement`` is one of :data:`PLACEMENTS`."""
    if placement not in PLACEMENTS:
        raise ValueError(f"'placement' must be one of {PLACEMENTS} (got {placement!r})")


def check_api(api: str) -> None:
    """Raise ``ValueError`` unless ``api`` is one of :data:`APIS`."""
    if api not in APIS:
        raise ValueError(f"'api' must be one of {APIS} (got {api!r})")


def _is_tool_result_carrier(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content
    )


def user_message_index(messages: Sequence[Mapping[str, Any]], *, api: Api = "auto") -> int | None:
    """Index of the user's message (see the module docstring), or None if there is none."""
    check_api(api)
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if not isinstance(msg, Mapping):
            raise TypeError(f"'messages[{i}]' must be a mapping (got {type(msg).__name__})")
        if msg.get("role") != "user":
            continue
        if api != "openai" and _is_tool_result_carrier(msg):
            continue
        return i
    return None


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message: its string content, or its text blocks joined by newlines."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"]
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def starts_with_block(text: str) -> bool:
    """zeroclaw's check: an exact, case-sensitive prefix test on the raw text (no trimming)."""
    return text.startswith(BLOCK_MARKERS)


def _first_text(message: Mapping[str, Any]) -> str | None:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        first = content[0]
        if (
            isinstance(first, Mapping)
            and first.get("type") == "text"
            and isinstance(first.get("text"), str)
        ):
            return str(first["text"])
    return None


def _is_block_message(message: Mapping[str, Any]) -> bool:
    """A message that is a block and nothing else (what the ``message`` placement inserts)."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, list) and len(content) != 1:
        return False
    text = _first_text(message)
    return text is not None and starts_with_block(text) and text.endswith("\n\n")


def has_block(messages: Sequence[Mapping[str, Any]], *, api: Api = "auto") -> bool:
    """True when this turn's block is already placed (by either placement)."""
    idx = user_message_index(messages, api=api)
    if idx is None:
        return False
    text = _first_text(messages[idx])
    if text is not None and starts_with_block(text):
        return True
    return idx > 0 and _is_block_message(messages[idx - 1])


def _prefixed(message: M, block: str) -> M:
    content = message.get("content")
    if isinstance(content, list):
        new_content: Any = [{"type": "text", "text": block}, *content]
    elif isinstance(content, str):
        new_content = block + content
    else:
        raise TypeError(
            f"'content' of the user message must be a string or a list of blocks "
            f"(got {type(content).__name__})"
        )
    return cast(M, {**message, "content": new_content})


def _block_message(target: Mapping[str, Any], block: str) -> dict[str, Any]:
    if isinstance(target.get("content"), list):
        return {"role": "user", "content": [{"type": "text", "text": block}]}
    return {"role": "user", "content": block}


def inject_block(
    messages: Sequence[M], block: str, *, placement: Placement = "prefix_user", api: Api = "auto"
) -> list[M]:
    """A new list with ``block`` placed for this turn (unchanged copy when nothing to do).

    Nothing is placed when ``block`` is empty, when there is no user message,
    or when the block is already there (idempotence).
    """
    check_placement(placement)
    out = list(messages)
    idx = user_message_index(out, api=api)
    if not block or idx is None or has_block(out, api=api):
        return out
    if placement == "prefix_user":
        out[idx] = _prefixed(out[idx], block)
    else:
        out.insert(idx, cast(M, _block_message(out[idx], block)))
    return out
