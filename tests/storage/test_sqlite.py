"""What only the SQLite store does: file format, schema versions, open failures, locks, FTS."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_inject.contract import RecallQuery
from memory_inject.embedders import HashingEmbedder
from memory_inject.exceptions import (
    EmbedderError,
    SchemaMismatchError,
    StorageError,
    StoreCorruptError,
    StoreLockedError,
    StoreMissingError,
)
from memory_inject.storage.calibration import SUBSTRING_WEIGHT
from memory_inject.storage.fusion import build_fts_query
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite import SQLiteStore, migrations
from tests.storage import _sqlite_schema as schema
from tests.storage._sqlite_backend import writable


@contextlib.contextmanager
def raw(path: Path, *, check_same_thread: bool = True) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection that is always closed."""
    conn = writable(path, isolation_level=None, check_same_thread=check_same_thread)
    try:
        yield conn
    finally:
        conn.close()


def pragma(path: Path, name: str) -> object:
    with raw(path) as conn:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]


def stored(store: SQLiteStore, key: str) -> MemoryRecord:
    """The live record under ``key``, which the test has stored (``get`` is never None here)."""
    rec = store.get(key)
    assert rec is not None
    return rec


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "nested" / ".memory" / "memory.db"


class TestFile:
    def test_creates_parent_directories(self, db: Path) -> None:
        """Opening a path in missing directories creates them and the file."""
        with SQLiteStore(db):
            pass
        assert True is db.is_file()

    def test_wal_and_versions_are_set(self, db: Path) -> None:
        """The file is in WAL mode and carries our schema version and application id."""
        with SQLiteStore(db):
            pass
        assert ("wal", schema.SCHEMA_VERSION, schema.APPLICATION_ID) == (
            pragma(db, "journal_mode"),
            pragma(db, "user_version"),
            pragma(db, "application_id"),
        )

    def test_table_has_a_column_per_record_field(self, db: Path) -> None:
        """Every MemoryRecord field is a column, next to the rowid and the index context."""
        with SQLiteStore(db), raw(db) as conn:
            cols = tuple(r[1] for r in conn.execute("PRAGMA table_info(memories)"))
        context = ("ctx_prev", "ctx_prev2", "ctx_day", "ctx_scope", "ctx_near")
        assert sorted(("rid", *schema.COLUMNS, *context)) == sorted(cols)

    def test_reopening_keeps_the_data(self, db: Path) -> None:
        """A second open sees what the first one wrote."""
        with SQLiteStore(db) as s:
            s.store("k", "persisted value")
        with SQLiteStore(db, create=False) as s:
            assert ["k"] == [e.key for e in s.recall("persisted", 5)]

    def test_in_memory_database(self) -> None:
        """':memory:' works for throwaway stores."""
        with SQLiteStore(":memory:") as s:
            s.store("k", "ephemeral note")
            assert ["k"] == [e.key for e in s.recall("note", 5)]


class TestMigrations:
    def test_old_file_is_migrated_forward(self, db: Path) -> None:
        """A version-1 file gains the FTS index, which indexes its existing rows."""
        db.parent.mkdir(parents=True)
        full = schema.record_to_row(MemoryRecord(key="old", content="written before full-text"))
        cols = [c for c in schema.COLUMNS if c != "metadata"]  # v5 added metadata
        row = [v for c, v in zip(schema.COLUMNS, full, strict=True) if c != "metadata"]
        with raw(db) as conn:
            schema.migrate(conn, target=1)
            conn.execute(
                f"INSERT INTO memories ({', '.join(cols)}) VALUES ({', '.join('?' * len(row))})",
                row,
            )
        assert 1 == pragma(db, "user_version")
        with SQLiteStore(db) as s:
            found = [e.key for e in s.recall("written", 5)]
        assert (["old"], schema.SCHEMA_VERSION) == (found, pragma(db, "user_version"))

    def test_migrating_twice_is_a_no_op(self, db: Path) -> None:
        """Running the migrations on a current file changes nothing."""
        with SQLiteStore(db), raw(db) as conn:
            assert schema.SCHEMA_VERSION == schema.migrate(conn)

    def test_a_file_another_process_creates_meanwhile_is_not_foreign(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Another process commits the file's first step between this opener's read of the
        version (0) and of the tables: one snapshot sees neither, and the opener then finds
        the file current instead of calling it another program's database."""
        db.parent.mkdir(parents=True)
        with raw(db) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
        read = migrations._pragma
        created: list[int] = []
        started: list[bool] = []

        def racing(conn: sqlite3.Connection, name: str) -> int:
            value = read(conn, name)
            if name == "user_version" and not started:
                started.append(True)
                with raw(db) as other:  # the other process, in between
                    created.append(schema.migrate(other))
            return value

        monkeypatch.setattr(migrations, "_pragma", racing)
        with raw(db) as conn:
            migrations.prepare(conn, create=True, label=str(db))
        assert created == [schema.SCHEMA_VERSION]
        assert schema.SCHEMA_VERSION == pragma(db, "user_version")


class TestOpenFailures:
    def test_garbage_file_is_corrupt(self, db: Path) -> None:
        """A file that is not SQLite raises StoreCorruptError caused by the driver error."""
        db.parent.mkdir(parents=True)
        db.write_bytes(b"definitely not a database " * 200)
        with pytest.raises(StoreCorruptError) as info:
            SQLiteStore(db)
        assert True is isinstance(info.value.__cause__, sqlite3.DatabaseError)

    @pytest.mark.parametrize("content", [b"y", b"\n", b"ok", b"x" * 99])
    def test_a_file_shorter_than_a_header_is_corrupt_and_kept(
        self, db: Path, content: bytes
    ) -> None:
        """SQLite read a 1-byte file as an empty database and wrote its own over it (round
        34's attack: a user's one-line note given as the store path was gone); a file
        shorter than SQLite's header is refused, byte for byte as it was."""
        db.parent.mkdir(parents=True)
        db.write_bytes(content)
        with pytest.raises(StoreCorruptError, match="file is not a database"):
            SQLiteStore(db)
        assert db.read_bytes() == content

    def test_directory_is_missing(self, tmp_path: Path) -> None:
        """A directory where the file should be is reported clearly."""
        with pytest.raises(StoreMissingError, match="is a directory"):
            SQLiteStore(tmp_path)

    def test_missing_file_with_create_false(self, db: Path) -> None:
        """create=False refuses to create a database, and creates nothing."""
        with pytest.raises(StoreMissingError, match="create=False"):
            SQLiteStore(db, create=False)
        assert False is db.parent.exists()

    def test_empty_file_with_create_false(self, db: Path) -> None:
        """An empty file is no database either when create=False."""
        db.parent.mkdir(parents=True)
        db.touch()
        with pytest.raises(StoreMissingError, match="empty"):
            SQLiteStore(db, create=False)

    def test_newer_schema_is_refused(self, db: Path) -> None:
        """A file written by a newer library is a SchemaMismatchError, untouched."""
        with SQLiteStore(db):
            pass
        with raw(db) as conn:
            conn.execute("PRAGMA user_version = 99")
        with pytest.raises(SchemaMismatchError, match="newer"):
            SQLiteStore(db)
        assert 99 == pragma(db, "user_version")

    def test_foreign_database_is_refused(self, db: Path) -> None:
        """founder-os's own memory.db (tables, no version) is not ours to migrate."""
        db.parent.mkdir(parents=True)
        with raw(db) as conn:
            conn.execute("CREATE TABLE memories (id TEXT PRIMARY KEY, key TEXT UNIQUE)")
        with pytest.raises(SchemaMismatchError, match="not a memory-inject database"):
            SQLiteStore(db)

    def test_other_application_id_is_refused(self, db: Path) -> None:
        """A versioned database of another program is refused too."""
        db.parent.mkdir(parents=True)
        with raw(db) as conn:
            conn.execute("CREATE TABLE t (x)")
            conn.execute("PRAGMA user_version = 1")
        with pytest.raises(SchemaMismatchError, match="application_id"):
            SQLiteStore(db)

    def test_dropped_index_is_corrupt(self, db: Path) -> None:
        """A current-version file without its FTS table fails the schema check."""
        with SQLiteStore(db), raw(db) as conn:
            conn.execute("DROP TABLE memories_fts")
        with pytest.raises(StoreCorruptError, match="memories_fts"):
            SQLiteStore(db)

    def test_closed_store_raises(self, db: Path) -> None:
        """Using a closed store is a StorageError; closing twice is fine."""
        s = SQLiteStore(db)
        s.close()
        s.close()
        with pytest.raises(StorageError, match="closed"):
            s.recall("x", 5)


class TestLocking:
    def test_lock_held_past_the_retry(self, db: Path) -> None:
        """A writer that keeps the lock makes a write raise StoreLockedError after one retry."""
        with SQLiteStore(db, busy_timeout_ms=50) as s, raw(db) as other:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreLockedError) as info:
                s.store("k", "v")
            other.execute("ROLLBACK")
            assert (True, 0) == (
                isinstance(info.value.__cause__, sqlite3.OperationalError),
                s.count(),
            )

    def test_lock_released_during_the_retry(self, db: Path) -> None:
        """A lock released within the 300 ms pause lets the retried write succeed."""
        with SQLiteStore(db, busy_timeout_ms=50) as s, raw(db, check_same_thread=False) as other:
            other.execute("BEGIN IMMEDIATE")
            timer = threading.Timer(0.15, lambda: other.execute("ROLLBACK"))
            timer.start()
            try:
                s.store("k", "v")
            finally:
                timer.join()
            assert 1 == s.count()

    def test_readers_are_not_blocked_by_a_writer(self, db: Path) -> None:
        """Under WAL a recall proceeds while another connection holds the write lock."""
        with SQLiteStore(db, busy_timeout_ms=50) as s, raw(db) as other:
            s.store("k", "value under lock")
            other.execute("BEGIN IMMEDIATE")
            try:
                assert ["k"] == [e.key for e in s.recall("value", 5)]
            finally:
                other.execute("ROLLBACK")

    def test_threads_share_one_store(self, db: Path) -> None:
        """Concurrent writes from many threads all land."""
        with SQLiteStore(db) as s:

            def work(t: int) -> None:
                for i in range(20):
                    s.store(f"t{t}-{i}", f"thread {t} item {i}")

            threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            assert 120 == s.count()

    def test_two_stores_on_one_file(self, db: Path) -> None:
        """Two connections to one file see each other's committed writes."""
        with SQLiteStore(db) as a, SQLiteStore(db) as b:
            a.store("from-a", "alpha")
            b.store("from-b", "beta")
            assert (2, 2) == (a.count(), b.count())


class TestSqliteRecall:
    def test_like_fallback_finds_substrings(self, db: Path) -> None:
        """When FTS finds nothing, a substring match scores SUBSTRING_WEIGHT per word found."""
        with SQLiteStore(db) as s:
            s.store("srv", "the server db01 is in Frankfurt")
            answer = s.answer(RecallQuery("serv", 5))
            got = answer.entries
            assert (["srv"], [SUBSTRING_WEIGHT], "like") == (
                [e.key for e in got],
                [e.score for e in got],
                answer.strategy,
            )

    def test_like_fallback_keeps_the_session_filter(self, db: Path) -> None:
        """The substring fallback is as strict about sessions as the FTS stage."""
        with SQLiteStore(db) as s:
            s.store("srv", "the server db01", session_id="a")
            assert [] == s.recall("serv", 5, session_id="b")

    def test_like_fallback_escapes_wildcards(self, db: Path) -> None:
        """Underscores in a query match literally, not as LIKE wildcards."""
        with SQLiteStore(db) as s:
            s.store("k", "set max_conn in the pool")
            s.store("other", "maxXconn is not it")
            assert ["k"] == [e.key for e in s.recall("x_conn", 5)]

    def test_key_and_tags_are_searchable(self, db: Path) -> None:
        """FTS covers the key and the tags as well as the content."""
        with SQLiteStore(db) as s:
            s.store("user_editor_pref", "vim")
            s.store("other", "something", tags=["kubernetes"])
            assert (["user_editor_pref"], ["other"]) == (
                [e.key for e in s.recall("editor", 5)],
                [e.key for e in s.recall("kubernetes", 5)],
            )

    def test_vectors_of_another_size_are_ignored(self, db: Path) -> None:
        """Rows embedded at another dimension are skipped, not compared."""
        with SQLiteStore(db, embedder=HashingEmbedder(dim=32)) as s:
            s.store("k", "PostgreSQL database")
        with SQLiteStore(db, embedder=HashingEmbedder(dim=64)) as s:
            answer = s.answer(RecallQuery("postgressql databse", 5))
            assert ([], 0) == (list(answer.entries), answer.vector_hits)

    def test_embed_missing_backfills_vectors(self, db: Path) -> None:
        """Rows written without an embedder get vectors later, and then match typos."""
        with SQLiteStore(db) as s:
            s.store("db", "The production database is PostgreSQL")
        with SQLiteStore(db, embedder=HashingEmbedder()) as s:
            done = s.embed_missing()
            assert (1, ["db"]) == (done, [e.key for e in s.recall("postgressql", 5)])

    def test_other_namespace_filling_the_window(self, db: Path) -> None:
        """Better hits in another namespace do not crowd this namespace's hits out."""
        lines = [json.dumps({"key": f"o{i}", "content": "alpha alpha alpha"}) for i in range(250)]
        mine = [
            json.dumps({"key": f"m{i}", "content": f"alpha and {i} more words"}) for i in range(3)
        ]
        with SQLiteStore(db, namespace="other") as other, SQLiteStore(db, namespace="mine") as s:
            other.import_jsonl(io.StringIO("\n".join(lines)))
            s.import_jsonl(io.StringIO("\n".join(mine)))
            assert ["m0", "m1", "m2"] == sorted(e.key for e in s.recall("alpha", 5))

    def test_ties_beyond_the_window_break_by_id(self, db: Path) -> None:
        """Hundreds of equal scores still return the smallest ids, whatever the insert order."""
        lines = [json.dumps({"key": f"k{i:03d}", "content": "alpha note"}) for i in range(250)]
        with SQLiteStore(db) as s:
            s.import_jsonl(io.StringIO("\n".join(reversed(lines))))
            assert ["k000", "k001", "k002"] == [e.key for e in s.recall("alpha", 3)]

    def test_import_moves_records_into_this_namespace(self, db: Path) -> None:
        """Imported lines land in the importing store's namespace."""
        line = json.dumps({"key": "k", "content": "shared fact", "namespace": "elsewhere"})
        with SQLiteStore(db, namespace="mine") as s:
            s.import_jsonl(io.StringIO(line))
            assert "mine" == stored(s, "k").namespace

    def test_duplicate_id_is_a_value_error(self, db: Path) -> None:
        """Two keys cannot share an id within a namespace."""
        with SQLiteStore(db) as s:
            s.store("a", "x", id="same")
            with pytest.raises(ValueError, match="UNIQUE"):
                s.store("b", "y", id="same")


class BrokenEmbedder:
    """Returns vectors of the wrong shape, as a misconfigured model might."""

    name = "broken"
    dim = 2

    def embed(self, texts: list[str]) -> list[object]:
        return [["not", "floats"] for _ in texts]


class TestEmbeddings:
    def test_vectors_are_stored_as_float32(self, db: Path) -> None:
        """upsert() returns the float32-rounded vector that get() reads back."""
        with SQLiteStore(db) as s:
            written = s.upsert(MemoryRecord(key="k", content="v", embedding=(0.1, 1 / 3)))
            assert (written, True) == (s.get("k"), written.embedding != (0.1, 1 / 3))

    def test_wrong_shape_is_an_embedder_error(self, db: Path) -> None:
        """An embedder that returns non-numbers fails the write with EmbedderError."""
        # BrokenEmbedder is deliberately not an Embedder (its vectors are not floats).
        with SQLiteStore(db, embedder=BrokenEmbedder()) as s:  # type: ignore[arg-type]
            with pytest.raises(EmbedderError, match="broken"):
                s.store("k", "v")
            assert 0 == s.count()

    def test_wrong_shape_at_recall_degrades(self, db: Path) -> None:
        """At recall the same failure falls back to keywords and is reported."""
        with SQLiteStore(db) as s:
            s.store("k", "keyword match")
        # BrokenEmbedder is deliberately not an Embedder (its vectors are not floats).
        with SQLiteStore(db, embedder=BrokenEmbedder()) as s:  # type: ignore[arg-type]
            answer = s.answer(RecallQuery("keyword", 5))
            assert (["k"], True) == (
                [e.key for e in answer.entries],
                "; ".join(answer.degraded).startswith("embedder_failed"),
            )


class TestBuildFtsQuery:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("deploy server", '"deploy" OR "server"'),
            ("what is the server", '"server"'),
            ("what is it", '"what" OR "is" OR "it"'),
            ("publ* notes", '"publ"* OR "notes"'),
            ("Server server SERVER", '"server"'),
            ("café Zürich", '"café" OR "zürich"'),
            (
                'x "b" (c) NEAR/3 k:e -f +g ^h',
                '"x" OR "b" OR "c" OR "near" OR "3" OR "k" OR "e" OR "f" OR "g" OR "h"',
            ),
            ("What's the server? (prod/staging)", '"server" OR "prod" OR "staging"'),
            ("AND OR NOT", '"and" OR "or" OR "not"'),
        ],
    )
    def test_builds_a_quoted_or_query(self, text: str, expected: str) -> None:
        """Words are quoted and ORed; stopwords go unless nothing else is left."""
        assert expected == build_fts_query(text)

    @pytest.mark.parametrize("text", ["", "   ", "?!.,", "*", '"()"'])
    def test_no_words_is_none(self, text: str) -> None:
        """A prompt without words has no FTS query."""
        assert None is build_fts_query(text)

    def test_max_terms_bounds_the_query(self) -> None:
        """A pasted log is cut to ``max_terms`` words."""
        text = " ".join(f"w{i}" for i in range(100))
        query = build_fts_query(text, max_terms=3)
        assert query is not None
        assert 3 == len(query.split(" OR "))

    @pytest.mark.parametrize(
        "prompt",
        [
            "how should qmd search work?",
            "typecheck, please",
            "fix the bug in src/app.ts",
            'say "hi" -- then NEAR(a b) OR NOT c*',
            "col:umn ^start {a b} [x] a+b a-b 'quoted'",
            "emoji 🚀 and ünïcödé",
        ],
    )
    def test_every_query_is_valid_match_syntax(self, prompt: str) -> None:
        """PI's failing prompts (and worse) produce MATCH expressions FTS5 accepts."""
        conn = sqlite3.connect(":memory:")
        try:
            conn.execute("CREATE VIRTUAL TABLE f USING fts5(x, tokenize='porter unicode61')")
            conn.execute("INSERT INTO f VALUES ('search the typecheck bug in app')")
            query = build_fts_query(prompt)
            assert query is not None
            conn.execute("SELECT count(*) FROM f WHERE f MATCH ?", (query,)).fetchone()
        finally:
            conn.close()


class TestPlanQueries:
    """The recall_where/known_entities/mark_used extensions a founder-os plan uses."""

    def test_entity_and_source_queries_order_by_confidence(self, tmp_path: Path) -> None:
        """Entity- and source-scoped queries return only tagged rows, best confidence first."""
        from memory_inject.storage.sqlite import SQLiteStore

        with SQLiteStore(tmp_path / "p.db") as s:
            s.store("a", "acme renewal terms", entity_ids=["company:acme"], confidence=0.5)
            s.store("b", "acme contact is jane", entity_ids=["company:acme"], confidence=0.9)
            s.store("c", "globex notes", entity_ids=["company:globex"], source="P10")
            assert (["b", "a"], ["c"]) == (
                [e.key for e in s.recall_where(None, 5, entity_id="company:acme")],
                [e.key for e in s.recall_where(None, 5, source="P10")],
            )
            assert {"acme": "company:acme", "globex": "company:globex"} == s.known_entities()

    def test_founder_os_preset_end_to_end_on_sqlite(self, tmp_path: Path) -> None:
        """The preset resolves the company from an email, merges three queries, marks usage."""
        from memory_inject import MemoryInjectConfig, MemoryRecall, render_memory_context
        from memory_inject.config import RecallPlanConfig
        from memory_inject.embedders import HashingEmbedder
        from memory_inject.storage.sqlite import SQLiteStore

        with SQLiteStore(tmp_path / "f.db", embedder=HashingEmbedder()) as s:
            s.store(
                "acme-terms",
                "Acme pays net-30",
                entity_ids=["company:acme"],
                confidence=0.8,
                status="confirmed",
            )
            s.store(
                "renewal",
                "renewal emails go out on Fridays",
                confidence=0.6,
                status="confirmed",
                source="P10",
            )
            s.store("cand", "renewal candidate note", confidence=0.9, status="candidate")
            cfg = MemoryInjectConfig(
                min_relevance_score=0.0,
                recall_plan=RecallPlanConfig(enabled=True, preset="founder_os"),
            )
            out = render_memory_context(
                s, "draft the renewal email to jane@acme.io", config=cfg, source="P10"
            )
            assert {"acme-terms", "renewal"} == {e.key for e in out.entries}
            assert isinstance(out.event, MemoryRecall)
            assert "cand" not in out.event.dropped  # filtered in the query: never fetched
            assert [1, 1] == [stored(s, k).times_used for k in ("acme-terms", "renewal")]
            assert 0 == stored(s, "cand").times_used

    def test_preset_without_embedder_runs_the_other_queries(self, tmp_path: Path) -> None:
        """No embedder: the semantic query searches by keywords, as every recall of a store
        without one (it was dropped, with an error on every turn, until round 29: a memory
        only the task's words matched was never shown); entity and plugin still run."""
        from memory_inject import MemoryInjectConfig, MemoryRecall, render_memory_context
        from memory_inject.config import RecallPlanConfig
        from memory_inject.storage.sqlite import SQLiteStore

        with SQLiteStore(tmp_path / "n.db") as s:
            s.store("renewal", "renewal emails go out on Fridays", source="P10", status="confirmed")
            cfg = MemoryInjectConfig(
                recall_plan=RecallPlanConfig(enabled=True, preset="founder_os")
            )
            s.store("terms", "Acme pays invoices on net-30 terms.", status="confirmed")
            out = render_memory_context(s, "draft the renewal email", config=cfg, source="P10")
            assert ["renewal"] == [e.key for e in out.entries]
            assert isinstance(out.event, MemoryRecall)
            assert (None, ()) == (out.event.error, out.event.degraded)
            out = render_memory_context(s, "what are acme invoice terms", config=cfg, source="P9")
            assert ["terms"] == [e.key for e in out.entries]


class TestSpecSqliteThroughRerank:
    def test_bm25_recall_stays_ranked_through_rerank_injection(self, tmp_path: Path) -> None:
        """Spec case 23: BM25 scores are in 0..1 and ordered; rerank keeps best first."""
        from memory_inject import MemoryInjectConfig, RerankConfig, render_memory_context
        from memory_inject.storage.sqlite import SQLiteStore

        with SQLiteStore(tmp_path / "r.db") as s:
            s.store("best_match", "rust borrow checker lifetimes explained with lifetimes")
            s.store("supporting_match", "a note that mentions lifetimes once among other words")
            s.store("unrelated", "green tea preferences")
            got = s.recall("lifetimes", 5)
            scores = [e.score for e in got]
            assert all(x is not None and 0.0 <= x <= 1.0 for x in scores)
            known = [x for x in scores if x is not None]  # all of them, as just asserted
            assert scores == sorted(known, reverse=True)
            cfg = MemoryInjectConfig(rerank=RerankConfig(enabled=True, strategy="none"))
            out = render_memory_context(s, "lifetimes", config=cfg)
            assert ["best_match", "supporting_match"] == [e.key for e in out.entries]
