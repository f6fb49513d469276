"""A fresh process's first keyword recalls on a kept store, side by side with bare FTS5.

    python benchmarks/keyword_fresh.py /tmp/hk/lib-20000.db [--seed 1]

A server restarted, a worker started: its first turns pay for what a long-lived
process has already read (the keyword mirror's build on the 4th recall, each common
word's first read). ``keyword_kept.py`` times the process after that; this times it
from the first recall. Every LoCoMo dev question (997) is asked once, in a seeded
random order, with ``SQLiteStore.recall(q, 10)`` on a store opened in this process,
then with the same OR query on the bare FTS5 table ``hybrid_sizes.py --keep`` wrote
beside it (``bare-N.db``). Latencies are cut by position: recalls 1-10, 11-100,
101-300 and the rest, p50 / p90 / p99 / max / mean in ms each. The data is CC BY-NC
and is read from ``../shared/data/locomo-dev``, never copied here.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._locomo_data import DEFAULT_DATA, load
from memory_inject.storage import SQLiteStore
from memory_inject.storage.fusion import build_fts_query

#: The positions the latencies are cut at.
SEGMENTS = ((0, 10), (10, 100), (100, 300), (300, None))
_BARE_SQL = "SELECT rowid, content FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT 10"


def segments(times: list[float]) -> list[str]:
    """One Markdown cell per segment: p50 / p90 / p99 / max / mean."""
    cells = []
    for start, end in SEGMENTS:
        part = sorted(times[start:end])
        n = len(part)
        if not n:
            cells.append("-")
            continue
        at = [part[min(n - 1, int(q * n))] for q in (0.5, 0.9, 0.99)]
        cells.append(" / ".join(f"{v:.2f}" for v in (*at, part[-1], statistics.mean(part))))
    return cells


def main() -> None:
    """Print one row for the library, one for bare FTS5 (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("store", type=Path, help="a lib-N.db file hybrid_sizes.py kept")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seed", type=int, default=1, help="the questions' order")
    args = parser.parse_args()
    _, queries = load(args.data)
    questions = [q["question"] for q in queries]
    random.Random(args.seed).shuffle(questions)
    bare_path = args.store.with_name(args.store.name.replace("lib-", "bare-", 1))

    times: list[float] = []
    with SQLiteStore(args.store) as store:
        for q in questions:
            t = time.perf_counter()
            store.recall(q, 10)
            times.append((time.perf_counter() - t) * 1000.0)
    bare_times: list[float] = []
    bare = sqlite3.connect(bare_path)
    try:
        for q in questions:
            t = time.perf_counter()
            bare.execute(_BARE_SQL, (build_fts_query(q) or '"-"',)).fetchall()
            bare_times.append((time.perf_counter() - t) * 1000.0)
    finally:
        bare.close()
    head = " | ".join(f"recalls {a + 1}-{'' if b is None else b}" for a, b in SEGMENTS)
    print(f"{args.store.name}, {len(questions)} questions, seed {args.seed}")
    print(f"(p50 / p90 / p99 / max / mean, ms)\n\n| contender | {head} |")
    print("|---|" + "---:|" * len(SEGMENTS))
    print("| library | " + " | ".join(segments(times)) + " |")
    print("| bare FTS5 | " + " | ".join(segments(bare_times)) + " |")


if __name__ == "__main__":
    main()
