"""Hybrid (keyword + vector) recall by store size, side by side with bare FTS5 + numpy.

    nice python benchmarks/hybrid_sizes.py 10000 100000 1000000 --keep /tmp/hybrid-sizes

For each size, the first ``n`` LoCoMo dev records (every conversation copied as
often as needed, copy ``i`` keyed ``id#i`` in its own session, as in
``keyword_sizes.py``; copies after the first get three words drawn, seeded,
from the dev vocabulary appended, so no two vectors are equal and the nearest
rows are not ties) are written once with their vectors from
:class:`~memory_inject.embedders.HashingEmbedder` (256 dimensions: cheap and
deterministic; the point is the index's cost, not its quality). Up to 300 of
their conversations' questions are asked, top 10, with no session (the scope
is the whole namespace), after 20 warm-up questions; the contenders run
alternately ``--reps`` times and the table shows the median of their
per-repetition p50 / p99 (ms).

The query vectors are computed before the timing: the library's stores get an
embedder that looks them up (the store's own cost: total minus the query
embedding), with the fusion the library uses for a model embedder
(``MODEL_FUSION``, whose min-max rescaling needs the scope's least and greatest
cosine).

* ``library``: ``SQLiteStore.recall`` with default settings: past
  :data:`~memory_inject.storage.sqlite.vector_ann.ANN_THRESHOLD` rows the
  approximate index (``usearch``; its build time on a daemon thread is shown,
  and the timing starts once it is ready);
* ``library exact``: the same with ``vector_index="exact"`` (only where the
  matrix fits :data:`~memory_inject.storage.sqlite.vectors.MAX_MATRIX_BYTES`;
  past it every recall reads the vectors from the file, seconds at 1M);
* ``bare``: one ``fts5(content)`` table, ``ORDER BY bm25(fts) LIMIT 20`` with
  the library's OR query, plus an exact numpy cosine of the query over every
  vector (an in-memory float32 matrix, top 20 by ``argpartition``): no scope,
  no fusion, no row fetch.

``overlap``: the mean share of the exact top-10 (numpy) the library's vector
stage returns (``recall_where(..., mode="semantic")``), the approximate index's
recall@10. It is measured with the day's vote off (``day_vote.DAY_VOTE`` 0,
:func:`vector_stage_only`): a recall's lower half is otherwise chosen with its
day's vote, not by its cosine alone, and from issue 29's eleventh round to its
twentieth that choice was counted as the index's misses (an exact scan scored
0.83 at 10k). ``--keep DIR`` writes the stores there once and reuses them (a 1M
store takes minutes to write). The data is CC BY-NC and is read from
``../shared/data/locomo-dev``, never copied here.

``--backend postgres`` measures ``PostgresStore.recall`` (default settings: the
HNSW index pgvector builds, searched with ``hnsw.ef_search`` 100, and the fusion
for a model embedder, ``MODEL_FUSION``, as on SQLite) on the same records and vectors, on a
private PostgreSQL unless ``--dsn`` names a server (a scratch database there),
against the bare tsvector query of ``keyword_sizes.py`` (``LIMIT 20``) plus
``ORDER BY embedding <=> q LIMIT 20`` on the same table, ``bare exact`` (a
sequential scan) and ``bare HNSW`` (pgvector's HNSW index at its defaults,
``ef_search`` 40): see ``_pg_sizes.py``. ``import`` is the library's
``import_jsonl`` of every row with its vector, HNSW build included; ``--keep``
then keeps only the vectors.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from benchmarks._locomo_data import DEFAULT_DATA, load
from benchmarks.peers import _content, copies
from memory_inject._recall_query import RecallQuery
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage import SQLiteStore, day_vote
from memory_inject.storage.fusion import build_fts_query
from memory_inject.storage.sqlite.vectors import MAX_MATRIX_BYTES, row_bytes

DIM = 256


class Given:
    """An embedder that answers from precomputed query vectors (the store's own cost)."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        """``vectors``: ``{text: vector}`` for every query asked."""
        self._vectors = vectors
        self.dim = DIM
        self.name = "given"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The stored vector of each text."""
        return [self._vectors[t] for t in texts]


def texts_of(rows: list[dict[str, Any]]) -> list[str]:
    """The records' contents; copies after the first get three seeded vocabulary words."""
    vocab = sorted({w for r in rows for w in _content(r).split() if w.isalpha()})
    rng = random.Random(29)
    out = []
    for r in rows:
        text = _content(r)
        if not r["id"].endswith("#0"):
            text += " " + " ".join(rng.choice(vocab) for _ in range(3))
        out.append(text)
    return out


def build(dirpath: Path, rows: list[dict[str, Any]]) -> tuple[Path, Path, Any]:
    """The library's store, the bare FTS5 file and the vectors (written once per size)."""
    n = len(rows)
    lib, bare, vec = dirpath / f"lib-{n}.db", dirpath / f"bare-{n}.db", dirpath / f"vec-{n}.npy"
    if lib.exists() and bare.exists() and vec.exists():
        return lib, bare, np.load(vec)
    for p in (lib, bare, vec):
        p.unlink(missing_ok=True)
    texts = texts_of(rows)
    t = time.perf_counter()
    emb = HashingEmbedder(DIM)
    matrix = np.asarray(emb.embed(texts), dtype=np.float32)
    print(f"  {n:,}: embedded in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    with SQLiteStore(lib, synchronous="OFF") as store:
        step = 20_000
        for start in range(0, n, step):
            part = "".join(
                json.dumps(
                    {
                        "key": r["id"],
                        "content": text,
                        "category": "core",
                        "timestamp": r["timestamp"] + "Z",
                        "session_id": r["conversation"],
                        "embedding": v.tolist(),
                    }
                )
                + "\n"
                for r, text, v in zip(
                    rows[start : start + step],
                    texts[start : start + step],
                    matrix[start : start + step],
                    strict=True,
                )
            )
            store.import_jsonl(io.StringIO(part), batch_size=5000)
    conn = sqlite3.connect(bare, isolation_level=None)
    conn.execute("CREATE VIRTUAL TABLE fts USING fts5(content, tokenize='porter unicode61')")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO fts(rowid, content) VALUES (?, ?)", enumerate(texts, 1))
    conn.execute("COMMIT")
    conn.close()
    np.save(vec, matrix)
    print(f"  {n:,}: written in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    return lib, bare, matrix


def _p(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _run(fn: Callable[[str], Any], questions: list[str]) -> list[float]:
    for q in questions[:20]:
        fn(q)
    times = []
    for q in questions:
        t = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - t) * 1000.0)
    return times


def _wait_ready(store: SQLiteStore, question: str) -> float:
    """Recall until the vectors are read (a namespace past ``LOAD_LATER_ROWS`` is read
    on a background thread, its recalls keyword only meanwhile) and the index's build has
    started, then wait for the build; seconds taken."""
    t = time.perf_counter()
    while any(
        d.startswith("vectors_loading") for d in store.answer(RecallQuery(question, 10)).degraded
    ):
        time.sleep(0.5)
    cache = store._engine._vectors
    while cache is not None and any(not a.ready for a in cache._indexes.values()):
        if any(a.error is not None for a in cache._indexes.values()):
            raise RuntimeError("the index build failed")
        time.sleep(0.5)
    return time.perf_counter() - t


@contextlib.contextmanager
def vector_stage_only() -> Iterator[None]:
    """The day's vote off (``day_vote.DAY_VOTE`` 0) for the block: a semantic recall
    returns the rows of its best cosines, what the index's recall@10 compares."""
    was = day_vote.DAY_VOTE
    day_vote.DAY_VOTE = 0.0
    try:
        yield
    finally:
        day_vote.DAY_VOTE = was


def measure(
    lib: Path, bare_path: Path, matrix: Any, questions: list[str], qvecs: Any, reps: int
) -> dict[str, Any]:
    """Per contender, the per-repetition latencies (ms); ``build`` (s) and ``overlap``."""
    n = len(matrix)
    given = Given({q: v.tolist() for q, v in zip(questions, qvecs, strict=True)})
    stores = {"library": SQLiteStore(lib, embedder=given)}
    out: dict[str, Any] = {"build": _wait_ready(stores["library"], questions[0])}
    if n * row_bytes(DIM) <= MAX_MATRIX_BYTES:
        stores["library exact"] = SQLiteStore(lib, embedder=given, vector_index="exact")
    bare = sqlite3.connect(bare_path, isolation_level=None)
    by_q = dict(zip(questions, qvecs, strict=True))

    def bare_fn(q: str) -> Any:
        hits = bare.execute(
            "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT 20",
            (build_fts_query(q) or '"-"',),
        ).fetchall()
        sims = np.einsum("ij,j->i", matrix, by_q[q])
        return hits, np.argpartition(-sims, 19)[:20]

    keys = [str(k) for k in _keys(lib)]
    overlaps = []
    with vector_stage_only():
        for q in questions:
            sims = matrix @ by_q[q]
            exact = {keys[i] for i in np.argsort(-sims)[:10]}
            got = stores["library"].recall_where(q, 10, mode="semantic")
            overlaps.append(len(exact & {e.key for e in got}) / 10)
    out["overlap"] = statistics.mean(overlaps)
    names = [*stores, "bare"]
    try:
        for rep in range(reps):
            for name in names if rep % 2 == 0 else reversed(names):
                fn = bare_fn if name == "bare" else _recall_of(stores[name])
                out.setdefault(name, []).append(_run(fn, questions))
    finally:
        bare.close()
        for store in stores.values():
            store.close()
    return out


def _recall_of(store: SQLiteStore) -> Callable[[str], Any]:
    return lambda q: store.recall(q, 10)


def _keys(lib: Path) -> list[str]:
    conn = sqlite3.connect(lib)
    try:
        return [r[0] for r in conn.execute("SELECT key FROM memories ORDER BY rid")]
    finally:
        conn.close()


def main() -> None:
    """Print one Markdown row per size (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sizes", nargs="*", type=int, default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--reps", type=int, default=3, help="alternating repetitions")
    parser.add_argument("--keep", type=Path, help="write the stores here once and reuse them")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--dsn", help="postgres: an existing server (default: a private one)")
    args = parser.parse_args()
    if args.backend == "postgres":
        main_postgres(args)
        return
    records, queries = load(args.data)
    per_copy = sum(map(len, records.values()))
    every = copies(records, max(1, math.ceil(max(args.sizes) / per_copy)))
    print(
        f"sqlite {sqlite3.sqlite_version}, HashingEmbedder({DIM}), top 10, no session, "
        f"{args.reps} reps (median of per-rep p50 / p99, ms)\n"
    )
    names = ["library", "library exact", "bare"]
    print(
        "| records | index build (s) | ANN recall@10 |"
        + "".join(f" {k} p50 / p99 |" for k in names)
        + " library vs bare (p50) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        for n in args.sizes:
            rows = every[:n]
            convs = {r["conversation"].split("#")[0] for r in rows}
            questions = list(
                dict.fromkeys(q["question"] for q in queries if q["conversation"] in convs)
            )[:300]
            qvecs = np.asarray(HashingEmbedder(DIM).embed(questions), dtype=np.float32)
            lib, bare, matrix = build(where, rows)
            got = measure(lib, bare, matrix, questions, qvecs, args.reps)
            p50 = {
                k: statistics.median(statistics.median(t) for t in got[k])
                for k in got
                if k in names
            }
            p99 = {k: statistics.median(_p(t, 0.99) for t in got[k]) for k in got if k in names}
            cells = "".join(
                f" {p50[k]:.2f} / {p99[k]:.2f} |" if k in p50 else " - |" for k in names
            )
            build_s = f"{got['build']:.1f}" if n >= 50_000 else "-"
            print(
                f"| {n:,} | {build_s} | {got['overlap']:.3f} |{cells} "
                f"{p50['library'] / p50['bare']:.2f}x |",
                flush=True,
            )


def _vectors(where: Path | None, rows: list[dict[str, Any]], texts: list[str]) -> Any:
    """The records' vectors, read from ``where`` when a SQLite run kept them there."""
    kept = None if where is None else where / f"vec-{len(rows)}.npy"
    if kept is not None and kept.exists():
        return np.load(kept)
    matrix = np.asarray(HashingEmbedder(DIM).embed(texts), dtype=np.float32)
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        np.save(kept, matrix)
    return matrix


def main_postgres(args: argparse.Namespace) -> None:
    """``--backend postgres``: ``PostgresStore`` against bare tsvector + pgvector."""
    from benchmarks import _pg_sizes as pg

    records, queries = load(args.data)
    per_copy = sum(map(len, records.values()))
    every = copies(records, max(1, math.ceil(max(args.sizes) / per_copy)))
    names = ["library", "bare exact", "bare HNSW"]
    with pg.database(args.dsn) as dsn:
        print(
            f"{pg.describe(dsn)}, HashingEmbedder({DIM}), top 10, no session, "
            f"{args.reps} reps (median of per-rep p50 / p99, ms)\n"
        )
        print(
            "| records | library import (s) | bare HNSW build (s) | ANN recall@10 |"
            + "".join(f" {k} p50 / p99 |" for k in names)
            + " library vs bare exact | library vs bare HNSW |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in args.sizes:
            rows = every[:n]
            convs = {r["conversation"].split("#")[0] for r in rows}
            questions = list(
                dict.fromkeys(q["question"] for q in queries if q["conversation"] in convs)
            )[:300]
            qvecs = np.asarray(HashingEmbedder(DIM).embed(questions), dtype=np.float32)
            texts = texts_of(rows)
            matrix = _vectors(args.keep, rows, texts)
            given = Given({q: v.tolist() for q, v in zip(questions, qvecs, strict=True)})
            got = pg.hybrid_measure(dsn, rows, texts, matrix, questions, qvecs, given, args.reps)
            p50, p99 = pg.summary(got, names, _p)
            cells = "".join(f" {p50[k]:.2f} / {p99[k]:.2f} |" for k in names)
            print(
                f"| {n:,} | {got['import']:.1f} | {got['hnsw']:.1f} | {got['overlap']:.3f} |"
                f"{cells} {p50['library'] / p50['bare exact']:.2f}x |"
                f" {p50['library'] / p50['bare HNSW']:.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
