"""PostgreSQL-only behaviour of ``PostgresStore`` (the shared contract is test_contract.py)."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from memory_inject import open_store as open_store_of
from memory_inject.config import AgentConfig, BackendConfig, MemoryInjectConfig
from memory_inject.contract import RecallQuery
from memory_inject.embedders import HashingEmbedder
from memory_inject.exceptions import (
    SchemaMismatchError,
    StorageError,
    StoreLockedError,
    StoreMissingError,
)
from memory_inject.storage._base import float32
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres.errors import translate_errors
from memory_inject.storage.postgres.lending import OUTAGE_WAIT_S
from memory_inject.storage.postgres.migrations import MIGRATIONS
from memory_inject.storage.postgres.recall import like_patterns, tsquery_text
from memory_inject.storage.postgres.schema import COLUMNS
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.unavailable import UnavailableStore
from tests.storage import _pg_backend as pgb

Factory = Callable[..., PostgresStore]


@pytest.fixture
def db(pg_dsn: str) -> Iterator[str]:
    """The DSN of a fresh database, dropped after the test."""
    with pgb.scratch_database(pg_dsn) as dsn:
        yield dsn


@pytest.fixture
def open_store(db: str) -> Iterator[Factory]:
    """``open_store(**kwargs)`` opens a PostgresStore on the test's database, closed after."""
    made: list[PostgresStore] = []

    def factory(**kwargs: Any) -> PostgresStore:
        store = PostgresStore(db, **kwargs)
        made.append(store)
        return store

    yield factory
    for store in made:
        store.close()


def _scalar(dsn: str, query: str, params: Sequence[Any] = ()) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def _stored(store: PostgresStore, key: str) -> MemoryRecord:
    """The live record under ``key``, which the test has stored (``get`` is never None here)."""
    rec = store.get(key)
    assert rec is not None
    return rec


def _versions(dsn: str, table: str = "memories") -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(f"SELECT version FROM {table}_schema_version ORDER BY 1").fetchall()
    return [int(r[0]) for r in rows]


class FailingEmbedder(HashingEmbedder):
    """Embeds documents, but fails on any text that starts with 'boom' (the query)."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if any(t.startswith("boom") for t in texts):
            raise RuntimeError("model fell over")
        return super().embed(texts)


class TestMigrations:
    def test_reopen_is_idempotent(self, open_store: Factory, db: str) -> None:
        """Opening a migrated table again applies nothing and keeps the rows."""
        first = open_store()
        first.store("k", "kept across reopen")
        first.close()
        second = open_store()
        assert [m[0] for m in MIGRATIONS] == _versions(db)
        assert "kept across reopen" == _stored(second, "k").content

    def test_concurrent_open(self, db: str) -> None:
        """Eight stores opening one new table at once all succeed; it migrates once."""
        barrier = threading.Barrier(8)
        stores: list[PostgresStore] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def opener() -> None:
            barrier.wait()
            try:
                s = PostgresStore(db, embedder=HashingEmbedder(32), max_size=1)
            except BaseException as exc:
                with lock:
                    errors.append(exc)
            else:
                with lock:
                    stores.append(s)

        threads = [threading.Thread(target=opener) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in stores:
            s.close()
        assert [] == errors
        assert 8 == len(stores)
        assert [m[0] for m in MIGRATIONS] == _versions(db)

    def test_newer_schema_is_refused(self, open_store: Factory, db: str) -> None:
        """A table migrated by a newer library raises SchemaMismatchError instead of guessing."""
        open_store().close()
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("INSERT INTO memories_schema_version VALUES (999, 'from the future')")
        with pytest.raises(SchemaMismatchError, match="newer"):
            open_store()

    def test_foreign_table_is_refused(self, open_store: Factory, db: str) -> None:
        """A table of that name that we did not create is never adopted."""
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("CREATE TABLE memories (id int)")
        with pytest.raises(SchemaMismatchError, match="not ours"):
            open_store()

    def test_tables_are_independent(self, open_store: Factory, db: str) -> None:
        """Two ``table`` names in one database keep separate rows and versions."""
        a = open_store(table="mem_a")
        b = open_store(table="mem_b")
        a.store("k", "in a")
        assert b.get("k") is None
        assert [m[0] for m in MIGRATIONS] == _versions(db, "mem_b")

    def test_bad_table_name_is_rejected(self, db: str) -> None:
        """The table name is an identifier, never SQL."""
        with pytest.raises(ValueError, match="'table' must be"):
            PostgresStore(db, table="memories; DROP TABLE x")


class TestVectors:
    def test_hnsw_index_and_semantic_recall(self, open_store: Factory, db: str) -> None:
        """pgvector + an embedder give a vector(dim) column with HNSW, and typos still match."""
        store = open_store(embedder=HashingEmbedder(64))
        assert store.vectors_enabled
        indexdef = _scalar(
            db, "SELECT indexdef FROM pg_indexes WHERE indexname = 'memories_embedding_hnsw'"
        )
        assert "hnsw" in indexdef
        assert "vector_cosine_ops" in indexdef
        assert "vector(64)" == _scalar(
            db,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'memories'::regclass AND attname = 'embedding_vec'",
        )
        store.store("db", "Production runs PostgreSQL on a big box")
        store.store("ed", "The user edits with neovim")
        answer = store.answer(RecallQuery("postgress", 5))
        assert ("db", "vector") == (answer.entries[0].key, answer.strategy)

    def test_lexical_only_when_told(self, open_store: Factory, db: str) -> None:
        """``vectors=False`` adds no vector column; embeddings are still kept exactly."""
        store = open_store(embedder=HashingEmbedder(64), vectors=False)
        assert not store.vectors_enabled
        assert not _scalar(
            db,
            "SELECT count(*) FROM pg_attribute "
            "WHERE attrelid = 'memories'::regclass AND attname = 'embedding_vec'",
        )
        written = store.store("db", "Production runs PostgreSQL")
        answer = store.answer(RecallQuery("postgresql production", 5))
        assert (["db"], "keyword") == ([e.key for e in answer.entries], answer.strategy)
        assert written.embedding == _stored(store, "db").embedding
        assert 64 == len(written.embedding or ())

    def test_embedding_round_trips_exactly(self, open_store: Factory) -> None:
        """float8[] storage: the float32-rounded vector upsert returns comes back bit for bit."""
        store = open_store(embedder=HashingEmbedder(3))
        vec = (0.1, 1 / 3, -2.718281828459045)
        written = store.upsert(MemoryRecord(key="v", content="x", embedding=vec))
        buf = io.StringIO()
        store.export_jsonl(buf)
        assert (float32(vec), float32(vec), list(float32(vec))) == (
            written.embedding,
            _stored(store, "v").embedding,
            json.loads(buf.getvalue())["embedding"],
        )

    def test_initial_bulk_load_rebuilds_the_index(
        self, open_store: Factory, db: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A big import into an empty table builds HNSW afterwards; later ones insert into it."""
        store = open_store(embedder=HashingEmbedder(32))
        monkeypatch.setattr(store._engine, "hnsw_rebuild_at", 50)
        oid = "SELECT 'memories_embedding_hnsw'::regclass::oid"
        before = _scalar(db, oid)
        rows = [{"key": f"k{i}", "content": f"filler note number {i}"} for i in range(200)]
        rows.append({"key": "db", "content": "Production runs PostgreSQL"})
        assert 201 == store.import_jsonl(io.StringIO("\n".join(map(json.dumps, rows))))
        rebuilt = _scalar(db, oid)
        store.import_jsonl(io.StringIO("\n".join(map(json.dumps, rows))))
        assert (True, rebuilt) == (before != rebuilt, _scalar(db, oid))
        assert 201 == store.count()
        assert "db" == store.recall("postgress", 3)[0].key

    def test_rebuild_can_be_forced(self, open_store: Factory, db: str) -> None:
        """``rebuild_index=True`` rebuilds even for a small import into a full table."""
        store = open_store(embedder=HashingEmbedder(32))
        store.store("a", "alpha")
        oid = "SELECT 'memories_embedding_hnsw'::regclass::oid"
        before = _scalar(db, oid)
        store.import_jsonl(io.StringIO('{"key": "b", "content": "beta"}'), rebuild_index=True)
        assert before != _scalar(db, oid)
        assert ["b"] == [e.key for e in store.recall("beta", 3)]

    def test_other_dimension_is_refused(self, open_store: Factory) -> None:
        """Reopening with an embedder of another size raises instead of mixing vectors."""
        open_store(embedder=HashingEmbedder(64)).close()
        with pytest.raises(SchemaMismatchError, match="vector\\(64\\)"):
            open_store(embedder=HashingEmbedder(32))

    def test_embedder_failure_degrades_to_lexical(self, open_store: Factory) -> None:
        """A failing query embedding falls back to keyword recall and says so."""
        store = open_store(embedder=FailingEmbedder(32))
        store.store("k", "the boom gate is stuck open")
        info = store.answer(RecallQuery("boom gate", 5))
        assert ["k"] == [e.key for e in info.entries]
        assert "keyword" == info.strategy
        assert [True] == [d.startswith("embedder_failed") for d in info.degraded]


class TestQuerySafety:
    @pytest.mark.parametrize(
        "query",
        [
            "'); DROP TABLE memories; --",
            "a & b | !c <-> d:* (e",
            "\\' '' \" \\\\",
            "foo:*A & bar",
            "100%_done",
            "ünïcödé 東京 emoji 🎉",
        ],
    )
    def test_operators_are_inert(self, open_store: Factory, query: str) -> None:
        """tsquery and LIKE syntax in a prompt never raises; it is only words."""
        store = open_store()
        store.store("k", "drop table memories 100 done tokyo")
        store.recall(query, 5)
        text = tsquery_text(query)
        if text is not None:
            for term in text.split(" | "):
                assert term.startswith("'")
                assert term.rstrip("*").rstrip(":").endswith("'")

    def test_like_patterns_escape_wildcards(self) -> None:
        """LIKE fallback patterns escape % and _ so they match literally."""
        assert ["%100\\_done%"] == like_patterns("100_done")

    def test_prefix_term(self, open_store: Factory) -> None:
        """A trailing * asks for a prefix match."""
        store = open_store()
        store.store("k", "Kubernetes cluster upgrades")
        assert ["k"] == [e.key for e in store.recall("kuber*", 5)]


class TestRankBudget:
    def test_a_word_found_everywhere_does_not_flood_the_candidates(
        self, open_store: Factory, db: str
    ) -> None:
        """After ANALYZE, a query's ubiquitous word stops selecting rows; rarer words decide."""
        store = open_store()
        unbounded = open_store(rank_budget=None)
        lines = [{"key": f"c{i}", "content": f"common chatter number {i}"} for i in range(300)]
        lines += [{"key": f"r{i}", "content": f"common but zebra {i}"} for i in range(3)]
        store.import_jsonl(io.StringIO("\n".join(map(json.dumps, lines))))
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("ANALYZE memories")
        assert (["r0", "r1", "r2"], 20) == (
            sorted(e.key for e in store.recall("common zebra", 10)),
            len(unbounded.recall("common zebra", 20)),
        )

    def test_without_statistics_every_match_is_ranked(self, open_store: Factory) -> None:
        """A table ANALYZE has not seen yet behaves as rank_budget=None."""
        store = open_store()
        for i in range(5):
            store.store(f"k{i}", f"common words {i}")
        assert 5 == len(store.recall("common", 10))


class TestConcurrency:
    def test_eight_writer_threads_lose_nothing(self, open_store: Factory) -> None:
        """Eight threads writing at once: every row lands and every use is counted."""
        store = open_store(max_size=8)
        store.store("shared", "counted by everyone")
        per_thread = 40
        barrier = threading.Barrier(8)
        errors: list[BaseException] = []

        def writer(n: int) -> None:
            barrier.wait()
            try:
                for i in range(per_thread):
                    store.store(f"t{n}-{i}", f"thread {n} item {i}", session_id=f"s{n}")
                    store.mark_used(["shared"])
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [] == errors
        assert 1 + 8 * per_thread == store.count()
        assert 8 * per_thread == _stored(store, "shared").times_used

    def test_bulk_import_is_atomic(self, open_store: Factory) -> None:
        """A bad line anywhere leaves the table as it was."""
        store = open_store()
        good = "\n".join(json.dumps({"key": f"k{i}", "content": f"c{i}"}) for i in range(2500))
        with pytest.raises(ValueError, match="line 2501"):
            store.import_jsonl(io.StringIO(good + "\n{not json}\n"), progress=lambda n: None)
        assert 0 == store.count()
        seen: list[int] = []
        assert 2500 == store.import_jsonl(io.StringIO(good), progress=seen.append)
        assert [1000, 2000, 2500] == seen
        assert 2500 == store.count()

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("content", "a\u0000b"),
            ("key", "k\u0000"),
            ("tags", ["ok", "t\u0000"]),
            ("metadata", {"note": "x\u0000y"}),
        ],
    )
    def test_an_import_line_postgres_cannot_store_is_named(
        self, open_store: Factory, field: str, value: Any
    ) -> None:
        """A NUL character: PostgreSQL's own error named neither the line nor the field."""
        store = open_store()
        lines = [{"key": f"k{i}", "content": "ok"} for i in range(5)]
        lines[2][field] = value
        text = "".join(json.dumps(line) + "\n" for line in lines)
        with pytest.raises(ValueError, match=f"import line 3: '{field}' holds a NUL character"):
            store.import_jsonl(io.StringIO(text))
        assert 0 == store.count()


class TestFaults:
    def test_connection_refused(self) -> None:
        """No server at the address: StorageError with reason 'unavailable', quickly."""
        t0 = time.monotonic()
        with pytest.raises(StorageError) as info:
            PostgresStore("postgresql://postgres@/postgres?host=/nonexistent-dir", timeout=1)
        assert "unavailable" == info.value.reason
        assert isinstance(info.value.__cause__, psycopg.OperationalError)
        assert time.monotonic() - t0 < 10

    @pytest.mark.parametrize("dsn", ["garbage", "hots=/tmp/pg dbname=memory"])
    def test_a_malformed_dsn_is_a_value_error_naming_it(self, dsn: str) -> None:
        """It was psycopg's ProgrammingError: a traceback in the CLI, and ``unavailable:
        degrade`` (which catches ValueError) did not degrade."""
        with pytest.raises(ValueError, match="'dsn' is not a PostgreSQL connection string"):
            PostgresStore(dsn)
        agent = AgentConfig(
            agent="a",
            memory=MemoryInjectConfig(
                backend=BackendConfig(kind="postgres", dsn=dsn, unavailable="degrade")
            ),
        )
        assert isinstance(open_store_of(agent), UnavailableStore)

    def test_missing_database(self, pg_dsn: str) -> None:
        """A database that does not exist is StoreMissingError."""
        dsn = psycopg.conninfo.make_conninfo(pg_dsn, dbname="mi_no_such_db")
        with pytest.raises(StoreMissingError):
            PostgresStore(dsn)

    def test_pool_survives_terminated_backends(self, open_store: Factory, db: str) -> None:
        """Killing every pooled connection costs nothing: the next recall reconnects."""
        store = open_store(max_size=4)
        store.store("k", "survives a backend kill")
        assert ["k"] == [e.key for e in store.recall("backend kill", 5)]
        killed = _scalar(
            db,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        assert killed >= 1
        assert ["k"] == [e.key for e in store.recall("backend kill", 5)]

    def test_operational_error_mid_recall(self, open_store: Factory, db: str) -> None:
        """A connection cut while a recall waits is a StorageError, and the pool recovers."""
        store = open_store(max_size=2)
        store.store("k", "cut mid query")
        outcome: list[BaseException | None] = []
        with psycopg.connect(db) as locker:
            locker.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")

            def recall() -> None:
                try:
                    store.recall("query", 5)
                    outcome.append(None)
                except BaseException as exc:
                    outcome.append(exc)

            worker = threading.Thread(target=recall)
            worker.start()
            deadline = time.monotonic() + 10
            victims = 0
            while not victims and time.monotonic() < deadline:
                time.sleep(0.05)
                row = locker.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                ).fetchone()
                assert row is not None  # an aggregate always returns one row
                victims = row[0]
            worker.join(10)
            locker.rollback()
        assert 1 == victims
        assert isinstance(outcome[0], StorageError)
        assert "unavailable" == outcome[0].reason
        assert isinstance(outcome[0].__cause__, psycopg.OperationalError)
        assert ["k"] == [e.key for e in store.recall("cut mid query", 5)]

    def test_embed_missing_names_a_driver_error_as_a_storage_error(
        self, open_store: Factory, db: str
    ) -> None:
        """``embed_missing`` let a raw psycopg error out (twenty-ninth round: a helper's
        writers, catching ``StorageError`` as the store's docstring says, died on it)."""
        open_store().store("k", "written without the embedder")
        store = open_store(embedder=HashingEmbedder(dim=16), timeout=0.5)
        with psycopg.connect(db) as locker:
            locker.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StorageError) as info:
                store.embed_missing()
            locker.rollback()
        assert isinstance(info.value.__cause__, psycopg.Error)
        assert "embed_missing" in str(info.value)
        assert 1 == store.embed_missing()

    def test_locked_table_fails_within_timeout(self, open_store: Factory, db: str) -> None:
        """A lock held past ``timeout`` is StoreLockedError, not a hung turn."""
        store = open_store(timeout=0.5)
        store.store("k", "locked out")
        with psycopg.connect(db) as locker:
            locker.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
            t0 = time.monotonic()
            with pytest.raises(StoreLockedError):
                store.recall("locked", 5)
            assert time.monotonic() - t0 < 5
        assert ["k"] == [e.key for e in store.recall("locked", 5)]

    def test_server_restart(self, open_store: Factory) -> None:
        """Down: recall fails fast with StorageError. Up again: the same store works."""
        if not pgb.owns_server():
            pytest.skip("needs the test-owned server (not an external DSN)")
        store = open_store(timeout=1.0)
        store.store("k", "outlives the restart")
        with pgb.server_stopped():
            t0 = time.monotonic()
            with pytest.raises(StorageError) as info:
                store.recall("restart", 5)
            assert "unavailable" == info.value.reason
            assert time.monotonic() - t0 < 5
        assert ["k"] == [e.key for e in store.recall("restart", 5)]
        assert 1 == store.count()

    def test_after_an_outage_turns_wait_for_the_pool_briefly(
        self, open_store: Factory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Once a wait found the server down, the next turns wait for the pool only
        ``OUTAGE_WAIT_S`` before the direct connection tells: the pool's reconnect back-off
        held every turn for its whole deadline for seconds after a restart (round 35).
        The first pooled connection lent ends that; a healthy pool is waited for as before."""
        if not pgb.owns_server():
            pytest.skip("needs the test-owned server (not an external DSN)")
        store = open_store(timeout=1.0)
        store.store("k", "outlives the restart")
        pool = store._engine.connections.pool
        asked: list[float] = []
        getconn = pool.getconn

        def recorded(timeout: float | None = None) -> Any:
            asked.append(timeout or 0.0)
            return getconn(timeout=timeout)

        monkeypatch.setattr(pool, "getconn", recorded)
        store.recall("restart", 5)
        assert [1.0] == [round(t, 1) for t in asked]  # healthy: the pool's whole timeout
        with pgb.server_stopped():
            for _ in range(3):
                with pytest.raises(StorageError):
                    store.recall("restart", 5)
            lending = store._engine.connections._lending
            with monkeypatch.context() as m:  # every direct connection taken: wait the rest
                m.setattr(lending, "direct_full", lambda: True)
                del asked[4:]
                with pytest.raises(StorageError):
                    store.recall("restart", 5)
                assert OUTAGE_WAIT_S == asked[4] and asked[5] > 0.5
        assert asked[1] == pytest.approx(1.0, abs=0.05)  # the wait that found the outage
        assert [OUTAGE_WAIT_S] * 2 == asked[2:4]  # then brief waits, each going direct
        del asked[:]
        assert ["k"] == [e.key for e in store.recall("restart", 5)]  # back: direct or pooled
        assert asked[0] == OUTAGE_WAIT_S
        for _ in range(50):  # the pool reconnects in its own time; then it lends again
            if len(asked) > 1 and asked[-1] > OUTAGE_WAIT_S:
                break
            store.recall("restart", 5)
            time.sleep(0.1)
        assert asked[-1] == pytest.approx(1.0, abs=0.05)


class TestErrorTranslation:
    @pytest.mark.parametrize(
        ("raised", "expected", "reason"),
        [
            (PoolTimeout("no connection"), StorageError, "unavailable"),
            (psycopg.OperationalError("server closed the connection"), StorageError, "unavailable"),
            (psycopg.errors.QueryCanceled("statement timeout"), StorageError, "timeout"),
            (psycopg.errors.LockNotAvailable("lock timeout"), StoreLockedError, "locked"),
            (
                psycopg.OperationalError('FATAL: database "x" does not exist'),
                StoreMissingError,
                "missing",
            ),
            (psycopg.errors.UndefinedTable("no table"), StorageError, "storage_error"),
        ],
    )
    def test_driver_errors_become_storage_errors(
        self, raised: Exception, expected: type[StorageError], reason: str
    ) -> None:
        """Each driver or pool failure maps to one StorageError kind, chained to the original."""
        with pytest.raises(expected) as info, translate_errors("recall"):
            raise raised
        assert (reason, raised) == (info.value.reason, info.value.__cause__)

    def test_duplicate_id_is_a_value_error(self, open_store: Factory) -> None:
        """Two keys cannot share an id: the second write is a ValueError."""
        store = open_store()
        store.upsert(MemoryRecord(key="a", content="x", id="same"))
        with pytest.raises(ValueError, match="duplicate"):
            store.upsert(MemoryRecord(key="b", content="y", id="same"))


class TestAsync:
    def test_arecall_matches_recall(self, open_store: Factory, db: str) -> None:
        """The async path returns what the sync path returns, for scored and time-only queries."""
        store = open_store(embedder=HashingEmbedder(64))
        for i in range(20):
            store.store(f"k{i}", f"note {i} about {'cats' if i % 2 else 'dogs'}", session_id="s")

        async def main() -> tuple[list[Any], list[Any], list[list[Any]]]:
            async with store:
                scored = await store.arecall("cats", 5, session_id="s")
                recent = await store.arecall("", 5)
                many = await asyncio.gather(*(store.arecall("dogs", 3) for _ in range(20)))
            return scored, recent, list(many)

        scored, recent, many = asyncio.run(main())
        # ``async with`` closed it; reopen the sync side to compare.
        again = PostgresStore(db, embedder=HashingEmbedder(64))
        try:
            assert again.recall("cats", 5, session_id="s") == scored
            assert again.recall("", 5) == recent
            assert all(m == again.recall("dogs", 3) for m in many)
        finally:
            again.close()

    def test_arecall_from_two_event_loops(self, open_store: Factory) -> None:
        """A second ``asyncio.run`` gets a fresh async pool on its own loop."""
        # One connection, made before the first query returns: no connect is in
        # flight when the first loop ends (see the aclose() note on PostgresStore).
        store = open_store(min_size=1, max_size=1)
        store.store("k", "loop one and loop two")
        first = asyncio.run(store.arecall("loop", 5))

        async def second_run() -> list[Any]:
            try:
                return await store.arecall("loop", 5)
            finally:
                await store.aclose()

        assert first == asyncio.run(second_run())
        assert ["k"] == [e.key for e in first]

    def test_arecall_after_aclose(self, open_store: Factory) -> None:
        """A closed store refuses async recalls with StorageError."""
        store = open_store()

        async def main() -> None:
            await store.aclose()
            with pytest.raises(StorageError, match="closed"):
                await store.arecall("x", 1)

        asyncio.run(main())

    def test_arecall_error_is_storage_error(self, open_store: Factory, db: str) -> None:
        """A dropped table surfaces from arecall as StorageError, like recall."""
        store = open_store()

        async def main() -> None:
            await store.arecall("x", 1)
            with psycopg.connect(db, autocommit=True) as conn:
                conn.execute("DROP TABLE memories")
            try:
                with pytest.raises(StorageError):
                    await store.arecall("x", 1)
            finally:
                await store.aclose()

        asyncio.run(main())


class TestSchema:
    def test_every_record_field_is_a_column(self, open_store: Factory, db: str) -> None:
        """The table has a column for each MemoryRecord field (so nothing is dropped)."""
        open_store()
        with psycopg.connect(db) as conn:
            rows = conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = 'memories'::regclass "
                "AND attnum > 0 AND NOT attisdropped"
            ).fetchall()
        assert set(COLUMNS) <= {r[0] for r in rows}


def test_the_test_servers_data_is_out_of_pytests_shared_root(
    pg_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Another pytest run prunes the shared temporary root (``pytest-of-<user>``); the
    server's data directory is elsewhere, so that run cannot take it away (issue 25)."""
    from tests.storage._pg_backend import _STATE, owns_server

    if not owns_server():
        pytest.skip("an external server (MEMORY_INJECT_TEST_PG_DSN) has no data directory here")
    shared_root = tmp_path_factory.getbasetemp().parent.resolve()
    pgdata = Path(_STATE["pgdata"]).resolve()
    assert pgdata.exists()
    assert shared_root not in pgdata.parents
