"""One model call of a tool loop, made each way an SDK offers, sync and async.

A driver sends ``messages`` (or the Responses ``input``) with the tools, reads the reply
the way that call style is read (chunks, events, the helper's final object), and gives
back the items to append to the conversation and the tool calls made (id, name). The
conversation then goes on exactly as OpenAI's and Anthropic's guides build it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from tests._sse import TOOL

Reply = tuple[list[Any], list[tuple[str, str]]]

_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
CHAT_TOOLS = [{"type": "function", "function": {"name": TOOL, "parameters": _SCHEMA}}]
RESPONSES_TOOLS = [{"type": "function", "name": TOOL, "parameters": _SCHEMA, "strict": False}]
ANTHROPIC_TOOLS = [{"name": TOOL, "input_schema": _SCHEMA}]


def _chat_kw(messages: list[Any], tools: bool) -> dict[str, Any]:
    return {"model": "m", "messages": messages, **({"tools": CHAT_TOOLS} if tools else {})}


def _responses_kw(messages: list[Any], tools: bool) -> dict[str, Any]:
    return {"model": "m", "input": messages, **({"tools": RESPONSES_TOOLS} if tools else {})}


def _anthropic_kw(messages: list[Any], tools: bool) -> dict[str, Any]:
    extra = {"tools": ANTHROPIC_TOOLS} if tools else {}
    return {"model": "m", "max_tokens": 64, "messages": messages, **extra}


class _ChatChunks:
    """Chat Completions chunks folded into one assistant message, as a host does."""

    def __init__(self) -> None:
        self.text = ""
        self.calls: dict[int, dict[str, Any]] = {}

    def add(self, chunk: Any) -> None:
        for choice in chunk.choices:
            self.text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or ():
                call = self.calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = tc.id or call["id"]
                if tc.function is not None:
                    call["name"] = tc.function.name or call["name"]
                    call["arguments"] += tc.function.arguments or ""

    def reply(self) -> Reply:
        calls = [self.calls[i] for i in sorted(self.calls)]
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls
            ]
        return [message], [(c["id"], c["name"]) for c in calls]


def _chat_message(message: Any) -> Reply:
    calls = [(tc.id, tc.function.name) for tc in message.tool_calls or ()]
    return [message.model_dump(exclude_none=True, exclude={"parsed"})], calls


def _responses_output(output: list[Any]) -> Reply:
    items = [o.model_dump(exclude_none=True) for o in output]
    calls = [(o.call_id, o.name) for o in output if o.type == "function_call"]
    return [{k: v for k, v in i.items() if k != "parsed_arguments"} for i in items], calls


def _anthropic_content(content: list[Any]) -> Reply:
    parts = [b.model_dump(exclude_none=True, exclude={"parsed_output"}) for b in content]
    calls = [(b.id, b.name) for b in content if b.type == "tool_use"]
    return [{"role": "assistant", "content": parts}], calls


def _anthropic_blocks(events: list[Any]) -> Reply:
    blocks: dict[int, dict[str, Any]] = {}
    for e in events:
        if e.type == "content_block_start":
            blocks[e.index] = e.content_block.model_dump(exclude_none=True)
        elif e.type == "content_block_delta" and e.delta.type == "text_delta":
            blocks[e.index]["text"] += e.delta.text
        elif e.type == "content_block_delta" and e.delta.type == "input_json_delta":
            blocks[e.index]["partial"] = blocks[e.index].get("partial", "") + e.delta.partial_json
    parts = []
    for i in sorted(blocks):
        b = dict(blocks[i])
        if b["type"] == "tool_use":
            b["input"] = json.loads(b.pop("partial", "") or "{}")
        parts.append(b)
    calls = [(b["id"], b["name"]) for b in parts if b["type"] == "tool_use"]
    return [{"role": "assistant", "content": parts}], calls


def _kw(api: str, messages: list[Any], tools: bool) -> dict[str, Any]:
    return {"chat": _chat_kw, "responses": _responses_kw, "anthropic": _anthropic_kw}[api](
        messages, tools
    )


def _results(api: str, calls: list[tuple[str, str]]) -> list[Any]:
    if api == "anthropic":
        return [{"role": "user", "content": [anthropic_result(c)["content"][0] for c in calls]}]
    return [chat_result(c) if api == "chat" else responses_result(c) for c in calls]


def _read_chunks(stream: Any) -> Reply:
    folded = _ChatChunks()
    for chunk in stream:
        folded.add(chunk)
    return folded.reply()


def _completed(events: list[Any]) -> Reply:
    return _responses_output(
        next(e.response for e in events if e.type == "response.completed").output
    )


def tool_loop(
    client: Any, style: str, messages: list[Any], tools: bool, run_tool: Callable[[], None]
) -> None:
    """One user turn: call, append the reply, run the tools, until a text answer.

    Every model call is made here, in this frame, as a host's loop makes it (a turn
    stays open only while the code that made its call runs)."""
    api = style.split("_", maxsplit=1)[0]
    while True:
        kw = _kw(api, messages, tools)
        if style == "chat_create":
            reply = _read_chunks(client.chat.completions.create(**kw, stream=True))
        elif style == "chat_stream":
            with client.chat.completions.stream(**kw) as stream:
                for _ in stream:
                    pass
                reply = _chat_message(stream.get_final_completion().choices[0].message)
        elif style == "chat_plain":
            reply = _chat_message(client.chat.completions.create(**kw).choices[0].message)
        elif style == "responses_create":
            with client.responses.create(**kw, stream=True) as stream:
                reply = _completed(list(stream))
        elif style == "responses_stream":
            with client.responses.stream(**kw) as stream:
                reply = _responses_output(stream.get_final_response().output)
        elif style == "responses_plain":
            reply = _responses_output(client.responses.create(**kw).output)
        elif style == "anthropic_create":
            reply = _anthropic_blocks(list(client.messages.create(**kw, stream=True)))
        elif style == "anthropic_stream":
            with client.messages.stream(**kw) as stream:
                reply = _anthropic_content(stream.get_final_message().content)
        else:
            reply = _anthropic_content(client.messages.create(**kw).content)
        messages += reply[0]
        if not reply[1]:
            return
        run_tool()
        messages += _results(api, reply[1])


async def atool_loop(
    client: Any,
    style: str,
    messages: list[Any],
    tools: bool,
    run_tool: Callable[[], Awaitable[None]],
) -> None:
    """The async twin of :func:`tool_loop`."""
    api = style.split("_", maxsplit=1)[0]
    while True:
        kw = _kw(api, messages, tools)
        if style == "chat_create":
            folded = _ChatChunks()
            async for chunk in await client.chat.completions.create(**kw, stream=True):
                folded.add(chunk)
            reply = folded.reply()
        elif style == "chat_stream":
            async with client.chat.completions.stream(**kw) as stream:
                async for _ in stream:
                    pass
                final = await stream.get_final_completion()
                reply = _chat_message(final.choices[0].message)
        elif style == "chat_plain":
            reply = _chat_message((await client.chat.completions.create(**kw)).choices[0].message)
        elif style == "responses_create":
            async with await client.responses.create(**kw, stream=True) as stream:
                reply = _completed([e async for e in stream])
        elif style == "responses_stream":
            async with client.responses.stream(**kw) as stream:
                reply = _responses_output((await stream.get_final_response()).output)
        elif style == "responses_plain":
            reply = _responses_output((await client.responses.create(**kw)).output)
        elif style == "anthropic_create":
            stream = await client.messages.create(**kw, stream=True)
            reply = _anthropic_blocks([e async for e in stream])
        elif style == "anthropic_stream":
            async with client.messages.stream(**kw) as stream:
                reply = _anthropic_content((await stream.get_final_message()).content)
        else:
            reply = _anthropic_content((await client.messages.create(**kw)).content)
        messages += reply[0]
        if not reply[1]:
            return
        await run_tool()
        messages += _results(api, reply[1])


def chat_result(call: tuple[str, str]) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call[0], "content": "prod-3 runbook"}


def responses_result(call: tuple[str, str]) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call[0], "output": "prod-3 runbook"}


def anthropic_result(call: tuple[str, str]) -> dict[str, Any]:
    part = {"type": "tool_result", "tool_use_id": call[0], "content": "prod-3 runbook"}
    return {"role": "user", "content": [part]}
