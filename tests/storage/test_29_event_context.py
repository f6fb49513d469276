"""Sessionless rows of one event are each other's context (issue 29; SQLite schema 8, PG 5).

An event is the sessionless, non-PI rows of one namespace, category and
profile stamped with one timestamp: a row of it indexes the two live rows
written just before it in the event, as a session's turn does its session's.
Rows stamped apart (``store()`` without a timestamp) stay on their own text.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memory_inject.storage.calibration import coverage
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite import SQLiteStore
from tests.storage import _pg_backend as pgb
from tests.storage import _sqlite_schema as schema
from tests.storage._sqlite_backend import writable

AT = "2023-05-08T13:56:00Z"
#: One event: the answer (turn 2) shares no word with the question about turn 1.
EVENT = [
    ("e1", "Caroline: I went to the LGBTQ support group yesterday."),
    ("e2", "Melanie: That sounds wonderful, how did it feel?"),
    ("e3", "Caroline: Powerful. Everyone was so welcoming."),
]
HALF = round(coverage([1.0], [0.5]), 4)
QUARTER = round(coverage([1.0], [0.25]), 4)
ENGINES = ["sqlite", "postgres"]


def _scores(store: Any, prompt: str, **kw: Any) -> dict[str, float]:
    return {e.key: round(e.score, 4) for e in store.recall(prompt, 10, **kw)}


def _write_event(store: Any, at: str = AT, **kw: Any) -> None:
    for key, content in EVENT:
        store.store(key, content, timestamp=at, **kw)


def _jsonl(rows: list[dict[str, Any]]) -> io.StringIO:
    return io.StringIO("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("engine", ENGINES)
class TestOneEvent:
    def test_the_rows_after_a_match_follow_it_at_half_and_a_quarter(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """Found only through the row before (half) or two before (a quarter), as in a session."""
        store = engine_store(engine)
        _write_event(store)
        assert {"e1": 1.0, "e2": HALF, "e3": QUARTER} == _scores(store, "LGBTQ support group")

    def test_rows_stamped_apart_stay_on_their_own_text(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """Unrelated facts stored one after another (each its own clock reading) are not
        recalled for each other's words, and a fact a second later is not in the event."""
        store = engine_store(engine)
        store.store("server", "The deploy server for production is prod-eu-3")
        store.store("colour", "The user's favourite colour is blue")
        store.store("late", "The user walks the dog at noon", timestamp="2023-05-08T13:56:01Z")
        store.store("first", "The deploy pipeline runs nightly", timestamp=AT)
        assert ["server"] == list(_scores(store, "which server is production on"))
        assert ["late"] == list(_scores(store, "dog walks at noon"))

    def test_category_profile_layer_and_session_bound_an_event(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """Another category, another profile, a PI record and a session row stamped the same
        moment are not in the event; none and blank profiles are one."""
        store = engine_store(engine)
        store.store("q", "Alice: which trail did you pick for the weekend?", timestamp=AT)
        store.store("cat", "Bob: the ridge loop", "daily", timestamp=AT)
        store.store("prof", "Bob: the ridge loop", profile_id="project:a", timestamp=AT)
        store.store("pi", "Bob: the ridge loop", layer="L2", confidence=0.9, timestamp=AT)
        store.store("sess", "Bob: the ridge loop", session_id="chat", timestamp=AT)
        store.store("blank", "Bob: the coast path", profile_id="", timestamp=AT)
        found = _scores(store, "which trail for the weekend")
        assert {"q": 1.0, "blank": HALF} == found

    def test_a_forgotten_row_is_no_ones_context(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """The row after a forgotten one takes the live rows before it."""
        store = engine_store(engine)
        store.store("e0", "Caroline: the LGBTQ group meets on Fridays.", timestamp=AT)
        store.store("gone", "Melanie: unrelated chatter", timestamp=AT)
        store.forget("gone")
        _write_event(store)
        found = _scores(store, "meets on Fridays")
        assert (1.0, HALF) == (found["e0"], found["e1"])
        assert "gone" not in found

    def test_an_update_gives_its_successors_the_new_text(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """Rewriting a row rewrites the context its successors took from it (issue 29,
        thirtieth round; until then they kept the old text, found by no row's own words)."""
        store = engine_store(engine)
        _write_event(store)
        store.store("e1", "Caroline: I went to the library yesterday.", timestamp=AT)
        assert {} == _scores(store, "LGBTQ support group")
        found = _scores(store, "library")
        assert (1.0, ["e1", "e2", "e3"]) == (found["e1"], list(found))

    def test_an_import_gets_the_context_single_writes_get(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """A file's event rows follow the event's rows already in the table, then each other."""
        single, bulk = engine_store(engine), engine_store(engine)
        single.store("e0", "Caroline: my LGBTQ group is on Friday.", timestamp=AT)
        _write_event(single)
        single.store("x", "Caroline: I love painting lakes.", timestamp=AT)
        bulk.store("e0", "Caroline: my LGBTQ group is on Friday.", timestamp=AT)
        lines = [{"key": k, "content": c, "category": "core", "timestamp": AT} for k, c in EVENT]
        lines.append({"key": "x", "content": "Caroline: I love painting lakes.", "timestamp": AT})
        assert 4 == bulk.import_jsonl(_jsonl(lines))
        for prompt in ("LGBTQ support group", "Friday", "how did it feel", "painting lakes"):
            assert _scores(single, prompt) == _scores(bulk, prompt), prompt
        assert {"e0": 1.0, "e1": HALF, "e2": QUARTER} == _scores(bulk, "Friday")


class TestEngineParity:
    def test_both_engines_score_an_event_alike(
        self, engine_store: Callable[[str], Any], tmp_path: Path
    ) -> None:
        """The same event written to both engines, and imported into PostgreSQL, scores alike."""
        sqlite, pg, imported = (engine_store(e) for e in ("sqlite", "postgres", "postgres"))
        for store in (sqlite, pg):
            store.store("before", "Melanie: the lake painting is done", timestamp=AT)
            _write_event(store)
            store.store("other", "Melanie: the lake at dawn", "daily", timestamp=AT)
        dump = tmp_path / "dump.jsonl"
        sqlite.export_jsonl(dump)
        imported.import_jsonl(dump)
        for prompt in ("lake painting", "LGBTQ support group", "how did it feel", "welcoming"):
            expected = _scores(sqlite, prompt)
            assert expected == pytest.approx(_scores(pg, prompt), abs=0.02), prompt
            assert expected == pytest.approx(_scores(imported, prompt), abs=0.02), prompt


class TestMigration:
    def test_a_version_7_file_gives_its_events_their_context(self, tmp_path: Path) -> None:
        """Opening the file fills the event rows' neighbours and re-indexes only them."""
        path = tmp_path / "old.db"
        conn = writable(path, isolation_level=None)
        try:
            schema.migrate(conn, target=7)
            rows = [MemoryRecord(key=k, content=c, timestamp=AT) for k, c in EVENT]
            rows.append(MemoryRecord(key="s1", content="Bob: the quarterly audit", session_id="c"))
            rows.append(MemoryRecord(key="s2", content="Alice: go on", session_id="c"))
            for rec in rows:
                full = schema.record_to_row(rec)
                marks = ", ".join("?" * len(full))
                conn.execute(
                    f"INSERT INTO memories ({', '.join(schema.COLUMNS)}) VALUES ({marks})", full
                )
            assert (None,) == conn.execute(
                "SELECT ctx_prev FROM memories WHERE key = 'e2'"
            ).fetchone()
        finally:
            conn.close()
        with SQLiteStore(path) as store:
            assert {"e1": 1.0, "e2": HALF, "e3": QUARTER} == _scores(store, "LGBTQ support group")
            assert {"s1": 1.0, "s2": HALF} == _scores(store, "quarterly audit")
            # The index holds each row once, with its new text: the old entry is gone.
            assert {"e3": 1.0} == _scores(store, "welcoming everyone")
            store.store("e4", "Melanie: I'm so glad!", timestamp=AT)
            assert QUARTER == _scores(store, "how did it feel")["e4"]
        with writable(path) as raw:
            raw.execute(
                "INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)"
            )
            assert schema.SCHEMA_VERSION == raw.execute("PRAGMA user_version").fetchone()[0]

    def test_a_schema_4_table_gives_its_events_their_context(
        self, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Opening the table fills the event rows' neighbours; new rows follow them."""
        with pgb.scratch_database(pg_dsn) as dsn:
            with monkeypatch.context() as m:
                pgb.old_schema(m, 4)
                with PostgresStore(dsn) as old:
                    _write_event(old)
                    old.store("gone", "Melanie: LGBTQ typo", timestamp=AT)
                    old.forget("gone")
                    old.store("e4", "Melanie: I'm so glad!", timestamp=AT)
            # What the library before schema 5 left: no neighbours outside sessions.
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("UPDATE memories SET ctx_prev = NULL, ctx_prev2 = NULL")
            with PostgresStore(dsn) as store:
                assert {"e1": 1.0, "e2": HALF, "e3": QUARTER} == _scores(
                    store, "LGBTQ support group"
                )
                assert QUARTER == _scores(store, "how did it feel")["e4"]
                store.store("e5", "Caroline: me too", timestamp=AT)
                assert QUARTER == _scores(store, "Powerful welcoming")["e5"]
