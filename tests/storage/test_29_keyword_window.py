"""Issue 29, second pass: cheaper keyword recalls with the same answers.

A token's postings summed in SQL (what the mirror loads), one statistics read
per FTS5 recall, and a prompt's words tokenised together again after the
token cache was cleared.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite import keyword_postings as _postings
from memory_inject.storage.sqlite import keyword_terms as _terms
from memory_inject.storage.sqlite.keyword_postings import (
    INSTANCES_SELECT,
    STREAMED,
    posting_of,
    postings_of_instances,
    read_postings,
)
from memory_inject.storage.sqlite.keyword_terms import grouped_counts

_WORDS = [f"w{i}" for i in range(120)]


def _store(path: Path, seed: int) -> SQLiteStore:
    """Rows of Zipf-like words, some in sessions (context columns), some forgotten."""
    rng = random.Random(seed)
    store = SQLiteStore(path, synchronous="OFF")
    for i in range(200):
        text = " ".join(_WORDS[min(119, int(rng.paretovariate(0.8)) - 1)] for _ in range(8))
        store.store(f"k{i}", text, "core", session_id="s1" if i % 4 == 0 else None)
    for i in range(0, 200, 7):
        store.forget(f"k{i}")
    return store


class TestPostingsSummedInSql:
    def test_the_pairs_are_posting_of_the_instances(self, tmp_path: Path) -> None:
        """``(weighted count, mask)`` per token and row from the streamed instances equal
        :func:`posting_of` of the instances counted per column, to the bit."""
        store = _store(tmp_path / "m.db", 11)
        store.store("rep", "w0 w0 w1, w0: w1 w2", "core", session_id="s1", tags=["w0"])
        conn = sqlite3.connect(tmp_path / "m.db")
        conn.execute("CREATE VIRTUAL TABLE temp.inst USING fts5vocab(main, memories_fts, instance)")
        terms = [t for (t,) in conn.execute("SELECT DISTINCT term FROM temp.inst")]
        marks = ", ".join("?" * len(terms))
        grouped = grouped_counts(
            conn.execute(
                f"SELECT term, doc, col, count(*) FROM temp.inst WHERE term IN ({marks}) "
                "GROUP BY term, doc, col",
                terms,
            )
        )
        want = {(t, d): posting_of(c) for t, per in grouped.items() for d, c in per.items()}
        sql = INSTANCES_SELECT.format(table="temp.inst")
        got = {
            (t, d): pair
            for t in terms
            for d, pair in (postings_of_instances(conn.execute(sql, (t,)), 10**6) or {}).items()
        }
        # Past the bound: nothing (the caller asks FTS5).
        assert postings_of_instances(conn.execute(sql, ("w0",)), 3) is None
        assert {k: repr(v) for k, v in want.items()} == {k: repr(v) for k, v in got.items()}
        assert any(f > 2.0 for f, _ in got.values())
        conn.close()
        store.close()

    @pytest.mark.parametrize("numpy", [True, False], ids=["arrays", "streamed"])
    def test_a_read_of_a_tokens_postings_is_the_streamed_one(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, numpy: bool
    ) -> None:
        """:func:`read_postings` (one string summed in numpy arrays, or streamed without
        numpy) gives every token's pairs to the bit, in any order of the instances; None
        past its bound and not at it; nothing for a token no row holds."""
        if not numpy:
            monkeypatch.setattr(_postings, "numpy_or_none", lambda: None)
        store = _store(tmp_path / "m.db", 5)
        store.store("rep", "w0 w0 w1, w0: w1 w2", "core", session_id="s1", tags=["w0", "w1"])
        conn = sqlite3.connect(tmp_path / "m.db")
        conn.execute("CREATE VIRTUAL TABLE temp.inst USING fts5vocab(main, memories_fts, instance)")
        # The same instances in a plain table, shuffled: a read must not rely on doc order.
        rows = conn.execute("SELECT term, doc, col FROM temp.inst").fetchall()
        random.Random(3).shuffle(rows)
        conn.execute("CREATE TEMP TABLE shuffled(term, doc, col)")
        conn.executemany("INSERT INTO shuffled VALUES (?, ?, ?)", rows)
        sql = INSTANCES_SELECT.format(table="temp.inst")
        terms = sorted({t for t, _, _ in rows})
        counts = {t: sum(1 for r in rows if r[0] == t) for t in terms}

        def bits(postings: dict[int, tuple[float, int]] | None) -> list[tuple[int, str]]:
            return sorted((d, repr(pair)) for d, pair in (postings or {}).items())

        for term in terms:
            want = bits(postings_of_instances(conn.execute(sql, (term,)), 10**6))
            assert bits(read_postings(conn, "temp.inst", term, 10**6)) == want, term
            assert bits(read_postings(conn, "temp.shuffled", term, 10**6)) == want, term
            most = counts[term]
            assert read_postings(conn, "temp.inst", term, most) is not None
            assert read_postings(conn, "temp.inst", term, most - 1) is None
        assert read_postings(conn, "temp.inst", "nowhere", 10) == {}
        # Both ways are taken: rare words streamed, common ones read as one string.
        assert min(counts.values()) <= STREAMED < max(counts.values())
        conn.close()
        store.close()


class TestOneStatisticsRead:
    def test_a_recall_past_the_mirror_reads_the_averages_once(self, tmp_path: Path) -> None:
        """The mirror's size check refreshes the statistics; the FTS5 stage does not again."""
        store = SQLiteStore(tmp_path / "m.db")
        for i in range(30):
            store.store(f"k{i}", f"note {i} about hiking", "core")
        mirror = store._engine._mirror
        assert mirror is not None
        mirror.max_rows = 5
        seen: list[str] = []
        store._engine.connections.read(lambda c: c.set_trace_callback(seen.append), "test")
        assert store.recall("hiking note", 5)
        assert 1 == sum("memories_fts_data WHERE id = 1" in s for s in seen)
        store.close()


class TestTokenCacheCleared:
    def test_words_forgotten_by_cache_clear_are_tokenised_together(self) -> None:
        """After ``cache_clear`` a prompt's words, seen before, cost one round trip again
        (accented: plain ASCII words never make one, ``porter``)."""
        words = ["cl\u00e9ared29a", "cl\u00e9ared29b", "cl\u00e9ared29c"]
        _terms.tokens_of_all(words)
        _terms._cached_tokens.cache_clear()
        trips: list[str] = []
        conn = _terms._tokenizer()
        conn.set_trace_callback(lambda sql: trips.append(sql) if sql == "BEGIN" else None)
        try:
            got = _terms.tokens_of_all(words)
        finally:
            conn.set_trace_callback(None)
        assert [("cleared29a",), ("cleared29b",), ("cleared29c",)] == got
        assert 1 == len(trips)
