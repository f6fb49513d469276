"""Keyword recall by store size: the mirrored index, the FTS5 path and bare FTS5.

    python benchmarks/keyword_sizes.py                    # 500 1000 2000 4000 8000 records
    python benchmarks/keyword_sizes.py 550 4000 --writes  # one write before every query

Where :data:`memory_inject.storage.sqlite.keyword_mirror.MAX_ROWS` comes from. For each
size, the first ``n`` LoCoMo dev records (every conversation four times over,
each copy its own session stream, as in ``peers.py``) go into one store,
asked up to 300 of their conversations' questions once each, top 10, after
20 warm-up questions. Three contenders on the same file:

* ``mirror``: ``SQLiteStore.recall`` with the mirrored index forced on at any
  size (``KeywordMirror(after=1, max_rows=huge)``); ``build`` is its first
  recall, the one that reads every row's id, length and scope;
* ``fts5 path``: the same store with the mirror off;
* ``bare FTS5``: one ``fts5(content)`` table, ``ORDER BY bm25(fts) LIMIT 10``
  with the library's OR query (no scoring, no row fetch), as in ``peers.py``.

``--writes`` stores one memory (in the asked conversation's session) before
each timed query of the library's contenders: the cost of the recall after a
write, as an agent that remembers every turn sees it. The data is CC BY-NC
and is read from ``../shared/data/locomo-dev``, never copied here.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._locomo_data import DEFAULT_DATA, load
from benchmarks.peers import _content, as_jsonl, copies
from memory_inject.storage import Fusion, SQLiteStore
from memory_inject.storage.fusion import build_fts_query
from memory_inject.storage.sqlite.keyword_mirror import KeywordMirror


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


def measure(
    tmp: Path, rows: list[dict[str, Any]], questions: list[str], writes: bool
) -> dict[str, Any]:
    """p50 / p99 per contender and the mirror's build time, for one store of ``rows``."""
    n = len(rows)
    db = tmp / f"lib-{n}-{int(writes)}.db"
    out: dict[str, Any] = {}
    with SQLiteStore(db, fusion=Fusion(), synchronous="OFF") as mirrored:
        mirrored.import_jsonl(as_jsonl(rows))
        mirrored._engine._mirror = KeywordMirror(after=1, max_rows=10**9)
        t = time.perf_counter()
        mirrored.recall("hello", 10)
        out["build"] = (time.perf_counter() - t) * 1000.0
        with SQLiteStore(db, fusion=Fusion(), synchronous="OFF") as plain:
            plain._engine._mirror = None
            for name, store in (("mirror", mirrored), ("fts5 path", plain)):

                def before(i: int, store: SQLiteStore = store, name: str = name) -> None:
                    if writes:
                        store.store(
                            f"w-{name}-{i}",
                            f"note {i} about the day",
                            "core",
                            session_id=rows[0]["conversation"],
                        )

                out[name] = _run(lambda q, s=store: s.recall(q, 10), questions, before)
    bare = sqlite3.connect(tmp / f"bare-{n}-{int(writes)}.db", isolation_level=None)
    try:
        bare.execute("CREATE VIRTUAL TABLE fts USING fts5(content, tokenize='porter unicode61')")
        bare.execute("BEGIN")
        bare.executemany(
            "INSERT INTO fts(rowid, content) VALUES (?, ?)",
            [(i + 1, _content(r)) for i, r in enumerate(rows)],
        )
        bare.execute("COMMIT")
        sql = "SELECT rowid, content FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT 10"
        out["bare FTS5"] = _run(
            lambda q: bare.execute(sql, (build_fts_query(q) or '"-"',)).fetchall(),
            questions,
            lambda i: None,
        )
    finally:
        bare.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sizes", nargs="*", type=int, default=[500, 1000, 2000, 4000, 8000])
    parser.add_argument("--writes", action="store_true", help="one write before every query")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    records, queries = load(args.data)
    every = copies(records, 4)
    print(f"sqlite {sqlite3.sqlite_version}, top 10, writes: {args.writes}\n")
    print(
        "| records | build (ms) | mirror p50 / p99 | FTS5 path p50 / p99 "
        "| bare FTS5 p50 / p99 | mirror vs bare | FTS5 path vs bare |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            rows = every[:n]
            convs = {r["conversation"].split("#")[0] for r in rows}
            questions = [q["question"] for q in queries if q["conversation"] in convs][:300]
            got = measure(Path(tmp), rows, questions, args.writes)
            p50 = {k: statistics.median(v) for k, v in got.items() if k != "build"}
            cells = " | ".join(
                f"{p50[k]:.2f} / {_p(got[k], 0.99):.2f}"
                for k in ("mirror", "fts5 path", "bare FTS5")
            )
            print(
                f"| {n:,} | {got['build']:.0f} | {cells} | {p50['mirror'] / p50['bare FTS5']:.2f}x "
                f"| {p50['fts5 path'] / p50['bare FTS5']:.2f}x |"
            )


if __name__ == "__main__":
    main()
