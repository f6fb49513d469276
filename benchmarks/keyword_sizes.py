"""Keyword recall by store size, side by side with bare FTS5, in one run.

    python benchmarks/keyword_sizes.py 1000 10000 30000 100000            # default store
    python benchmarks/keyword_sizes.py 1000 10000 30000 100000 --layout none
    python benchmarks/keyword_sizes.py --paths                            # mirror vs FTS5 path
    python benchmarks/keyword_sizes.py 550 4000 --paths --writes          # a write before each

For each size, the first ``n`` LoCoMo dev records (every conversation copied as
often as needed, each copy keyed ``id#i``, as in ``peers.py``) go into one
store, written as chat session streams (``--layout stream``: each copy its own
session, so each record's index row holds its two predecessors), as facts
without a session stamped with their session's date (``--layout none``: one
event per session), or stamped a second apart (``--layout apart``: what
``remember()`` and the CLI write, each row with its near context), and are
asked up to 300 of their conversations' questions, top 10, after 20 warm-up
questions. The contenders run alternately ``--reps`` times, the
library's on a store opened afresh each time with the process's tokenised
words forgotten (every question is new to it); the table shows the median of
their per-repetition p50 / p99 and the ratio to bare FTS5.

* ``library``: ``SQLiteStore.recall`` with default settings (the mirrored
  index where it applies by default, :data:`~memory_inject.storage.sqlite.keyword_mirror.MAX_ROWS`);
* ``bare FTS5``: one ``fts5(content)`` table, ``ORDER BY bm25(fts) LIMIT 10``
  with the library's OR query (no scoring, no row fetch), as in ``peers.py``.

``--paths`` adds the two keyword paths at any size (where ``MAX_ROWS`` comes
from): ``mirror``, the mirrored index forced on (``KeywordMirror(after=1,
max_rows=huge)``, its first recall's ``build`` time shown), and ``fts5 path``,
the mirror off; its cells are p50 / mean / p99 (the mean counts the first
reads of common words, which the p50 hides). ``--optimize`` merges the
store's FTS5 index into one segment after the import (the bare table, written
in one transaction, has one; the store's import commits every 1,000
records). ``--writes`` stores one memory (in
the asked conversation's session) before each timed query of the library's
contenders: the cost of the recall after a write, as an agent that remembers
every turn sees it; it adds ``bare FTS5 + writes``, the bare table with one
row inserted (autocommit) before each of its queries, so each side is asked
right after a write of its own. The data is CC BY-NC and is read from
``../shared/data/locomo-dev``, never copied here.

``--backend postgres`` measures ``PostgresStore.recall`` (default settings,
the table ``VACUUM ANALYZE``d after the import) against ``bare tsvector``: one
table with a GIN-indexed ``to_tsvector('english', content)``, the library's OR
tsquery, ``ORDER BY ts_rank_cd LIMIT 10``, the key only (``_pg_sizes.py``), on
a private PostgreSQL unless ``--dsn`` names a server (a scratch database is
made there and dropped). ``--paths`` and ``--optimize`` are SQLite's own.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._locomo_data import DEFAULT_DATA, load
from benchmarks.peers import _content, copies
from memory_inject.storage import Fusion, SQLiteStore
from memory_inject.storage.fusion import build_fts_query
from memory_inject.storage.sqlite import keyword_terms as _terms
from memory_inject.storage.sqlite.keyword_mirror import KeywordMirror

LAYOUTS = ("stream", "none", "apart")


def _p(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _run(
    fn: Callable[[str], Any], questions: list[str], before: Callable[[int], None]
) -> list[float]:
    for q in questions[:20]:
        fn(q)
    times = []
    for i, q in enumerate(questions):
        before(i)
        t = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - t) * 1000.0)
    return times


def as_jsonl(rows: Sequence[dict[str, Any]], layout: str) -> io.StringIO:
    """The records as the store's JSONL import reads them: ``core``, one session per stream
    (``layout`` ``"stream"``) or no session (``"none"``: a session's turns share its
    timestamp, one event; ``"apart"``: the n-th row of a timestamp n seconds after it, rows
    written alone, each with its near context)."""
    seen: dict[str, int] = {}
    lines = []
    for r in rows:
        stamp = datetime.fromisoformat(r["timestamp"])
        if layout == "apart":
            seen[r["timestamp"]] = n = seen.get(r["timestamp"], -1) + 1
            stamp += timedelta(seconds=n)
        lines.append(
            json.dumps(
                {
                    "key": r["id"],
                    "content": _content(r),
                    "category": "core",
                    "timestamp": stamp.isoformat() + "Z",
                    "session_id": r["conversation"] if layout == "stream" else None,
                }
            )
        )
    return io.StringIO("\n".join(lines) + "\n")


def _bare(path: Path, rows: list[dict[str, Any]]) -> sqlite3.Connection:
    bare = sqlite3.connect(path, isolation_level=None)
    bare.execute("CREATE VIRTUAL TABLE fts USING fts5(content, tokenize='porter unicode61')")
    bare.execute("BEGIN")
    bare.executemany(
        "INSERT INTO fts(rowid, content) VALUES (?, ?)",
        [(i + 1, _content(r)) for i, r in enumerate(rows)],
    )
    bare.execute("COMMIT")
    return bare


_BARE_SQL = "SELECT rowid, content FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT 10"
#: With ``--writes``, the bare table with the same write before each query (untimed).
_BARE_WRITES = "bare FTS5 + writes"


def measure(
    tmp: Path,
    rows: list[dict[str, Any]],
    questions: list[str],
    *,
    writes: bool,
    layout: str,
    paths: bool,
    reps: int,
    optimize: bool = False,
) -> dict[str, Any]:
    """Per contender, the per-repetition latencies (ms); ``build``: the forced mirror's.

    Each repetition of a library contender opens the store afresh and forgets
    the process's tokenised words, so no question is ever asked of warm caches
    twice (the bare FTS5 table has none).
    """
    n = len(rows)
    db = tmp / f"lib-{n}-{layout}-{int(writes)}.db"
    with SQLiteStore(db, synchronous="OFF") as loader:
        loader.import_jsonl(as_jsonl(rows, layout))
    if optimize:  # one b-tree per index, as the bare table has (an experiment, not the store's)
        with sqlite3.connect(db, isolation_level=None) as conn:
            conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
    out: dict[str, Any] = {}
    bare = _bare(tmp / f"bare-{n}-{int(writes)}.db", rows)
    session = rows[0]["conversation"] if layout == "stream" else None

    def opened(name: str) -> SQLiteStore:
        _terms._cached_tokens.cache_clear()
        if name == "library":
            return SQLiteStore(db)
        store = SQLiteStore(db, fusion=Fusion(), synchronous="OFF")
        if name == "fts5 path":
            store._engine._mirror = None
            return store
        store._engine._mirror = KeywordMirror(after=1, max_rows=10**9)
        t = time.perf_counter()
        store.recall("hello", 10)
        out["build"] = (time.perf_counter() - t) * 1000.0
        return store

    def bare_write(i: int) -> None:  # autocommit: one transaction, as the store's write
        bare.execute("INSERT INTO fts(content) VALUES (?)", (f"note {i} about the day",))

    def contender(name: str) -> list[float]:
        if name.startswith("bare FTS5"):
            return _run(
                lambda q: bare.execute(_BARE_SQL, (build_fts_query(q) or '"-"',)).fetchall(),
                questions,
                bare_write if name == _BARE_WRITES else lambda i: None,
            )
        with opened(name) as store:

            def before(i: int) -> None:
                if writes:
                    key = f"w-{name}-{i}-{time.perf_counter_ns()}"
                    store.store(key, f"note {i} about the day", "core", session_id=session)

            return _run(lambda q: store.recall(q, 10), questions, before)

    names = [
        "library",
        *(["mirror", "fts5 path"] if paths else []),
        "bare FTS5",
        *([_BARE_WRITES] if writes else []),
    ]
    try:
        for rep in range(reps):
            for name in names if rep % 2 == 0 else reversed(names):
                out.setdefault(name, []).append(contender(name))
    finally:
        bare.close()
    return out


def main() -> None:
    """Print one Markdown row per size (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sizes", nargs="*", type=int, default=[1000, 10000, 30000, 100000])
    parser.add_argument("--writes", action="store_true", help="one write before every query")
    parser.add_argument("--layout", choices=LAYOUTS, default="stream")
    parser.add_argument("--paths", action="store_true", help="add the mirror and the FTS5 path")
    parser.add_argument("--reps", type=int, default=3, help="alternating repetitions")
    parser.add_argument(
        "--optimize", action="store_true", help="merge the store's FTS5 segments after the import"
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--dsn", help="postgres: an existing server (default: a private one)")
    args = parser.parse_args()
    if args.backend == "postgres":
        if args.paths or args.optimize:
            parser.error("--paths and --optimize are SQLite's; drop them with --backend postgres")
        main_postgres(args)
        return
    records, queries = load(args.data)
    per_copy = sum(map(len, records.values()))
    every = copies(records, max(1, math.ceil(max(args.sizes) / per_copy)))
    ours = ["library", *(["mirror", "fts5 path"] if args.paths else [])]
    bares = ["bare FTS5", *([_BARE_WRITES] if args.writes else [])]
    names = ours + bares
    print(
        f"sqlite {sqlite3.sqlite_version}, top 10, layout: {args.layout}, "
        f"writes: {args.writes}, optimize: {args.optimize}, {args.reps} reps "
        f"(median of per-rep p50 / {'mean / ' if args.paths else ''}p99, ms)\n"
    )
    print(
        "| records |"
        + (" build (ms) |" if args.paths else "")
        + "".join(f" {k} p50 / {'mean / ' if args.paths else ''}p99 |" for k in names)
        + "".join(f" {k} vs {b} |" for b in bares for k in ours)
    )
    print("|---:|" + "---:|" * (int(args.paths) + len(names) + len(ours) * len(bares)))
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            rows = every[:n]
            convs = {r["conversation"].split("#")[0] for r in rows}
            questions = [q["question"] for q in queries if q["conversation"] in convs][:300]
            got = measure(
                Path(tmp),
                rows,
                questions,
                writes=args.writes,
                layout=args.layout,
                paths=args.paths,
                reps=args.reps,
                optimize=args.optimize,
            )
            p50 = {k: statistics.median(statistics.median(t) for t in got[k]) for k in names}
            p99 = {k: statistics.median(_p(t, 0.99) for t in got[k]) for k in names}
            mean = {k: statistics.median(statistics.mean(t) for t in got[k]) for k in names}
            cells = "".join(
                f" {p50[k]:.2f} / {mean[k]:.2f} / {p99[k]:.2f} |"
                if args.paths
                else f" {p50[k]:.2f} / {p99[k]:.2f} |"
                for k in names
            )
            ratios = "".join(f" {p50[k] / p50[b]:.2f}x |" for b in bares for k in ours)
            build = f" {got['build']:.0f} |" if args.paths else ""
            print(f"| {n:,} |{build}{cells}{ratios}", flush=True)


def _questions(queries: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[str]:
    convs = {r["conversation"].split("#")[0] for r in rows}
    return [q["question"] for q in queries if q["conversation"] in convs][:300]


def main_postgres(args: argparse.Namespace) -> None:
    """``--backend postgres``: the library's store against a bare tsvector table."""
    from benchmarks import _pg_sizes as pg

    records, queries = load(args.data)
    per_copy = sum(map(len, records.values()))
    every = copies(records, max(1, math.ceil(max(args.sizes) / per_copy)))
    names = ["library", "bare tsvector"]
    with pg.database(args.dsn) as dsn:
        print(
            f"{pg.describe(dsn)}, top 10, layout: {args.layout}, writes: {args.writes}, "
            f"{args.reps} reps (median of per-rep p50 / p99, ms)\n"
        )
        print("| records |" + "".join(f" {k} p50 / p99 |" for k in names) + " library vs bare |")
        print("|---:|---:|---:|---:|")
        for n in args.sizes:
            rows = every[:n]
            got = pg.keyword_measure(
                dsn,
                rows,
                _questions(queries, rows),
                layout=args.layout,
                writes=args.writes,
                reps=args.reps,
            )
            p50, p99 = pg.summary(got, names, _p)
            cells = "".join(f" {p50[k]:.2f} / {p99[k]:.2f} |" for k in names)
            print(f"| {n:,} |{cells} {p50['library'] / p50['bare tsvector']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
