"""A repeated render with and without the hot cache (``memory.retrieval_stages: [..., cache]``).

Run: ``python benchmarks/hot_cache.py`` (``--rows``, ``--repeats``, ``--pg-dsn`` to add a
PostgreSQL store). Prints a Markdown table of median render times: the same prompt rendered
again and again through the bare store (every render recalls) and through the hot cache
(the first render recalls, the rest are served from process memory). Timings live here,
never in test asserts.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_inject import (
    AgentConfig,
    BackendConfig,
    MemoryInjectConfig,
    open_store,
    render_memory_context,
)

WORDS = (
    "deploy server prod staging user prefers concise answers tea coffee meeting monday budget "
    "review incident database migration alpha beta gamma delta release notes customer acme invoice"
).split(" ")
PROMPT = "which server do we deploy to after the release review?"


def _rows(n: int) -> Iterator[tuple[str, str, str]]:
    rnd = random.Random(7)
    for i in range(n):
        words = " ".join(rnd.choice(WORDS) for _ in range(12))
        yield f"fact_{i}", f"{words} ({i})", rnd.choice(("core", "daily", "conversation"))


@contextmanager
def _opened(backend: BackendConfig, stages: tuple[str, ...]) -> Iterator[Any]:
    memory = MemoryInjectConfig(backend=backend, retrieval_stages=stages)
    store: Any = open_store(AgentConfig("bench", memory))
    try:
        yield store, memory
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()


def _median_us(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm: connections, statements, the cache's first answer
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def _measure(name: str, backend: BackendConfig, rows: int, repeats: int) -> list[str]:
    with _opened(backend, ("fts", "vector")) as (store, _):
        lines = (json.dumps({"key": k, "content": c, "category": g}) for k, c, g in _rows(rows))
        store.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
    out = []
    for label, stages in (("off", ("fts", "vector")), ("cache", ("fts", "vector", "cache"))):
        with _opened(backend, stages) as (store, memory):
            text = render_memory_context(store, PROMPT, config=memory).text
            us = _median_us(
                functools.partial(render_memory_context, store, PROMPT, config=memory), repeats
            )
            out.append(f"| {name} | {rows} | {label} | {us:,.0f} | {len(text)} |")
    return out


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--pg-dsn", default=None, help="also measure a PostgreSQL store")
    args = parser.parse_args()
    lines = [
        "| store | rows | retrieval_stages | median render, us | block chars |",
        "| --- | --- | --- | --- | --- |",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        db = BackendConfig(path=str(Path(tmp) / "bench.db"))
        lines += _measure("sqlite", db, args.rows, args.repeats)
        hashed = BackendConfig(path=str(Path(tmp) / "hashed.db"), embedder="hashing")
        lines += _measure("sqlite + hashing embedder", hashed, args.rows, args.repeats)
    if args.pg_dsn:
        pg = BackendConfig(kind="postgres", dsn=args.pg_dsn, namespace="bench_hot_cache")
        lines += _measure("postgres", pg, args.rows, args.repeats)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
