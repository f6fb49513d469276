"""Issue 29's faster keyword paths on SQLite give the answers the slower ones gave.

The mirror's cached bm25() terms, the mirror skipped on a store past its size,
empty context columns highlighted rather than asked of FTS5, and a token's
postings read grouped by row and column, and a prompt's new words tokenised
together. (PostgreSQL has none of these paths:
its keyword stage is one statement, unchanged.)
"""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memory_inject.storage.fusion import Fusion, content_words
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite import keyword_marks as _marks
from memory_inject.storage.sqlite import keyword_terms as _terms
from memory_inject.storage.sqlite.bulk import MERGE_AFTER
from memory_inject.storage.sqlite.keyword_index import MirrorIndex
from memory_inject.storage.sqlite.keyword_mirror import KeywordMirror
from memory_inject.storage.sqlite.keyword_phrases import BM25_ARGS, TEXT_COLUMN_NAMES, held_in_long
from memory_inject.storage.sqlite.keyword_terms import (
    grouped_counts,
    instance_counts,
    tokens_of,
    tokens_of_all,
)

_ROWS = [
    ("a", "alpha hiking boots for the trail", "s1"),
    ("b", "hiking in december with alpha", "s1"),
    ("c", "beta deploys go out on fridays", "s2"),
    ("d", "the alpha deploy failed twice", None),
    ("e", "gamma notes about lunch and hiking", "s2"),
    ("f", "delta rollback plan for fridays", None),
]


def _filled(path: Path, mirror: KeywordMirror | None) -> SQLiteStore:
    store = SQLiteStore(path, fusion=Fusion())
    store._engine._mirror = mirror
    for key, text, session in _ROWS:
        store.store(key, text, "core", session_id=session)
    return store


def _answers(store: SQLiteStore, query: str, **kw: Any) -> list[tuple[str, float | None]]:
    return [(e.key, e.score) for e in store.recall(query, 5, **kw)]


def _fts5_bm25(conn: sqlite3.Connection, match: str) -> dict[str, float]:
    return {
        str(i): float(s)
        for i, s in conn.execute(
            f"SELECT m.id, -bm25(memories_fts, {BM25_ARGS}) FROM memories_fts "
            "JOIN memories AS m ON m.rid = memories_fts.rowid WHERE memories_fts MATCH ?",
            (match,),
        )
    }


def _index(mirror: KeywordMirror) -> MirrorIndex:
    index = mirror._index
    assert index is not None
    return index


class TestMirrorShares:
    def test_a_tokens_terms_are_kept_between_recalls(self, tmp_path: Path) -> None:
        """A token's bm25() terms are computed once and reused while nothing changes."""
        mirror = KeywordMirror(after=1)
        store = _filled(tmp_path / "m.db", mirror)
        store.recall("alpha hiking", 5)
        first = _index(mirror).shares("hike")
        store.recall("hiking fridays", 5)
        assert first is _index(mirror).shares("hike")
        store.close()

    def test_loading_another_token_keeps_the_others_terms(self, tmp_path: Path) -> None:
        """Reading a new token's postings moves no other token's idf or lengths."""
        mirror = KeywordMirror(after=1)
        store = _filled(tmp_path / "m.db", mirror)
        store.recall("hiking", 5)
        held = _index(mirror).shares("hike")
        store.recall("rollback", 5)  # loads "rollback"
        assert "rollback" in _index(mirror).postings
        assert held is _index(mirror).shares("hike")
        store.close()

    def test_a_write_forgets_the_terms_and_bm25_stays_fts5s_to_the_bit(
        self, tmp_path: Path
    ) -> None:
        """After a write (new idf, lengths, average) the BM25 is still FTS5's, bit for bit."""
        db = tmp_path / "m.db"
        mirror = KeywordMirror(after=1)
        store = _filled(db, mirror)
        store.recall("alpha hiking fridays", 5)
        before = _index(mirror).shares("hike")
        store.store("g", "hiking hiking hiking up the long alpha ridge trail", "core")
        conn = sqlite3.connect(db)
        words = content_words("hiking fridays rollback")
        where = ("default", "deleted_at IS NULL", ())
        got = mirror.keyword_hits(conn, where, words, 10)
        assert got
        assert before is not _index(mirror).shares("hike")
        want = _fts5_bm25(conn, '"hike" OR "fridai" OR "rollback"')
        assert {k: b for k, _, b in got} == {k: want[k] for k, _, _ in got}
        conn.close()
        store.close()

    def test_a_scoped_recall_scores_only_the_scopes_rows(self, tmp_path: Path) -> None:
        """Scoped recalls share the cached terms and still answer only from their session."""
        db = tmp_path / "m.db"
        mirror = KeywordMirror(after=1)
        mirrored = _filled(db, mirror)
        plain = SQLiteStore(db, fusion=Fusion())
        plain._engine._mirror = None
        mirrored.recall("hiking", 5)
        held = _index(mirror).shares("hike")
        for query in ("alpha hiking", "fridays deploy", "hiking lunch"):
            for session in ("s1", "s2"):
                got = _answers(mirrored, query, session_id=session)
                assert got == _answers(plain, query, session_id=session)
        assert held is _index(mirror).shares("hike")
        assert {"a", "b"} == {k for k, _ in _answers(mirrored, "hiking", session_id="s1")}
        # A word no row holds has no terms, and the others still rank.
        assert {"a", "b"} == {k for k, _ in _answers(mirrored, "hiking zzyzx29", session_id="s1")}
        assert {} == _index(mirror).shares("zzyzx29")
        mirrored.close()
        plain.close()


class TestMirrorSkippedPastItsSize:
    def test_a_store_past_max_rows_never_asks_the_mirror(self, tmp_path: Path) -> None:
        """Past ``max_rows`` with no mirror held, FTS5 answers at once, with its answers."""
        db = tmp_path / "m.db"
        mirror = KeywordMirror(after=1, max_rows=3)
        store = _filled(db, mirror)
        plain = SQLiteStore(db, fusion=Fusion())
        plain._engine._mirror = None
        for query in ("alpha hiking", "fridays rollback", "lunch"):
            assert _answers(store, query) == _answers(plain, query)
        assert 0 == mirror._calls
        assert mirror._index is None
        store.close()
        plain.close()

    def test_the_async_twin_skips_it_too(self, tmp_path: Path) -> None:
        """``arecall`` takes the same path and gives the same answers as ``recall``."""
        mirror = KeywordMirror(after=1, max_rows=3)
        store = _filled(tmp_path / "m.db", mirror)
        sync = _answers(store, "alpha hiking")
        got = asyncio.run(store.arecall("alpha hiking", 5))
        assert sync == [(e.key, e.score) for e in got]
        assert 0 == mirror._calls
        store.close()

    def test_a_held_mirror_is_still_asked_when_the_store_grows(self, tmp_path: Path) -> None:
        """A mirror built while small is asked once the store outgrows it, lets go, and is
        not asked again."""
        db = tmp_path / "m.db"
        mirror = KeywordMirror(after=1, max_rows=7)
        store = _filled(db, mirror)
        store.recall("alpha", 5)
        assert mirror._index is not None
        for i in range(4):
            store.store(f"x{i}", f"alpha extra note {i}", "core")
        calls = mirror._calls
        plain = SQLiteStore(db, fusion=Fusion())
        plain._engine._mirror = None
        assert _answers(store, "alpha hiking") == _answers(plain, "alpha hiking")
        assert calls + 1 == mirror._calls
        assert mirror._index is None
        assert _answers(store, "fridays") == _answers(plain, "fridays")
        assert calls + 1 == mirror._calls
        store.close()
        plain.close()


class TestEmptyColumnsAreHighlighted:
    def test_sessionless_rows_need_no_long_column_statement(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A NULL context column is highlighted (nothing marked), not asked of FTS5 as long,
        and the scores are what asking FTS5 gave."""
        store = _filled(tmp_path / "m.db", None)
        asked: list[dict[int, list[int]]] = []

        def spy(conn: sqlite3.Connection, too_long: dict[int, list[int]], phrases: Any) -> Any:
            asked.append(too_long)
            return held_in_long(conn, too_long, phrases)

        monkeypatch.setattr(_marks, "held_in_long", spy)
        queries = ("alpha deploy", "fridays rollback plan", "hiking alpha")
        fast = [_answers(store, q) for q in queries]
        assert [] == asked
        # The select list as it was: NULL compared as "not short", so FTS5 was asked.
        old = ", ".join(
            f"CASE WHEN length(CAST(m.{name} AS BLOB)) <= {_marks.HIGHLIGHT_MAX_BYTES} "
            f"THEN highlight(memories_fts, {c}, ?, ?) ELSE -1 END"
            for c, name in enumerate(TEXT_COLUMN_NAMES)
        )
        monkeypatch.setattr(_marks, "_MARKS", old)
        assert fast == [_answers(store, q) for q in queries]
        assert asked  # the old list did ask FTS5 about the empty columns
        store.close()


class TestGroupedPostings:
    def test_grouped_counts_are_the_instances_counted(self, tmp_path: Path) -> None:
        """Counts grouped in SQL equal the instances counted one by one, for every token."""
        db = tmp_path / "m.db"
        store = _filled(db, None)
        store.store("h", "hiking hiking alpha, alpha: hiking", "core", session_id="s1")
        conn = sqlite3.connect(db)
        conn.execute("CREATE VIRTUAL TABLE temp.inst USING fts5vocab(main, memories_fts, instance)")
        grouped = grouped_counts(
            conn.execute("SELECT term, doc, col, count(*) FROM temp.inst GROUP BY term, doc, col")
        )
        one_by_one = instance_counts(conn.execute("SELECT term, doc, col FROM temp.inst"))
        flipped: dict[str, dict[int, list[int]]] = {}
        for rid, tokens in one_by_one.items():
            for token, per_col in tokens.items():
                flipped.setdefault(token, {})[rid] = per_col
        assert flipped == grouped
        assert any(max(c) > 1 for rows in grouped.values() for c in rows.values())
        conn.close()
        store.close()


class TestWordsTokenisedTogether:
    def test_the_same_tokens_as_one_by_one(self) -> None:
        """Each word's tokens are what :func:`tokens_of` gives it alone, in order."""
        words = [
            "Deploys29a",
            "foo_bar29",
            "hiking29",
            "",
            "...",
            "Deploys29a",
            "x" * 100 + "29",
            "ünïcode29",
        ]
        got = tokens_of_all(words)
        _terms._cached_tokens.cache_clear()
        assert [_terms._tokenize(w) for w in words] == got
        assert [tokens_of(w) for w in words] == got
        assert ("foo", "bar29") == got[1]
        assert () == got[3]

    def test_new_words_cost_one_round_trip(self) -> None:
        """A prompt's unseen words that are not plain ASCII are inserted into the private
        tokenizer once, together; plain ASCII words never reach it (``porter``)."""
        trips: list[str] = []
        conn = _terms._tokenizer()
        conn.set_trace_callback(lambda sql: trips.append(sql) if sql == "BEGIN" else None)
        try:
            plain = tokens_of_all(["Deploying29x", "hikes29x", "plain29x"])
            assert [] == trips
            words = ["\u00e5lpha29x", "b\u00ebta29x", "plain29y", "g\u00e4mma29x"]
            got = tokens_of_all(words)
            again = tokens_of_all(words)
        finally:
            conn.set_trace_callback(None)
        assert [("deploying29x",), ("hikes29x",), ("plain29x",)] == plain
        assert [("alpha29x",), ("beta29x",), ("plain29i",), ("gamma29x",)] == got == again
        assert 1 == len(trips)  # one transaction for the three accented words, none again
        assert None is getattr(_terms._prefetched, "tokens", None)

    def test_the_seen_words_are_bounded_like_the_cache(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The record of words handed to the cache starts over at the cache's size."""
        tokens_of_all(["bounded29a", "bounded29b"])
        monkeypatch.setattr(_terms, "_CACHED", len(_terms._seen))
        assert [("bounded29c",), ("bounded29d",)] == tokens_of_all(["bounded29c", "bounded29d"])
        assert {"bounded29c", "bounded29d"} == _terms._seen


class TestImportMergesTheIndex:
    def _segments(self, store: SQLiteStore) -> int:
        rows = store._engine.connections.read(
            lambda c: c.execute("SELECT count(DISTINCT segid) FROM memories_fts_idx").fetchall(),
            "test",
        )
        return int(rows[0][0])

    def _jsonl(self, n: int) -> str:
        lines = [
            json.dumps({"key": f"k{i}", "content": f"note {i} about hiking and the alpha deploy"})
            for i in range(n)
        ]
        return "\n".join(lines) + "\n"

    def test_an_import_of_several_batches_leaves_one_segment_and_the_same_answers(
        self, tmp_path: Path
    ) -> None:
        """Each batch's commit leaves FTS5 a segment; the import merges them, answers equal."""
        with (
            SQLiteStore(tmp_path / "one.db") as merged,
            SQLiteStore(tmp_path / "many.db") as split,
        ):
            assert 1200 == merged.import_jsonl(io.StringIO(self._jsonl(1200)), batch_size=100)
            for i in range(12):  # the same rows, 12 commits and no import to merge them
                part = "\n".join(self._jsonl(1200).splitlines()[i * 100 : (i + 1) * 100])
                split.import_jsonl(io.StringIO(part + "\n"), batch_size=100)
            assert 1 == self._segments(merged) < self._segments(split)
            for prompt in ("alpha deploy", "note 7 hiking", "hiking"):
                a = [(e.key, e.score) for e in merged.recall(prompt, 10)]
                b = [(e.key, e.score) for e in split.recall(prompt, 10)]
                assert a == b

    def test_a_small_import_does_not_rewrite_the_index(self, tmp_path: Path) -> None:
        """An import of fewer than ``MERGE_AFTER`` rows runs no merge statement; one of
        250 rows into a store of 50 runs one; one of 100 into a store of 500 (a fifth of
        it) none: FTS5's own merging is cheaper than rewriting the index."""
        with SQLiteStore(tmp_path / "m.db") as store:
            seen: list[str] = []
            store._engine.connections.write(lambda c: c.set_trace_callback(seen.append), "test")
            store.import_jsonl(io.StringIO(self._jsonl(MERGE_AFTER - 1)))
            assert [] == [s for s in seen if "'optimize'" in s]
            store.import_jsonl(io.StringIO(self._jsonl(400)), batch_size=100)
            assert 1 == len([s for s in seen if "'optimize'" in s])
            more = "\n".join(self._jsonl(500).splitlines()[400:]) + "\n"
            assert 100 == store.import_jsonl(io.StringIO(more))
            assert 1 == len([s for s in seen if "'optimize'" in s])

    def test_a_one_batch_import_of_a_new_store_leaves_one_segment(self, tmp_path: Path) -> None:
        """The index's triggers flush a segment a row: 1,000 rows in one batch left about
        16 segments, each looked up for every word a recall reads."""
        with SQLiteStore(tmp_path / "m.db") as store:
            assert 1000 == store.import_jsonl(io.StringIO(self._jsonl(1000)))
            assert 1 == self._segments(store)
            assert "k7" in {e.key for e in store.recall("note 7 hiking", 10)}
