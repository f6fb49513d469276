"""Scripted model servers that stream, as the real APIs do: ``text/event-stream`` bodies.

Each server answers a conversation whose last message is the user's (and whose request
offers tools) with one tool call, and anything else (a tool's result, a request without
tools) with a text reply. It streams when the body asks for it (``"stream": true``, which
the SDKs' ``stream`` helpers always send) and answers with JSON otherwise, so one script
runs a tool loop either way. Tool-call ids are unique per reply, as a provider makes them.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx2

TOOL = "lookup"
ARGS = '{"q": "runbook"}'


def sse(events: list[tuple[str | None, dict[str, Any]]], *, done: bool = False) -> bytes:
    """An SSE body: ``event:`` lines where named, one ``data:`` per event, ``[DONE]``."""
    body = "".join(
        (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
        for name, data in events
    )
    return (body + ("data: [DONE]\n\n" if done else "")).encode()


class StreamServer:
    """Records every request body and answers it (streamed or not) by :meth:`reply`."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self._ids = itertools.count(1)

    def wants_call(self, body: dict[str, Any]) -> bool:
        raise NotImplementedError

    def streamed(self, call: str | None, n: int) -> bytes:
        raise NotImplementedError

    def plain(self, call: str | None, n: int) -> dict[str, Any]:
        raise NotImplementedError

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        n = next(self._ids)
        call = f"call_{n}" if self.wants_call(body) else None
        if body.get("stream"):
            headers = {"content-type": "text/event-stream"}
            return httpx2.Response(200, content=self.streamed(call, n), headers=headers)
        return httpx2.Response(200, json=self.plain(call, n))

    async def areply(self, request: httpx2.Request) -> httpx2.Response:
        return self(request)

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self))

    def aclient(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.areply))


def _last(items: list[Any]) -> Any:
    return items[-1] if items else {}


class ChatStreams(StreamServer):
    """Chat Completions: ``chat.completion.chunk`` objects, then ``[DONE]``."""

    def wants_call(self, body: dict[str, Any]) -> bool:
        return bool(body.get("tools")) and _last(body["messages"]).get("role") == "user"

    def _chunk(self, n: int, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {
            "id": f"c{n}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [choice],
        }

    def streamed(self, call: str | None, n: int) -> bytes:
        if call is None:
            chunks = [
                self._chunk(n, {"role": "assistant", "content": "prod-"}, None),
                self._chunk(n, {"content": f"3 ({n})"}, None),
                self._chunk(n, {}, "stop"),
            ]
        else:
            first = {"index": 0, "id": call, "type": "function"}
            chunks = [
                self._chunk(
                    n,
                    {
                        "role": "assistant",
                        "tool_calls": [{**first, "function": {"name": TOOL, "arguments": ""}}],
                    },
                    None,
                ),
                self._chunk(
                    n, {"tool_calls": [{"index": 0, "function": {"arguments": ARGS}}]}, None
                ),
                self._chunk(n, {}, "tool_calls"),
            ]
        return sse([(None, c) for c in chunks], done=True)

    def plain(self, call: str | None, n: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": f"prod-3 ({n})"}
        if call is not None:
            function = {"name": TOOL, "arguments": ARGS}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call, "type": "function", "function": function}],
            }
        finish = "tool_calls" if call else "stop"
        choice = {"index": 0, "finish_reason": finish, "message": message}
        return {
            "id": f"c{n}",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [choice],
        }


class ResponsesStreams(StreamServer):
    """The Responses API: typed events from ``response.created`` to ``response.completed``."""

    def wants_call(self, body: dict[str, Any]) -> bool:
        items = body["input"]
        last = {"role": "user"} if isinstance(items, str) else _last(items)
        return bool(body.get("tools")) and last.get("role") == "user"

    def _response(self, n: int, output: list[Any], status: str) -> dict[str, Any]:
        return {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 0,
            "status": status,
            "model": "m",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }

    def _item(self, call: str | None, n: int, *, done: bool) -> dict[str, Any]:
        status = "completed" if done else "in_progress"
        if call is not None:
            args = ARGS if done else ""
            return {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": call,
                "name": TOOL,
                "arguments": args,
                "status": status,
            }
        text = [{"type": "output_text", "text": f"prod-3 ({n})", "annotations": []}]
        return {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "status": status,
            "content": text if done else [],
        }

    def streamed(self, call: str | None, n: int) -> bytes:
        item_id = f"fc_{n}" if call else f"msg_{n}"
        middle: list[dict[str, Any]]
        if call is not None:
            middle = [
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item_id,
                    "delta": ARGS,
                },
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item_id,
                    "arguments": ARGS,
                },
            ]
        else:
            part = {"type": "output_text", "text": "", "annotations": []}
            where = {"item_id": item_id, "content_index": 0}
            middle = [
                {"type": "response.content_part.added", **where, "part": part},
                {
                    "type": "response.output_text.delta",
                    **where,
                    "delta": f"prod-3 ({n})",
                    "logprobs": [],
                },
                {
                    "type": "response.output_text.done",
                    **where,
                    "text": f"prod-3 ({n})",
                    "logprobs": [],
                },
                {
                    "type": "response.content_part.done",
                    **where,
                    "part": {**part, "text": f"prod-3 ({n})"},
                },
            ]
        events = [
            {"type": "response.created", "response": self._response(n, [], "in_progress")},
            {"type": "response.output_item.added", "item": self._item(call, n, done=False)},
            *({**e, "output_index": 0} for e in middle),
            {"type": "response.output_item.done", "item": self._item(call, n, done=True)},
            {
                "type": "response.completed",
                "response": self._response(n, [self._item(call, n, done=True)], "completed"),
            },
        ]
        for i, e in enumerate(events):
            e.setdefault("output_index", 0)
            e["sequence_number"] = i
        return sse([(e["type"], e) for e in events])

    def plain(self, call: str | None, n: int) -> dict[str, Any]:
        return self._response(n, [self._item(call, n, done=True)], "completed")


class AnthropicStreams(StreamServer):
    """Anthropic Messages: ``message_start`` ... ``message_stop``, tool input as JSON deltas."""

    def wants_call(self, body: dict[str, Any]) -> bool:
        last = _last(body["messages"])
        content = last.get("content")
        result = isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") == "tool_result" for p in content
        )
        return bool(body.get("tools")) and last.get("role") == "user" and not result

    def _message(self, n: int, content: list[Any], stop: str | None) -> dict[str, Any]:
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }

    def streamed(self, call: str | None, n: int) -> bytes:
        if call is not None:
            block = {"type": "tool_use", "id": call, "name": TOOL, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": ARGS}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": f"prod-3 ({n})"}
            stop = "end_turn"
        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": self._message(n, [], None)},
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 1},
            },
            {"type": "message_stop"},
        ]
        return sse([(str(e["type"]), e) for e in events])

    def plain(self, call: str | None, n: int) -> dict[str, Any]:
        if call is not None:
            use = {"type": "tool_use", "id": call, "name": TOOL, "input": json.loads(ARGS)}
            return self._message(n, [use], "tool_use")
        return self._message(n, [{"type": "text", "text": f"prod-3 ({n})"}], "end_turn")
