"""Multi-source recall plans (founder-os), entity extraction, usage counters and the deadline."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from memory_inject import MemoryEntry, MemoryInjectConfig, MemoryRecall, render_memory_context
from memory_inject.config import PlanQueryConfig, RecallPlanConfig
from memory_inject.plan import (
    FOUNDER_OS_PLAN,
    PlanQuery,
    RecallPlan,
    extract_entities,
    merge_results,
)
from memory_inject.testing import FixtureMemory, recording

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def e(
    key: str,
    score: float | None = 0.9,
    confidence: float | None = None,
    status: str = "confirmed",
    **extra: Any,
) -> MemoryEntry:
    return MemoryEntry(
        key,
        f"content of {key}",
        "fact",
        NOW,
        score=score,
        extra={"confidence": confidence, "status": status, **extra},
    )


class TestEntities:
    def test_emails_domains_companies_and_contacts(self) -> None:
        """Emails, their domains, known companies and the name before an email are found."""
        got = extract_entities(
            "Follow up with Jane Doe <jane@acme.io> about Globex Corp",
            ["Acme", "Globex Corp", "Umbrella"],
        )
        assert ("jane@acme.io",) == got.emails
        assert ("acme.io",) == got.domains
        assert ("Acme", "Globex Corp") == got.companies
        assert ("Jane Doe",) == got.contacts

    def test_no_entities_in_plain_text(self) -> None:
        """A sentence without emails or known names yields nothing."""
        assert () == extract_entities("summarise the week", ["Acme"]).companies


class TestMerge:
    def test_multi_hit_beats_higher_confidence_single_hit(self) -> None:
        """An id returned by two queries ranks above a higher-confidence single hit."""
        a = [e("x", confidence=0.5), e("y", confidence=0.99)]
        b = [e("x", confidence=0.5)]
        merged, _ = merge_results([a, b], FOUNDER_OS_PLAN)
        assert ["x", "y"] == [m.key for m in merged]

    def test_cap_and_status_filter(self) -> None:
        """Only allowed statuses take part, and the merge is capped."""
        rows = [e(f"k{i}", confidence=i / 10) for i in range(8)] + [e("cand", status="candidate")]
        merged, dropped = merge_results([rows], FOUNDER_OS_PLAN)
        assert 5 == len(merged)
        assert "status:candidate" == dropped["cand"]
        assert ["k7", "k6", "k5", "k4", "k3"] == [m.key for m in merged]


class PlanStore:
    """A store with the optional recall_where/known_entities/mark_used extensions."""

    name = "plan"

    def __init__(self) -> None:
        self.where_calls: list[dict[str, Any]] = []
        self.marked: list[list[str]] = []
        self.rows = [
            e("sem1", 0.9, 0.6),
            e("sem2", 0.7, 0.9),
            e("acme1", None, 0.8, entity_ids=("company:acme",)),
            e("plug1", None, 0.7, source="P10"),
        ]

    def recall(self, query: str, limit: int, **kw: Any) -> Sequence[MemoryEntry]:
        return self.rows[:2]

    def recall_where(self, query: str | None, limit: int, **kw: Any) -> Sequence[MemoryEntry]:
        self.where_calls.append(kw)
        if kw.get("entity_id"):
            return [r for r in self.rows if kw["entity_id"] in r.extra.get("entity_ids", ())]
        if kw.get("source"):
            return [r for r in self.rows if r.extra.get("source") == kw["source"]]
        return self.rows[:2]

    def known_entities(self) -> dict[str, str]:
        return {"Acme": "company:acme"}

    def mark_used(self, ids: list[str]) -> int:
        self.marked.append(list(ids))
        return len(ids)


class TestPlanRender:
    def test_founder_os_preset_runs_three_queries_and_marks_usage_once(self) -> None:
        """Semantic, entity and plugin queries merge; rendered ids are marked in one call."""
        store = PlanStore()
        cfg = MemoryInjectConfig(
            recall_plan=RecallPlanConfig(enabled=True, preset="founder_os", track_usage=True),
            min_relevance_score=0.0,
        )
        out = render_memory_context(
            store, "renewal for jane@acme.io", config=cfg, now=NOW, source="P10"
        )
        assert {"sem1", "sem2", "acme1", "plug1"} == {x.key for x in out.entries}
        ok = ("confirmed", "applied")
        assert [
            {"session_id": None, "mode": "semantic", "statuses": ok},
            {"session_id": None, "entity_id": "company:acme", "statuses": ok},
            {"session_id": None, "source": "P10", "statuses": ok},
        ] == store.where_calls
        assert [[x.id for x in out.entries]] == store.marked

    def test_custom_plan_falls_back_to_client_side_filters(self) -> None:
        """A store without recall_where still serves plugin queries by filtering recall."""
        rows = [e("a", None, 0.5, source="P01"), e("b", None, 0.9, source="P02")]
        cfg = MemoryInjectConfig(
            recall_plan=RecallPlanConfig(
                enabled=True, queries=(PlanQueryConfig("plugin", 2),), priority="hits"
            )
        )
        out = render_memory_context(
            FixtureMemory({None: rows}), "plugin notes", config=cfg, now=NOW, source="P02"
        )
        assert ["b"] == [x.key for x in out.entries]

    def test_plan_query_limits_are_passed_to_the_store(self) -> None:
        """Each default query asks the store for its own limit."""
        mem = FixtureMemory({None: [e("a")]})
        plan = RecallPlanConfig(
            enabled=True, queries=(PlanQueryConfig("default", 3), PlanQueryConfig("default", 7))
        )
        render_memory_context(
            mem, "project status", config=MemoryInjectConfig(recall_plan=plan), now=NOW
        )
        assert [3, 7] == mem.limits


class TestDeadline:
    def test_hanging_store_returns_in_time_with_partial_event(self) -> None:
        """A store that blocks past the deadline is abandoned; the event says partial."""
        slow = FixtureMemory({None: [e("k")]}, delay=2.0)
        cfg = MemoryInjectConfig(deadline_ms=100)
        with recording() as rec:
            t0 = time.monotonic()
            out = render_memory_context(slow, "project status", config=cfg, now=NOW)
            elapsed = time.monotonic() - t0
        assert "" == out.text
        assert elapsed < 1.5
        assert rec.events[0].partial
        assert any("deadline" in d for d in rec.events[0].degraded)

    def test_results_in_hand_are_used(self) -> None:
        """With two scopes, the fast first scope renders though the second hangs."""

        class Half:
            name = "half"

            def recall(
                self, query: str, limit: int, *, session_id: str | None = None, **kw: Any
            ) -> Sequence[MemoryEntry]:
                if session_id == "slow":
                    time.sleep(2.0)
                return [e("fast")]

        cfg = MemoryInjectConfig(deadline_ms=200)
        out = render_memory_context(
            Half(), "project status", sessions=["fast", "slow"], config=cfg, now=NOW
        )
        assert ["fast"] == [x.key for x in out.entries]
        assert isinstance(out.event, MemoryRecall)
        assert out.event.partial and out.event.success

    def test_no_deadline_runs_inline(self) -> None:
        """deadline_ms null runs recall in the caller's thread."""
        import threading

        seen: list[str] = []

        class Where:
            name = "w"

            def recall(self, *a: Any, **kw: Any) -> Sequence[MemoryEntry]:
                seen.append(threading.current_thread().name)
                return []

        render_memory_context(
            Where(), "project status", config=MemoryInjectConfig(deadline_ms=None)
        )
        assert [threading.current_thread().name] == seen


def test_plan_query_rejects_bad_values() -> None:
    """A plan query with an unknown source or a zero limit is a clear error."""
    with pytest.raises(ValueError, match="source"):
        PlanQuery("web", 3)
    with pytest.raises(ValueError, match="limit"):
        RecallPlan((PlanQuery("default", 0),))
