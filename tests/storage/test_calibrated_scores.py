"""Calibrated keyword scores across engines: a memory and prompt score the same on SQLite and PG."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memory_inject.contract import RecallQuery
from memory_inject.storage.calibration import ABSENT_WEIGHT, coverage, term_weight
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres import migrations as _pg_migrations
from memory_inject.storage.postgres.migrations import migrate
from memory_inject.storage.postgres.schema import COLUMNS, TableNames, record_params
from memory_inject.storage.records import MemoryRecord
from tests.storage import _pg_backend as pgb
from tests.storage._sqlite_backend import make_sqlite_store

#: How far the two engines' scores of one memory and prompt may differ.
TOLERANCE = 0.02

#: ``(key, content, session_id, timestamp)``
Memory = tuple[str, str, str | None, str | None]

FACTS: list[Memory] = [
    ("bob", "Bob likes to go hiking on weekends.", None, "2026-03-01T09:00:00Z"),
    (
        "deploy",
        "Deploys to production need two approvals from the platform team.",
        None,
        "2026-03-02T09:00:00Z",
    ),
    ("db", "The staging database runs PostgreSQL 16 on a single node.", None, None),
    ("cat", "Carol's cat is named Miso and hates the vacuum cleaner.", None, None),
    ("k8s", "Kubernetes cluster upgrades happen on the first Monday of the month.", None, None),
]
CHAT: list[Memory] = [
    ("c1", "Caroline: I went to a LGBTQ support group yesterday.", "chat", "2023-05-08T10:00:00Z"),
    ("c2", "Melanie: That's great! How did it feel?", "chat", "2023-05-08T10:01:00Z"),
    ("c3", "Caroline: It was powerful, I felt accepted.", "chat", "2023-05-08T10:02:00Z"),
    ("c4", "Melanie: I am painting a sunrise over the lake.", "chat", "2023-06-20T18:00:00Z"),
    ("c5", "Caroline: Lovely, send me a photo of the painting!", "chat", "2023-06-20T18:05:00Z"),
]
STORES: dict[str, list[Memory]] = {"facts": FACTS, "chat": CHAT, "both": FACTS + CHAT}
PROMPTS = [
    "where do production deploys go?",
    "which database does staging run",
    "what is the name of Carol's cat",
    "kuber* upgrades",
    "weekend hiking trip with Bob",
    "When did Caroline go to the support group?",
    "how did it feel being accepted",
    "What is Melanie painting? Send a photo",
    "what happened in May 2023",
    "hik",
    "hi",
    # Other spellings (``_variants``): "db" / "database", "k8s" / "kubernetes", "prod".
    "which db does staging run",
    "k8s upgrades",
    "prod deploys",
]

_dirs = itertools.count()


def _fill(store: Any, memories: list[Memory]) -> Any:
    for key, content, session, ts in memories:
        store.store(key, content, session_id=session, timestamp=ts)
    return store


def _scores(store: Any, prompt: str) -> dict[str, float]:
    return {e.key: round(e.score, 4) for e in store.recall(prompt, 10)}


@pytest.fixture
def engines(tmp_path: Path, pg_dsn: str) -> Iterator[Callable[[], tuple[Any, PostgresStore]]]:
    """``engines()`` opens an empty SQLite store and an empty PostgreSQL store."""
    made: list[Any] = []

    def factory() -> tuple[Any, PostgresStore]:
        pair = (
            make_sqlite_store(tmp_path / f"e{next(_dirs)}"),
            pgb.make_postgres_store(pg_dsn),
        )
        made.extend(pair)
        return pair

    yield factory
    for s in made:
        s.close()


class TestEngineParity:
    @pytest.mark.parametrize("name", sorted(STORES))
    def test_same_keyword_scores(
        self, engines: Callable[[], tuple[Any, PostgresStore]], name: str
    ) -> None:
        """For every prompt, both engines find the same memories with the same scores."""
        sqlite, pg = (_fill(s, STORES[name]) for s in engines())
        for prompt in PROMPTS:
            expected, actual = _scores(sqlite, prompt), _scores(pg, prompt)
            assert (prompt, sorted(expected)) == (prompt, sorted(actual))
            for key, score in expected.items():
                assert score == pytest.approx(actual[key], abs=TOLERANCE), (prompt, key)
            asked = RecallQuery(prompt, 10)
            assert sqlite.answer(asked).strategy == pg.answer(asked).strategy

    def test_a_short_row_comes_before_a_long_one_of_equal_score(
        self, engines: Callable[[], tuple[Any, PostgresStore]]
    ) -> None:
        """Both rows hold the one query word (score 1.0 each); the long one twice. SQLite's
        BM25 weighs a row's length down, and so does PostgreSQL's ts_rank (normalization
        1): the short row first on both, not the row that says the word more often."""
        filler = " ".join(f"word{i}" for i in range(150))
        # Hours apart: each stands alone (no near context).
        rows: list[Memory] = [
            ("long", f"The kayak trip {filler} and the kayak again.", None, "2026-01-01T09:00:00Z"),
            ("short", "Bought a kayak.", None, "2026-01-01T12:00:00Z"),
            ("other", "Planted tomatoes.", None, "2026-01-01T15:00:00Z"),
        ]
        for store in (_fill(s, rows) for s in engines()):
            got = store.recall("kayak", 10)
            assert [("short", 1.0), ("long", 1.0)] == [(e.key, e.score) for e in got]

    def test_context_counts_less(self, engines: Callable[[], tuple[Any, PostgresStore]]) -> None:
        """A term found only in the previous record counts half, two back a quarter."""
        sqlite, pg = (_fill(s, CHAT) for s in engines())
        for store in (sqlite, pg):
            expected = {"c1": 1.0, "c2": 0.5, "c3": 0.25}
            shares = {k: round(coverage([1.0], [v]), 4) for k, v in expected.items()}
            assert shares == _scores(store, "LGBTQ")

    def test_bulk_import_scores_like_single_writes(
        self, engines: Callable[[], tuple[Any, PostgresStore]], tmp_path: Path
    ) -> None:
        """Rows loaded by import_jsonl get the same context, so the same scores, as stored ones."""
        sqlite, pg = engines()
        _fill(sqlite, FACTS + CHAT)
        dump = tmp_path / "dump.jsonl"
        sqlite.export_jsonl(dump)
        pg.import_jsonl(dump)
        for prompt in PROMPTS:
            assert _scores(sqlite, prompt) == pytest.approx(_scores(pg, prompt), abs=TOLERANCE)


class TestStability:
    @pytest.mark.parametrize("engine", ["sqlite", "postgres"])
    def test_score_ignores_unrelated_memories(
        self, engines: Callable[[], tuple[Any, PostgresStore]], engine: str
    ) -> None:
        """Memories holding none of the prompt's words leave a memory's score as it was."""
        store = dict(zip(("sqlite", "postgres"), engines(), strict=True))[engine]
        # Hours apart: rows written alone within 30 minutes are each other's near context.
        store.store("bob", "Bob likes hiking on weekends.", timestamp="2026-01-01T09:00:00Z")
        store.store("ann", "Ann keeps bees in the garden.", timestamp="2026-01-01T12:00:00Z")
        prompt = "hiking weekends bees volcano"
        before = _scores(store, prompt)
        for i in range(40):
            store.store(f"noise{i}", f"Invoice {i} was paid by the accounting department.")
        assert before == _scores(store, prompt)
        # "volcano" is in no row: it weighs ABSENT_WEIGHT; "bees" is in Ann's row.
        half = coverage([1.0, 1.0, 1.0, ABSENT_WEIGHT], [1.0, 1.0, 0.0, 0.0])
        assert half == pytest.approx(before["bob"], abs=TOLERANCE)

    @pytest.mark.parametrize("engine", ["sqlite", "postgres"])
    def test_a_word_no_row_holds_weighs_more(
        self, engines: Callable[[], tuple[Any, PostgresStore]], engine: str
    ) -> None:
        """A prompt word the store never mentions lowers a hit more than one another row holds."""
        store = dict(zip(("sqlite", "postgres"), engines(), strict=True))[engine]
        store.store("bob", "Bob likes hiking on weekends.")
        store.store("ann", "Ann keeps bees in the garden.")
        held_elsewhere = _scores(store, "hiking bees")["bob"]
        never_held = _scores(store, "hiking volcano")["bob"]
        assert held_elsewhere == pytest.approx(coverage([1.0, 1.0], [1.0, 0.0]), abs=TOLERANCE)
        assert never_held == pytest.approx(
            coverage([1.0, ABSENT_WEIGHT], [1.0, 0.0]), abs=TOLERANCE
        )
        assert never_held < held_elsewhere

    def test_a_share_at_the_floor_is_the_floor(self) -> None:
        """A word one row holds beside a word no row holds is a share of exactly 0.4 at
        every store size, not 0.39999999999999997 at some (the float sum of the weights)."""
        for rows in range(1, 3000):
            weights = [term_weight(rows, 1), term_weight(rows, 0)]
            assert coverage(weights, [1.0, 0.0]) == 0.4, rows

    @pytest.mark.parametrize("engine", ["sqlite", "postgres"])
    def test_a_hit_at_the_floor_passes_it_whatever_the_store_size(
        self, engines: Callable[[], tuple[Any, PostgresStore]], engine: str
    ) -> None:
        """The default floor (0.4) keeps a hit scoring it at every store size: "is my car
        blue?" against one row about the car must not flip with unrelated rows' count."""
        store = dict(zip(("sqlite", "postgres"), engines(), strict=True))[engine]
        store.store("bob", "Bob likes hiking.", timestamp="2026-01-01T00:00:00Z")
        for rows in range(1, 20):
            hits = {e.key: e.score for e in store.recall("hiking volcano", 10)}
            assert hits["bob"] >= 0.4, rows
            store.store(f"n{rows}", f"Invoice {rows} was paid.", timestamp=f"2026-02-{rows:02d}")

    @pytest.mark.parametrize("engine", ["sqlite", "postgres"])
    def test_top_hit_is_not_one(
        self, engines: Callable[[], tuple[Any, PostgresStore]], engine: str
    ) -> None:
        """A lone weak hit keeps its weak score instead of becoming the batch's 1.0."""
        store = dict(zip(("sqlite", "postgres"), engines(), strict=True))[engine]
        store.store("bob", "Bob likes to go hiking on weekends.")
        [hit] = store.recall("where do production deploys go?", 5)
        assert hit.score < 0.4


def _v1_table(dsn: str, records: list[MemoryRecord], monkeypatch: pytest.MonkeyPatch) -> None:
    """A table at schema 1 (the previous release), holding ``records`` written as it did."""
    with monkeypatch.context() as m:
        m.setattr(_pg_migrations, "MIGRATIONS", _pg_migrations.MIGRATIONS[:1])
        with psycopg.connect(dsn) as conn:
            migrate(conn, TableNames("memories"))
            cols = ", ".join(f'"{c}"' for c in COLUMNS)
            marks = ", ".join(["%s"] * len(COLUMNS))
            for rec in records:
                conn.execute(
                    f"INSERT INTO memories ({cols}) VALUES ({marks})",
                    record_params(rec),
                )


class TestMigration:
    def test_from_schema_1(
        self, pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Opening a schema-1 table adds and back-fills the context; recall then scores as new."""
        made = [
            MemoryRecord(key=k, content=c, category="core", session_id=s, timestamp=str(t))
            for k, c, s, t in CHAT
        ]
        # A forgotten row is never anyone's context.
        made[1] = made[1].evolve(deleted_at=made[1].timestamp)
        with pgb.scratch_database(pg_dsn) as dsn:
            _v1_table(dsn, made, monkeypatch)
            with PostgresStore(dsn) as store:
                migrated = {p: _scores(store, p) for p in PROMPTS}
                store.store(
                    "c6",
                    "Melanie: Here it is, the lake at dawn.",
                    session_id="chat",
                    timestamp="2023-06-20T18:07:00Z",
                )
                with psycopg.connect(dsn) as conn:
                    versions = conn.execute(
                        "SELECT version FROM memories_schema_version ORDER BY 1"
                    ).fetchall()
                    ctx = conn.execute(
                        'SELECT "key", ctx_prev, ctx_prev2, ctx_day FROM memories ORDER BY rid'
                    ).fetchall()
        assert [(v,) for v, _, _ in _pg_migrations.MIGRATIONS] == versions
        assert ("c3", CHAT[0][1], None, "8 May 2023") == ctx[2]
        # Six weeks after c3: the session's earlier turns are not its context.
        assert ("c4", None, None, "20 June 2023") == ctx[3]
        assert ("c5", CHAT[3][1], None) == ctx[4][:3]
        assert ("c6", CHAT[4][1], CHAT[3][1]) == ctx[5][:3]
        fresh = make_sqlite_store(tmp_path)
        try:
            for rec in made:
                fresh.upsert(rec)
            for prompt, scores in migrated.items():
                assert _scores(fresh, prompt) == pytest.approx(scores, abs=TOLERANCE), prompt
        finally:
            fresh.close()
