"""PostgreSQL recall: what the pool's liveness check costs, and round trips per recall.

    python benchmarks/pg_round_trips.py                 # 1k records, a private server
    python benchmarks/pg_round_trips.py 10000 --passes 6 --dsn postgresql://...

The first ``n`` LoCoMo dev records go into one table as chat session streams
(as ``keyword_sizes.py --backend postgres`` writes them), and up to 300 of
their questions are asked, top 10, by two stores on that table that differ
only in the check their pool runs on each borrowed connection:

* ``empty query``: psycopg's ``check_connection`` (the store's check before
  issue 29's sixth round): a round trip on every borrow;
* ``socket poll``: :func:`memory_inject.storage.postgres.liveness.check`,
  the store's default: the empty query only when the socket has something
  to read (a terminated backend's FATAL message, end of file).

The two alternate question by question (the order flips each pass) and each
pass opens both stores afresh, so their lexeme caches start empty alike.
The table shows p50 / mean (ms) and round trips per recall, counted at the
driver (each statement and each empty query is one).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _pg_sizes as pg
from benchmarks._locomo_data import DEFAULT_DATA, load
from benchmarks.keyword_sizes import _questions, as_jsonl
from benchmarks.peers import copies
from memory_inject.storage.postgres import PostgresStore, liveness

CHECKS = ("empty query", "socket poll")


class _Counted:
    """Counts statements sent through psycopg cursors (a round trip each; psycopg's
    empty-query check goes through one too)."""

    def __init__(self) -> None:
        self.n = 0
        self._execute = psycopg.Cursor.execute

    def install(self) -> None:
        execute = self._execute

        def counted(cur: psycopg.Cursor[Any], *args: Any, **kwargs: Any) -> Any:
            self.n += 1
            return execute(cur, *args, **kwargs)

        psycopg.Cursor.execute = counted  # type: ignore[method-assign,assignment]


def _use(check: str) -> None:
    """Make the store's pools run ``check`` (the pool looks the function up per borrow)."""
    liveness.quiet = _QUIET if check == "socket poll" else (lambda conn: False)


_QUIET = liveness.quiet


def measure(dsn: str, rows: list[dict[str, Any]], questions: list[str], passes: int) -> Any:
    """Per check, every recall's latency (ms) and the round trips it made."""
    table = f"rt_{len(rows)}"
    with PostgresStore(dsn, table=table) as loader:
        loader.import_jsonl(as_jsonl(rows, "stream"))
    pg.vacuum_analyze(dsn, table)
    counter = _Counted()
    counter.install()
    times: dict[str, list[float]] = {c: [] for c in CHECKS}
    trips: dict[str, int] = dict.fromkeys(CHECKS, 0)
    for p in range(passes):
        stores = {c: PostgresStore(dsn, table=table) for c in CHECKS}
        try:
            for c in CHECKS:
                _use(c)
                stores[c].recall("hello", 10)
            for q in questions:
                for c in CHECKS if p % 2 == 0 else CHECKS[::-1]:
                    _use(c)
                    n0 = counter.n
                    t = time.perf_counter()
                    stores[c].recall(q, 10)
                    times[c].append((time.perf_counter() - t) * 1000.0)
                    trips[c] += counter.n - n0
        finally:
            for s in stores.values():
                s.close()
            _use("socket poll")
    return times, trips


def main() -> None:
    """Print one Markdown row per check (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("size", nargs="?", type=int, default=1000)
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--dsn", help="an existing server (default: a private one)")
    args = parser.parse_args()
    records, queries = load(args.data)
    per_copy = sum(map(len, records.values()))
    rows = copies(records, max(1, math.ceil(args.size / per_copy)))[: args.size]
    questions = _questions(queries, rows)
    with pg.database(args.dsn) as dsn:
        times, trips = measure(dsn, rows, questions, args.passes)
        print(f"{pg.describe(dsn)}, {args.size:,} records, {args.passes} passes\n")
    print("| pool check | p50 (ms) | mean (ms) | round trips per recall |")
    print("|---|---:|---:|---:|")
    for c in CHECKS:
        t = times[c]
        print(
            f"| {c} | {statistics.median(t):.3f} | {statistics.mean(t):.3f} "
            f"| {trips[c] / len(t):.2f} |"
        )


if __name__ == "__main__":
    main()
