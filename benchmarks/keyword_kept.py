"""Keyword recall on a store ``hybrid_sizes.py --keep`` wrote (no embedder: lexical only).

    python benchmarks/keyword_kept.py /tmp/hybrid-sizes/lib-1000000.db

Asks up to 300 LoCoMo dev questions (after 20 warm-ups) with
``SQLiteStore.recall(q, 10)`` and prints p50 / p90 / p99 / mean in ms.
``--all`` asks every dev question, ``--passes N`` asks them N times on the
same open store and times the passes after the first (a long-running
process: the mirror's first reads done, its bounds reached).
``--draw-rows N`` sets ``keyword_rank.DRAW_ROWS`` for the run (what a smaller
or larger bound on the draw would cost or save); ``--profile`` prints
cProfile's top entries instead of timing. ``--writes`` stores one memory
(its own key, one of seven sessions, "we talked about <the question>")
before each recall, as an agent that saves every turn does; the rows are
deleted from the file at the end. ``--mirror-rows N`` sets the keyword
mirror's bound (``KeywordMirror(max_rows=N)``; 0: the FTS5 path only) for the
run. Writing a 1M store takes about 15 minutes, so this reuses one to compare
code changes run after run.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._locomo_data import DEFAULT_DATA, load
from memory_inject.storage import SQLiteStore
from memory_inject.storage.sqlite import keyword_rank
from memory_inject.storage.sqlite.keyword_mirror import KeywordMirror


def main() -> None:
    """Time (or profile) the questions on the kept store (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("store", type=Path, help="a lib-N.db file hybrid_sizes.py kept")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--draw-rows", type=int, help="keyword_rank.DRAW_ROWS for this run")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--all", action="store_true", help="every question, not the first 300")
    parser.add_argument("--passes", type=int, default=1, help="time the passes after the first")
    parser.add_argument("--writes", action="store_true", help="one write before each recall")
    parser.add_argument("--mirror-rows", type=int, help="the keyword mirror's bound (0: off)")
    args = parser.parse_args()
    if not args.store.exists():
        parser.error(f"{args.store}: no such store (write one with hybrid_sizes.py --keep)")
    if args.draw_rows is not None:
        keyword_rank.DRAW_ROWS = args.draw_rows
    _, queries = load(args.data)
    questions = list(dict.fromkeys(q["question"] for q in queries))
    questions = questions if args.all else questions[:300]
    if args.writes:
        _drop_writes(args.store)  # a run cut short left its rows
    with SQLiteStore(args.store) as store:
        if args.mirror_rows is not None:
            store._engine._mirror = KeywordMirror(max_rows=args.mirror_rows)
        for q in questions[:20]:
            store.recall(q, 10)
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            for q in questions:
                store.recall(q, 10)
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
            return
        times: list[float] = []
        for n in range(max(1, args.passes)):
            if n == 1:
                times.clear()  # the first pass of several only warms
            for i, q in enumerate(questions):
                if args.writes:
                    key = f"kept-writes-{n}-{i}"
                    store.store(key, f"we talked about {q}", session_id=f"kept-writes-{i % 7}")
                t = time.perf_counter()
                store.recall(q, 10)
                times.append((time.perf_counter() - t) * 1000.0)
    if args.writes:
        _drop_writes(args.store)
    times.sort()
    print(
        f"{args.store.name}: p50 {statistics.median(times):.2f} "
        f"p90 {times[int(0.9 * len(times))]:.2f} p99 {times[int(0.99 * len(times))]:.2f} "
        f"mean {statistics.mean(times):.2f} ms ({len(times)} recalls)"
    )


def _drop_writes(path: Path) -> None:
    """Delete the rows ``--writes`` stored (its triggers keep the index and the log current)."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute("DELETE FROM memories WHERE key LIKE 'kept-writes-%'")
    finally:
        conn.close()


if __name__ == "__main__":
    main()
