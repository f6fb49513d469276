"""Issue 29: a large namespace's vectors are read on a background thread, never in a turn.

At 1M rows the first recall with an embedder spent 9 to 14 s reading the vectors; the
turn's deadline (2 s by default) interrupted it, and the next turn started it again, so
no turn ever got its memory. Past ``LOAD_LATER_ROWS`` the matrix is read by a thread of
its own; recalls meanwhile search by keyword and say so (``vectors_loading: ...``).
These tests lower the threshold to a few rows and hold the read back with an event.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("numpy")

from memory_inject._recall_query import RecallQuery
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite import vector_load as _load
from memory_inject.storage.sqlite.vector_matrix import read_matrix
from memory_inject.storage.sqlite.vectors import VectorCache

_FACTS = [f"fact {i}: the {w} of project {i % 7}" for i, w in enumerate(["budget"] * 40)]
_ASK = "what is the budget of project 3"


class _Gate:
    """Holds every background read until opened; counts the reads started."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.open = threading.Event()
        self.started = 0
        real = read_matrix

        def held(conn: sqlite3.Connection, namespace: str, dim: int, head: Any) -> Any:
            self.started += 1
            assert self.open.wait(30), "the test never opened the gate"
            return real(conn, namespace, dim, head)

        monkeypatch.setattr("memory_inject.storage.sqlite.vector_load.read_matrix", held)


def _started(gate: _Gate, n: int) -> int:
    """The reads started, once ``n`` have (a read's thread may not run at once: a busy
    machine), or after 10 s."""
    until = time.monotonic() + 10.0
    while gate.started < n and time.monotonic() < until:
        time.sleep(0.005)
    return gate.started


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Gate]:
    """The background reads held until the test opens the gate (opened at the end)."""
    held = _Gate(monkeypatch)
    try:
        yield held
    finally:
        held.open.set()


class _Model(HashingEmbedder):
    """Hashing vectors declared of meaning, as a model's: ``mode="semantic"`` is the vector
    stage alone (with hashing's own ``semantic = False`` it is the store's recall)."""

    semantic = True


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SQLiteStore]:
    monkeypatch.setattr(_load, "LOAD_LATER_ROWS", 10)
    s = SQLiteStore(tmp_path / "m.db", embedder=_Model(64))
    for i, text in enumerate(_FACTS):
        s.store(f"k{i}", text)
    s._engine._vectors = VectorCache(index="exact")  # read afresh, no graph
    try:
        yield s
    finally:
        s.close()


def _answer(store: SQLiteStore, query: str = _ASK, **kw: Any) -> Any:
    return store.answer(RecallQuery(query, 5, deadline=time.perf_counter() + 2.0, **kw))


def _until_hybrid(store: SQLiteStore) -> Any:
    for _ in range(300):
        got = _answer(store)
        if got.strategy == "hybrid":
            return got
        time.sleep(0.02)
    raise AssertionError("the vectors never arrived")


def _reference(path: Path, query: str = _ASK) -> list[tuple[str, float | None]]:
    """What a store reading its vectors inside the recall answers."""
    with SQLiteStore(path, embedder=HashingEmbedder(64)) as fresh:
        fresh._engine._vectors = VectorCache(index="exact", background=False)
        return [(e.key, e.score) for e in fresh.recall(query, 5)]


def test_recalls_search_by_keyword_until_the_vectors_arrive(
    store: SQLiteStore, gate: _Gate
) -> None:
    first = _answer(store)
    assert first.strategy == "keyword"
    assert first.entries, "the turn got its memory by keyword"
    assert len(first.degraded) == 1 and first.degraded[0].startswith("vectors_loading: ")
    again = _answer(store)  # the same read: not started twice
    assert again.strategy == "keyword" and _started(gate, 1) == 1
    gate.open.set()
    got = _until_hybrid(store)
    assert got.degraded == ()
    assert [(e.key, e.score) for e in got.entries] == _reference(Path(store.path))
    assert gate.started == 1


def test_rows_written_while_the_vectors_load_are_found(store: SQLiteStore, gate: _Gate) -> None:
    assert _answer(store).strategy == "keyword"
    while gate.started == 0:  # the read's snapshot is taken before these writes
        time.sleep(0.01)
    store.store("late", "the budget of project 3 was cut to zero")
    store.forget("k3")
    gate.open.set()
    got = _until_hybrid(store)
    keys = [e.key for e in got.entries]
    assert "late" in keys and "k3" not in keys
    assert [(e.key, e.score) for e in got.entries] == _reference(Path(store.path))


def test_a_turn_with_a_deadline_is_not_held_by_the_read(store: SQLiteStore, gate: _Gate) -> None:
    started = time.perf_counter()
    got = store.answer(RecallQuery(_ASK, 5, deadline=time.perf_counter() + 0.5))
    assert time.perf_counter() - started < 0.5
    assert got.strategy == "keyword" and got.entries
    gate.open.set()
    _until_hybrid(store)


def test_a_failed_read_is_reported_and_tried_again(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sqlite3.connect
    calls = []

    def broken(*a: Any, **kw: Any) -> Any:
        calls.append(a)
        if len(calls) == 1:
            raise sqlite3.OperationalError("unable to open database file")
        return real(*a, **kw)

    # Only the background read's connections: the store's own stay as they are.
    fake = types.SimpleNamespace(connect=broken, OperationalError=sqlite3.OperationalError)
    monkeypatch.setattr("memory_inject.storage.sqlite.vector_load.sqlite3", fake)
    monkeypatch.setattr(_load, "RETRY_S", 0.2)
    _answer(store)
    notes = []
    for _ in range(300):
        got = _answer(store)
        notes += got.degraded
        if got.strategy == "hybrid":
            break
        time.sleep(0.02)
    assert got.strategy == "hybrid"
    assert any("the last read failed: OperationalError: unable to open" in n for n in notes)
    assert len(calls) == 2


def test_a_cleared_cache_drops_the_read_running(store: SQLiteStore, gate: _Gate) -> None:
    _answer(store)
    while gate.started == 0:
        time.sleep(0.01)
    cache = store._engine._vectors
    assert cache is not None
    cache.clear()
    gate.open.set()
    time.sleep(0.2)
    assert cache._matrices == {}  # the read started before the clear is not kept
    got = _until_hybrid(store)  # a new read, started by the next recall
    assert gate.started == 2 and got.entries


def test_many_turns_at_once_while_the_vectors_load(store: SQLiteStore, gate: _Gate) -> None:
    """16 threads ask at once: each gets its memory and one true note; one read runs."""
    results: list[Any] = []
    errors: list[BaseException] = []

    def turn() -> None:
        try:
            results.append(_answer(store))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=turn) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 16
    for got in results:
        assert got.strategy == "keyword" and got.entries
        assert [n.split(":")[0] for n in got.degraded] == ["vectors_loading"]
    assert _started(gate, 1) == 1
    gate.open.set()
    _until_hybrid(store)


def test_a_small_namespace_is_read_inside_the_recall(tmp_path: Path) -> None:
    """Below the threshold nothing changes: the first recall is already hybrid."""
    with SQLiteStore(tmp_path / "m.db", embedder=HashingEmbedder(64)) as s:
        for i, text in enumerate(_FACTS):
            s.store(f"k{i}", text)
        got = _answer(s)
    assert got.strategy == "hybrid" and got.degraded == ()


def test_a_semantic_query_answers_by_keyword_while_the_vectors_load(
    store: SQLiteStore, gate: _Gate
) -> None:
    """As when the embedder fails: ``mode="semantic"`` skips keywords only while the vector
    stage is live."""
    got = _answer(store, mode="semantic")
    assert got.strategy == "keyword" and got.entries
    assert got.degraded[0].startswith("vectors_loading: ")
    gate.open.set()
    _until_hybrid(store)
    assert _answer(store, mode="semantic").strategy == "vector"


@pytest.mark.parametrize("scan_bytes", [1, 1 << 30])
def test_a_namespace_too_large_to_hold_is_not_read_by_every_recall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan_bytes: int
) -> None:
    """Past the in-memory bound a recall reads the scope's vectors from the file; past
    ``FILE_SCAN_BYTES`` of them a recall without a session searches by keyword and says
    so, and a session's recall still reads its own rows."""
    monkeypatch.setattr(_load, "FILE_SCAN_BYTES", scan_bytes)
    with SQLiteStore(tmp_path / "m.db", embedder=HashingEmbedder(64)) as s:
        for i, text in enumerate(_FACTS):
            s.store(f"k{i}", text, session_id="s1" if i % 2 else None)
        s._engine._vectors = VectorCache(max_bytes=1000, index="exact")  # holds 3 rows
        wide = _answer(s)
        session = _answer(s, session_id="s1")
    assert wide.entries and session.entries
    assert session.strategy == "hybrid" and session.degraded == ()
    if scan_bytes == 1:
        assert wide.strategy == "keyword"
        assert [n.split(":")[0] for n in wide.degraded] == ["vectors_not_held"]
        assert "holds 40 vectors of 64 dimensions" in wide.degraded[0]
    else:
        assert wide.strategy == "hybrid" and wide.degraded == ()


def test_a_small_namespace_in_a_large_file_reads_its_vectors_at_once(
    tmp_path: Path, gate: _Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rids' span counts the whole file: a tenant of three rows beside one of forty
    # must not wait for a background read (nor say it does).
    monkeypatch.setattr(_load, "LOAD_LATER_ROWS", 10)
    path = tmp_path / "shared.db"
    with SQLiteStore(path, embedder=HashingEmbedder(64), namespace="big") as big:
        for i, text in enumerate(_FACTS):
            big.store(f"k{i}", text)
    small = SQLiteStore(path, embedder=HashingEmbedder(64), namespace="small")
    try:
        small._engine._vectors = VectorCache(index="exact")
        for i in range(3):
            small.store(f"s{i}", f"the budget of project {i} is small")
        big = SQLiteStore(path, embedder=HashingEmbedder(64), namespace="big")
        big._engine._vectors = small._engine._vectors  # one cache, as one process holds
        got = _answer(small)
        assert got.strategy == "hybrid" and got.degraded == ()
        assert {e.key for e in got.entries} == {"s0", "s1", "s2"}
        assert gate.started == 0
        loading = _answer(big)  # forty rows: past the (lowered) threshold on their own
        assert loading.strategy == "keyword" and _started(gate, 1) == 1
        assert loading.degraded[0].startswith("vectors_loading: ")
        big.close()
    finally:
        small.close()
