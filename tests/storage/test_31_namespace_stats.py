"""A namespace's keyword scores count its own rows only (issue 29, thirty-first round).

The calibrated keyword score weighs each query word by how many rows hold it
(``calibration.term_weight``), a word no row holds 1.5 times more. Counted over
the whole file or table, another namespace's rows moved a namespace's scores
across the 0.4 floor: tenant A asked "which kubernetes cluster runs production
deploys?" against its one row "Production deploys go to prod-3." and scored
0.31; after tenant B stored 50 notes about its kubernetes cluster, A's entry
scored 0.49, a block, and A learned that some namespace holds "kubernetes". Now
on a file (table) of several namespaces the weights count the namespace's own
live rows, on SQLite's FTS5 path and in-process mirror and on PostgreSQL.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from memory_inject.contract import RecallQuery
from memory_inject.storage.fusion import Fusion
from memory_inject.storage.postgres.terms import TermStats as PgTermStats
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite.keyword_mirror import KeywordMirror
from memory_inject.storage.sqlite.keyword_terms import tokens_of
from memory_inject.storage.sqlite.term_stats import TermStats
from tests.storage import _pg_backend as pgb
from tests.storage._sqlite_backend import on_file, writable

PROMPT = "which kubernetes cluster runs production deploys?"
A_ROW = ("deploys", "Production deploys go to prod-3.")
ALONE = 0.3077  # A's score with no other namespace in the file: under the floor


def _sqlite(path: Path, namespace: str, *, mirror: bool) -> SQLiteStore:
    """A keyword-only store answering from the mirror at once, or always from FTS5."""
    store = SQLiteStore(path, fusion=Fusion(), namespace=namespace)
    store._engine._mirror = KeywordMirror(after=1) if mirror else None
    return store


def _scores(store: Any, prompt: str = PROMPT) -> dict[str, float]:
    return {e.key: round(e.score, 4) for e in store.recall(prompt, 10)}


def _tenant_b_writes(store: Any, start: int, n: int) -> None:
    for i in range(start, start + n):
        store.store(f"k8s-{i}", f"Note {i}: the kubernetes cluster was resized.")


@pytest.mark.parametrize("path", ["fts5", "mirror"])
def test_another_namespace_does_not_move_a_score_across_the_floor(
    tmp_path: Path, path: str
) -> None:
    """The docs' repro: tenant B's notes leave tenant A's score where it was, through
    new rows (the cached counts' tail), a rewrite and a forget of B's older rows."""
    db = tmp_path / "m.db"
    a = _sqlite(db, "tenant-a", mirror=path == "mirror")
    b = _sqlite(db, "tenant-b", mirror=path == "mirror")
    a.store(*A_ROW)
    assert _scores(a) == {"deploys": ALONE}
    _tenant_b_writes(b, 0, 50)
    assert _scores(a) == {"deploys": ALONE}
    _tenant_b_writes(b, 50, 5)  # rows after the cached counts' base
    assert _scores(a) == {"deploys": ALONE}
    b.store("k8s-3", "production deploys kubernetes cluster runs which")  # an older row
    b.forget("k8s-4")
    assert _scores(a) == {"deploys": ALONE}
    # B's own scores are B's: its one row naming every word scores 1.
    assert _scores(b)["k8s-3"] == 1.0
    if path == "mirror":
        assert a._engine._mirror is not None and a._engine._mirror.builds >= 1
    a.close()
    b.close()


def _content(rng: random.Random, words: list[str]) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(2, 7)))


_WORDS = (
    "apple pie banana crumble agreed tart zest kubernetes cluster deploys 7 2023 "
    "production prod office wifi password may"
).split()
_PROMPTS = [
    "apple tart with zest",
    "which kubernetes cluster runs production deploys?",
    "the office wifi password from may 7",
    "we agreed on banana crumble in 2023",
    "zebra apple",
    "what happened on the 7th?",
]


def _analyze(*stores: Any) -> None:
    """``ANALYZE`` each PostgreSQL store's table, as autovacuum may at any moment."""
    import psycopg

    for store in stores:
        with psycopg.connect(store.database.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("ANALYZE {}").format(store._engine.q.names.ident()))


@pytest.mark.parametrize("engine", ["fts5", "mirror", "postgres", "postgres-budget"])
def test_a_namespace_scores_as_it_would_alone_in_its_file(
    tenants: Callable[[str], Any], engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Random rows of three namespaces in one file (table): every score of namespace ``a``
    equals its score in a file (table) holding ``a``'s rows alone, written the same way.

    On PostgreSQL both tables are ANALYZEd before each comparison: the shared table's
    statistics count every namespace, and once they existed the keyword stage selected
    ``a``'s candidates by them (round 33: CI saw it when autovacuum ran mid-test).
    ``postgres-budget`` ranks at most 20 rows, so ``a``'s recall selects its candidates
    by its own rows' counts."""
    rng = random.Random(31)
    shared = {ns: tenants(ns) for ns in "abc"}
    if engine.startswith("postgres"):
        alone: Any = pgb.make_postgres_store(
            request.getfixturevalue("pg_dsn"), namespace="a", **_pg_options(engine)
        )
    else:
        alone = _sqlite(tmp_path / "alone.db", "a", mirror=engine == "mirror")
    stamp = "2023-05-0{}T10:00:00+00:00"
    for i in range(90):
        ns = rng.choice("abc")
        text, ts = _content(rng, _WORDS), stamp.format(rng.randint(1, 9))
        key = rng.randrange(40)
        session = [None, "s1", "s2"][key % 3]  # a key stays in its session
        for store in [shared[ns], *([alone] if ns == "a" else [])]:
            store.store(f"k{key}", text, timestamp=ts, session_id=session)
        if i % 17 == 16:
            gone = f"k{rng.randrange(40)}"
            for store in [shared[ns], *([alone] if ns == "a" else [])]:
                store.forget(gone)
        if i % 10 == 9:
            if engine.startswith("postgres"):
                _analyze(shared["a"], alone)
            for prompt in _PROMPTS:
                assert _scores(shared["a"], prompt) == _scores(alone, prompt), (i, prompt)
    alone.close()


def test_the_namespace_counts_match_a_fresh_count(tmp_path: Path) -> None:
    """:meth:`TermStats.namespace_counts` against a count of the namespace's rows read
    afresh, in the same snapshot, through new rows, rewrites, forgets and another
    connection's delete; None on a file of one namespace."""
    db = tmp_path / "m.db"
    a, b = _sqlite(db, "a", mirror=False), _sqlite(db, "b", mirror=False)
    conn = writable(db, isolation_level=None)
    conn.execute("CREATE VIRTUAL TABLE temp.inst USING fts5vocab(main, memories_fts, instance)")
    stats = TermStats()
    tokens = sorted({t for w in ("apple", "agreed", "agre", "zest", "tart") for t in tokens_of(w)})

    def counts(namespace: str) -> tuple[Any, tuple[int, dict[str, int]]]:
        conn.execute("BEGIN")
        try:
            stats.refresh(conn)
            stats.document_frequencies(conn, tokens)
            got = stats.namespace_counts(conn, namespace, tokens)
            rows = conn.execute(
                "SELECT count(*) FROM memories WHERE namespace = ? AND deleted_at IS NULL",
                (namespace,),
            ).fetchone()[0]
            df = {
                t: conn.execute(
                    "SELECT count(DISTINCT i.doc) FROM temp.inst AS i JOIN memories AS m "
                    "ON m.rid = i.doc WHERE i.term = ? AND m.namespace = ?",
                    (t, namespace),
                ).fetchone()[0]
                for t in tokens
            }
            return got, (rows, df)
        finally:
            conn.execute("COMMIT")

    for i in range(6):
        a.store(f"a{i}", "apple tart we agreed" if i % 2 else "agre zest")
    assert counts("a")[0] is None  # one namespace: the file's counts are its own
    b.store("b0", "apple pie")
    rng = random.Random(7)
    words = ["apple", "tart", "agreed", "agre", "zest", "pie"]
    for step in range(40):
        store, name = (a, "a") if rng.random() < 0.5 else (b, "b")
        store.store(f"{name}{rng.randrange(12)}", _content(rng, words))
        if step % 9 == 8:
            store.forget(f"{name}{rng.randrange(12)}")
        if step == 20:
            on_file(db, "DELETE FROM memories WHERE rid = (SELECT min(rid) FROM memories)")
        for ns in ("a", "b"):
            got, fresh = counts(ns)
            assert got == fresh, (step, ns)
    conn.close()
    a.close()
    b.close()


def _pg_options(engine: str) -> dict[str, Any]:
    return {"rank_budget": 20} if engine == "postgres-budget" else {}


@pytest.fixture
def tenants(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[str], Any]]:
    """``store(namespace)``: stores of one file (SQLite: ``fts5`` or ``mirror`` path) or
    one table (``postgres``), one per namespace."""
    made: list[Any] = []

    def store(namespace: str) -> Any:
        if engine.startswith("postgres"):
            first = made[0] if made else None
            dsn = request.getfixturevalue("pg_dsn")
            made.append(
                pgb.make_postgres_store(
                    dsn, same_database_as=first, namespace=namespace, **_pg_options(engine)
                )
            )
        else:
            made.append(_sqlite(tmp_path / "m.db", namespace, mirror=engine == "mirror"))
        return made[-1]

    yield store
    for s in reversed(made):
        s.close()


@pytest.mark.parametrize("engine", ["postgres"])
def test_postgres_another_namespace_does_not_move_a_score(
    tenants: Callable[[str], Any],
) -> None:
    """The docs' repro on PostgreSQL: the document frequencies and the row count are
    the namespace's own."""
    a, b = tenants("tenant-a"), tenants("tenant-b")
    a.store(*A_ROW)
    before = _scores(a)
    assert before == {"deploys": ALONE}
    _tenant_b_writes(b, 0, 50)
    assert _scores(a) == before
    b.store("k8s-1", "production deploys kubernetes cluster runs which")
    b.forget("k8s-2")
    assert _scores(a) == before
    assert _scores(b)["k8s-1"] == 1.0


@pytest.mark.parametrize("engine", ["fts5", "mirror", "postgres"])
def test_the_day_words_rule_looks_at_the_namespace_rows(tenants: Callable[[str], Any]) -> None:
    """A number of the prompt that the namespace's rows hold only in their day words is
    left out of the query of a row that does not hold it (``calibration.dated_coverage``),
    whatever another namespace's text holds: "7" in B's "gate 7" no longer weighs
    against A's dentist."""
    a, b = tenants("tenant-a"), tenants("tenant-b")
    a.store("dentist", "My dentist is Dr. Lee", timestamp="2023-05-08T10:00:00+00:00")
    a.store("milk", "Bought oat milk", timestamp="2023-05-07T10:00:00+00:00")
    prompt = "who is my dentist? 7"
    before = _scores(a, prompt)
    assert before["dentist"] == 1.0
    for i in range(5):
        b.store(f"gate{i}", f"Boarding at gate 7, flight {i}", timestamp="2023-05-09T10:00:00Z")
    assert _scores(a, prompt) == before


def test_another_namespace_does_not_choose_a_namespaces_candidates(pg_dsn: str) -> None:
    """Past its ranking budget, a namespace's keyword candidates are picked by its own
    rarest words: in ``a`` "zest" is rare (3 rows) and "apple" common (60), so "apple zest"
    ranks the zest rows. Before round 33 the pick read ANALYZE's counts of the whole table,
    where namespace ``b``'s 300 zest notes made "zest" the common word: ``a``'s recall
    ranked its apple rows only and its three zest rows were never seen."""
    a = pgb.make_postgres_store(pg_dsn, namespace="a", rank_budget=20)
    b = pgb.make_postgres_store(pg_dsn, same_database_as=a, namespace="b", rank_budget=20)
    try:
        for i in range(60):
            a.store(f"apple-{i}", f"apple note {i}")
        for i in range(3):
            a.store(f"zest-{i}", f"zest tip {i}")
        for i in range(300):
            b.store(f"b-{i}", f"zest note {i}")
        for analyzed in (False, True):
            if analyzed:
                _analyze(a)
                a.store("later", "a later row")  # a write: the statistics are read again
            got = [e.key for e in a.recall("apple zest", 5)]
            assert sorted(got[:3]) == ["zest-0", "zest-1", "zest-2"], (analyzed, got)
    finally:
        b.close()
        a.close()


def _both(pg_dsn: str) -> tuple[Any, Any]:
    """A default store and one ranking every match (``rank_budget=None``) on one table."""
    store = pgb.make_postgres_store(pg_dsn, namespace="a")
    every = pgb.make_postgres_store(pg_dsn, same_database_as=store, namespace="a", rank_budget=None)
    return store, every


def _top(store: Any, prompt: str, limit: int = 5, **kw: Any) -> list[tuple[str, float]]:
    store._engine._terms = None  # the statistics read afresh
    return [(e.key, round(e.score, 6)) for e in store.recall(prompt, limit, **kw)]


def test_a_word_no_row_holds_does_not_take_the_rarest_slot(pg_dsn: str) -> None:
    """The library also looks up "gpus" for "gpu" (and "k8s" for "kubernetes"): a
    spelling no row holds counted 0 rows, sorted first and was the one lexeme kept, so a
    prompt whose real word is common got no candidates ([] or the LIKE fallback's flat
    0.3 scores, round 33's attack)."""
    store, every = _both(pg_dsn)
    try:
        for i in range(60):
            store.store(f"g{i}", f"the gpu {i} is busy")
        for i in range(40):
            store.store(f"o{i}", f"other note {i}")
        for prompt in ("gpu", "gpu busy", "busy zebra", "kubernetes gpu"):
            got = _top(store, prompt)
            assert got == _top(every, prompt), prompt
            assert got and got[0][0].startswith("g"), (prompt, got)
    finally:
        every.close()
        store.close()


def test_the_selection_counts_the_rows_the_recall_may_return(pg_dsn: str) -> None:
    """Expired rows, superseded rows and another session's rows are never candidates, so
    they no longer make a word "common" and leave the recall's own rows unranked."""
    from datetime import datetime, timedelta

    store, every = _both(pg_dsn)
    try:
        past = datetime.now(UTC) - timedelta(days=1)
        for i in range(60):
            store.store(f"exp{i}", f"deploy note {i}", expires_at=past)
        store.store("live1", "deploy to staging")
        store.store("live3", "production outage")
        got = _top(store, "deploy production")
        assert {"live1", "live3"} <= {k for k, _ in got}
        assert got == _top(every, "deploy production")
        for i in range(60):
            store.store(f"other{i}", f"deploy log {i}", session_id="s2")
        store.store("rare", "kubernetes upgrade", session_id="s2")
        for i in range(5):
            store.store(f"mine{i}", f"deploy step {i}", session_id="s1")
        mine = _top(store, "kubernetes deploy", session_id="s1")
        assert mine == _top(every, "kubernetes deploy", session_id="s1")
        assert {k for k, _ in mine} >= {"mine0", "mine1", "mine2"}
    finally:
        every.close()
        store.close()


def test_statistics_read_before_a_write_of_the_store_are_not_kept(pg_dsn: str) -> None:
    """A recall that read the row count while the store forgot or wrote rows must not
    cache it: forgets did not even drop the cached count, and a concurrent writer's
    change was overwritten by the recall's older reading (for up to a minute)."""
    store = pgb.make_postgres_store(pg_dsn, namespace="a")
    try:
        for i in range(40):
            store.store(f"j{i}", f"junk {i}")
        store.recall("junk", 5)
        assert store._engine._terms is not None and store._engine._terms[1].table_rows == 40
        store.forget("j0")
        assert store._engine._terms is None  # a forget drops the cached count
        run = store._engine._run_of(RecallQuery("junk", 5))
        assert run is not None
        run.terms, run.terms_read = PgTermStats.build([], [], 40.0, 2000, counted=40), True
        store.store("late", "a row written while the recall ran")
        store._engine._keep_terms(run)
        assert store._engine._terms is None
    finally:
        store.close()


def test_on_a_big_table_a_word_no_row_holds_does_not_take_the_rarest_slot(pg_dsn: str) -> None:
    """Above 10,000 rows the selection reads ANALYZE's common lexemes, and one it does
    not list counted 0 rows: "gpus", which no row holds, was kept as the rarest and
    "gpu", common, was not, so "gpu" found nothing. The statistics of a big table are
    put in place of the small one's (writing 10,000 rows would take the test a minute)."""
    store = pgb.make_postgres_store(pg_dsn, namespace="a")
    try:
        for i in range(60):
            store.store(f"g{i}", f"the gpu {i} is busy")
        for i in range(40):
            store.store(f"o{i}", f"other note {i}")
        big = PgTermStats.build(["gpu"], [6000.0], 20_000.0, 2000)
        assert not big.exact and big.lexemes == ("gpu",)
        store._engine._terms = (time.monotonic() + 600.0, big)
        got = [e.key for e in store.recall("gpu", 5)]
        assert len(got) == 5 and all(k.startswith("g") for k in got), got
    finally:
        store.close()


def _import(store: Any, rows: list[tuple[str, str]]) -> None:
    """``rows`` (key, content) written through the store's JSONL import (fast)."""
    import io
    import json

    lines = "".join(
        json.dumps(
            {"key": k, "content": c, "category": "core", "timestamp": "2023-05-01T10:00:00Z"}
        )
        + "\n"
        for k, c in rows
    )
    assert store.import_jsonl(io.StringIO(lines)) == len(rows)


def test_a_word_in_more_than_a_thousand_rows_counts_the_namespace_only(
    pg_dsn: str, tmp_path: Path
) -> None:
    """A word's rows were counted up to 1,000, and a count at the cap took ANALYZE's
    estimate of the whole table: namespace ``a``'s 1,100 "apple" rows weighed by ``b``'s
    4,000 once autovacuum had run (round 33's attack: a score 0.7371 -> 0.7398), and
    before it weighed as 1,000 rows where SQLite counts 1,103. On a small table a word's
    rows are now counted in the namespace, however many."""
    a = pgb.make_postgres_store(pg_dsn, namespace="a", rank_budget=None)
    b = pgb.make_postgres_store(pg_dsn, same_database_as=a, namespace="b", rank_budget=None)
    alone = pgb.make_postgres_store(pg_dsn, namespace="a", rank_budget=None)
    try:
        mine = [(f"apple-{i}", f"apple note {i}") for i in range(1100)]
        mine += [(f"pie-{i}", f"apple pie recipe {i}") for i in range(3)]
        mine += [(f"o-{i}", f"other note {i}") for i in range(1900)]  # "apple" weighs > 1
        for store in (a, alone):
            _import(store, mine)
        _import(b, [(f"b-{i}", f"apple crate {i}") for i in range(4000)])
        prompt = "apple pie for the fair"
        expected = _top(alone, prompt)
        assert [k for k, _ in expected[:3]] == ["pie-0", "pie-1", "pie-2"], expected
        assert _top(a, prompt) == expected
        _analyze(a, alone)
        assert _top(alone, prompt) == expected
        assert _top(a, prompt) == expected
        # The weights are SQLite's, whose FTS5 counts every row holding a word.
        sqlite = SQLiteStore(tmp_path / "m.db", fusion=Fusion())
        try:
            _import(sqlite, mine)
            want = [(e.key, round(e.score or 0.0, 6)) for e in sqlite.recall(prompt, 5)]
        finally:
            sqlite.close()
        assert [k for k, _ in sorted(want[:3])] == ["pie-0", "pie-1", "pie-2"], want
        assert [s for _, s in sorted(want[:3])] == pytest.approx(
            [s for _, s in expected[:3]], abs=1e-4
        )
    finally:
        for store in (alone, b, a):
            store.close()
