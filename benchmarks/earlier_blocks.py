"""What earlier turns' blocks cost: 20 turns through the wrapped OpenAI client, keep vs strip.

    python benchmarks/earlier_blocks.py            # 20 turns, the demo's 11 memories
    python benchmarks/earlier_blocks.py --turns 50
    python benchmarks/earlier_blocks.py --client anthropic

Each turn appends a question (and a short answer) to one conversation and
sends it through ``wrap_openai(...).chat.completions.create`` (or
``wrap_anthropic(...).messages.create``) with
``httpx2.MockTransport`` (no network). Per policy it prints, in cl100k
tokens: the blocks in the last request, the blocks sent over all turns, the
whole last request, and the share of all tokens sent that sat in a prefix
identical to the previous request's (what a provider's prompt cache can
serve). Token counts, not timings: they do not depend on the machine.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2
from anthropic import Anthropic
from openai import OpenAI

from memory_inject import AgentConfig
from memory_inject._tokens import count_tokens
from memory_inject.adapters.anthropic_client import wrap_anthropic
from memory_inject.adapters.messages import starts_with_block
from memory_inject.adapters.openai_client import wrap_openai
from memory_inject.demo import open_demo_store

QUESTIONS = (
    "where do production deploys go?",
    "who is on call this week?",
    "what happened with the nightly backup job?",
    "how should answers be formatted?",
    "is staging on the same cluster as prod?",
    "who do I escalate an incident to?",
    "what failed on prod-3 last night?",
    "when does the on-call rotation change?",
    "which region is prod-3 in?",
    "what is incident 2231 about?",
)
ENC = "cl100k_base"
CLOSE = "[/Memory context]\n\n"


def _reply(request: httpx2.Request) -> httpx2.Response:
    if request.url.path.endswith("/messages"):
        return httpx2.Response(
            200,
            json={
                "id": "msg",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [{"type": "text", "text": "Noted."}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )
    message = {"role": "assistant", "content": "Noted."}
    choice = {"index": 0, "finish_reason": "stop", "message": message}
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
    return httpx2.Response(200, json=body)


def _text(content: Any) -> str:
    return content if isinstance(content, str) else content[0]["text"]


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def run(policy: str, turns: int, store: Any, api: str) -> dict[str, Any]:
    """Drive ``turns`` turns with ``earlier_blocks=policy`` and count what was sent."""
    sent: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.dumps(json.loads(request.content)["messages"], ensure_ascii=False))
        return _reply(request)

    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    agent = AgentConfig(agent="bench")
    if api == "anthropic":
        claude = wrap_anthropic(
            Anthropic(api_key="k", http_client=http), store, agent, earlier_blocks=policy
        )
    else:
        client = wrap_openai(
            OpenAI(api_key="k", http_client=http), store, agent, earlier_blocks=policy
        )
    messages: list[Any] = []
    if api == "openai":
        messages.append({"role": "system", "content": "You are the ops assistant."})
    block_tokens_sent = 0
    last_blocks = 0
    for n in range(turns):
        question = QUESTIONS[n % len(QUESTIONS)]
        if api == "anthropic":
            messages.append({"role": "user", "content": [{"type": "text", "text": question}]})
            response = claude.messages.create(
                model="m", max_tokens=100, system="You are the ops assistant.", messages=messages
            )
            messages.append({"role": "assistant", "content": response.content})
        else:
            messages.append({"role": "user", "content": question})
            reply = client.chat.completions.create(model="m", messages=messages)
            messages.append(reply.choices[0].message)
        request = json.loads(sent[-1])
        texts = [_text(m["content"]) for m in request if m["role"] == "user"]
        blocks = [t[: t.index(CLOSE) + len(CLOSE)] for t in texts if starts_with_block(t)]
        last_blocks = sum(count_tokens(b, ENC) for b in blocks)
        block_tokens_sent += last_blocks
    total = sum(count_tokens(s, ENC) for s in sent)
    cached = sum(
        count_tokens(cur[: _common_prefix(prev, cur)], ENC)
        for prev, cur in itertools.pairwise(sent)
    )
    return {
        "policy": policy,
        "blocks_in_last_request": last_blocks,
        "block_tokens_sent": block_tokens_sent,
        "last_request": count_tokens(sent[-1], ENC),
        "all_sent": total,
        "cacheable_share": cached / total,
        "uncached": total - cached,
    }


def main(argv: list[str] | None = None) -> int:
    """Print one row per policy."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--turns", type=int, default=20)
    args.add_argument("--client", choices=("openai", "anthropic"), default="openai")
    ns = args.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_demo_store(Path(tmp) / "m.db", datetime.now(UTC))
        rows = [run(p, ns.turns, store, ns.client) for p in ("keep", "strip")]
    print(f"{ns.client}: {ns.turns} turns, {ENC} tokens")
    print(
        "policy | blocks in last request | block tokens sent | last request | all sent"
        " | in the previous request's prefix | not"
    )
    for r in rows:
        print(
            f"{r['policy']} | {r['blocks_in_last_request']} | {r['block_tokens_sent']} | "
            f"{r['last_request']} | {r['all_sent']} | {r['cacheable_share']:.0%} | {r['uncached']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
