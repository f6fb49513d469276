"""What ``erase`` costs: one row of a 10k-row store, and ``erase_forgotten`` of 1,000 rows.

A store of ``--rows`` rows (half of them in 50 sessions, half sessionless, a
minute apart, keyword only) is filled with ``import_jsonl``; after one recall
(the caches built), ``--erases`` single rows are erased one at a time (median and
slowest printed), then 1,000 rows are forgotten and ``erase_forgotten`` is timed
(on PostgreSQL that includes its ``VACUUM (ANALYZE)`` of the table).

Reproduce: ``python benchmarks/erase.py [--backend sqlite|postgres] [--dsn DSN]
[--rows 10000] [--erases 20]``; PostgreSQL uses a database ``erase_bench``, dropped
and made again, on the server of ``--dsn``.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_inject.records import MemoryRecord
from memory_inject.storage._jsonl import record_to_json
from memory_inject.storage.sqlite import SQLiteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = "garden weather office deploy river lamp coffee tiger paper violin".split()


def _jsonl(rows: int) -> io.StringIO:
    lines = []
    for i in range(rows):
        text = " ".join(WORDS[(i * j) % 10] for j in range(1, 12)) + f" item{i}"
        record = MemoryRecord(
            key=f"k{i}",
            content=text,
            category="conversation" if i % 2 else "daily",
            session_id=f"s{i % 50}" if i % 2 else None,
            timestamp=T0 + timedelta(minutes=i),
        )
        lines.append(json.dumps(record_to_json(record)) + "\n")
    return io.StringIO("".join(lines))


def _open(backend: str, dsn: str, folder: str) -> Any:
    if backend == "sqlite":
        return SQLiteStore(Path(folder) / "m.db")
    import psycopg

    from memory_inject.storage.postgres import PostgresStore

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS erase_bench")
        conn.execute("CREATE DATABASE erase_bench")
    return PostgresStore(f"{dsn} dbname=erase_bench")


def main() -> None:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--dsn", default="user=postgres dbname=postgres host=/tmp/memory-inject-pg")
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--erases", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = _open(args.backend, args.dsn, folder)
        store.import_jsonl(_jsonl(args.rows))
        store.recall("garden weather", 5)
        took = []
        for i in range(args.erases):
            t = time.perf_counter()
            assert store.erase(f"k{args.rows // 2 + 2 * i}")
            took.append(time.perf_counter() - t)
        print(
            f"{args.backend}: erase of one row at {args.rows} rows: median "
            f"{statistics.median(took) * 1e3:.1f} ms, slowest {max(took) * 1e3:.1f} ms"
        )
        for i in range(1000):
            store.forget(f"k{i}")
        t = time.perf_counter()
        n = store.erase_forgotten()
        print(
            f"{args.backend}: erase_forgotten of {n} rows: {(time.perf_counter() - t) * 1e3:.0f} ms"
        )
        store.close()


if __name__ == "__main__":
    main()
