"""What earlier turns' blocks cost in the framework adapters: 20 turns, strip vs keep.

    python benchmarks/framework_tokens.py              # 20 turns, the demo's memories
    python benchmarks/framework_tokens.py --turns 50

Each framework runs for real (LangChain ``create_agent`` + ``MemoryMiddleware`` with a
checkpointer, the OpenAI Agents SDK + ``AgentsMemory`` with ``to_input_list()`` history,
pydantic-ai + ``PydanticAIMemory`` with ``message_history``) against ``httpx2.MockTransport``
(no network), one question per turn in one conversation. Per adapter and
``earlier_blocks`` value it prints, in cl100k tokens: the blocks in the last request, the
block tokens sent over all turns, the last request, everything sent, and the share of
what was sent that sat in a prefix identical to the previous request's (what a provider's
prompt cache can serve). Token counts, not timings: they do not depend on the machine.
The same columns as ``benchmarks/earlier_blocks.py`` (the wrapped OpenAI client).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2
from langchain_core.messages import HumanMessage
from pydantic import SecretStr

from benchmarks.earlier_blocks import ENC, QUESTIONS  # the same 10 questions, the same count
from memory_inject import AgentConfig
from memory_inject._tokens import count_tokens
from memory_inject.demo import open_demo_store

SYSTEM = "You are the ops assistant."
BLOCK = re.compile(r"\[Memory context\][\s\S]*?\[/Memory context\]\n\n")
AGENT = AgentConfig(agent="bench")


def _chat(_: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": "Noted."}
    choice = {"index": 0, "finish_reason": "stop", "message": message}
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [choice],
        "usage": usage,
    }


def _responses(_: dict[str, Any]) -> dict[str, Any]:
    text = {"type": "output_text", "text": "Noted.", "annotations": []}
    output = {
        "type": "message",
        "id": "m",
        "role": "assistant",
        "status": "completed",
        "content": [text],
    }
    usage = {
        "input_tokens": 1,
        "output_tokens": 1,
        "total_tokens": 2,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    return {
        "id": "r",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": "m",
        "output": [output],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    }


class Wire:
    """The mocked endpoint: records each request's prompt (system + messages) as JSON text."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if "input" in body:  # Responses: the instructions are the system prompt
            prompt = [body.get("instructions"), *body["input"]]
            self.sent.append(json.dumps(prompt, ensure_ascii=False))
            return httpx2.Response(200, json=_responses(body))
        self.sent.append(json.dumps(body["messages"], ensure_ascii=False))
        return httpx2.Response(200, json=_chat(body))

    def sync(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self))

    def aio(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self))


def langchain(store: Any, wire: Wire, earlier: Any, turns: int) -> None:
    """``create_agent`` + ``MemoryMiddleware`` + ``InMemorySaver``, one ``invoke`` a turn."""
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import InMemorySaver

    from memory_inject.adapters.langchain import MemoryMiddleware

    model = ChatOpenAI(model="m", api_key=SecretStr("k"), http_client=wire.sync())
    memory = MemoryMiddleware(store, AGENT, sessions=["cli_main"], earlier_blocks=earlier)
    graph = create_agent(
        model, [], system_prompt=SYSTEM, middleware=[memory], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "bench"}}
    for n in range(turns):
        graph.invoke({"messages": [HumanMessage(QUESTIONS[n % len(QUESTIONS)])]}, config)


def agents(store: Any, wire: Wire, earlier: Any, turns: int) -> None:
    """``Runner.run`` with ``AgentsMemory.run_config()``, history from ``to_input_list()``."""
    from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled
    from openai import AsyncOpenAI

    from memory_inject.adapters.openai_agents import AgentsMemory

    set_tracing_disabled(True)
    client = AsyncOpenAI(api_key="k", http_client=wire.aio())
    agent = Agent(name="ops", instructions=SYSTEM, model=OpenAIResponsesModel("m", client))
    memory = AgentsMemory(store, AGENT, sessions=["cli_main"], earlier_blocks=earlier)

    async def go() -> None:
        history: list[Any] = []
        for n in range(turns):
            question = {"role": "user", "content": QUESTIONS[n % len(QUESTIONS)]}
            result = await Runner.run(agent, [*history, question], run_config=memory.run_config())
            history = result.to_input_list()

    asyncio.run(go())


def pydantic_ai(store: Any, wire: Wire, earlier: Any, turns: int) -> None:
    """``agent.run`` with ``PydanticAIMemory.capability()`` and ``message_history``."""
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from memory_inject.adapters.pydantic_ai import PydanticAIMemory

    client = AsyncOpenAI(api_key="k", http_client=wire.aio())
    model = OpenAIChatModel("m", provider=OpenAIProvider(openai_client=client))
    memory = PydanticAIMemory(store, AGENT, sessions=["cli_main"], earlier_blocks=earlier)
    agent = Agent(model, system_prompt=SYSTEM, capabilities=[memory.capability()])

    async def go() -> None:
        history: list[Any] = []
        for n in range(turns):
            result = await agent.run(QUESTIONS[n % len(QUESTIONS)], message_history=history)
            history = result.all_messages()

    asyncio.run(go())


RUNS: dict[str, tuple[Callable[[Any, Wire, str, int], None], tuple[str, ...]]] = {
    "langchain MemoryMiddleware": (langchain, ("strip", "keep")),
    "openai-agents AgentsMemory": (agents, ("strip",)),
    "pydantic-ai PydanticAIMemory": (pydantic_ai, ("strip", "keep")),
}


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _block_tokens(prompt: str) -> int:
    """cl100k tokens of every memory block anywhere in one request's prompt."""
    blocks = [b for text in _strings(json.loads(prompt)) for b in BLOCK.findall(text)]
    return sum(count_tokens(b, ENC) for b in blocks)


def measure(sent: list[str]) -> dict[str, Any]:
    """The columns for one run's requests (one request per turn)."""
    total = sum(count_tokens(s, ENC) for s in sent)
    cached = sum(
        count_tokens(cur[: _common_prefix(prev, cur)], ENC)
        for prev, cur in itertools.pairwise(sent)
    )
    return {
        "blocks_in_last_request": _block_tokens(sent[-1]),
        "block_tokens_sent": sum(_block_tokens(s) for s in sent),
        "last_request": count_tokens(sent[-1], ENC),
        "all_sent": total,
        "cacheable_share": cached / total,
        "uncached": total - cached,
    }


def main(argv: list[str] | None = None) -> int:
    """Print one row per adapter and ``earlier_blocks`` value."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    ns = parser.parse_args(argv)
    print(f"{ns.turns} turns, {ENC} tokens")
    print(
        "adapter | earlier_blocks | blocks in last request | block tokens sent | last request"
        " | all sent | in the previous request's prefix | not"
    )
    for name, (run, choices) in RUNS.items():
        for earlier in choices:
            with tempfile.TemporaryDirectory() as tmp:
                store = open_demo_store(Path(tmp) / "m.db", datetime.now(UTC))
                wire = Wire()
                run(store, wire, earlier, ns.turns)
                store.close()
            r = measure(wire.sent)
            print(
                f"{name} | {earlier} | {r['blocks_in_last_request']} | {r['block_tokens_sent']} | "
                f"{r['last_request']} | {r['all_sent']} | {r['cacheable_share']:.0%} | "
                f"{r['uncached']}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
