"""A number of the prompt found only in a row's day words says nothing of the row.

Every SQLite row indexes its day in words (``ctx_day``, "8 May 2023"), so "7" matched
every row written on a 7th and "2024" every row written in 2024: "who is my dentist?
(asking as 7)" or "dentist 7" showed rows written on a 7th at about half the query's
weight, and "what should I buy in 2024?" every row of 2024 at ~0.45, over the 0.4 floor.
A number counts from the day words only when the prompt names the row's month too
("what did we do on 7 May 2024?"); otherwise it counts only where the row's text holds it
and, where it does not, it is left out of that row's query. Both keyword paths (FTS5 and
the in-process mirror) score it alike.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_inject import render_memory_context
from memory_inject.storage.postgres import day_numbers
from memory_inject.storage.sqlite import SQLiteStore
from tests.storage import _pg_backend as pgb
from tests.storage._sqlite_backend import mirrored, plain

FILLERS = [
    "I like hiking on the coast trail.",
    "The team standup moved to nine.",
    "Planted tomatoes and basil in the garden.",
    "Watched a documentary about octopuses.",
    "Dinner with Sam at the Thai place.",
    "The car needs an oil change soon.",
    "Read a chapter of the Dune novel.",
    "My sister lives in Lisbon.",
]


def _ts(month: int, day: int) -> str:
    return f"2024-{month:02d}-{day:02d}T12:00:00.000000Z"


def _fill(store: Any) -> None:
    store.store(
        "dentist", "My dentist is Dr Alvarez at the Elm Street clinic.", timestamp=_ts(3, 8)
    )
    store.store("kettle", "Need to buy a new kettle.", timestamp=_ts(11, 2))
    store.store("stamps", "Remember to buy stamps.", timestamp=_ts(11, 3))
    store.store("gift", "Buy a gift for mum.", timestamp=_ts(11, 4))
    store.store("servers", "We run 12 servers in the rack.", timestamp=_ts(12, 1))
    for i, text in enumerate(FILLERS):  # each written on a 7th of 2024
        store.store(f"f{i}", text, timestamp=_ts(1 + i, 7))


@pytest.fixture(params=["fts5", "mirror", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "postgres":
        pg = pgb.make_postgres_store(request.getfixturevalue("pg_dsn"))
        _fill(pg)
        yield pg
        pg.close()
        return
    db = tmp_path / "m.db"
    writer = SQLiteStore(db)
    _fill(writer)
    writer.close()
    s: SQLiteStore = plain(db) if request.param == "fts5" else mirrored(db)
    yield s
    s.close()


def _scores(store: Any, prompt: str) -> dict[str, float]:
    return {e.key: e.score or 0.0 for e in store.recall(prompt, 20)}


class TestBareNumbers:
    def test_a_day_of_the_month_raises_no_row_written_on_it(self, store: Any) -> None:
        got = _scores(store, "dentist 7")
        assert got["dentist"] == pytest.approx(1.0)  # written on the 8th: 7 is not held against it
        assert all(got.get(f"f{i}", 0.0) == 0.0 for i in range(len(FILLERS)))

    def test_a_year_every_row_holds_raises_none(self, store: Any) -> None:
        got = _scores(store, "what should I buy in 2024?")
        assert {k for k, v in got.items() if v >= 0.4} == {"kettle", "stamps", "gift"}
        assert got["kettle"] == pytest.approx(1.0)

    def test_a_number_in_the_text_still_counts(self, store: Any) -> None:
        got = _scores(store, "servers 12")
        assert got["servers"] == pytest.approx(1.0)
        assert max((v for k, v in got.items() if k != "servers"), default=0.0) < 0.4
        # "12" is written (by "servers"): a row whose text lacks it does not hold it.
        assert _scores(store, "dentist clinic 12")["dentist"] < 1.0

    def test_a_date_the_prompt_names_still_counts(self, store: Any) -> None:
        got = _scores(store, "what did I do on 7 May 2024?")
        assert max(got, key=lambda k: got[k]) == "f4"  # written on 7 May 2024
        assert got["f4"] == pytest.approx(1.0)
        assert {k for k, v in got.items() if v >= 0.4} == {"f4"}

    def test_the_block_shows_the_dentist_only(self, store: Any) -> None:
        keys = [e.key for e in render_memory_context(store, "dentist 7").entries]
        assert keys == ["dentist"]


class TestDatedCoverage:
    def test_rules(self) -> None:
        from memory_inject.storage.sqlite.keyword_phrases import dated_coverage

        # weights: a word 2, a number 1; present: the best column weight of each.
        w, n = [2.0, 1.0], [False, True]
        # the row's day holds the prompt's month: the day's number counts as before
        assert dated_coverage(w, [0.0, 1.0], n, [0.0, 0.0], n, True) == pytest.approx(1 / 3)
        # no month: found in the day words alone, the number counts nothing, and a number
        # that only day words hold is left out of the row's query
        assert dated_coverage(w, [0.0, 1.0], n, [0.0, 0.0], n, False) == 0.0
        assert dated_coverage(w, [1.0, 1.0], n, [0.0, 0.0], n, False) == 1.0
        assert dated_coverage(w, [1.0, 0.0], n, [0.0, 0.0], n, False) == 1.0
        # a number some row's text holds still weighs against a row that does not
        assert dated_coverage(w, [1.0, 1.0], n, [0.0, 0.0], [False, False], False) == (
            pytest.approx(2 / 3)
        )
        # the row's text holds it: it counts
        assert dated_coverage(w, [0.0, 1.0], n, [0.0, 1.0], n, False) == pytest.approx(1 / 3)


_WORDS = "alpha beta gamma may march 7 8 2023 2024 05 servers".split()


def test_mirror_and_fts5_agree_on_numbers_and_months(tmp_path: Path) -> None:
    rng = random.Random(29)
    db = tmp_path / "m.db"
    a, b = mirrored(db), plain(db)
    for i in range(80):
        a.store(
            f"k{i}",
            " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(1, 6))),
            session_id=rng.choice([None, "s1"]),
            timestamp=f"{rng.choice(['2023', '2024'])}-{rng.choice(['03', '05'])}-"
            f"{rng.choice(['07', '08', '17'])}T12:00:00.000000Z",
        )
    seen = 0
    for _ in range(120):
        query = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(1, 5)))
        got = [(e.key, e.score) for e in a.recall(query, 8)]
        want = [(e.key, e.score) for e in b.recall(query, 8)]
        assert [k for k, _ in got] == [k for k, _ in want], query
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9, abs=1e-12)
        seen += len(got)
    assert seen > 300
    a.close()
    b.close()


def _random_store(rng: random.Random, stores: list[Any]) -> None:
    for i in range(80):
        content = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(1, 6)))
        session = rng.choice([None, "s1"])
        ts = (
            f"{rng.choice(['2023', '2024'])}-{rng.choice(['03', '05'])}-"
            f"{rng.choice(['07', '08', '17'])}T12:00:00.000000Z"
        )
        for s in stores:
            s.store(f"k{i}", content, session_id=session, timestamp=ts)


def test_postgres_scores_numbers_and_months_as_sqlite(tmp_path: Path, pg_dsn: str) -> None:
    rng = random.Random(29)
    # Every match ranked, as FTS5 ranks them: by default a table of more than 50 rows
    # selects the keyword candidates by the rarest words (``rank_budget``).
    sqlite, pg = plain(tmp_path / "m.db"), pgb.make_postgres_store(pg_dsn, rank_budget=None)
    try:
        _random_store(rng, [sqlite, pg])
        seen = 0
        for _ in range(120):
            query = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(1, 5)))
            want = {e.key: e.score or 0.0 for e in sqlite.recall(query, 80)}
            got = {e.key: e.score or 0.0 for e in pg.recall(query, 80)}
            assert sorted(got) == sorted(want), query
            for key, score in want.items():
                assert got[key] == pytest.approx(score, abs=0.02), (query, key)
            seen += len(got)
        assert seen > 300
    finally:
        sqlite.close()
        pg.close()


def test_postgres_looks_at_a_bounded_number_of_rows_for_a_loose_number(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether any row holds a number outside its day words is asked of at most
    ``LOOSE_SCAN`` rows holding it: beyond them a number written in a row's text is not
    seen, and the number is taken as loose (SQLite looks at every row)."""
    pg = pgb.make_postgres_store(pg_dsn)
    try:
        for i in range(6):  # written on a 7th, "7" in their day words only
            pg.store(f"d{i}", f"Dinner number {i} with Sam.", timestamp=_ts(1 + i, 7))
        pg.store("seven", "Seven 7 lamps.", timestamp=_ts(10, 8))
        pg.store("sam", "Sam plays chess.", timestamp=_ts(11, 8))
        assert _scores(pg, "sam 7")["sam"] < 1.0  # "7" is written: held against "sam"
        monkeypatch.setattr(day_numbers, "LOOSE_SCAN", 3)
        assert _scores(pg, "sam 7")["sam"] == pytest.approx(1.0)  # not seen: loose
    finally:
        pg.close()
