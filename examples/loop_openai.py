"""Wrap an OpenAI-style tool loop with MemoryLoop (prefix placement, chat.completions shape).

A stand-in model replaces the OpenAI client, so the script runs offline. It shows that
the block is placed once per turn before the first model call, that later calls of the
same tool loop reuse it, and that every request starts with the bytes of the previous one
(the system prompt is never touched, so the provider's prompt cache keeps hitting).

    python examples/loop_openai.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from memory_inject import AgentConfig
from memory_inject.adapters import MemoryLoop
from memory_inject.storage.sqlite import SQLiteStore


def fake_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Asks for one tool call, then answers (what client.chat.completions.create returns)."""
    if messages[-1]["role"] == "user":
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "deploy_status", "arguments": "{}"},
                }
            ],
        }
    return {"role": "assistant", "content": "Deploys go to prod-3; Dana approves them."}


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "memory.db")
        store.store("deploy_target", "Production deploys go to prod-3 (eu-west-1).", "core")
        store.store("approver", "Dana approves every deploy to prod-3.", "core")
        loop = MemoryLoop(
            store, AgentConfig(agent="alice"), channel="cli", api="openai", autosave=True
        )
        history: list[dict[str, Any]] = [
            {"role": "system", "content": "You are the deploy assistant."}
        ]
        previous: list[dict[str, Any]] = []
        for question in ("where do production deploys go?", "who approves prod-3 deploys?"):
            history = [*history, {"role": "user", "content": question}]
            with loop.turn(sessions=["cli_main"]) as turn:
                request = loop.prepare(history)  # recall + render + place, once
                calls = 0
                while True:
                    reply = fake_model(request)
                    calls += 1
                    request = [*request, reply]
                    if not reply.get("tool_calls"):
                        break
                    request = [
                        *loop.prepare(request),  # free: the block is already there
                        {"role": "tool", "tool_call_id": "call_1", "content": "green"},
                    ]
            print(
                f"turn {turn.turn_id[:8]}: {question!r} -> {calls} model calls, "
                f"block of {len(turn.block)} chars, autosaved {turn.injection.autosaved_key}"
            )
            print("  user message sent:", json.dumps(request[len(history) - 1]["content"]))
            same_prefix = json.dumps(previous) == json.dumps(request[: len(previous)])
            print(f"  request starts with the previous one byte for byte: {same_prefix}")
            if not same_prefix or request[0] != history[0]:
                raise SystemExit("the request prefix changed between turns")
            previous, history = request, request
        store.close()
    print("ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
