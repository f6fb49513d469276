"""Where the block goes in a chat request, whatever shape its messages have.

Read here, in one place: plain dicts; OpenAI Chat Completions params and SDK
objects (``ChatCompletionMessage``, any pydantic model); LangChain messages
(``HumanMessage``, ``AIMessage``, ``SystemMessage``, ``ToolMessage``: no
``role``, their ``type`` says it; ids kept by ``model_copy``); OpenAI Responses API
input items (``input_text`` / ``input_image`` parts, ``function_call`` /
``function_call_output`` and other role-less items); Anthropic params and SDK
objects (``Message``, ``TextBlock`` / ``ToolUseBlock`` parts). A message is
read by key (a mapping) or by attribute (anything else), so the SDKs' own
objects go through as the SDKs' docs append them, and nothing is converted
on the way: what is not the user's message is the same object afterwards.

The system prompt is never touched, so the provider's cached prefix survives
every turn (seed 000). Two placements:

``prefix_user`` (default, zeroclaw's wire format)
    The block goes in front of the user's message. A string content becomes
    ``block + content``. A list of content parts gets the block as a NEW
    first text part, of the list's own kind: ``{"type": "input_text"}`` in a
    Responses item (or whenever the parts are ``input_*``), ``{"type":
    "text"}`` otherwise, and an SDK part object when the parts are SDK
    objects. The user's own parts, their ``cache_control`` marks, images and
    documents stay exactly as they were. A pydantic user message is copied
    with ``model_copy(update={"content": ...})``, so it keeps its class.

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

A shape this module cannot read (no ``role`` and no ``type``, or a user
message whose content is neither text nor a list of parts) is an
:class:`UnreadableMessage` (a ``TypeError``) naming its index and type. The
adapters catch it: the list goes out untouched and the turn's event says why
(:func:`find_user_message` is the non-raising form they use).
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
    "UnreadableMessage",
    "find_user_message",
    "get_field",
    "has_block",
    "inject_block",
    "is_message",
    "is_user_message",
    "message_role",
    "message_text",
    "place_on",
    "starts_with_block",
    "tool_names",
    "user_message_index",
    "with_content",
]

Placement = Literal["prefix_user", "message"]
Api = Literal["openai", "anthropic", "auto"]
PLACEMENTS: tuple[str, ...] = ("prefix_user", "message")
APIS: tuple[str, ...] = ("openai", "anthropic", "auto")
#: How each renderer's block starts (bracket, sectioned, relevant_memories).
BLOCK_MARKERS: tuple[str, ...] = (MEMORY_CONTEXT_OPEN, SECTIONED_TITLE, RELEVANT_MEMORIES_HEADER)
#: Content-part types that carry text: chat and Anthropic, Responses input, Responses output.
TEXT_PARTS: frozenset[str] = frozenset({"text", "input_text", "output_text"})

M = TypeVar("M")


class UnreadableMessage(TypeError):
    """A message (or the user's content) of a shape this module cannot read or write."""


def check_placement(placement: str) -> None:
    """Raise ``ValueError`` unless ``placement`` is one of :data:`PLACEMENTS`."""
    if placement not in PLACEMENTS:
        raise ValueError(f"'placement' must be one of {PLACEMENTS} (got {placement!r})")


def check_api(api: str) -> None:
    """Raise ``ValueError`` unless ``api`` is one of :data:`APIS`."""
    if api not in APIS:
        raise ValueError(f"'api' must be one of {APIS} (got {api!r})")


def get_field(obj: object, name: str) -> Any:
    """``obj[name]`` for a mapping, ``obj.name`` for an SDK object; None when absent."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def is_message(obj: object) -> bool:
    """True for what can be read as a message or an item: a mapping, or an object with a
    string ``role`` or ``type`` (every SDK message, part and Responses item has one)."""
    if isinstance(obj, Mapping):
        return True
    return isinstance(getattr(obj, "role", None), str) or isinstance(
        getattr(obj, "type", None), str
    )


#: LangChain message types (``BaseMessage.type``) and the roles they stand for: its
#: messages have no ``role``, only a ``type``.
_LANGCHAIN_ROLES: dict[str, str] = {
    "human": "user",
    "HumanMessageChunk": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "system": "system",
    "SystemMessageChunk": "system",
    "tool": "tool",
    "ToolMessageChunk": "tool",
    "function": "tool",
}


def message_role(message: object) -> str | None:
    """The message's role: its ``role``, or for a LangChain message (no ``role``, a
    ``type`` such as ``human``) the role that type stands for; None when it has neither."""
    role = get_field(message, "role")
    if isinstance(role, str):
        return role
    if not isinstance(message, Mapping):
        kind = getattr(message, "type", None)
        if isinstance(kind, str):
            return _LANGCHAIN_ROLES.get(kind)
    return None


def _text_of_part(part: object) -> str | None:
    if get_field(part, "type") in TEXT_PARTS:
        text = get_field(part, "text")
        if isinstance(text, str):
            return text
    return None


def _is_tool_result_carrier(message: object) -> bool:
    content = get_field(message, "content")
    return isinstance(content, list) and any(get_field(b, "type") == "tool_result" for b in content)


def is_user_message(message: object, *, api: Api = "auto") -> bool:
    """True for a message that can be the user's: role ``user``, and (except with
    ``api="openai"``) not a carrier of Anthropic ``tool_result`` blocks."""
    if not is_message(message) or message_role(message) != "user":
        return False
    return api == "openai" or not _is_tool_result_carrier(message)


def _unreadable(i: int, msg: object) -> UnreadableMessage:
    return UnreadableMessage(
        f"'messages[{i}]' must be a message: a mapping, or an object with a 'role' or "
        f"'type' (got {type(msg).__name__})"
    )


def user_message_index(messages: Sequence[Any], *, api: Api = "auto") -> int | None:
    """Index of the user's message (see the module docstring), or None if there is none.

    Raises :class:`UnreadableMessage` for a message it cannot read before it
    finds the user's (guessing past it could put the block on an older turn).
    """
    check_api(api)
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if not is_message(msg):
            raise _unreadable(i, msg)
        if is_user_message(msg, api=api):
            return i
    return None


def find_user_message(
    messages: Sequence[Any], *, api: Api = "auto"
) -> tuple[int | None, str | None]:
    """``(index, None)`` of the user's message, or ``(None, problem)`` when the list (or the
    user's content) cannot be read; ``(None, None)`` when there is no user message."""
    try:
        idx = user_message_index(messages, api=api)
    except UnreadableMessage as exc:
        return None, str(exc)
    if idx is None:
        return None, None
    msg = messages[idx]
    content = get_field(msg, "content")
    if not isinstance(content, str | list):
        return None, (
            f"'messages[{idx}].content' of the user message must be a string or a list of "
            f"parts (got {type(content).__name__})"
        )
    if not isinstance(msg, Mapping) and not callable(getattr(msg, "model_copy", None)):
        return None, (
            f"'messages[{idx}]' (the user message) must be a mapping or a pydantic model to "
            f"carry the block (got {type(msg).__name__})"
        )
    return idx, None


def message_text(message: object) -> str:
    """The text of a message: its string content, or its text parts joined by newlines."""
    content = get_field(message, "content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in map(_text_of_part, content) if t is not None)
    return ""


def starts_with_block(text: str) -> bool:
    """zeroclaw's check: an exact, case-sensitive prefix test on the raw text (no trimming)."""
    return text.startswith(BLOCK_MARKERS)


def _first_text(message: object) -> str | None:
    content = get_field(message, "content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        return _text_of_part(content[0])
    return None


def _is_block_message(message: object) -> bool:
    """A message that is a block and nothing else (what the ``message`` placement inserts)."""
    if not is_message(message) or message_role(message) != "user":
        return False
    content = get_field(message, "content")
    if isinstance(content, list) and len(content) != 1:
        return False
    text = _first_text(message)
    return text is not None and starts_with_block(text) and text.endswith("\n\n")


def has_block(messages: Sequence[Any], *, api: Api = "auto") -> bool:
    """True when this turn's block is already placed (by either placement)."""
    idx = user_message_index(messages, api=api)
    return idx is not None and _placed_at(messages, idx)


def _placed_at(messages: Sequence[Any], idx: int) -> bool:
    text = _first_text(messages[idx])
    if text is not None and starts_with_block(text):
        return True
    return idx > 0 and _is_block_message(messages[idx - 1])


def with_content(message: M, content: object) -> M:
    """``message`` with a new ``content``, of the same kind: a new dict for a mapping, a
    ``model_copy`` for a pydantic model (its class and other fields kept)."""
    if isinstance(message, Mapping):
        return cast(M, {**message, "content": content})
    copy = getattr(message, "model_copy", None)
    if callable(copy):
        return cast(M, copy(update={"content": content}))
    raise UnreadableMessage(
        f"the user message must be a mapping or a pydantic model to carry the block "
        f"(got {type(message).__name__})"
    )


#: Part types only the Responses API takes (Chat Completions also has ``input_audio``).
_RESPONSES_PARTS = frozenset({"input_text", "input_image", "input_file"})


def _part_kind(message: object, content: Sequence[object]) -> str:
    """``input_text`` for Responses input (an ``input_text`` / ``input_image`` /
    ``input_file`` part, or a ``message`` item), else ``text``: an ``input_audio`` part
    alone is Chat Completions' (its schema has no ``input_text`` part)."""
    if get_field(message, "type") == "message":
        return "input_text"
    return (
        "input_text" if any(get_field(p, "type") in _RESPONSES_PARTS for p in content) else "text"
    )


def _text_part(kind: str, block: str, like: Sequence[object]) -> object:
    """A text part for ``block``: an SDK object when the list's text parts are objects."""
    for part in like:
        if not isinstance(part, Mapping) and get_field(part, "type") == kind:
            validate = getattr(type(part), "model_validate", None)
            if callable(validate):
                try:
                    return validate({"type": kind, "text": block})
                except ValueError:  # the class wants more than type and text
                    break
    return {"type": kind, "text": block}


def _prefixed(message: M, block: str) -> M:
    content = get_field(message, "content")
    if isinstance(content, list):
        new_content: Any = [_text_part(_part_kind(message, content), block, content), *content]
    elif isinstance(content, str):
        new_content = block + content
    else:
        raise UnreadableMessage(
            f"'content' of the user message must be a string or a list of parts "
            f"(got {type(content).__name__})"
        )
    return with_content(message, new_content)


def _block_message(target: object, block: str) -> dict[str, Any]:
    content = get_field(target, "content")
    if isinstance(content, list):
        return {"role": "user", "content": [{"type": _part_kind(target, content), "text": block}]}
    return {"role": "user", "content": block}


def place_on(
    messages: Sequence[M], idx: int, block: str, *, placement: Placement = "prefix_user"
) -> list[M]:
    """A new list with ``block`` placed on ``messages[idx]`` (a user message), unless it is
    empty or already there. The placement used for this turn's message and, by the client
    wrappers, to re-place an earlier turn's block byte for byte."""
    check_placement(placement)
    out = list(messages)
    if not block or _placed_at(out, idx):
        return out
    if placement == "prefix_user":
        out[idx] = _prefixed(out[idx], block)
    else:
        out.insert(idx, cast(M, _block_message(out[idx], block)))
    return out


def inject_block(
    messages: Sequence[M], block: str, *, placement: Placement = "prefix_user", api: Api = "auto"
) -> list[M]:
    """A new list with ``block`` placed for this turn (unchanged copy when nothing to do).

    Nothing is placed when ``block`` is empty, when there is no user message,
    or when the block is already there (idempotence).
    """
    check_placement(placement)
    idx = user_message_index(messages, api=api)
    if idx is None:
        return list(messages)
    return place_on(messages, idx, block, placement=placement)


def _call_name(call: object) -> object:
    """A tool call's name: OpenAI's ``function.name``, else its own ``name`` (LangChain)."""
    function = get_field(call, "function")
    return get_field(function, "name") if function is not None else get_field(call, "name")


def tool_names(messages: Sequence[Any]) -> tuple[str, ...]:
    """The tools the model called in ``messages``, each once, in first-call order.

    Read from OpenAI's and LangChain's ``tool_calls``, Responses
    ``function_call`` items and Anthropic ``tool_use`` parts; anything else
    names no tool. Never raises.
    """
    names: list[str] = []
    for message in messages:
        found: list[object] = []
        calls = get_field(message, "tool_calls")
        if isinstance(calls, list | tuple):
            found += [_call_name(c) for c in calls]
        if get_field(message, "type") == "function_call":
            found.append(get_field(message, "name"))
        content = get_field(message, "content")
        if isinstance(content, list | tuple):
            found += [get_field(p, "name") for p in content if get_field(p, "type") == "tool_use"]
        for name in found:
            if isinstance(name, str) and name and name not in names:
                names.append(name)
    return tuple(names)
