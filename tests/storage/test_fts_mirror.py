"""The mirrored keyword index of small SQLite stores: FTS5's answers, kept current, no leaks."""

from __future__ import annotations

import io
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_inject.contract import RecallQuery
from memory_inject.storage.fusion import Fusion, content_words
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite import keyword_arrays as _arrays
from memory_inject.storage.sqlite import keyword_mirror as _fts_mirror
from memory_inject.storage.sqlite import keyword_terms as _terms
from memory_inject.storage.sqlite.keyword_index import MirrorIndex, bm25_scores
from memory_inject.storage.sqlite.keyword_mirror import KeywordMirror
from memory_inject.storage.sqlite.keyword_phrases import BM25_WEIGHTS
from memory_inject.storage.sqlite.keyword_rank import keyword_hits
from memory_inject.storage.sqlite.term_stats import TermStats
from tests.storage import _sqlite_schema as schema
from tests.storage._sqlite_backend import mirrored, plain, writable
from tests.storage._writes import host_write

#: A vocabulary with words in most rows (floored idf), in few, and stems that merge.
_WORDS = (
    "alpha alpha alpha beta gamma delta deploy deploys deploying hiking hike "
    "zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau december"
).split()
_SESSIONS = (None, "s1", "s2", "s1\x00", "s1 ", "ünï")


@pytest.fixture(autouse=True, params=["dicts", "arrays"])
def ranking_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with both rankings of the mirror: over dicts and over numpy arrays
    (the shipped bound picks by the store's size; these stores are small)."""
    monkeypatch.setattr(_arrays, "ARRAY_MIN_ROWS", 10**9 if request.param == "dicts" else 0)
    return str(request.param)


_mirrored = mirrored
_plain = plain


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(1, 9)))


def _query(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(1, 5)))


def _answers(store: SQLiteStore, query: str, session_id: str | None) -> list[tuple[str, float]]:
    return [(e.key, e.score or 0.0) for e in store.recall(query, 6, session_id=session_id)]


def _same_as_fts5(
    mirrored: SQLiteStore, plain: SQLiteStore, query: str, session_id: str | None
) -> list[str]:
    """Both stores return the same ids in the same order with the same scores."""
    got = _answers(mirrored, query, session_id)
    want = _answers(plain, query, session_id)
    assert [k for k, _ in got] == [k for k, _ in want], (query, session_id)
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9, abs=1e-12)
    return [k for k, _ in got]


def _varint_bytes(value: int) -> bytes:
    """SQLite's varint of ``value`` (below 2**56: big-endian 7-bit groups)."""
    groups = [value & 0x7F]
    value >>= 7
    while value:
        groups.append(0x80 | (value & 0x7F))
        value >>= 7
    return bytes(reversed(groups))


def _fill(store: SQLiteStore, rng: random.Random, n: int) -> None:
    for i in range(n):
        store.store(
            f"k{i}",
            _text(rng),
            category=rng.choice(["core", "daily", "conversation"]),
            session_id=rng.choice(_SESSIONS),
            # Day words ("5 December 2024") are indexed too: "december" finds them.
            timestamp=rng.choice(["2024-12-05T12:00:00Z", "2024-05-08T12:00:00Z"]),
        )


def _raw(tmp_path: Path, seed: int, n: int) -> tuple[SQLiteStore, sqlite3.Connection]:
    """A filled store and a plain connection to its file (BEGIN issued on first read)."""
    store = _mirrored(tmp_path / "m.db")
    _fill(store, random.Random(seed), n)
    conn = writable(tmp_path / "m.db")
    return store, conn


class TestSameAnswersAsFts5:
    def test_random_stores_queries_and_scopes(self, tmp_path: Path) -> None:
        rng = random.Random(14)
        db = tmp_path / "m.db"
        mirrored, plain = _mirrored(db), _plain(db)
        _fill(mirrored, rng, 120)
        seen = 0
        for _ in range(150):
            query = _query(rng)
            for session in (None, "s1", "s1\x00", "ünï"):
                seen += len(_same_as_fts5(mirrored, plain, query, session))
        assert seen > 500  # the queries do find rows
        assert 1 == mirrored._engine._mirror.builds  # type: ignore[union-attr]
        mirrored.close()
        plain.close()

    def test_bm25_is_fts5s_whole_query_bm25_to_the_bit(self, tmp_path: Path) -> None:
        """Without floored words the mirror's BM25 is FTS5's ``bm25()`` of the same MATCH."""
        store, conn = _raw(tmp_path, 3, 60)
        store.store("rare", "omicron hiking", session_id="s1")
        mirror = KeywordMirror(after=1)
        words = content_words("omicron hiking rho")
        where = ("default", "deleted_at IS NULL", ())
        got = mirror.keyword_hits(conn, where, words, 50)
        assert got
        args = ", ".join(str(w) for w in BM25_WEIGHTS)
        want = {
            str(i): float(s)
            for i, s in conn.execute(
                f"SELECT m.id, -bm25(memories_fts, {args}) FROM memories_fts "
                "JOIN memories AS m ON m.rid = memories_fts.rowid WHERE memories_fts MATCH ?",
                ('"omicron" OR "hike" OR "rho"',),
            )
        }
        assert {key: bm25 for key, _, bm25 in got} == {k: want[k] for k, _, _ in got}
        conn.close()
        store.close()

    def test_rows_of_many_tokens_have_fts5s_lengths(self, tmp_path: Path) -> None:
        """bm25() weighs a row by its length, stored as one varint per column: a column of
        128 tokens or more takes several bytes. Rows around and past that length, built
        into the mirror and written after it, score as FTS5 scores them."""
        db = tmp_path / "m.db"
        mirrored, plain = _mirrored(db), _plain(db)
        rng = random.Random(9)
        lengths = [1, 5, 126, 127, 128, 129, 300, 16_383, 16_384, 40_000]
        for i, n in enumerate(lengths):
            mirrored.store(f"long{i}", " ".join(rng.choice(_WORDS) for _ in range(n)), "core")
        for q in ["alpha", "zeta kappa", "december hiking"]:
            _same_as_fts5(mirrored, plain, q, None)
        for i, n in enumerate(lengths):  # patched into the built mirror
            mirrored.store(f"more{i}", " ".join(rng.choice(_WORDS) for _ in range(n)), "core")
        for q in ["alpha", "zeta kappa", "december hiking", "rho"]:
            _same_as_fts5(mirrored, plain, q, None)
        assert mirrored._engine._mirror.builds == 1  # type: ignore[union-attr]
        mirrored.close()
        plain.close()

    def test_row_length_sums_every_varint(self) -> None:
        """The one-byte shortcut and the decoder agree on lengths of one to nine bytes."""
        rng = random.Random(3)
        for _ in range(500):
            counts = [
                rng.choice([0, 1, 127, 128, 16_383, 16_384, rng.randrange(1 << 40)])
                for _ in range(rng.randrange(0, 8))
            ]
            data = b"".join(_varint_bytes(c) for c in counts)
            assert _terms.varints(data) == counts
            assert _terms.row_length(data) == sum(counts)

    def test_coverage_and_order_match_the_sql_stage(self, tmp_path: Path) -> None:
        """The raw keyword stage: same hits, BM25 and calibrated coverage as ``keyword_hits``."""
        store, conn = _raw(tmp_path, 9, 90)
        rng = random.Random(9)
        stats, mirror = TermStats(), KeywordMirror(after=1)
        where = ("default", "deleted_at IS NULL AND session_id = ?", ("s2",))
        tokens = schema.scope_tokens("s2", ())
        for _ in range(60):
            words = content_words(_query(rng))
            rows_a: dict[str, Any] = {}
            rows_b: dict[str, Any] = {}
            got = mirror.keyword_hits(conn, where, words, 8, scope_tokens=tokens, rows=rows_a)
            want = keyword_hits(
                conn,
                stats,
                where,
                words,
                8,
                scope_match=schema.scope_match("s2", ()),
                rows=rows_b,
            )
            assert got is not None
            assert [(i, c) for i, c, _ in got] == [(i, c) for i, c, _ in want]
            assert [b for *_, b in got] == pytest.approx([b for *_, b in want], rel=1e-9)
            # The hits' entry columns come with them, as on the SQL path.
            assert {i: rows_a[i] for i, _, _ in got} == {i: rows_b[i] for i, _, _ in want}
        conn.close()
        store.close()


class TestKeptCurrent:
    def test_random_writes_by_the_store_and_by_another_connection(self, tmp_path: Path) -> None:
        rng = random.Random(21)
        db = tmp_path / "m.db"
        mirrored, plain = _mirrored(db), _plain(db)
        other = writable(db, isolation_level=None)
        _fill(mirrored, rng, 30)
        for step in range(200):
            key = f"k{rng.randrange(40)}"
            op = rng.random()
            if op < 0.5:
                host_write(mirrored, key, _text(rng), session_id=rng.choice(_SESSIONS))
            elif op < 0.6:
                mirrored.forget(key)
            elif op < 0.7:
                other.execute("DELETE FROM memories WHERE key = ?", (key,))
            elif op < 0.8:
                other.execute("UPDATE memories SET content = ? WHERE key = ?", (_text(rng), key))
            elif op < 0.9:
                other.execute(
                    "UPDATE memories SET expires_at = '2000-01-01T00:00:00.000000Z' WHERE key = ?",
                    (key,),
                )
            else:
                host_write(plain, key, _text(rng), session_id=rng.choice(_SESSIONS))
            if step % 3 == 0:
                query = _query(rng)
                _same_as_fts5(mirrored, plain, query, None)
                _same_as_fts5(mirrored, plain, query, rng.choice(["s1", "s2", "s1\x00"]))
        # Patched from the log all along, never read whole again.
        assert 1 == mirrored._engine._mirror.builds  # type: ignore[union-attr]
        other.close()
        mirrored.close()
        plain.close()

    def test_own_writes_in_a_memory_database(self) -> None:
        store = _mirrored(":memory:")
        store.store("a", "alpha hiking")
        assert ["a"] == [e.key for e in store.recall("hiking", 5)]
        store.store("b", "hiking boots")
        store.forget("a")
        assert ["b"] == [e.key for e in store.recall("hiking", 5)]
        store.close()

    def test_more_changes_than_the_log_keeps_reads_again(self, tmp_path: Path) -> None:
        db = tmp_path / "m.db"
        store, plain = _mirrored(db), _plain(db)
        store.store("a", "alpha beta")
        store.store("b", "gamma")
        _same_as_fts5(store, plain, "alpha", None)
        other = writable(db, isolation_level=None)
        other.execute("BEGIN")
        for i in range(schema.LOG_KEEP + 1):
            text = "alpha zeta" if i % 2 == 0 else "gamma"
            other.execute("UPDATE memories SET content = ? WHERE key = 'b'", (text,))
        other.execute("COMMIT")
        other.close()
        assert ["a", "b"] == sorted(_same_as_fts5(store, plain, "alpha", None))
        assert 2 == store._engine._mirror.builds  # type: ignore[union-attr]
        store.close()
        plain.close()

    def test_a_row_too_long_to_tokenise_reads_the_index_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(_fts_mirror, "PATCH_MAX_BYTES", 200)
        db = tmp_path / "m.db"
        store, plain = _mirrored(db), _plain(db)
        store.store("a", "alpha beta")
        _same_as_fts5(store, plain, "alpha", None)
        store.store("short", "alpha gamma")  # under 200 bytes with its context: patched
        _same_as_fts5(store, plain, "alpha", None)
        assert 1 == store._engine._mirror.builds  # type: ignore[union-attr]
        store.store("long", "alpha " + "delta " * 60)  # over 200: read again, not tokenised
        assert ["a", "long", "short"] == sorted(_same_as_fts5(store, plain, "alpha", None))
        assert 2 == store._engine._mirror.builds  # type: ignore[union-attr]
        store.close()
        plain.close()

    def test_many_changed_rows_read_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(_fts_mirror, "PATCH_MAX", 3)
        db = tmp_path / "m.db"
        store, plain = _mirrored(db), _plain(db)
        store.store("a", "alpha")
        _same_as_fts5(store, plain, "alpha", None)
        lines = [json.dumps({"key": f"n{i}", "content": "alpha beta"}) for i in range(5)]
        store.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
        assert 6 == len(_same_as_fts5(store, plain, "alpha", None))
        assert 2 == store._engine._mirror.builds  # type: ignore[union-attr]
        store.close()
        plain.close()

    def test_few_held_tokens_are_dropped_and_read_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Past ``MAX_TOKENS`` held tokens the postings go; queries read them again, right."""
        monkeypatch.setattr(_fts_mirror, "MAX_TOKENS", 3)
        rng = random.Random(4)
        db = tmp_path / "m.db"
        mirrored, plain = _mirrored(db), _plain(db)
        _fill(mirrored, rng, 40)
        for step in range(40):
            _same_as_fts5(mirrored, plain, _query(rng), rng.choice([None, "s2"]))
            if step % 5 == 0:
                host_write(mirrored, f"k{rng.randrange(50)}", _text(rng), session_id="s2")
        index = mirrored._engine._mirror._index  # type: ignore[union-attr]
        assert index is not None
        assert len(index.postings) <= 4 + 3  # a query's own words may pass the bound
        mirrored.close()
        plain.close()

    def test_the_least_recently_used_tokens_go_first(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Past the bound the tokens used longest ago go; one just used again stays, the
        counts stay true and the answers stay FTS5's (the whole set went before)."""
        monkeypatch.setattr(_fts_mirror, "MAX_TOKENS", 4)
        db = tmp_path / "m.db"
        mirrored, plain = _mirrored(db), _plain(db)
        words = ["alpha", "bravo", "golf", "delta", "echo", "kilo"]
        for w in words:
            for j in range(3):
                mirrored.store(f"{w}{j}", f"{w} note number {j}", "core")
        for w in ["alpha", "bravo", "golf", "alpha"]:
            _same_as_fts5(mirrored, plain, w, None)
        index = mirrored._engine._mirror._index  # type: ignore[union-attr]
        assert index is not None
        assert ["bravo", "golf", "alpha"] == list(index.postings)  # oldest used first
        _same_as_fts5(mirrored, plain, "delta echo", None)  # 3 + 2 > 4: evict to 3 - 2
        assert ["alpha", "delta", "echo"] == list(index.postings)
        _same_as_fts5(mirrored, plain, "bravo kilo alpha", None)
        assert {"alpha", "bravo", "kilo"} == set(index.postings)
        assert index.held == sum(len(p) for p in index.postings.values())
        want = {rid: {t for t, p in index.postings.items() if rid in p} for rid in index.ids}
        assert {rid: t for rid, t in want.items() if t} == {
            rid: set(t) for rid, t in index.loaded.items()
        }
        assert all(len(set(t)) == len(t) for t in index.loaded.values())  # each token once
        for w in words:
            _same_as_fts5(mirrored, plain, w, None)
        mirrored.close()
        plain.close()

    def test_postings_share_their_pairs_and_rids(self, tmp_path: Path) -> None:
        """What lets the mirror hold about three times the postings in the same memory:
        rows holding a word the same way share one (count, columns) pair, every posting
        of a row keys on the row's one rid object, and the answers stay FTS5's through
        writes, rewrites and deletes."""
        db = tmp_path / "m.db"
        mirrored, plain = _mirrored(db), _plain(db)
        for i in range(300):  # rids past Python's cached small ints
            mirrored.store(f"f{i}", f"filler {i}", "core")
        for i in range(60):
            mirrored.store(f"k{i}", f"alpha note {i % 3}", "core", session_id="s1")
        for q in ["alpha note", "alpha", "note 1", "alpha note"]:
            _same_as_fts5(mirrored, plain, q, None)
        index = mirrored._engine._mirror._index  # type: ignore[union-attr]
        assert index is not None
        alpha, note = index.postings["alpha"], index.postings["note"]
        assert len(alpha) == 60
        assert len({id(p) for p in alpha.values()}) <= 3  # few distinct ways to hold it
        for posting in (alpha, note):
            assert all(rid is index.rids[rid] for rid in posting)
        host_write(mirrored, "k1", "alpha alpha alpha rewritten", session_id="s1")
        host_write(mirrored, "k62", "note alpha new", session_id="s2")
        mirrored.forget("k2")
        for q in ["alpha note", "alpha", "note", "rewritten"]:
            _same_as_fts5(mirrored, plain, q, None)
            _same_as_fts5(mirrored, plain, q, "s2")
        assert set(index.rids) == set(index.ids)
        assert all(rid is index.rids[rid] for p in index.postings.values() for rid in p)
        mirrored.close()
        plain.close()


class TestWhenItApplies:
    def test_not_before_the_nth_recall(self, tmp_path: Path) -> None:
        """A one-shot process (one recall) never pays for reading the index."""
        store = SQLiteStore(tmp_path / "m.db", fusion=Fusion())
        store.store("a", "alpha")
        mirror = store._engine._mirror
        assert mirror is not None
        for _ in range(_fts_mirror.AFTER_RECALLS - 1):
            store.recall("alpha", 5)
        assert 0 == mirror.builds
        store.recall("alpha", 5)
        assert 1 == mirror.builds
        store.close()

    def test_a_store_past_max_rows_uses_fts5(self, tmp_path: Path) -> None:
        db = tmp_path / "m.db"
        store = SQLiteStore(db, fusion=Fusion())
        store._engine._mirror = KeywordMirror(after=1, max_rows=5)
        for i in range(5):
            store.store(f"k{i}", "alpha")
        assert 5 == len(store.recall("alpha", 10))
        assert 1 == store._engine._mirror.builds
        store.store("k5", "alpha beta")  # past the bound: dropped, answered by FTS5
        assert 6 == len(store.recall("alpha", 10))
        assert store._engine._mirror._index is None
        assert ["k5"] == [e.key for e in store.recall("beta", 10)]
        assert 1 == store._engine._mirror.builds
        store.close()

    @pytest.mark.parametrize("query", ["alph*", "alpha_beta"])
    def test_prefix_and_multi_token_words_go_to_fts5(self, tmp_path: Path, query: str) -> None:
        db = tmp_path / "m.db"
        store = _mirrored(db)
        store.store("a", "alpha beta")
        conn = writable(db)
        conn.execute("BEGIN")
        mirror = KeywordMirror(after=1)
        where = ("default", "deleted_at IS NULL", ())
        assert mirror.keyword_hits(conn, where, content_words(query), 5) is None
        assert ["a"] == [e.key for e in store.recall(query, 5)]
        conn.close()
        store.close()

    def test_a_failed_build_backs_off_and_fts5_answers(self, tmp_path: Path) -> None:
        db = tmp_path / "m.db"
        store = _mirrored(db)
        store.store("a", "alpha")
        mirror = store._engine._mirror
        assert mirror is not None
        calls = []

        def broken(conn: sqlite3.Connection, head: object) -> Any:
            calls.append(head)
            raise sqlite3.OperationalError("disk I/O error")

        mirror._build = broken  # type: ignore[method-assign]
        for _ in range(3):
            answer = store.answer(RecallQuery("alpha", 5))
            assert (["a"], ()) == ([e.key for e in answer.entries], answer.degraded)
        assert 1 == len(calls)  # backed off after the failure
        assert mirror._index is None
        store.close()


class TestScope:
    def test_a_session_ending_in_nul_is_another_session(self) -> None:
        store = _mirrored(":memory:")
        store.store("secret", "alpha", session_id="alice\x00")
        store.store("mine", "beta", session_id="alice")
        assert [] == [e.key for e in store.recall("alpha", 10, session_id="alice")]
        assert ["secret"] == [e.key for e in store.recall("alpha", 10, session_id="alice\x00")]
        store.close()

    def test_other_namespaces_and_forgotten_rows_never_show(self, tmp_path: Path) -> None:
        db = tmp_path / "m.db"
        mine = _mirrored(db)
        theirs = SQLiteStore(db, namespace="other", fusion=Fusion())
        for i in range(20):
            theirs.store(f"t{i}", "alpha alpha alpha")  # better BM25 than ours
        mine.store("m", "alpha beta")
        mine.store("gone", "alpha")
        mine.forget("gone")
        assert ["m"] == [e.key for e in mine.recall("alpha", 5)]
        theirs.close()
        mine.close()

    def test_many_sessions_each_sees_its_own_rows_through_writes(self, tmp_path: Path) -> None:
        """A chat server's store: more sessions than the scopes the mirror caches (64),
        rows moved to another session, forgotten and written after the build. Each
        session's recall is FTS5's, and the mirror's rows per scope token are its rows'."""
        db = tmp_path / "m.db"
        mirrored, plain = _mirrored(db), _plain(db)
        rng = random.Random(11)
        sessions = [f"chat-{i}" for i in range(90)]
        for i in range(300):
            mirrored.store(f"k{i}", _text(rng), "conversation", session_id=rng.choice(sessions))
        for i in range(20):  # rows every session sees
            mirrored.store(f"c{i}", _text(rng), "core")
        for step in range(240):
            _same_as_fts5(mirrored, plain, _query(rng), rng.choice(sessions))
            if step % 6 == 0:  # a row written again in another session: it moves
                key = f"k{rng.randrange(300)}"
                host_write(mirrored, key, _text(rng), session_id=rng.choice(sessions))
            if step % 17 == 0:
                mirrored.forget(f"k{rng.randrange(300)}")
            if step % 23 == 0:
                mirrored.store(f"n{step}", _text(rng), "conversation", session_id=sessions[0])
        index = mirrored._engine._mirror._index  # type: ignore[union-attr]
        assert index is not None
        assert index.by_scope == {
            t: {rid for rid, toks in index.scope.items() if t in toks}
            for t in {t for toks in index.scope.values() for t in toks}
        }
        mirrored.close()
        plain.close()


class TestRankings:
    def test_the_ranking_follows_the_bound(self, tmp_path: Path, ranking_kind: str) -> None:
        """The parametrisation is real: arrays are built only where the bound allows."""
        store = _mirrored(tmp_path / "m.db")
        _fill(store, random.Random(5), 30)
        assert store.recall("alpha hiking", 5)
        index = store._engine._mirror._index  # type: ignore[union-attr]
        assert index is not None
        assert (index.arrays is not None) == (ranking_kind == "arrays")
        store.close()

    def test_both_rankings_agree_through_many_dropped_rows(self) -> None:
        """Rows come and go past the slot renumbering; both rankings give the same rows,
        scores (to the bit) and order, ties by id, with and without a scope."""
        rng = random.Random(31)
        index = MirrorIndex((0, None))
        next_rid = 1
        for _round in range(6):
            for _ in range(700):
                scope = frozenset(rng.sample(["s1", "s2", "s3"], rng.randrange(0, 2)))
                index.set_row(next_rid, f"k{next_rid % 997:04d}", rng.randrange(1, 30), scope)
                next_rid += 1
            for rid in rng.sample(sorted(index.ids), len(index.ids) // 2 + 300):
                index.remove(rid)
            for token in ("alpha", "beta", "gamma"):
                rows = rng.sample(sorted(index.ids), len(index.ids) // 3)
                index.load(token, {r: (rng.choice([0.25, 1.0, 2.0, 3.5]), 2) for r in rows})
            _rankings_agree(index)
            # Written and dropped rows patch the held tokens' arrays in place.
            for _ in range(60):
                counts = {"alpha": [0, 1, 0, 0, 0, 0, 0], "beta": [1, 0, 0, 2, 0, 0, 0]}
                index.add(next_rid, f"k{next_rid % 997:04d}", rng.randrange(1, 30), counts)
                next_rid += 1
            for rid in rng.sample(sorted(index.ids), 40):
                index.remove(rid)
            rewritten = rng.choice(sorted(index.ids))
            index.remove(rewritten)
            index.add(rewritten, "again", 7, {"alpha": [2, 0, 0, 0, 0, 0, 0]})
            _rankings_agree(index)
        assert index.arrays is not None
        slot_rid = index.arrays.slot_rid
        assert len(slot_rid) < 2 * len(index.ids) + 1024 + 700  # renumbered, not grown
        assert index.arrays.slot == {r: i for i, r in enumerate(slot_rid)}


def _rankings_agree(index: MirrorIndex) -> None:
    sessions: list[tuple[list[str], tuple[str, ...] | None]] = [
        (["alpha"], None),
        (["beta", "alpha", "beta"], ("s1",)),
    ]
    if index.arrays is None:
        index.arrays = _arrays.IndexArrays(index, np)
    for phrases, session in sessions:
        arrays = _arrays._ArrayRanking(index, index.arrays, phrases, session, np)
        allowed = None if session is None else index.in_scope(session)
        dicts = _arrays._DictRanking(bm25_scores(index, phrases, allowed), index.ids)
        assert len(arrays) == len(dicts)
        for m in (1, 7, 40, len(dicts) + 5):
            top = dicts.best(m)
            assert arrays.best(m) == top
            assert [arrays.score(r) for r in top] == [dicts.score(r) for r in top]
