"""Issue 29: the FTS5 path's document frequencies stay cached across new rows.

An agent writes a turn and recalls the next one. :class:`TermStats` keeps each
token's count of the rows up to a rid and adds the rows written since with one
``MATCH ... AND rowid > upto`` count, instead of walking every query word's
doclist again after each write. These tests hold its answers to a fresh
``fts5vocab`` count in the same snapshot, and check when it walks the index.
"""

from __future__ import annotations

import random
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite import term_stats as _term_stats
from memory_inject.storage.sqlite.keyword_terms import document_frequencies, tokens_of
from memory_inject.storage.sqlite.term_stats import TermStats
from tests.storage._sqlite_backend import on_file, plain, writable

# "agreed" stems to "agre", which stems again to "agr": no MATCH phrase counts "agre".
_WORDS = ["apple", "pie", "banana", "crumble", "agreed", "agre", "because", "tart", "zest"]
_TOKENS = sorted({t for w in _WORDS for t in tokens_of(w)})


class _Reader:
    """A read connection of its own with a :class:`TermStats`; ``walked`` lists the tokens
    the cache read from ``fts5vocab`` (each read walks the token's whole doclist)."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.conn = writable(path, isolation_level=None, check_same_thread=False)
        self.stats = TermStats()
        self.walked: list[str] = []

        def walk(conn: sqlite3.Connection, tokens: Sequence[str]) -> dict[str, int]:
            self.walked += tokens
            return document_frequencies(conn, tokens)

        monkeypatch.setattr(_term_stats, "document_frequencies", walk)

    def counts(self, tokens: Sequence[str] = _TOKENS) -> tuple[dict[str, int], dict[str, int]]:
        """(the cache's answer, a fresh fts5vocab count), in one read snapshot."""
        self.conn.execute("BEGIN")
        try:
            self.stats.refresh(self.conn)
            got = self.stats.document_frequencies(self.conn, tokens)
            fresh = document_frequencies(self.conn, tokens)
            return got, {t: fresh.get(t, 0) for t in tokens}
        finally:
            self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SQLiteStore, _Reader]]:
    path = tmp_path / "m.db"
    store = plain(path)
    for i in range(12):
        store.store(f"old{i}", f"apple pie {_WORDS[i % len(_WORDS)]}", session_id=f"s{i % 3}")
    reader = _Reader(path, monkeypatch)
    try:
        yield store, reader
    finally:
        reader.close()
        store.close()


_COUNTED = [t for t in _TOKENS if tokens_of(t) == (t,)]  # what a MATCH phrase counts


def test_new_rows_are_counted_without_walking_the_index(
    db: tuple[SQLiteStore, _Reader],
) -> None:
    store, reader = db
    got, fresh = reader.counts()
    assert got == fresh
    assert sorted(reader.walked) == _TOKENS
    upto, first = reader.stats.upto, fresh["zest"]
    reader.walked.clear()
    for n in range(5):
        store.store(f"new{n}", "apple crumble with zest", session_id="s9")
        got, fresh = reader.counts(_COUNTED)
        assert got == fresh, n
    assert fresh["zest"] >= first + 5
    assert reader.walked == []  # every count after the first came from the cache
    assert reader.stats.upto == upto


@pytest.mark.parametrize(
    "change",
    [
        "store the same key again",
        "forget",
        "another connection deletes",
        "another connection updates",
    ],
)
def test_a_change_to_an_older_row_reads_the_counts_again(
    db: tuple[SQLiteStore, _Reader], change: str
) -> None:
    """An older row's tokens may have changed, and nothing says which: the cache is based
    again at once, and its counts stay exact."""
    store, reader = db
    reader.counts()
    store.store("fresh", "banana tart", session_id="s9")  # a new row first: carried
    reader.counts()
    reader.walked.clear()
    if change == "store the same key again":
        store.store("old1", "zest only", session_id="s1")
    elif change == "forget":
        store.forget("old0")
    elif change == "another connection deletes":
        on_file(Path(store.path), "DELETE FROM memories WHERE key = 'old2'")
    else:
        on_file(Path(store.path), "UPDATE memories SET content = 'because' WHERE key = 'old3'")
    got, fresh = reader.counts()
    assert got == fresh
    assert sorted(reader.walked) == _TOKENS  # based again: every token read afresh
    assert reader.stats.upto is not None and reader.stats.upto >= 13


def test_a_token_no_phrase_counts_is_read_again_after_a_write(
    db: tuple[SQLiteStore, _Reader],
) -> None:
    """``agre`` (from "agreed") stems again to ``agr``: a MATCH for it would count rows
    holding "agre" itself. Its cached count is dropped at the next write instead."""
    store, reader = db
    assert ("agre",) == tokens_of("agreed") and ("agr",) == tokens_of("agre")
    before, _ = reader.counts(["agre", "agr"])
    reader.walked.clear()
    store.store("n1", "we agreed on it", session_id="s7")
    store.store("n2", "agre agre", session_id="s8")
    got, fresh = reader.counts(["agre", "agr"])
    assert got == fresh
    assert got["agre"] > before["agre"] and got["agr"] > before["agr"]
    assert reader.walked == ["agre"]


def test_many_new_rows_read_the_counts_again(
    db: tuple[SQLiteStore, _Reader], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_term_stats, "TAIL_ROWS", 4)
    store, reader = db
    reader.counts(_COUNTED)
    upto = reader.stats.upto
    reader.walked.clear()
    store.store("n1", "apple", session_id="s9")
    reader.counts(_COUNTED)
    assert reader.walked == []  # one new row: carried
    for n in range(2, 6):
        store.store(f"n{n}", "apple", session_id="s9")
    got, fresh = reader.counts(_COUNTED)
    assert got == fresh
    assert sorted(reader.walked) == _COUNTED
    assert reader.stats.upto is not None and upto is not None and reader.stats.upto > upto


def test_random_writes_keep_the_carried_counts_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mostly new rows (the carried path), with upserts, forgets and another connection's
    deletes and updates between them; every count equals fts5vocab's in its snapshot."""
    rng = random.Random(29)
    path = tmp_path / "m.db"
    store = plain(path)
    reader = _Reader(path, monkeypatch)
    other = writable(path, isolation_level=None)
    try:
        for step in range(200):
            op = rng.random()
            text = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(1, 5)))
            session = rng.choice([None, "s1", "s2"])
            if op < 0.85 or step < 5:
                store.store(f"k{step}", text, session_id=session)
            elif op < 0.9:
                store.forget(f"k{rng.randrange(step)}")
            elif op < 0.95:
                other.execute("DELETE FROM memories WHERE key = ?", (f"k{rng.randrange(step)}",))
            else:
                other.execute(
                    "UPDATE memories SET content = ? WHERE key = ?",
                    (text, f"k{rng.randrange(step)}"),
                )
            asked = rng.sample(_TOKENS, rng.randrange(1, len(_TOKENS) + 1))
            got, fresh = reader.counts(asked)
            assert got == fresh, step
        # The carried path was taken: most counts walked no countable token.
        walked = [t for t in reader.walked if t in _COUNTED]
        assert len(walked) < 200 * len(_COUNTED) // 4
    finally:
        other.close()
        reader.close()
        store.close()


def test_recalls_after_writes_score_as_a_fresh_store(tmp_path: Path) -> None:
    """End to end on the FTS5 path: each recall after a write returns the rows and
    scores a store opened afresh on the file returns."""
    path = tmp_path / "m.db"
    with plain(path) as store:
        for i in range(30):
            store.store(f"old{i}", f"apple pie {_WORDS[i % len(_WORDS)]} day {i}")
        for n in range(15):
            store.store(f"new{n}", f"banana tart {_WORDS[n % len(_WORDS)]} because {n}")
            query = "apple banana zest because agreed"
            got = [(e.key, e.score) for e in store.recall(query, 8)]
            with plain(path) as fresh:
                assert got == [(e.key, e.score) for e in fresh.recall(query, 8)], n


def test_many_threads_write_and_count_on_one_store(tmp_path: Path) -> None:
    """Eight threads each write rows and check, on the read connection the store hands
    them, that its cached counts equal fts5vocab's in that snapshot."""
    path = tmp_path / "m.db"
    errors: list[str] = []
    with plain(path) as store:
        for i in range(20):
            store.store(f"old{i}", f"apple pie {_WORDS[i % len(_WORDS)]}")
        connections = store._engine.connections

        def check(conn: sqlite3.Connection) -> tuple[dict[str, int], dict[str, int]]:
            conn.execute("BEGIN")
            try:
                stats = connections.stats_of(conn)
                stats.refresh(conn)
                got = stats.document_frequencies(conn, _TOKENS)
                fresh = document_frequencies(conn, _TOKENS)
                return got, {t: fresh.get(t, 0) for t in _TOKENS}
            finally:
                conn.execute("COMMIT")

        def work(t: int) -> None:
            rng = random.Random(t)
            for n in range(25):
                text = " ".join(rng.choice(_WORDS) for _ in range(3))
                store.store(f"t{t}-{n}", text, session_id=f"s{t}")
                got, fresh = connections.read(check, "counts")
                if got != fresh:
                    errors.append(f"thread {t} step {n}: {got} != {fresh}")
                found = store.recall(text, 50, session_id=f"s{t}")
                if f"t{t}-{n}" not in {e.key for e in found}:
                    errors.append(f"thread {t} step {n}: its own row was not found")

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert errors == []
