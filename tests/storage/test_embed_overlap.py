"""Hybrid SQLite recall embeds the query while the keyword stage reads the index.

The overlap must not change a single result: the same recall run with the
query embedded first (every overlap slot taken) gives the same entries and
scores.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from memory_inject.embedders import HashingEmbedder
from memory_inject.storage import sqlite as sqlite_module
from memory_inject.storage.sqlite import SQLiteStore

FACTS = [
    ("deploy", "deploys go to prod-3 on fridays"),
    ("editor", "the user writes code in vim"),
    ("tea", "prefers green tea in the morning"),
    ("db", "the database migration runs before the deploy"),
    ("pets", "has a cat called Miso"),
]
QUERIES = ["where do deploys go", "what editor", "morning drink", "cat name", "migration order"]


class Recording(HashingEmbedder):
    """Records which thread embedded each batch."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.threads: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.append(threading.current_thread().name)
        return super().embed(texts)


@contextmanager
def no_free_slot() -> Iterator[None]:
    """Take every overlap slot, so recall embeds the query first, in its own thread."""
    sem = sqlite_module._embed_free
    taken = 0
    while sem.acquire(False):
        taken += 1
    try:
        yield
    finally:
        for _ in range(taken):
            sem.release()


def test_the_query_is_embedded_in_a_worker_and_the_results_do_not_change(
    tmp_path: Path,
) -> None:
    embedder = Recording()
    with SQLiteStore(tmp_path / "m.db", embedder=embedder) as store:
        for key, content in FACTS:
            store.store(key, content, session_id="s1" if key in ("tea", "pets") else None)
        embedder.threads.clear()
        overlapped = [
            [(e.key, e.score) for e in store.recall(q, 3, session_id=s)]
            for q in QUERIES
            for s in (None, "s1")
        ]
        workers = list(embedder.threads)
        embedder.threads.clear()
        with no_free_slot():
            inline = [
                [(e.key, e.score) for e in store.recall(q, 3, session_id=s)]
                for q in QUERIES
                for s in (None, "s1")
            ]
        assert overlapped == inline
        assert any(row for row in overlapped)
        assert all(name.startswith("memory-inject-embed") for name in workers)
        assert [threading.current_thread().name] * len(inline) == embedder.threads


def test_an_embedder_failure_during_the_overlap_degrades_to_keyword(tmp_path: Path) -> None:
    class Failing(HashingEmbedder):
        armed = False

        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            if self.armed:
                raise RuntimeError("model fell over")
            return super().embed(texts)

    embedder = Failing(dim=32)
    with SQLiteStore(tmp_path / "m.db", embedder=embedder) as store:
        store.store("deploy", "deploys go to prod-3")
        embedder.armed = True
        found = store.recall("deploys", 3)
        info = store.last_recall_info
    assert ["deploy"] == [e.key for e in found]
    assert "keyword" == info.strategy
    assert info.degraded is not None and info.degraded.startswith("embedder_failed")
