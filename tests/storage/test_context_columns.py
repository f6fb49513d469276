"""SQLite's context columns (schema v3, issue 14): session neighbours and day words in the index."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_inject.storage.calibration import coverage
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite import SQLiteStore
from tests.storage import _sqlite_schema as schema
from tests.storage._sqlite_backend import writable

DAY = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "m.db")
    s.store("q", "Alice: which trail did you pick for the weekend?", "core", session_id="chat")
    s.store("a", "Bob: the ridge loop, it has the best views", "core", session_id="chat")
    s.store("other", "Carol: the ridge loop is closed", "core", session_id="elsewhere")
    s.store("fact", "The quarterly audit is due in June.", "core", timestamp=DAY)
    return s


def context_of(store: SQLiteStore, key: str) -> tuple[str | None, str | None, str | None]:
    return column_values(store, key, "ctx_prev", "ctx_prev2", "ctx_day")  # type: ignore[return-value]


def column_values(store: SQLiteStore, key: str, *columns: str) -> tuple[str | None, ...]:
    conn = writable(store.path)
    try:
        row = conn.execute(
            f"SELECT {', '.join(columns)} FROM memories WHERE key = ?", (key,)
        ).fetchone()
    finally:
        conn.close()
    return tuple(row)


class TestNeighbours:
    def test_a_record_indexes_the_previous_records_of_its_session(self, store: SQLiteStore) -> None:
        """The reply carries the question it answers; another session's rows never do."""
        prev, prev2, _ = context_of(store, "a")
        assert ("Alice: which trail did you pick for the weekend?", None) == (prev, prev2)
        assert (None, None) == context_of(store, "other")[:2]

    def test_a_sessionless_record_gets_no_neighbours_only_day_words(
        self, store: SQLiteStore
    ) -> None:
        """Facts outside a session stream are indexed on their own text and date."""
        assert (None, None, "8 May 2023") == context_of(store, "fact")

    def test_a_question_restating_the_previous_turn_finds_the_reply(
        self, store: SQLiteStore
    ) -> None:
        """The words live in the question; the answer is the record after it."""
        found = {e.key: e.score or 0.0 for e in store.recall("which trail for the weekend", 5)}
        assert {"q", "a"} <= set(found)
        assert found["q"] == 1.0
        # Found only through its neighbour: half credit, on the calibrated scale.
        assert found["a"] == pytest.approx(coverage([1.0], [0.5]), abs=1e-9)
        assert found["a"] < found["q"]

    def test_a_date_in_words_finds_the_record_of_that_day(self, store: SQLiteStore) -> None:
        """'8 May 2023' in the prompt matches the day words of a record written then."""
        assert "fact" in [e.key for e in store.recall("what happened on 8 May 2023", 5)]


class TestMigrationToContextColumns:
    def test_a_version_2_file_gains_neighbours_day_words_and_scope(self, tmp_path: Path) -> None:
        """Rows written before v3 are indexed with their context when the file is opened."""
        path = tmp_path / "old.db"
        conn = writable(path, isolation_level=None)
        try:
            schema.migrate(conn, target=2)
            for key, content in (
                ("q", "Alice: which trail did you pick?"),
                ("a", "Bob: the ridge loop"),
            ):
                full = schema.record_to_row(
                    MemoryRecord(key=key, content=content, session_id="chat", timestamp=DAY)
                )
                # The columns a version 2 file has (v5 added ``metadata``).
                cols = [c for c in schema.COLUMNS if c != "metadata"]
                row = [v for c, v in zip(schema.COLUMNS, full, strict=True) if c != "metadata"]
                marks = ", ".join("?" * len(row))
                conn.execute(f"INSERT INTO memories ({', '.join(cols)}) VALUES ({marks})", row)
        finally:
            conn.close()
        with SQLiteStore(path) as s:
            assert ("Alice: which trail did you pick?", None, "8 May 2023") == context_of(s, "a")
            assert "a" in [e.key for e in s.recall("which trail", 5)]
            assert "a" in [e.key for e in s.recall("ridge loop", 5, session_id="chat")]
            assert [] == [e.key for e in s.recall("ridge loop", 5, session_id="other")]


class TestScopeToken:
    def test_rows_carry_their_scope_as_one_token(self, store: SQLiteStore) -> None:
        """A session row is 's' + hex(session); a sessionless one 'g' + hex(category)."""
        assert ("s" + b"chat".hex().upper(),) == column_values(store, "a", "ctx_scope")
        assert ("g" + b"core".hex().upper(),) == column_values(store, "fact", "ctx_scope")
        assert schema.scope_token("chat", "core") == column_values(store, "a", "ctx_scope")[0]

    def test_a_session_recall_sees_its_rows_and_the_shared_ones(self, store: SQLiteStore) -> None:
        """Another session's rows never come back; sessionless core facts do."""
        found = [e.key for e in store.recall("ridge loop audit", 10, session_id="chat")]
        assert "a" in found and "fact" in found and "other" not in found
        assert ["other"] == [e.key for e in store.recall("ridge loop", 10, session_id="elsewhere")]

    def test_moving_a_record_to_another_session_moves_its_token(self, store: SQLiteStore) -> None:
        """An update of session_id or category re-indexes the scope token. (A row belongs to
        its scope: the host moves one by forgetting it and storing it again.)"""
        store.forget("a")
        store.store("a", "Bob: the ridge loop, it has the best views", "core", session_id="moved")
        assert [] == [e.key for e in store.recall("ridge loop views", 10, session_id="chat")]
        assert ["a"] == [e.key for e in store.recall("ridge loop views", 10, session_id="moved")]
        store.store("fact", "The quarterly audit is due in June.", "conversation")
        assert "fact" not in [e.key for e in store.recall("quarterly audit", 10, session_id="x")]

    @pytest.mark.parametrize("session", ["", "%", "' OR '1'='1", '" OR ctx_scope : "g', "é" * 300])
    def test_hostile_session_ids_stay_in_their_scope(self, tmp_path: Path, session: str) -> None:
        """Quotes, FTS syntax and long ids become hex: no MATCH error, no other scope's rows."""
        with SQLiteStore(tmp_path / "h.db") as s:
            s.store("mine", "the invoice is paid", "core", session_id=session)
            s.store("theirs", "the invoice is late", "core", session_id=session + "x")
            s.store("talk", "the invoice chat", "conversation")
            assert ["mine"] == [e.key for e in s.recall("invoice", 10, session_id=session)]


def test_a_session_id_holding_a_nul_finds_its_rows_by_keyword(tmp_path: Path) -> None:
    """SQLite cuts the indexed scope token at a NUL; the query's token is cut the same way."""
    from memory_inject.contract import RecallQuery
    from memory_inject.storage.sqlite import SQLiteStore

    with SQLiteStore(tmp_path / "m.db") as store:
        store.store("cat", "has a cat named Miso", session_id="chat:\x00a")
        store.store("other", "has a cat named Tom", session_id="chat:\x00b")
        info = store.answer(RecallQuery("cat named Miso", 5, session_id="chat:\x00a"))
        found = info.entries
    assert (["cat"], "keyword") == ([e.key for e in found], info.strategy)
    assert found[0].score == 1.0
