"""Keyword recall on a chat server's store: many short conversations, each turn scoped to one.

    python benchmarks/keyword_sessions.py 10000:1000 20000:2000 20000:40

For each ``records:sessions`` pair, LoCoMo dev turns (copied as often as needed) are
written as ``records`` rows spread round-robin over ``sessions`` sessions
(``conversation`` category, so a recall scoped to a session sees only that session's
rows), and the dev questions are asked, each scoped to a random session, ``--passes``
times on one open store after 20 warm-ups (a long-lived server: the keyword mirror's
first reads are in the first pass, which is timed too). Contenders, alternated in
one process per size:

* ``library``: ``SQLiteStore.recall(q, 10, session_id=s)`` with default settings (the
  keyword mirror up to :data:`~memory_inject.storage.sqlite.keyword_mirror.MAX_ROWS`);
* ``fts5 path``: the same store with the mirror off (``KeywordMirror(max_rows=0)``);
* ``bare FTS5``: one ``fts5(content, session UNINDEXED)`` table, the library's OR
  query, ``WHERE session = ?``, ``ORDER BY bm25 LIMIT 10``: no scoring, no row fetch.

Prints p50 / p90 / p99 / mean (ms) per contender and the library's ratio to bare FTS5.
"""

from __future__ import annotations

import argparse
import json
import random
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
from memory_inject.storage import SQLiteStore
from memory_inject.storage.fusion import content_words
from memory_inject.storage.sqlite.keyword_mirror import KeywordMirror


def _or_query(question: str) -> str:
    """The library's OR query of a question's content words (as ``peers.py`` asks)."""
    return " OR ".join(f'"{w}"' for w, _ in content_words(question))


def _stats(times: list[float]) -> str:
    times = sorted(times)
    return (
        f"{statistics.median(times):.2f} / {times[int(0.9 * len(times))]:.2f} / "
        f"{times[int(0.99 * len(times))]:.2f} / {statistics.mean(times):.2f}"
    )


def run(
    directory: Path,
    records: int,
    sessions: int,
    turns: list[dict[str, Any]],
    questions: list[str],
    passes: int,
) -> str:
    """One table row: the three contenders on a store of ``records`` rows in ``sessions``."""
    items = [
        {
            "key": f"r{i}",
            "content": turns[i % len(turns)]["content"],
            "category": "conversation",
            "session_id": f"chat-{i % sessions}",
            "timestamp": turns[i % len(turns)]["timestamp"],
        }
        for i in range(records)
    ]
    source = directory / f"{records}-{sessions}.jsonl"
    source.write_text("\n".join(json.dumps(x) for x in items), encoding="utf-8")
    lib_path = directory / f"lib-{records}-{sessions}.db"
    with SQLiteStore(lib_path) as writer:
        writer.import_jsonl(source)
    bare = sqlite3.connect(directory / f"bare-{records}-{sessions}.db")
    bare.execute("CREATE VIRTUAL TABLE fts USING fts5(content, session UNINDEXED)")
    bare.executemany(
        "INSERT INTO fts(content, session) VALUES (?, ?)",
        [(x["content"], x["session_id"]) for x in items],
    )
    bare.commit()
    library = SQLiteStore(lib_path)
    fts5_path = SQLiteStore(lib_path)
    fts5_path._engine._mirror = KeywordMirror(max_rows=0)
    rng = random.Random(records + sessions)
    asks = [(q, f"chat-{rng.randrange(sessions)}") for q in questions]
    queries = {q: _or_query(q) for q in questions}

    def bare_recall(q: str, s: str) -> None:
        if queries[q]:
            bare.execute(
                "SELECT rowid FROM fts WHERE fts MATCH ? AND session = ? "
                "ORDER BY bm25(fts) LIMIT 10",
                (queries[q], s),
            ).fetchall()

    contenders: dict[str, Callable[[str, str], object]] = {
        "library": lambda q, s: library.recall(q, 10, session_id=s),
        "fts5 path": lambda q, s: fts5_path.recall(q, 10, session_id=s),
        "bare FTS5": bare_recall,
    }
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for q, s in asks[:20]:
        for ask in contenders.values():
            ask(q, s)
    for _ in range(passes):
        for q, s in asks:
            for name, ask in contenders.items():
                t = time.perf_counter()
                ask(q, s)
                times[name].append((time.perf_counter() - t) * 1000.0)
    library.close()
    fts5_path.close()
    bare.close()
    ratio = statistics.median(times["library"]) / statistics.median(times["bare FTS5"])
    cells = " | ".join(_stats(times[name]) for name in contenders)
    return f"| {records:,} | {sessions:,} | {cells} | {ratio:.2f}x |"


def main() -> None:
    """Print the table (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sizes", nargs="+", help="records:sessions, e.g. 10000:1000")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--passes", type=int, default=2)
    args = parser.parse_args()
    pairs = []
    for text in args.sizes:
        records, _, sessions = text.partition(":")
        if not (records.isdigit() and sessions.isdigit() and int(sessions) > 0):
            parser.error(f"{text!r}: expected records:sessions, e.g. 10000:1000")
        pairs.append((int(records), int(sessions)))
    rows, queries = load(args.data)
    turns = [r for conv in rows.values() for r in conv]
    questions = list(dict.fromkeys(q["question"] for q in queries))
    print(
        f"sqlite {sqlite3.sqlite_version}, top 10, one random session a question, "
        f"{len(questions)} questions x {args.passes} passes (p50 / p90 / p99 / mean, ms)\n"
    )
    print("| records | sessions | library | fts5 path | bare FTS5 | library vs bare (p50) |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as d:
        for records, sessions in pairs:
            print(run(Path(d), records, sessions, turns, questions, args.passes), flush=True)


if __name__ == "__main__":
    main()
