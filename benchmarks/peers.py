"""The library side by side with its peers, in one run, on LoCoMo records (top-10 per query).

    python benchmarks/peers.py               # keyword: SQLiteStore.recall vs bare FTS5
    python benchmarks/peers.py --reps 5      # more alternating repetitions

Two store shapes: one store per dev conversation (about 550 records each,
its own questions), and one store of about 11k records (every conversation's
records four times over, each copy its own session stream), asked every
question. Each contender is one function taking the records and questions
and returning per-query latencies in ms (and the ids it found); the
contenders run alternately, ``--reps`` times each, and the table shows the
median of their per-repetition p50 / p99 and the ratio to bare FTS5.

The bare FTS5 peer is what a hand-rolled memory would do: one
``fts5(content, tokenize='porter unicode61')`` table over the same contents,
``SELECT rowid, content ... WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT 10``
with the library's own OR query (a raw prompt is not valid MATCH syntax). It
neither scores nor fetches records. The data is CC BY-NC and is read from
``../shared/data/locomo-dev``, never copied here. A hybrid / mem0 peer can
be added as another contender function.
"""

from __future__ import annotations

import argparse
import io
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._locomo_data import DEFAULT_DATA, load, mean, recall_at
from memory_inject.storage import Fusion, SQLiteStore
from memory_inject.storage.fusion import build_fts_query

#: ``[(records, questions)]``, one pair per store: what every contender is run on.
Workload = list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]
#: A contender: records and questions in, ``(latencies in ms, ids found per question)`` out.
Contender = Callable[[Path, Workload], tuple[list[float], list[list[str]]]]


def _content(r: dict[str, Any]) -> str:
    text = str(r["content"])
    if r.get("image_caption"):
        text += f" [shared an image: {r['image_caption']}]"
    return text


def as_jsonl(rows: Sequence[dict[str, Any]]) -> io.StringIO:
    """The records as the store's JSONL import reads them: ``core``, one session per stream."""
    lines = [
        json.dumps(
            {
                "key": r["id"],
                "content": _content(r),
                "category": "core",
                "timestamp": r["timestamp"] + "Z",
                "session_id": r["conversation"],
            }
        )
        for r in rows
    ]
    return io.StringIO("\n".join(lines) + "\n")


def copies(records: dict[str, list[dict[str, Any]]], n: int) -> list[dict[str, Any]]:
    """Every conversation's records ``n`` times, copy ``i`` keyed ``id#i`` in its own session."""
    out = []
    for i in range(n):
        for conv, rows in records.items():
            out += [{**r, "id": f"{r['id']}#{i}", "conversation": f"{conv}#{i}"} for r in rows]
    return out


def _timed(
    fn: Callable[[str], list[str]], questions: Sequence[dict[str, Any]]
) -> tuple[list[float], list[list[str]]]:
    times, found = [], []
    for q in questions:
        t = time.perf_counter()
        ids = fn(q["question"])
        times.append((time.perf_counter() - t) * 1000.0)
        found.append(ids)
    return times, found


def keyword_library(tmp: Path, work: Workload) -> tuple[list[float], list[list[str]]]:
    """``SQLiteStore.recall(question, 10)``: the default lexical store, records as ``core``."""
    times: list[float] = []
    found: list[list[str]] = []
    for n, (rows, questions) in enumerate(work):
        with SQLiteStore(tmp / f"lib-{n}.db", fusion=Fusion(), synchronous="OFF") as store:
            store.import_jsonl(as_jsonl(rows))
            for q in questions[:20]:  # warm the page cache and term statistics
                store.recall(q["question"], 10)
            t, f = _timed(lambda q: [e.key for e in store.recall(q, 10)], questions)
        times += t
        found += f
    return times, found


def keyword_bare_fts5(tmp: Path, work: Workload) -> tuple[list[float], list[list[str]]]:
    """One FTS5 table of the contents, ``ORDER BY bm25(fts) LIMIT 10``, the library's OR query."""
    times: list[float] = []
    found: list[list[str]] = []
    for n, (rows, questions) in enumerate(work):
        conn = sqlite3.connect(tmp / f"bare-{n}.db", isolation_level=None)
        try:
            conn.execute(
                "CREATE VIRTUAL TABLE fts USING fts5(content, tokenize='porter unicode61')"
            )
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO fts(rowid, content) VALUES (?, ?)",
                [(i + 1, _content(r)) for i, r in enumerate(rows)],
            )
            conn.execute("COMMIT")
            ids = [r["id"] for r in rows]
            sql = "SELECT rowid, content FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT 10"

            def query(
                text: str,
                conn: sqlite3.Connection = conn,
                ids: list[str] = ids,
                sql: str = sql,
            ) -> list[str]:
                match = build_fts_query(text)
                if match is None:
                    return []
                return [ids[int(rid) - 1] for rid, _ in conn.execute(sql, (match,)).fetchall()]

            for q in questions[:20]:
                query(q["question"])
            t, f = _timed(query, questions)
        finally:
            conn.close()
        times += t
        found += f
    return times, found


KEYWORD: dict[str, Contender] = {"bare FTS5": keyword_bare_fts5, "memory-inject": keyword_library}


def _p(times: list[float], q: float) -> float:
    s = sorted(times)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def compare(
    label: str, work: Workload, contenders: dict[str, Contender], reps: int, tmp: Path
) -> None:
    """Run ``contenders`` alternately on ``work`` and print one Markdown row each."""
    p50: dict[str, list[float]] = {name: [] for name in contenders}
    p99: dict[str, list[float]] = {name: [] for name in contenders}
    recall: dict[str, float] = {}
    names = list(contenders)
    for rep in range(reps):
        for name in names if rep % 2 == 0 else reversed(names):
            with tempfile.TemporaryDirectory(dir=tmp) as d:
                times, found = contenders[name](Path(d), work)
            p50[name].append(statistics.median(times))
            p99[name].append(_p(times, 0.99))
            evidence = [q["evidence"] for _, qs in work for q in qs]
            # A copy of an evidence turn counts as the turn itself.
            plain = [list(dict.fromkeys(i.split("#")[0] for i in f)) for f in found]
            recall[name] = mean(recall_at(f, ev, 10) for f, ev in zip(plain, evidence, strict=True))
    base = statistics.median(p50[names[0]])
    for name in names:
        m50 = statistics.median(p50[name])
        print(
            f"| {label} | {name} | {m50:.2f} | {statistics.median(p99[name]):.2f} "
            f"| {m50 / base:.2f}x | {recall[name]:.3f} | "
            + " / ".join(f"{x:.2f}" for x in p50[name])
            + " |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--copies", type=int, default=4, help="copies in the large store")
    args = parser.parse_args()
    records, queries = load(args.data)
    per_conv: Workload = [
        (rows, [q for q in queries if q["conversation"] == conv]) for conv, rows in records.items()
    ]
    big = copies(records, args.copies)
    print(f"sqlite {sqlite3.sqlite_version}, {len(queries)} questions, top 10, {args.reps} reps\n")
    print("| store | contender | p50 (ms) | p99 (ms) | p50 vs bare FTS5 | R@10 | p50 per rep |")
    print("|---|---|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        avg = sum(map(len, records.values())) // len(records)
        compare(f"per conversation (~{avg})", per_conv, KEYWORD, args.reps, Path(tmp))
        compare(f"{len(big):,} records", [(big, queries)], KEYWORD, args.reps, Path(tmp))


if __name__ == "__main__":
    main()
