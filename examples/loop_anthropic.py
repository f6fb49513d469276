"""Wrap an Anthropic-style tool loop with MemoryLoop (the block as its own user message).

Anthropic takes the system prompt as a separate parameter, so it never changes; the
block goes in a separate user message right before the user's own (placement="message"),
and tool_result messages never receive a block. A stand-in model replaces the client.

    python examples/loop_anthropic.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from memory_inject import AgentConfig
from memory_inject.adapters import MemoryLoop
from memory_inject.storage.sqlite import SQLiteStore

SYSTEM = "You are the on-call assistant."


async def fake_model(system: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One tool_use, then a text answer (what client.messages.create returns)."""
    await asyncio.sleep(0)
    if not any(b.get("type") == "tool_result" for m in messages for b in m["content"]):
        return {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "tu_1", "name": "pager", "input": {}}],
        }
    return {"role": "assistant", "content": [{"type": "text", "text": "Lee is on call."}]}


async def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "memory.db")
        store.store("oncall", "On-call rotation: Dana this week, Lee next week.", "daily")
        loop = MemoryLoop(store, AgentConfig(agent="ops"), placement="message", api="anthropic")

        @loop.wrap(sessions=["cli_main"])
        async def turn(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
            request = await loop.aprepare(history)
            while True:
                reply = await fake_model(SYSTEM, request)
                request = [*request, reply]
                if reply["content"][0]["type"] == "text":
                    return request
                request = [
                    *request,
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "tu_1", "content": "paged"}
                        ],
                    },
                ]
                request = await loop.aprepare(request)  # no second block, no second recall

        history = [
            {"role": "user", "content": [{"type": "text", "text": "who is on call next week?"}]}
        ]
        done = await turn(history)
        for n, message in enumerate(done):
            print(n, message["role"], json.dumps(message["content"])[:90])
        blocks = [
            m
            for m in done
            if json.dumps(m).startswith(
                '{"role": "user", "content": [{"type": "text", "text": "[Memory'
            )
        ]
        print(f"block messages: {len(blocks)} (system prompt unchanged: {SYSTEM!r})")
        if len(blocks) != 1:
            raise SystemExit(f"expected one block message, got {len(blocks)}")
        store.close()
    print("ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
