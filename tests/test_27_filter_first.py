"""Issue 27, item 1: filter first (status, profile), then rank — the shared rules and every
kind of store the render can be given (in-memory, a store with only ``recall``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memory_inject import InMemoryStore, MemoryEntry, render_memory_context
from memory_inject._filter_first import (
    FILTER_WINDOW_CAP,
    both_statuses,
    keeps,
    ranked_of,
    restricted,
    windows,
)
from memory_inject.config import MemoryInjectConfig
from memory_inject.contract import RecallQuery
from memory_inject.records import MemoryRecord

NOW = datetime(2026, 5, 20, 15, 30, tzinfo=UTC)


def _entry(key: str, **extra: Any) -> MemoryEntry:
    return MemoryEntry(key, f"deploy note {key}", "core", NOW, extra=extra)


def test_keeps_reads_status_and_profile_as_the_governance_stages_do() -> None:
    keep = keeps(("Active", "contested"), ("project:a", None))
    assert keep is not None
    assert keep(_entry("plain"))  # no status is active, no profile is unbound
    assert keep(_entry("blank", status="", profile_id=""))
    assert keep(_entry("upper", status=" ACTIVE ", profile_id="project:a"))
    assert keep(_entry("fight", status="contested"))
    assert not keep(_entry("old", status="deprecated"))
    assert not keep(_entry("other", profile_id="project:b"))
    only_bound = keeps(None, ("project:a",))
    assert only_bound is not None and not only_bound(_entry("unbound"))
    assert keeps(None, None) is None


def test_a_status_restriction_and_both_statuses() -> None:
    rows = [_entry("a", status="confirmed"), _entry("b", status="pending"), _entry("c")]
    confirmed, active = keeps(["confirmed"], None), keeps(["active"], None)
    assert confirmed is not None and active is not None
    assert ["a"] == [e.key for e in rows if confirmed(e)]
    assert ["c"] == [e.key for e in rows if active(e)]
    assert both_statuses(None, None) is None
    assert ("x",) == both_statuses(["x"], None)
    assert ("active",) == both_statuses(None, ["active"])
    assert ("Active",) == both_statuses(["confirmed", "Active"], ["active", "contested"])


def test_windows_grow_fourfold_up_to_the_cap() -> None:
    assert [24, 96, 384, 1536, FILTER_WINDOW_CAP] == list(windows(6))
    assert [FILTER_WINDOW_CAP * 2] == list(windows(FILTER_WINDOW_CAP * 2))
    assert 1 == next(windows(0))


def test_restricted_looks_deeper_until_the_limit_is_kept() -> None:
    """30 rows passed over rank first: a 4x window keeps nothing, the next finds the rows."""
    pool = [_entry(f"old{i}", status="deprecated") for i in range(30)]
    pool += [_entry(f"ok{i}") for i in range(5)]
    asked: list[int] = []

    def fetch(n: int) -> list[MemoryEntry]:
        asked.append(n)
        return pool[:n]

    keep = keeps(("active",), None)
    assert keep is not None
    _found, kept, over = restricted(fetch, list, 3, keep)
    assert ["ok0", "ok1", "ok2"] == [e.key for e in kept]
    assert [12, 48] == asked
    assert 12 == len(over) and all(e.key.startswith("old") for e in over)  # at most 4 x limit
    # Exhausted: fewer rows than asked ends the search with what there is.
    asked.clear()
    assert ["ok0", "ok1", "ok2", "ok3", "ok4"] == [e.key for e in ranked_of(fetch, 9, ("active",))]
    assert [36] == asked
    assert 2 == len(ranked_of(fetch, 2, None))


class RecallOnly:
    """A third-party store with nothing but ``recall``, best match first."""

    name = "recall-only"

    def __init__(self, entries: list[MemoryEntry]) -> None:
        self.entries = entries
        self.limits: list[int] = []

    def recall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryEntry]:
        self.limits.append(limit)
        return self.entries[:limit]


def _crowded() -> list[MemoryEntry]:
    rows = [_entry(f"other{i}", profile_id="project:other") for i in range(20)]
    rows += [_entry(f"old{i}", status="deprecated", profile_id="project:app") for i in range(20)]
    rows += [_entry(f"own{i}", profile_id="project:app") for i in range(3)]
    return rows


SECTIONED = MemoryInjectConfig(renderer="sectioned", min_relevance_score=0.0, recall_limit=8)


def test_a_store_with_only_recall_filters_first_too() -> None:
    store = RecallOnly(_crowded())
    out = render_memory_context(store, "deploy", config=SECTIONED, now=NOW, profile="project:app")
    assert {"own0", "own1", "own2"} == {e.key for e in out.entries}
    assert max(store.limits) > 8  # it looked deeper than the recall limit
    dropped = out.event.dropped  # type: ignore[union-attr]
    assert "status:deprecated" == dropped["old0"]
    assert "profile_mismatch:project:other" == dropped["other0"]


def test_the_in_memory_store_filters_first() -> None:
    store = InMemoryStore(
        [
            *(
                MemoryRecord(f"other{i}", "deploy deploy deploy", profile_id="project:o")
                for i in range(20)
            ),
            *(MemoryRecord(f"old{i}", "deploy deploy", status="deprecated") for i in range(20)),
            MemoryRecord("own", "deploy steps", profile_id="project:app"),
        ]
    )
    q = RecallQuery("deploy", 2, statuses=("active",), profiles=("project:app", None))
    answer = store.answer(q)
    assert ["own"] == [e.key for e in answer.entries]
    assert answer.passed_over and not {e.key for e in answer.passed_over} & {"own"}
    # A plan's entity query restricted by profile keeps the profile's rows only.
    tagged = store.answer(RecallQuery("", 5, source="nowhere", profiles=("project:app", None)))
    assert [] == list(tagged.entries)


def test_another_profiles_turn_keeps_only_its_own_and_unbound_rows() -> None:
    rows = [_entry(f"bound{i}", profile_id="project:app") for i in range(12)]
    rows.append(_entry("unbound"))
    mine = render_memory_context(
        RecallOnly(rows), "deploy", config=SECTIONED, now=NOW, profile="project:app"
    )
    assert 8 == len(mine.entries) and "unbound" not in {e.key for e in mine.entries}
    theirs = render_memory_context(
        RecallOnly(rows), "deploy", config=SECTIONED, now=NOW, profile="project:zzz"
    )
    assert ["unbound"] == [e.key for e in theirs.entries]
