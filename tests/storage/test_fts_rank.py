"""The SQLite keyword stage: rarest-word draw, BM25 order and coverage against the old stage."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from memory_inject.storage.fusion import content_words, fts_match
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite import keyword_rank as _fts_rank
from memory_inject.storage.sqlite import keyword_terms as _fts_terms
from memory_inject.storage.sqlite.keyword_rank import keyword_hits
from memory_inject.storage.sqlite.queries import LIVE as _LIVE
from memory_inject.storage.sqlite.term_stats import TermStats
from tests.storage import _sqlite_schema as schema
from tests.storage._sqlite_backend import writable
from tests.storage._sqlite_reference import reference_hits
from tests.storage._writes import host_write

_FAR = "2999-01-01T00:00:00.000000Z"
_WORDS = [f"w{i}" for i in range(300)]


def _sentence(rng: random.Random) -> str:
    # Zipf-like: low indexes are common, so some words sit in most rows.
    return " ".join(_WORDS[min(299, int(rng.paretovariate(0.7)) - 1)] for _ in range(12))


@pytest.fixture(autouse=True)
def _fts5_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """These are tests of the FTS5 path: the stores made here never mirror their index."""
    monkeypatch.setattr("memory_inject.storage.sqlite.engine.KeywordMirror", lambda: None)


@pytest.fixture(scope="module")
def zipf_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 600-row store of Zipf-like sentences in 6 sessions, some forgotten."""
    path = tmp_path_factory.mktemp("rank") / "memory.db"
    rng = random.Random(7)
    with SQLiteStore(path, synchronous="OFF") as store:
        for i in range(600):
            store.store(f"k{i}", _sentence(rng), "core", session_id=f"s{i % 6}")
        for i in range(0, 600, 37):
            store.forget(f"k{i}")
    return path


def _queries() -> list[str]:
    rng = random.Random(11)
    out = []
    for _ in range(120):
        words = [rng.choice(_WORDS[:8]), rng.choice(_WORDS[8:60]), rng.choice(_WORDS[60:])]
        out.append(" ".join(rng.sample(words, rng.randint(1, 3))) + rng.choice(["", " w2*", "?"]))
    return out


#: Below this BM25 a row holds only words FTS5 floors at idf 1e-6: their order is near exact.
_FLOORED = 1e-3


def _both(
    conn: sqlite3.Connection, query: str, *, session: str | None
) -> tuple[list[tuple[str, float]], list[tuple[str, float, float]]]:
    scope, params = _LIVE, [_FAR]
    if session is not None:
        scope += " AND session_id = ?"
        params.append(session)
    where = ("default", scope, params)
    words = content_words(query)
    match = fts_match(words)
    assert match is not None
    new = keyword_hits(conn, TermStats(), where, words, 20, window=session is None)
    return [(key, score) for key, score, _ in new], reference_hits(
        conn, where, words, match, 20, window=session is None
    )


def _bm25(conn: sqlite3.Connection, query: str, key: str) -> float:
    sql = (
        "SELECT -bm25(memories_fts, 2.0, 1.0, 1.0, 0.5, 0.25, 1.0) FROM memories_fts "
        "WHERE memories_fts MATCH ? AND rowid = (SELECT rid FROM memories WHERE key = ?)"
    )
    return float(conn.execute(sql, (fts_match(content_words(query)), key)).fetchone()[0])


class TestScopeInTheIndex:
    @pytest.mark.parametrize("session", ["s0", "s3", "nobody"])
    def test_ranking_inside_the_scope_token_equals_joining_first(
        self, zipf_store: Path, session: str
    ) -> None:
        """The windowed draw over ``ctx_scope`` finds what the join-first path finds."""
        where = ("default", _LIVE + " AND session_id = ?", [_FAR, session])
        scope = schema.scope_match(session, ())
        with writable(zipf_store, isolation_level=None) as conn:
            for query in _queries():
                words = content_words(query)
                joined = keyword_hits(conn, TermStats(), where, words, 20, window=False)
                indexed = keyword_hits(
                    conn, TermStats(), where, words, 20, window=True, scope_match=scope
                )
                assert [(k, c) for k, c, _ in joined] == [(k, c) for k, c, _ in indexed], query


class TestKeywordHits:
    @pytest.mark.parametrize("session", [None, "s3"])
    @pytest.mark.parametrize("share_scan", [_fts_rank.SHARE_SCAN_ROWS, 0])
    def test_same_hits_and_scores_as_the_whole_query(
        self,
        zipf_store: Path,
        session: str | None,
        share_scan: int,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """In budget, the draw ranks by the whole query's BM25 (ties within 1e-4 may swap),
        whether FTS5 scores the common words' share or it is added from highlight() marks."""
        monkeypatch.setattr(_fts_rank, "SHARE_SCAN_ROWS", share_scan)
        with writable(zipf_store, isolation_level=None) as conn:
            for query in _queries():
                new, old = _both(conn, query, session=session)
                ranked = [bm25 for _, _, bm25 in old if bm25 > _FLOORED]
                full = [_bm25(conn, query, key) for key, _ in new[: len(ranked)]]
                reference = {key: score for key, score, _ in old}
                assert len(old) == len(new)
                assert pytest.approx(ranked, abs=1e-4) == full, query
                assert all(reference.get(key, score) == score for key, score in new)

    @pytest.mark.parametrize("session", [None, "s3"])
    def test_a_tight_budget_keeps_each_rows_score(
        self, zipf_store: Path, monkeypatch: pytest.MonkeyPatch, session: str | None
    ) -> None:
        """Past the budget a memory scores the same coverage for the same prompt."""
        monkeypatch.setattr(_fts_rank, "RANK_BUDGET", 5)
        with writable(zipf_store, isolation_level=None) as conn:
            for query in _queries():
                new, old = _both(conn, query, session=session)
                reference = {key: score for key, score, _ in old}
                assert len(old) == len(new)
                for key, score in new:
                    if key in reference:
                        assert reference[key] == score, (query, key)

    def test_too_few_rare_hits_fall_back_to_common_words(self, tmp_path: Path) -> None:
        """Rows holding only a word found in most rows still fill the hits."""
        with SQLiteStore(tmp_path / "m.db") as store:
            for i in range(10):
                store.store(f"k{i}", f"the garden note {i}", "core")
            store.store("rare", "garden zucchini", "core")
            found = store.recall("garden zucchini", 5)
        assert "rare" == found[0].key
        assert 5 == len(found)

    def test_too_few_rare_hits_draw_the_next_rarest_word_not_every_word(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """One rare word and two common ones: the refill draws the rarer common word first.

        Ranking every common row is what made such prompts the slowest at 100k
        (the p99); the refill ranks the commonest word only if the others fall short.
        """
        monkeypatch.setattr(_fts_rank, "RANK_BUDGET", 5)
        seen: list[str] = []
        real = _fts_rank._candidates

        def spy(conn: sqlite3.Connection, where: object, match: str, k: int, **kw: bool) -> object:
            seen.append(match)
            return real(conn, where, match, k, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(_fts_rank, "_candidates", spy)
        with SQLiteStore(tmp_path / "m.db") as store:
            for i in range(40):
                store.store(f"c{i}", f"garden note {i}", "core")  # garden: 40 rows + 20 below
            for i in range(20):
                store.store(f"o{i}", f"orchard garden {i}", "core")  # orchard: 20 rows
            store.store("rare", "zucchini", "core")
            for i in range(60):
                store.store(f"f{i}", f"filler {i}", "core")
            found = store.recall("zucchini orchard garden", 8)
        assert "rare" == found[0].key
        assert 7 == sum(e.key.startswith("o") for e in found)
        assert ['"zucchini"', '"zucchini" OR "orchard"'] == seen


class TestDrawCap:
    """Past ``DRAW_ROWS`` matches the draw ranks only the newest (issue 29: 1M rows)."""

    @staticmethod
    def _store(path: Path) -> None:
        with SQLiteStore(path) as store:
            store.store("old", "apple apple apple", "core", session_id="early")
            for i in range(30):
                words = " ".join(["more"] * i)  # longer and longer: BM25 falls
                store.store(f"n{i}", f"apple note {words}", "core", session_id="late")
            for i in range(40):
                store.store(f"f{i}", f"filler {i}", "core", session_id="fill")

    def test_under_the_cap_the_best_row_of_all_is_found(self, tmp_path: Path) -> None:
        self._store(tmp_path / "m.db")
        with SQLiteStore(tmp_path / "m.db") as store:
            found = store.recall("apple", 5)
        assert "old" == found[0].key
        assert 5 == len(found)

    def test_past_the_cap_only_the_newest_matches_are_ranked(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The oldest row scores best but is not among the newest 20 apple rows; the best
        of those (the shortest) come back in BM25 order."""
        monkeypatch.setattr(_fts_rank, "DRAW_ROWS", 20)
        self._store(tmp_path / "m.db")
        with SQLiteStore(tmp_path / "m.db") as store:
            found = store.recall("apple", 5)
            newest = {f"n{i}" for i in range(10, 30)}
            assert [f"n{i}" for i in range(10, 15)] == [e.key for e in found]
            # The same rows and order as ranking those 20 alone by BM25.
            conn = writable(tmp_path / "m.db")
            alone = [
                r[0]
                for r in conn.execute(
                    "SELECT m.key FROM memories_fts "
                    "JOIN memories AS m ON m.rid = memories_fts.rowid "
                    "WHERE memories_fts MATCH 'apple' AND m.key IN "
                    f"({', '.join('?' * len(newest))}) "
                    "ORDER BY bm25(memories_fts, 2.0, 1.0, 1.0, 0.5, 0.25, 1.0), m.key LIMIT 5",
                    sorted(newest),
                )
            ]
            conn.close()
        assert alone == [e.key for e in found]

    def test_a_scope_keeps_its_old_rows_past_the_cap(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The cap counts the scope's matches: newer rows of other sessions never hide them."""
        monkeypatch.setattr(_fts_rank, "DRAW_ROWS", 20)
        self._store(tmp_path / "m.db")
        with SQLiteStore(tmp_path / "m.db") as store:
            found = store.recall("apple", 5, session_id="early")
        assert ["old"] == [e.key for e in found]


class TestTermStats:
    def test_another_connections_write_is_seen(self, tmp_path: Path) -> None:
        """Cached document frequencies are dropped when another connection commits."""
        path = tmp_path / "m.db"
        with SQLiteStore(path) as reader, SQLiteStore(path) as writer:
            writer.store("a", "apple pie", "core")
            writer.store("b", "banana bread", "core")
            first = reader.recall("apple banana", 5)
            writer.store("c", "apple crumble", "core")
            second = reader.recall("apple banana", 5)
            with SQLiteStore(path) as fresh:
                expected = fresh.recall("apple banana", 5)
        assert ["a", "b"] == sorted(e.key for e in first)
        assert [(e.key, e.score) for e in expected] == [(e.key, e.score) for e in second]

    def test_own_writes_on_one_connection_are_seen(self) -> None:
        """In ``:memory:`` reads share the writer's connection; its changes count too."""
        with SQLiteStore(":memory:") as store:
            # Hours apart: rows written alone within 30 minutes are each other's context.
            store.store("a", "apple pie", "core", timestamp="2026-01-01T09:00:00Z")
            store.store("b", "banana bread", "core", timestamp="2026-01-01T12:00:00Z")
            store.recall("apple banana", 5)
            store.store("c", "apple crumble", "core", timestamp="2026-01-01T15:00:00Z")
            again = store.recall("apple banana", 5)
            stats = TermStats()

            def fresh(conn: sqlite3.Connection) -> dict[str, int]:
                stats.refresh(conn)
                return stats.document_frequencies(conn, ["appl"])

            assert {"appl": 2} == store._engine.connections.read(fresh, "stats")
        assert {"a", "b", "c"} == {e.key for e in again}

    def test_random_writes_keep_counts_exact(self, tmp_path: Path) -> None:
        """Any mix of inserts, updates and deletes, by the store and a plain connection."""
        rng = random.Random(8)
        path = tmp_path / "m.db"
        words = ["apple", "pie", "banana", "crumble", "tart", "pear", "apples", "x"]
        with SQLiteStore(path) as store:
            other = writable(path, isolation_level=None)
            reader = writable(path, isolation_level=None)
            stats = TermStats()
            tokens = ["appl", "pie", "banana", "crumbl", "tart", "pear", "x"]
            for step in range(120):
                op = rng.random()
                text = " ".join(rng.choice(words) for _ in range(rng.randrange(1, 5)))
                if op < 0.7:
                    host_write(store, f"n{step}", text, "core", session_id=rng.choice([None, "s"]))
                elif op < 0.8:
                    host_write(store, f"n{rng.randrange(step + 1)}", text, "core")
                elif op < 0.9:
                    other.execute(
                        "DELETE FROM memories WHERE key = ?", (f"n{rng.randrange(step + 1)}",)
                    )
                else:
                    other.execute(
                        "UPDATE memories SET content = ? WHERE key = ?",
                        (text, f"n{rng.randrange(step + 1)}"),
                    )
                reader.execute("BEGIN")
                stats.refresh(reader)
                got = stats.document_frequencies(reader, tokens)
                fresh = _fts_terms.document_frequencies(reader, tokens)
                assert got == {t: fresh.get(t, 0) for t in tokens}, step
                reader.execute("COMMIT")
            other.close()
            reader.close()


def test_long_query_words_are_not_kept_in_the_token_cache() -> None:
    """A hostile prompt of long distinct words leaves nothing behind in the process: only
    words of at most 64 characters are cached (issue 25: megabytes per prompt, for good)."""
    from memory_inject.storage.sqlite import keyword_terms as _fts_terms

    before = _fts_terms._cached_tokens.cache_info().currsize
    for n in range(50):
        word = f"w{n}" + "x" * 1000  # longer than 64, within MAX_WORD_CHARS: searched
        assert _fts_terms._tokenize(word) == _fts_terms.tokens_of(word)
        # Longer than any stored word: searched for nothing (FTS5 cuts tokens at 32 KiB).
        assert () == _fts_terms.tokens_of(word + "x" * 5000)
    assert before == _fts_terms._cached_tokens.cache_info().currsize
    assert ("deploi",) == _fts_terms.tokens_of("deploys")  # porter; short words are cached
