"""The rows a recall returns are chosen with their day's vote (issue 29, eleventh round).

A store ranks a window of twice the rows asked for; the best half of the rows asked
stand on their own scores, the rest are chosen by score plus ``DAY_VOTE`` times their
day's share of the window's scores (``memory_inject.storage.day_vote``). Scores and
order are untouched, so the best row, and whether a prompt injects, never change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_inject.storage import day_vote
from memory_inject.storage.day_vote import day_key, pick_by_day

# Day A: four turns of one session holding "kayak" (the last also "lake"), written in
# that order so no turn's context adds "lake" to another; three short sessionless rows
# holding "lake", each on a day of its own. Both words are in four rows: equal weights.
DAY_A = [
    ("a2", "We rented a kayak for the whole afternoon with friends from work."),
    ("a3", "The kayak we rented had a small leak near the seat at the back."),
    ("a4", "Everyone took a turn in the kayak until the sun went down over us."),
    ("a1", "Kayak on the lake at dawn."),
]
LONE = [
    ("b1", "Lake.", "2026-01-01T10:00:00Z"),
    ("b2", "Lake day.", "2026-02-01T10:00:00Z"),
    ("b3", "Lake day at noon.", "2026-03-01T10:00:00Z"),
]


def _filled(factory: Callable[..., Any]) -> Any:
    store = factory()
    for key, content in DAY_A:
        store.store(key, content, session_id="trip", timestamp="2026-06-01T10:00:00Z")
    for key, content, ts in LONE:
        store.store(key, content, timestamp=ts)
    return store


class TestInTheStores:
    def test_a_row_of_the_day_where_matches_gather_wins_a_close_call(
        self, store_factory: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Asked for 3: the best row and the next best stand; the third place, a tie at
        half the query between short lone rows and long turns of day A, goes to day A."""
        store = _filled(store_factory)
        got = store.recall("kayak lake", 3)
        assert ["a1", "b1"] == [e.key for e in got[:2]]
        assert got[2].key in {"a2", "a3", "a4"}
        scores = [e.score for e in got]
        assert scores == sorted(scores, reverse=True)  # their own scores, best first
        assert pytest.approx(0.5) == scores[2]
        monkeypatch.setattr(day_vote, "DAY_VOTE", 0.0)
        before = store.recall("kayak lake", 3)
        assert ["a1", "b1", "b2"] == [e.key for e in before]  # short rows win the tie
        assert [e.score for e in before] == scores

    def test_asked_for_more_than_the_hits_every_hit_comes(
        self, store_factory: Callable[..., Any]
    ) -> None:
        store = _filled(store_factory)
        assert {k for k, _ in DAY_A} | {k for k, _, _ in LONE} == {
            e.key for e in store.recall("kayak lake", 10)
        }

    def test_a_session_s_other_days_are_other_days(self, store_factory: Callable[..., Any]) -> None:
        """Day A's turns moved to three dates of the same session: no day gathers the
        matches, and the short rows keep the tie."""
        store = store_factory()
        for i, (key, content) in enumerate(DAY_A[:3]):
            store.store(key, content, session_id="trip", timestamp=f"2026-06-0{i + 2}T10:00:00Z")
        store.store(*DAY_A[3], session_id="trip", timestamp="2026-06-01T10:00:00Z")
        for key, content, ts in LONE:
            store.store(key, content, timestamp=ts)
        assert ["a1", "b1", "b2"] == [e.key for e in store.recall("kayak lake", 3)]

    def test_another_session_s_day_is_another_day(self, store_factory: Callable[..., Any]) -> None:
        """Day A's turns on one date, but each in a session of its own: no day gathers."""
        store = store_factory()
        for key, content in DAY_A:
            store.store(key, content, session_id=f"s-{key}", timestamp="2026-06-01T10:00:00Z")
        for key, content, ts in LONE:
            store.store(key, content, timestamp=ts)
        assert ["a1", "b1", "b2"] == [e.key for e in store.recall("kayak lake", 3)]


class TestPickByDay:
    def test_the_best_half_stand_and_the_rest_follow_the_day(self) -> None:
        ranked = [("x", 0.9), ("y", 0.6), ("p", 0.5), ("q", 0.5), ("d1", 0.45), ("d2", 0.45)]
        days = {"x": 1, "y": 2, "p": 3, "q": 4, "d1": 5, "d2": 5}
        got = pick_by_day(ranked, [days[i] for i, _ in ranked], 3)
        # Day 5 sums 0.9 (as much as x's day): 0.45 + 0.2 beats 0.5 + 0.2 * 0.5 / 0.9.
        assert [("x", 0.9), ("y", 0.6), ("d1", 0.45)] == got

    def test_few_candidates_or_no_weight_change_nothing(self) -> None:
        ranked = [("a", 0.8), ("b", 0.3), ("c", 0.2)]
        assert ranked == pick_by_day(ranked, ["a", "b", "c"], 3)
        assert ranked[:2] == pick_by_day(ranked, ["a", "b", "c"], 2, weight=0.0)
        assert ranked[:2] == pick_by_day(ranked, ["same"] * 3, 2)
        assert [] == pick_by_day(ranked, ["a", "b", "c"], 0)
        zero = [("a", 0.0), ("b", 0.0), ("c", 0.0)]
        assert zero[:2] == pick_by_day(zero, ["a", "b", "c"], 2)

    @given(
        st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 4)), min_size=0, max_size=30).map(
            sorted
        ),
        st.integers(0, 15),
    )
    def test_a_subset_in_order_with_the_best_half_kept(
        self, rows: list[tuple[float, int]], limit: int
    ) -> None:
        ranked = [(f"r{j}", s) for j, (s, _) in enumerate(reversed(rows))]
        days = {f"r{j}": d for j, (_, d) in enumerate(reversed(rows))}
        got = pick_by_day(ranked, [days[i] for i, _ in ranked], limit)
        assert len(got) == min(limit, len(ranked))
        assert got == [p for p in ranked if p in got]  # the store's order, own scores
        assert got[: (limit + 1) // 2] == ranked[: (limit + 1) // 2]

    def test_the_day_of_a_text_and_a_datetime_agree(self) -> None:
        from datetime import datetime, timedelta, timezone

        at = datetime(2026, 6, 1, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
        assert ("s", "2026-06-02") == day_key("s", at)  # the UTC date
        assert ("s", "2026-06-02") == day_key("s", "2026-06-02T04:30:00.000000Z")
        assert (None, "") == day_key(None, None)
