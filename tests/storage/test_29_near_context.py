"""Sessionless rows written alone take their near neighbours as context (issue 29; SQLite
schema 9, PostgreSQL 6).

A sessionless, non-PI row with no event (no earlier row of its namespace,
category and profile stamped with its very timestamp) indexes, at the same low
weights as a session's turn, the two live rows written just before it in the
30 minutes before its timestamp (``ctx_near``). They reorder its matches, but
such a row is recalled only for its own words: a neighbour's words never bring
it in, so unrelated facts stored a second apart are not recalled for each other.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres import schema as pg_schema
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite.keyword_mirror import AFTER_RECALLS
from tests.storage import _pg_backend as pgb
from tests.storage import _sqlite_schema as schema
from tests.storage._sqlite_backend import writable
from tests.storage.test_29_event_context import _jsonl, _scores

ENGINES = ["sqlite", "postgres"]
#: A chat's turns written one by one, a second apart, with no session.
TURNS = [
    ("t1", "Caroline: I went to the LGBTQ support group yesterday.", "2023-05-08T13:56:00Z"),
    ("t2", "Melanie: That sounds wonderful, how did it feel?", "2023-05-08T13:56:01Z"),
    ("t3", "Caroline: Powerful. Everyone was so welcoming.", "2023-05-08T13:56:02Z"),
]
#: The same turns, hours apart: no neighbours.
APART = [(k, c, f"2023-05-08T{10 + i:02d}:00:00Z") for i, (k, c, _) in enumerate(TURNS)]


def _write(store: Any, rows: list[tuple[str, str, str]], **kw: Any) -> None:
    for key, content, at in rows:
        store.store(key, content, timestamp=at, **kw)


@pytest.mark.parametrize("engine", ENGINES)
class TestNearContext:
    def test_a_neighbours_words_lift_a_row_that_matches_on_its_own(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """ "feel" is t2's own word; "LGBTQ support group", said a second before, lifts it
        over the same row written hours apart."""
        near, far = engine_store(engine), engine_store(engine)
        _write(near, TURNS)
        _write(far, APART)
        prompt = "how did the LGBTQ support group feel"
        assert _scores(near, prompt)["t2"] > _scores(far, prompt)["t2"]
        assert _scores(near, prompt)["t1"] == _scores(far, prompt)["t1"]

    def test_a_neighbours_words_alone_never_bring_a_row_in(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """t2 and t3 hold none of the prompt's words: only t1 comes back (in a session or an
        event, t2 and t3 would follow it at half and a quarter)."""
        store = engine_store(engine)
        _write(store, TURNS)
        assert ["t1"] == list(_scores(store, "LGBTQ support group"))
        store.store("fact", "The deploy server for production is prod-eu-3")
        store.store("colour", "The user's favourite colour is blue")
        assert ["fact"] == list(_scores(store, "which server is production on"))
        assert ["colour"] == list(_scores(store, "favourite colour"))

    def test_a_time_bound_recall_keeps_the_same_rule(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """``since``/``until`` rank the scope's own rows first (SQLite checks each row there,
        a whole ranked window at once otherwise): the same rows, the same scores."""
        store = engine_store(engine)
        _write(store, TURNS)
        bound = {"since": "2023-05-08T00:00:00Z", "until": "2023-05-09T00:00:00Z"}
        for prompt in ("LGBTQ support group", "how did the LGBTQ group feel", "welcoming"):
            assert _scores(store, prompt, **bound) == _scores(store, prompt), prompt
        assert ["t1"] == list(_scores(store, "LGBTQ support group", **bound))

    def test_thirty_minutes_category_profile_layer_and_session_bound_it(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """Rows more than 30 minutes before, of another category or profile, PI records and
        session rows are no row's near context."""
        store = engine_store(engine)
        store.store("old", "Bob: the LGBTQ ridge loop", timestamp="2023-05-08T13:25:59Z")
        store.store("cat", "Bob: the LGBTQ ridge loop", "daily", timestamp="2023-05-08T13:55:00Z")
        store.store("prof", "Bob: LGBTQ", profile_id="project:a", timestamp="2023-05-08T13:55:01Z")
        store.store(
            "pi", "Bob: LGBTQ", layer="L2", confidence=0.9, timestamp="2023-05-08T13:55:02Z"
        )
        store.store("sess", "Bob: LGBTQ", session_id="chat", timestamp="2023-05-08T13:55:03Z")
        store.store("q", "Alice: how did it feel?", timestamp="2023-05-08T13:56:00Z")
        store.store("in", "Bob: LGBTQ", timestamp="2023-05-08T13:26:01Z")  # written after q
        # The same text a day later, with nothing before it: no context either.
        store.store("alone", "Alice: how did it feel?", timestamp="2023-05-09T13:56:00Z")
        scores = _scores(store, "LGBTQ feel")
        assert scores["q"] == scores["alone"]
        # A positive control: the same text a second after "in".
        store.store("near", "Alice: how did it feel?", timestamp="2023-05-08T13:26:02Z")
        scores = _scores(store, "LGBTQ feel")
        assert scores["near"] > scores["q"] == scores["alone"]

    def test_an_event_keeps_its_own_context(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """Rows of one timestamp are an event: found through each other as before."""
        store = engine_store(engine)
        at = "2023-05-08T13:56:00Z"
        _write(store, [(k, c, at) for k, c, _ in TURNS])
        assert ["t1", "t2", "t3"] == list(_scores(store, "LGBTQ support group"))

    def test_the_keyword_paths_agree(self, engine_store: Callable[[str], Any], engine: str) -> None:
        """The first recalls (FTS5 on SQLite) and the later ones (its in-process mirror)
        return the same rows with the same scores."""
        store = engine_store(engine)
        _write(store, TURNS)
        _write(
            store,
            [(f"x{i}", f"Melanie: painting lakes {i}", "2023-05-08T13:57:00Z") for i in range(3)],
        )
        prompts = ("how did the LGBTQ group feel", "welcoming painting", "lakes support")
        first = [_scores(store, p) for p in prompts]
        for _ in range(AFTER_RECALLS + 1):
            later = [_scores(store, p) for p in prompts]
        assert first == later
        assert ["t1", "t2"] == sorted(first[0])

    def test_refused_rows_ranked_first_give_way_to_the_next_matches(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """Twelve short rows that hold "LGBTQ" only as context outrank fifteen long rows that
        hold it once: a recall of ten returns the six heads and four long rows, the same on
        every path."""
        store = engine_store(engine)
        for day in range(6):
            at = f"2023-05-{day + 1:02d}T10:00:0"
            store.store(f"head{day}", "Bob: LGBTQ LGBTQ LGBTQ", timestamp=at + "0Z")
            store.store(f"n{day}a", "Ann: sounds nice", timestamp=at + "1Z")
            store.store(f"n{day}b", "Ann: sounds nice", timestamp=at + "2Z")
        filler = " ".join(f"word{i}" for i in range(60))
        for day in range(15):
            at = f"2023-06-{day + 1:02d}T10:00:00Z"
            store.store(f"long{day}", f"Cy: LGBTQ {filler}", timestamp=at)
        for day in range(30):  # "LGBTQ" in under half the rows: BM25 does not floor it
            store.store(f"other{day}", "Dee: a walk", timestamp=f"2023-07-{day + 1:02d}T10:00:00Z")
        first = _scores(store, "LGBTQ")
        for _ in range(AFTER_RECALLS + 1):
            later = _scores(store, "LGBTQ")
        assert first == later
        assert 10 == len(first)
        assert [6, 4] == [sum(k.startswith(w) for k in first) for w in ("head", "long")], first

    def test_an_import_gets_the_context_single_writes_get(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """A file's rows written alone follow the table's rows and each other, as single
        writes do."""
        single, bulk = engine_store(engine), engine_store(engine)
        first = ("t0", "Caroline: my LGBTQ group is on Friday.", "2023-05-08T13:55:00Z")
        _write(single, [first, *TURNS])
        _write(bulk, [first])
        lines = [{"key": k, "content": c, "timestamp": at} for k, c, at in TURNS]
        assert 3 == bulk.import_jsonl(_jsonl(lines))
        for prompt in ("how did the LGBTQ group feel", "Friday feel", "welcoming group"):
            assert _scores(single, prompt) == _scores(bulk, prompt), prompt


class TestEngineParity:
    def test_both_engines_rank_near_rows_alike(
        self, engine_store: Callable[[str], Any], tmp_path: Path
    ) -> None:
        """The same rows written to both engines, and imported into PostgreSQL, score alike."""
        sqlite, pg, imported = (engine_store(e) for e in ("sqlite", "postgres", "postgres"))
        for store in (sqlite, pg):
            _write(store, TURNS)
        dump = tmp_path / "dump.jsonl"
        sqlite.export_jsonl(dump)
        imported.import_jsonl(dump)
        for prompt in ("how did the LGBTQ group feel", "support group", "welcoming feel"):
            expected = _scores(sqlite, prompt)
            assert list(expected) == list(_scores(pg, prompt)), prompt
            assert expected == pytest.approx(_scores(pg, prompt), abs=0.02), prompt
            assert expected == pytest.approx(_scores(imported, prompt), abs=0.02), prompt


class TestMigration:
    def test_a_version_8_file_gives_its_rows_near_context(self, tmp_path: Path) -> None:
        """Opening the file fills the near rows' neighbours and re-indexes only them."""
        path = tmp_path / "old.db"
        conn = writable(path, isolation_level=None)
        try:
            schema.migrate(conn, target=8)
            rows = [MemoryRecord(key=k, content=c, timestamp=at) for k, c, at in TURNS]
            for rec in rows:
                full = schema.record_to_row(rec)
                marks = ", ".join("?" * len(full))
                conn.execute(
                    f"INSERT INTO memories ({', '.join(schema.COLUMNS)}) VALUES ({marks})", full
                )
        finally:
            conn.close()
        prompt = "how did the LGBTQ support group feel"
        with SQLiteStore(path) as store, SQLiteStore(tmp_path / "new.db") as new:
            _write(new, TURNS)
            assert _scores(new, prompt) == _scores(store, prompt)
            assert ["t1"] == list(_scores(store, "LGBTQ support group"))
        with writable(path) as raw:
            raw.execute(
                "INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)"
            )
            assert schema.SCHEMA_VERSION == raw.execute("PRAGMA user_version").fetchone()[0]
            near = raw.execute("SELECT key FROM memories WHERE ctx_near ORDER BY key").fetchall()
            assert [("t2",), ("t3",)] == near

    def test_a_schema_5_table_gives_its_rows_near_context(self, pg_dsn: str) -> None:
        """Opening the table fills the near rows' neighbours; new rows follow them."""
        prompt = "how did the LGBTQ support group feel"
        with pgb.scratch_database(pg_dsn) as dsn:
            with PostgresStore(dsn) as new:
                _write(new, TURNS)
                expected = _scores(new, prompt)
                versions = pg_schema.TableNames("memories").versions
            # What the library before schema 6 left: no ctx_near, no neighbours, no guard.
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("DROP TRIGGER memory_inject_writer_1 ON memories")
                conn.execute("UPDATE memories SET ctx_prev = NULL, ctx_prev2 = NULL")
                conn.execute("ALTER TABLE memories DROP COLUMN ctx_near")
                conn.execute(sql.SQL("DELETE FROM {} WHERE version >= 6").format(versions))
            with PostgresStore(dsn) as store:
                assert expected == _scores(store, prompt)
                assert ["t1"] == list(_scores(store, "LGBTQ support group"))
                store.store("t4", "Melanie: so glad", timestamp="2023-05-08T13:56:03Z")
                assert "t4" in _scores(store, "glad welcoming")
