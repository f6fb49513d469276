"""Shared pieces of the framework adapter tests: a scripted OpenAI server and an event log.

The frameworks run for real against ``httpx.MockTransport`` (the openai SDK's
``httpx2``), so every request is serialised as it would go on the wire; the
tests assert on those bytes.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import httpx2
import pytest

from memory_inject import AgentConfig
from memory_inject.signals import memory_recall, memory_skipped
from memory_inject.storage.sqlite import SQLiteStore

SYSTEM = "You are the deploy assistant."
QUESTIONS = (
    "where do production deploys go?",
    "who approves deploys to prod-3?",
    "when is the daily standup now?",
    "can the prod-3 deploy wait until Friday?",
    "which region is prod-3 in?",
)
BLOCK_START = "[Memory context]"
BLOCK = "[Memory context]\n- x\n\n"
AGENT = AgentConfig(agent="alice")


def facts_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    """A SQLite store with three facts, closed after the test (a fixture's body)."""
    s = SQLiteStore(tmp_path / ".memory" / "memory.db")
    s.store("deploy_target", "Production deploys go to prod-3 (eu-west-1).", "core")
    s.store("approver", "Dana approves every deploy to prod-3.", "core")
    s.store("standup", "The daily standup moved to 10:00 CET.", "daily")
    yield s
    s.close()


_S = TypeVar("_S", bound="_Server")


class _Server:
    """Records each request body and answers it with :meth:`reply`.

    A tool call asks with ``args`` (default: a question for a child agent).
    """

    def __init__(self, args: dict[str, Any] | None = None) -> None:
        self.bodies: list[bytes] = []
        self.args = json.dumps(args if args is not None else {"q": CHILD_QUESTION})

    @property
    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(b) for b in self.bodies]

    def reply(self, body: dict[str, Any], n: int) -> dict[str, Any]:
        raise NotImplementedError

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(request.content)
        return httpx2.Response(200, json=self.reply(json.loads(request.content), len(self.bodies)))

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self))

    def aclient(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self))


CHILD_QUESTION = "child question about the weather"
USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


class ChatServer(_Server):
    """A Chat Completions endpoint: calls the first tool once per user turn, then answers."""

    def reply(self, body: dict[str, Any], n: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": f"answer {n}"}
        if body.get("tools") and body["messages"][-1]["role"] != "tool":
            call = {"name": body["tools"][0]["function"]["name"], "arguments": self.args}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"call_{n}", "type": "function", "function": call}],
            }
        choice = {"index": 0, "finish_reason": "stop", "message": message}
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o-mini",
            "choices": [choice],
            "usage": USAGE,
        }


def chat_completion(content: str) -> dict[str, Any]:
    """An OpenAI chat completion answering ``content``, as the API sends it."""
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
    }


class Events:
    """Every ``memory_recall`` and ``memory_skipped`` sent while connected, in order."""

    def __init__(self) -> None:
        self.all: list[Any] = []

    def __call__(self, sender: Any, *, event: Any) -> None:
        self.all.append(event)

    @property
    def recalls(self) -> list[Any]:
        return [e for e in self.all if type(e).__name__ == "MemoryRecall"]

    @property
    def skips(self) -> list[Any]:
        return [e for e in self.all if type(e).__name__ == "MemorySkipped"]


@contextmanager
def events() -> Iterator[Events]:
    rec = Events()
    memory_recall.connect(rec)
    memory_skipped.connect(rec)
    try:
        yield rec
    finally:
        memory_recall.disconnect(rec)
        memory_skipped.disconnect(rec)


def last_user_index(messages: list[dict[str, Any]]) -> int:
    return max(i for i, m in enumerate(messages) if m["role"] == "user")


def user_text(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content)


def prefix_bytes(messages: list[dict[str, Any]]) -> str:
    """The serialised messages before the newest user message."""
    return json.dumps(messages[: last_user_index(messages)], sort_keys=True)[:-1]


def assert_prefix_stable(firsts: list[list[dict[str, Any]]]) -> None:
    """Each turn's request prefix (before the newest user message) extends the previous one."""
    for before, after in itertools.pairwise(firsts):
        assert prefix_bytes(after).startswith(prefix_bytes(before))
        assert len(after) > len(before)


class ResponsesServer(_Server):
    """A Responses endpoint: calls the first tool once per user turn, then answers."""

    def reply(self, body: dict[str, Any], n: int) -> dict[str, Any]:
        text = {"type": "output_text", "text": f"answer {n}", "annotations": []}
        output: dict[str, Any] = {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [text],
        }
        if body.get("tools") and body["input"][-1].get("type") != "function_call_output":
            output = {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": body["tools"][0]["name"],
                "arguments": self.args,
                "status": "completed",
            }
        tokens = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
        details = {"cached_tokens": 0}, {"reasoning_tokens": 0}
        usage = {**tokens, "input_tokens_details": details[0], "output_tokens_details": details[1]}
        return {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": "gpt-4o-mini",
            "output": [output],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage,
        }


def first_requests(server: _Server) -> list[list[dict[str, Any]]]:
    """The first Chat Completions request of each turn (the one ending with the user's message)."""
    return [r["messages"] for r in server.requests if r["messages"][-1]["role"] == "user"]


def assert_each_starts_with_previous(firsts: list[list[dict[str, Any]]]) -> None:
    """Each turn's request starts with the exact bytes of the previous turn's (kept blocks)."""
    for before, after in itertools.pairwise(firsts):
        assert json.dumps(before) == json.dumps(after[: len(before)])


def assert_chat_tool_loop(server: ChatServer, rec: Events, turns: int) -> None:
    """``turns`` tool-loop turns: one event each, two requests each, the system prompt sent
    as given and the block in front of the turn's question on the newest user message."""
    assert turns == len(rec.recalls) and [] == rec.skips
    assert 2 * turns == len(server.requests)
    for i, body in enumerate(server.requests):
        messages = body["messages"]
        assert {"role": "system", "content": SYSTEM} == messages[0]
        text = user_text(messages[last_user_index(messages)])
        assert text.startswith(BLOCK_START) and text.endswith(QUESTIONS[i // 2])


@attrs.frozen
class Spec:
    """A tool as the memory tool core describes one."""

    name: str
    description: str
    parameters: dict[str, Any]


RECALL_SPEC = Spec(
    "memory_recall",
    "Search long-term memory for facts relevant to a question.",
    {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look for."}},
        "required": ["query"],
        "additionalProperties": False,
    },
)


class FakeToolCore:
    """The memory tool core's interface (``MemoryTools``): one recall tool, calls recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __iter__(self) -> Iterator[Spec]:
        return iter([RECALL_SPEC])

    def call(self, name: str, arguments: Any = None) -> str:
        args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
        self.calls.append((name, args))
        return f"recalled: {args.get('query')}"

    async def acall(self, name: str, arguments: Any = None) -> str:
        return self.call(name, arguments)


def tool_call_setup(server: type[_S]) -> tuple[FakeToolCore, _S]:
    """A fake tool core, and a server whose tool call asks it about the deploy target."""
    return FakeToolCore(), server(args={"query": "deploy target"})


def break_placement(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Make ``memory_inject.adapters.<module>.place_block`` raise (a bug in placement)."""

    def broken(*_: Any) -> Any:
        raise RuntimeError("placement bug")

    monkeypatch.setattr(f"memory_inject.adapters.{module}.place_block", broken)
