"""Render end to end on a 200-row SQLite file, sync and async: p50 for one checkout.

Run it alternately on two checkouts to compare them (docs/performance.md, issue 25):

    python benchmarks/render_ab.py /path/to/old/checkout
    python benchmarks/render_ab.py .
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else ".")

from memory_inject import arender_memory_context, render_memory_context
from memory_inject.storage import SQLiteStore

NOW = datetime(2026, 5, 20, tzinfo=UTC)
WORDS = "deploy server prod cluster lunch budget review holiday rollback team alpha plan".split()


def p50_us(fn: Callable[[], object], n: int = 1500) -> float:
    for _ in range(100):
        fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main() -> None:
    rng = random.Random(3)
    with tempfile.TemporaryDirectory() as tmp, SQLiteStore(f"{tmp}/m.db") as lite:
        for i in range(200):
            text = " ".join(rng.choice(WORDS) for _ in range(10))
            lite.store(f"k{i}", text, timestamp=NOW - timedelta(days=i % 30))
        sync = p50_us(lambda: render_memory_context(lite, "deploy server prod", now=NOW))
        loop = asyncio.new_event_loop()
        try:
            asy = p50_us(
                lambda: loop.run_until_complete(
                    arender_memory_context(lite, "deploy server prod", now=NOW)
                )
            )
        finally:
            loop.close()
    where = sys.argv[1] if len(sys.argv) > 1 else "."
    print(f"{where}: sync p50 {sync:.1f} µs, async p50 {asy:.1f} µs")


if __name__ == "__main__":
    main()
