"""Per-turn cost of the core: policy, a default render, and the rerank arm at pool 1024.

Run: ``python benchmarks/bench_core.py`` (prints a Markdown table; medians of many runs).
Timings live here, never in test asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))

from memory_inject import (
    BudgetConfig,
    InMemoryStore,
    MemoryEntry,
    MemoryInjectConfig,
    RerankConfig,
    TurnMeta,
    TurnOrigin,
    render_memory_context,
    resolve_inject_policy,
)
from memory_inject.storage import SQLiteStore

NOW = datetime(2026, 6, 1, tzinfo=UTC)
WORDS = (
    "deploy server prod staging user prefers concise answers tea coffee meeting monday budget "
    "review incident database migration alpha beta gamma delta release notes customer acme invoice"
).split(" ")


class Preset:
    """A store whose recall returns a fixed list (so recall costs ~nothing)."""

    name = "preset"

    def __init__(self, entries: Sequence[MemoryEntry]) -> None:
        self.entries = list(entries)

    def recall(self, query: str, limit: int, **kw: Any) -> Sequence[MemoryEntry]:
        return self.entries[:limit]


class StoppingPreset(Preset):
    """The same, for a store that stops itself at the deadline (``SupportsInterrupt``,
    as ``SQLiteStore`` without an embedder): the render makes the call in place."""

    interrupts_in_place = True

    def interrupt_at(self, until: float) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()


def timeit(fn: Callable[[], object], n: int) -> tuple[float, float]:
    for _ in range(min(50, n)):
        fn()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
    samples.sort()
    return statistics.median(samples) / 1e3, samples[int(len(samples) * 0.99) - 1] / 1e3


def sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--reference",
        action="store_true",
        help="also time the straightforward reference rerank (slow)",
    )
    args = ap.parse_args()
    rng = random.Random(7)
    rows: list[tuple[str, float, float]] = []

    def row(name: str, fn: Callable[[], object], n: int) -> float:
        p50, p99 = timeit(fn, n)
        rows.append((name, p50, p99))
        return p50

    row(
        "resolve_inject_policy (channel, session)",
        lambda: resolve_inject_policy(TurnOrigin.CHANNEL, has_session=True),
        200_000,
    )
    cfg_origins = MemoryInjectConfig(origins={"cron": {"budget": {"max_entries": 2}}})
    row(
        "resolve_inject_policy (with per-origin config)",
        lambda: resolve_inject_policy(TurnOrigin.CRON, has_session=False, config=cfg_origins),
        200_000,
    )

    five = [
        MemoryEntry(
            f"k{i}",
            sentence(rng),
            "daily" if i % 2 else "core",
            NOW - timedelta(days=i),
            score=0.9 - i * 0.05,
        )
        for i in range(5)
    ]
    preset = Preset(five)
    turn = TurnMeta("cli", "bench", "t1")
    row(
        "render, 5 recalled entries, default config (store call ~0)",
        lambda: render_memory_context(preset, "deploy server", turn=turn, now=NOW),
        20_000,
    )
    stopping = StoppingPreset(five)
    row(
        "render, 5 recalled entries, default config, a store that stops itself (no thread hop)",
        lambda: render_memory_context(stopping, "deploy server", turn=turn, now=NOW),
        20_000,
    )
    inline = MemoryInjectConfig(deadline_ms=None)
    row(
        "render, 5 recalled entries, deadline_ms null (recall inline)",
        lambda: render_memory_context(preset, "deploy server", turn=turn, now=NOW, config=inline),
        20_000,
    )

    store = InMemoryStore()
    for i in range(200):
        store.store(f"k{i}", sentence(rng), timestamp=NOW - timedelta(days=i % 30))
    row(
        "InMemoryStore.recall, 200 rows (the store call alone)",
        lambda: store.recall("deploy server prod", 5),
        2_000,
    )
    row(
        "render end to end on InMemoryStore, 200 rows",
        lambda: render_memory_context(store, "deploy server prod", turn=turn, now=NOW),
        2_000,
    )

    with tempfile.TemporaryDirectory() as tmp, SQLiteStore(f"{tmp}/m.db") as lite:
        for i in range(200):
            lite.store(f"k{i}", sentence(rng), timestamp=NOW - timedelta(days=i % 30))
        row(
            "SQLiteStore.recall, 200 rows (the store call alone)",
            lambda: lite.recall("deploy server prod", 5),
            2_000,
        )
        row(
            "render end to end on SQLiteStore, 200 rows, default config (a recall thread)",
            lambda: render_memory_context(lite, "deploy server prod", turn=turn, now=NOW),
            2_000,
        )

    pool = [
        MemoryEntry(
            f"p{i}",
            sentence(rng, 20),
            rng.choice(["core", "daily"]),
            NOW - timedelta(days=rng.randint(0, 60)),
            score=rng.random(),
            importance=rng.random(),
        )
        for i in range(1024)
    ]
    big = Preset(pool)
    rr = MemoryInjectConfig(
        recall_limit=0, rerank=RerankConfig(enabled=True, strategy="mmr", candidate_multiplier=20)
    )
    row(
        "render with rerank + MMR, pool 1024",
        lambda: render_memory_context(big, "deploy server", config=rr, now=NOW),
        50,
    )
    rr_none = MemoryInjectConfig(
        recall_limit=0, rerank=RerankConfig(enabled=True, strategy="none", candidate_multiplier=20)
    )
    row(
        "render with rerank (no MMR), pool 1024",
        lambda: render_memory_context(big, "deploy server", config=rr_none, now=NOW),
        50,
    )

    # A token cap over many lines: the block is counted once when it fits, about
    # log2(lines) times when it does not (it was once per line: 4-6 s at 1,000).
    lines = [MemoryEntry(f"t{i}", sentence(rng), "core", NOW, score=0.9) for i in range(1000)]
    many = Preset(lines)
    for tokens in (1_000_000, 2_000):
        capped = MemoryInjectConfig(
            recall_limit=1024,
            budget=BudgetConfig(
                max_entries=10_000, max_total_chars=1_000_000, max_total_tokens=tokens
            ),
        )
        row(
            f"render 1,000 entries, max_total_tokens {tokens:,}",
            lambda capped=capped: render_memory_context(
                many, "deploy server", config=capped, now=NOW
            ),
            20,
        )

    if args.reference:
        from tests.reference_rerank import reference_rerank

        for n in (128, 256):
            sub = pool[:n]
            final = -(-n // 20)
            row(
                f"reference rerank + MMR (spec transcription), pool {n}",
                lambda sub=sub, n=n, final=final: reference_rerank(
                    sub,
                    now=NOW,
                    final_limit=final,
                    pool_cap=n,
                    threshold=5,
                    strategy="mmr",
                    lam=0.7,
                    iw=0.2,
                    rw=0.1,
                    floor=0.4,
                    exclude_conversation=False,
                ),
                1,
            )
            fast = MemoryInjectConfig(
                recall_limit=final,
                rerank=RerankConfig(enabled=True, strategy="mmr", candidate_multiplier=20),
            )
            row(
                f"optimised rerank + MMR, pool {n}",
                lambda sub=sub, fast=fast: render_memory_context(
                    Preset(sub), "deploy server", config=fast, now=NOW
                ),
                20,
            )

    print("| case | p50 (µs) | p99 (µs) |")
    print("|---|---:|---:|")
    for name, p50, p99 in rows:
        print(f"| {name} | {p50:,.1f} | {p99:,.1f} |")


if __name__ == "__main__":
    main()
