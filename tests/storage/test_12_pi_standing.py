"""Issue 12, PI: the standing context on every store, and the PI agent's golden render.

The golden renders ``config/agents/pi.yaml`` against a store seeded with PI's
own JSONL records (``_pi_seed``, from seeds 000 and 002), sync and async, on
SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_inject import arender_memory_context, render_memory_context
from memory_inject.config import load_agent_config
from memory_inject.contract import SupportsJsonl, SupportsStandingContext
from memory_inject.records import MemoryRecord
from memory_inject.standing import StandingCache
from memory_inject.storage._jsonl import read_jsonl
from memory_inject.storage.memory import InMemoryStore
from tests.storage._pi_seed import NOW, PROFILE, jsonl

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "how should typecheck run before pushing with bun?"


def rule(key: str, conf: float, **more: Any) -> dict[str, Any]:
    """The fields of an active L2 avoid_pattern rule."""
    return {"layer": "L2", "rule_type": "avoid_pattern", "confidence": conf, **more}


@pytest.mark.needs.with_args(SupportsStandingContext)
class TestStandingRecords:
    def test_l1_then_rules_by_confidence_in_the_profile(
        self, store_factory: Callable[..., Any]
    ) -> None:
        """Active in-profile L1 records in order, then hard rules most confident first."""
        s = store_factory()
        s.store("l1_b", "identity b", layer="L1")
        s.store("r_low", "low rule", **rule("r_low", 0.86))
        s.store("r_high", "high rule", **rule("r_high", 0.97), profile_id="project:a")
        s.store("l1_a", "identity a", layer="L1", profile_id="project:a")
        s.store("r_weak", "weak rule", **rule("r_weak", 0.5))
        s.store("r_soft", "not a rule type", layer="L2", rule_type="workflow", confidence=0.99)
        s.store("r_other", "other profile", **rule("r_other", 0.99), profile_id="project:b")
        s.store("r_dep", "deprecated", **rule("r_dep", 0.99), status="deprecated")
        got = s.standing_records("project:a", limit=8, min_confidence=0.85)
        assert ["l1_b", "l1_a", "r_high", "r_low"] == [e.key for e in got]
        assert [None] * 4 == [e.score for e in got]

    def test_no_profile_sees_only_unbound_records_and_limit_bounds_each_layer(
        self, store_factory: Callable[..., Any]
    ) -> None:
        """Without a profile bound records stay out; ``limit`` caps each layer."""
        s = store_factory()
        for i in range(3):
            s.store(f"l1_{i}", f"identity {i}", layer="L1")
            s.store(f"r_{i}", f"rule {i}", **rule(f"r_{i}", 0.9 + i / 100))
        s.store("bound", "bound rule", **rule("bound", 0.99), profile_id="project:a")
        got = s.standing_records(None, limit=2, min_confidence=0.85)
        assert ["l1_0", "l1_1", "r_2", "r_1"] == [e.key for e in got]

    def test_categories_give_the_newest_rows_since_their_time(
        self, store_factory: Callable[..., Any]
    ) -> None:
        """A category's newest rows come, written at or after its time."""
        s = store_factory()
        s.store("old_day", "yesterday", "daily", timestamp=NOW - timedelta(days=1))
        s.store("today_1", "this morning", "daily", timestamp=NOW - timedelta(hours=5))
        s.store("todo", "open item", "scratchpad", timestamp=NOW - timedelta(days=9))
        got = s.standing_records(
            None,
            limit=4,
            min_confidence=0.85,
            categories={"daily": NOW - timedelta(hours=12), "scratchpad": None},
        )
        assert {"today_1", "todo"} == {e.key for e in got}

    def test_data_version_moves_with_every_write(self, store_factory: Callable[..., Any]) -> None:
        """A write and a forget each change ``data_version``."""
        s = store_factory()
        v0 = s.data_version
        s.store("a", "x")
        v1 = s.data_version
        s.forget("a")
        assert v0 != v1 != s.data_version

    def test_the_cache_reads_once_between_writes(self, store_factory: Callable[..., Any]) -> None:
        """Two turns with no write between read the store once; a write forces a read."""
        s = store_factory()
        s.store("l1", "identity", layer="L1")
        cache = StandingCache()
        first = cache.get(s, None, limit=4, min_confidence=0.85)
        again = cache.get(s, None, limit=4, min_confidence=0.85)
        assert (1, first) == (cache.reads, again)
        s.store("l1_new", "new identity", layer="L1")
        assert ["l1", "l1_new"] == [e.key for e in cache.get(s, None, limit=4, min_confidence=0.85)]
        assert 2 == cache.reads


class TestStandingInTheRender:
    def test_unmatched_hard_rules_are_rendered_every_turn(self) -> None:
        """8 qualifying rules and 6 others: a prompt naming none still gets the 8 rules."""
        records = [
            MemoryRecord(f"rule{i}", f"Rule {i} about widgets", **rule("", 0.86 + i / 100))
            for i in range(8)
        ] + [
            MemoryRecord(f"note{i}", f"Gardening note {i}", layer="L2", confidence=0.9)
            for i in range(6)
        ]
        agent = load_agent_config(ROOT / "config/agents/pi.yaml")
        out = render_memory_context(
            InMemoryStore(records), "how deep should tomato beds be?", config=agent.memory, now=NOW
        )
        rules = [e.key for e in out.entries if e.key.startswith("rule")]
        assert sorted(f"rule{i}" for i in range(8)) == sorted(rules)
        assert 8 == out.text.count("⚠️ AVOID:")


GOLDEN = """\
# Persistent Intelligence Context

## Hard Rules
✓ PREFER: [conf 0.92] Use bun not npm for local development in this project.
⚠️ AVOID: [conf 0.92] Don't use echo >> for file writes
⚠️ AVOID: [conf 0.90] Never edit MEMORY.md directly
📌 CONVENTION: [conf 0.88] This project uses event-sourcing for orders
📌 RULE: [conf 0.88] Ask before deleting a branch

## Selected Memory
- mem_identity [L1, conf 0.95] Prefer TypeScript over JavaScript for new code
- mem_kv [L1, conf 0.90] Keep the system prompt stable across turns
- mem_def [L2, conf 0.91 ⚠️ 45d [workflow]] Always run typecheck before pushing

## Scratchpad
- [ ] Add typecheck to the CI workflow

## Contested Memory
<!-- Contested memories conflict with other memories. Review before relying on them. -->
⚠️ CONTESTED: [mem_xyz, conf 0.88] Run typecheck only in CI, never before pushing

## Daily Log (2026-05-20)
Sessions today: 3
- 10:00 ## Typecheck cleanup ↵ - fixed 12 type errors ↵ Typecheck before a push #decision

## Today's Sessions
Recent sessions (2026-05-20):
- [my-project] release notes (read, write)
- [my-project] typecheck fixes (bash, edit, read)

## Open Questions
? [high] Should typecheck run in CI as well as before pushing?

"""


@pytest.mark.needs.with_args(SupportsJsonl, SupportsStandingContext)
class TestPiAgentGolden:
    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_the_pi_agent_renders_the_seed_store(
        self, store_factory: Callable[..., Any], mode: str
    ) -> None:
        """config/agents/pi.yaml over PI's own records gives PI's block, in both twins."""
        store = store_factory()
        assert 19 == store.import_jsonl(jsonl())
        agent = load_agent_config(ROOT / "config/agents/pi.yaml")
        assert PROFILE == agent.memory.governance.profile_id
        if mode == "sync":
            out = render_memory_context(store, PROMPT, config=agent.memory, now=NOW, cwd=ROOT)
        else:

            async def run() -> Any:
                try:
                    return await arender_memory_context(
                        store, PROMPT, config=agent.memory, now=NOW, cwd=ROOT
                    )
                finally:
                    aclose = getattr(store, "aclose", None)
                    if aclose is not None:
                        await aclose()

            out = asyncio.run(run())
        assert (True, GOLDEN) == (out.success, out.text)
        dropped = {k: r for t in out.trace for k, r in t.dropped.items()}
        assert "status:contested" == dropped["mem_xyz"]
        assert "questions:below_medium" == dropped["inq_low"]
        assert not {"mem_old", "mem_friday"} & {e.key for e in out.entries}


def test_the_seed_parses_as_pi_records() -> None:
    """Every seed line imports; the record-schema example keeps its PI-only fields."""
    records = {r.key: r for _, r in read_jsonl(jsonl())}
    example = records["mem_20260520_abc"]
    assert "semi-stable" == (example.metadata or {})["stability"]
