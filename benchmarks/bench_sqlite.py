"""SQLite store performance: bulk import, lexical recall latency and size on disk.

    python benchmarks/bench_sqlite.py            # 10k and 100k records (~1-2 min)
    python benchmarks/bench_sqlite.py --full     # adds 1M records (several minutes)

Records are synthetic but shaped like agent memories: 8-30 words drawn from a
Zipf-distributed vocabulary of pronounceable pseudo-words, a few tags, 50
sessions, timestamps over a year. Queries mix common and rare words with the
punctuation real prompts carry. Every run uses the same seed. Prints a
Markdown table; the numbers are for reading, never asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memory_inject.storage.sqlite import SQLiteStore

SYLLABLES = [a + b for a in "bcdfghklmnprstvz" for b in ("a", "e", "i", "o", "u", "ar", "en", "is")]
START = datetime(2025, 1, 1, tzinfo=UTC)


def vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def zipf_weights(n: int, s: float = 1.07) -> list[float]:
    cum, total = [], 0.0
    for rank in range(1, n + 1):
        total += 1.0 / rank**s
        cum.append(total)
    return cum


def write_jsonl(path: Path, n: int, rng: random.Random, words: list[str], cum: list[float]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            body = rng.choices(words, cum_weights=cum, k=rng.randint(8, 30))
            ts = START + timedelta(seconds=rng.randint(0, 365 * 86400))
            row = {
                "key": f"mem-{i}",
                "content": " ".join(body).capitalize() + ".",
                "category": rng.choice(["core", "daily", "conversation"]),
                "timestamp": ts.isoformat(),
                "session_id": f"s{rng.randint(0, 49)}",
                "tags": rng.sample(words[:200], k=rng.randint(0, 3)),
                "importance": round(rng.random(), 2),
            }
            fh.write(json.dumps(row) + "\n")


def queries(rng: random.Random, words: list[str], n: int) -> list[str]:
    out = []
    for _ in range(n):
        common = rng.choices(words[:500], k=rng.randint(1, 3))
        rare = rng.choices(words[500:], k=rng.randint(1, 3))
        terms = common + rare
        rng.shuffle(terms)
        out.append(
            rng.choice(["What about {}?", "{} (prod/staging)", "how do I {}", "{}"]).format(
                " ".join(terms)
            )
        )
    return out


def latencies(fn: Callable[[str], object], qs: list[str]) -> tuple[float, float]:
    times = []
    for q in qs:
        t = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - t) * 1000.0)
    times.sort()
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    return statistics.median(times), p99


def after_writes(
    store: SQLiteStore,
    qs: list[str],
    limit: int,
    rng: random.Random,
    words: list[str],
    cum: list[float],
) -> tuple[float, float]:
    """Recall p50 / p99 right after one write each (the write itself is not timed)."""
    times = []
    for i, q in enumerate(qs):
        body = rng.choices(words, cum_weights=cum, k=rng.randint(8, 30))
        store.store(f"turn-{i}", " ".join(body).capitalize() + ".", "core", session_id="s7")
        t = time.perf_counter()
        store.recall(q, limit)
        times.append((time.perf_counter() - t) * 1000.0)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]


def disk_bytes(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


def bench(n: int, workdir: Path, n_queries: int, limit: int) -> dict[str, float]:
    rng = random.Random(20260301 + n)
    words = vocabulary(rng)
    cum = zipf_weights(len(words))
    src = workdir / f"records-{n}.jsonl"
    write_jsonl(src, n, rng, words, cum)
    db = workdir / f"bench-{n}" / "memory.db"
    with SQLiteStore(db) as store:
        t = time.perf_counter()
        store.import_jsonl(src)
        import_s = time.perf_counter() - t
        qs = queries(rng, words, n_queries)
        # First pass right after the import: every query cold (pages not cached yet).
        c50, c99 = latencies(lambda q: store.recall(q, limit), qs)
        # Steady state, as in a long-running agent: the same queries again.
        p50, p99 = latencies(lambda q: store.recall(q, limit), qs)
        s50, s99 = latencies(lambda q: store.recall(q, limit, session_id="s7"), qs)
        r50, r99 = latencies(lambda _q: store.recall("*", limit), qs[:50])
        # An agent writes every turn: one new memory, then the timed recall.
        w50, w99 = after_writes(store, qs, limit, rng, words, cum)
    size = disk_bytes(db)
    src.unlink()
    return {
        "n": n,
        "import_s": import_s,
        "rows_per_s": n / import_s,
        "mb": size / 1e6,
        "mb_per_100k": size / 1e6 * 100_000 / n,
        "p50": p50,
        "p99": p99,
        "c50": c50,
        "c99": c99,
        "s50": s50,
        "s99": s99,
        "r50": r50,
        "r99": r99,
        "w50": w50,
        "w99": w99,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also run 1M records")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: temp)")
    args = parser.parse_args()
    sizes = [10_000, 100_000] + ([1_000_000] if args.full else [])
    print(f"sqlite {sqlite3.sqlite_version}, {args.queries} queries, limit {args.limit}\n")
    print(
        "| records | import (s) | rows/s | DB (MB) | MB per 100k | cold recall p50 / p99 (ms) "
        "| recall p50 / p99 (ms) | with session p50 / p99 (ms) | recent '*' p50 / p99 (ms) "
        "| after a write p50 / p99 (ms) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for n in sizes:
            r = bench(n, Path(tmp), args.queries, args.limit)
            print(
                f"| {n:,} | {r['import_s']:.1f} | {r['rows_per_s']:,.0f} | {r['mb']:.1f} "
                f"| {r['mb_per_100k']:.1f} | {r['c50']:.2f} / {r['c99']:.2f} "
                f"| {r['p50']:.2f} / {r['p99']:.2f} "
                f"| {r['s50']:.2f} / {r['s99']:.2f} | {r['r50']:.2f} / {r['r99']:.2f} "
                f"| {r['w50']:.2f} / {r['w99']:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
