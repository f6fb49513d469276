"""founder-os's recall plan with the shipped agent (``embedder: hashing``): query A scores the
rows that hold the task's words as the store's own recall does, and the plan's cap of 5 is
taken by rows the relevance floor keeps, not by semantic hits it then drops."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory_inject import MemoryEntry, render_memory_context
from memory_inject.config import parse_agent_config
from memory_inject.embedders import HashingEmbedder, embeds_meaning
from memory_inject.plan import FOUNDER_OS_PLAN, merge_results, plan_for
from memory_inject.storage.sqlite import SQLiteStore

NOW = datetime(2026, 6, 1, tzinfo=UTC)
WIRE = "Zed Ltd pays by wire transfer within 30 days."
ACME = "company:acme-corp"


def founder(**memory: Any) -> Any:
    """The shipped founder-os agent's memory config (``config/agents/founder-os.yaml``)."""
    backend = {"kind": "sqlite", "path": "m.db", "embedder": "hashing"}
    raw = {"agent": "f", "memory": {"preset": "founder_os", "backend": backend, **memory}}
    return parse_agent_config(raw).memory


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "m.db", embedder=HashingEmbedder())
    yield s
    s.close()


def dropped(out: Any) -> dict[str, str]:
    return {k: v for t in out.trace for k, v in dict(t.dropped or {}).items()}


class TestQueryAWithHashing:
    def test_a_row_holding_the_prompts_words_is_injected(self, store: SQLiteStore) -> None:
        store.store("wire", WIRE, "fact", status="confirmed", confidence=0.9)
        store.store("other", "Weekly reporting goes out on Mondays.", "fact", status="confirmed")
        out = render_memory_context(store, "wire transfer terms", config=founder())
        # Query A ran on the vectors alone: the hashing cosine (0.448) sat under its
        # "unrelated" line, scored 0.0, and the relevance floor dropped the row.
        assert [e.key for e in out.entries] == ["wire"]
        assert out.entries[0].score is not None and out.entries[0].score >= 0.4
        assert WIRE in out.text

    def test_semantic_mode_is_the_stores_own_recall(self, store: SQLiteStore) -> None:
        store.store("wire", WIRE, "fact", status="confirmed")
        (own,) = store.recall("wire transfer terms", 5)
        (semantic,) = store.recall_where("wire transfer terms", 5, mode="semantic")
        assert semantic.score == own.score and semantic.score is not None
        assert semantic.score >= 0.4

    def test_only_a_hashing_embedder_says_it_embeds_no_meaning(self) -> None:
        class Model:
            name, dim = "model", 4

        class Raising:
            @property
            def semantic(self) -> bool:
                raise RuntimeError("boom")

        assert not embeds_meaning(HashingEmbedder())
        assert embeds_meaning(Model()) and embeds_meaning(Raising())


def entry(key: str, score: float | None, confidence: float) -> MemoryEntry:
    extra = {"confidence": confidence, "status": "confirmed"}
    return MemoryEntry(key, f"content of {key}", "fact", NOW, score=score, extra=extra)


class TestCapAfterTheFloor:
    def test_rows_under_the_floor_take_no_slot(self) -> None:
        plan = plan_for(founder())
        assert plan is not None and plan.floor == 0.4
        semantic = [entry("weak-a", 0.0, 0.95), entry("weak-b", 0.39, 0.94), entry("cfo", 0.9, 0.8)]
        company = [entry(f"note-{i}", None, 0.99 - i / 100) for i in range(3)]
        merged, cut = merge_results([semantic, company], plan)
        assert [e.key for e in merged] == ["note-0", "note-1", "note-2", "cfo"]
        assert cut == {"weak-a": "below_relevance:0", "weak-b": "below_relevance:0.39"}

    def test_the_cap_still_cuts_rows_over_the_floor(self) -> None:
        plan = plan_for(founder())
        assert plan is not None
        rows = [entry(f"r{i}", 0.5, 0.9 - i / 100) for i in range(7)]
        merged, cut = merge_results([rows], plan)
        assert len(merged) == 5 and cut == {"r5": "plan:cap", "r6": "plan:cap"}

    def test_a_company_hit_passes_whatever_query_a_scored_it(self) -> None:
        plan = plan_for(founder())
        assert plan is not None
        merged, cut = merge_results([[entry("row", 0.0, 0.9)], [entry("row", None, 0.9)]], plan)
        assert [(e.key, e.score) for e in merged] == [("row", None)] and not cut

    def test_the_floor_is_the_configs(self) -> None:
        assert FOUNDER_OS_PLAN.floor is None
        low = plan_for(founder(min_relevance_score=0.5, min_companion_score=0.2))
        assert low is not None and low.floor == 0.2
        reranked = plan_for(founder(rerank={"enabled": True}))
        assert reranked is not None and reranked.floor is None

    def test_the_cfo_row_is_injected_not_cut_as_plan_cap(self, store: SQLiteStore) -> None:
        # Two confident rows query A found but that hold none of the task's words outrank
        # the CFO row by confidence; the cap ran before the floor, so they took its slot.
        store.store(
            "acme-contact",
            "Acme Corp CFO is Jane Roe (jane@acme.com).",
            "contact",
            status="applied",
            confidence=0.85,
            entity_ids=[ACME],
        )
        ok = "confirmed"
        store.store(
            "globex", "Globex uses Salesforce as its CRM.", "fact", confidence=0.95, status=ok
        )
        store.store("initech", "Initech is off TPS reports.", "fact", confidence=0.94, status=ok)
        for i in range(3):
            note = f"General note {i} about weekly reporting."
            c = 0.99 - i / 100
            store.store(f"note-{i}", note, "fact", confidence=c, entity_ids=[ACME], status=ok)
        out = render_memory_context(store, "who is the CFO at Acme Corp?", config=founder())
        assert sorted(e.key for e in out.entries) == ["acme-contact", "note-0", "note-1", "note-2"]
        why = dropped(out)
        assert "acme-contact" not in why
        assert why["globex"].startswith("below_relevance:")
        assert why["initech"].startswith("below_relevance:")
        assert "Jane Roe" in out.text
