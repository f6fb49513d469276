"""Issue 12, PI items 2-6: PI's missing blocks, sectioned without governance, the trace
view, ``preset: pi`` and the import of PI's own records.

Item 1 (the standing context) and the PI agent's golden render are in
``tests/storage/test_12_pi_standing.py``, which runs on every store.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_inject import InMemoryStore, MemoryEntry, render_memory_context
from memory_inject.config import MemoryInjectConfig, load_agent_config, parse_agent_config
from memory_inject.exceptions import ConfigError
from memory_inject.records import MemoryRecord
from memory_inject.render import SectionedRenderer
from memory_inject.stages import StageContext
from memory_inject.stages.governance import pi_traces
from memory_inject.standing import StandingCache
from memory_inject.storage import SQLiteStore
from memory_inject.storage._jsonl import record_from_json, record_to_json
from memory_inject.testing import parse_sectioned
from tests.storage._pi_seed import SCHEMA_EXAMPLE

NOW = datetime(2026, 5, 20, 15, 30, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[1]


def mem(key: str, content: str, category: str = "core", **extra: Any) -> MemoryEntry:
    """An entry written an hour before NOW, with governance fields in ``extra``."""
    return MemoryEntry(key, content, category, NOW - timedelta(hours=1), extra=extra)


def render(entries: list[MemoryEntry], query: str = "", **settings: Any) -> Any:
    ctx = StageContext(MemoryInjectConfig(), NOW, query=query)
    return SectionedRenderer(**settings)(ctx, entries)


class TestPiBlocks:
    def test_daily_digest_counts_sessions_and_keeps_notable_lines(self) -> None:
        """PI's digest: 'Sessions today: N', then only headings, bullets and #decision lines."""
        log = (
            "<!-- captured -->\n## Session ended\n## Release\n- shipped 0.3\n"
            "small talk\nkeep SQLite #decision\n- Persistent Intelligence captured\n"
            "## Session ended"
        )
        out = render([mem("d", log, "daily")], daily_digest=True)
        assert {
            "Daily Log": ["- 14:30 ## Release ↵ - shipped 0.3 ↵ keep SQLite #decision"]
        } == parse_sectioned(out.text)
        assert "## Daily Log (2026-05-20)\nSessions today: 2\n- 14:30" in out.text

    def test_daily_digest_falls_back_to_the_raw_content(self) -> None:
        """With no notable line the day's content is shown as written."""
        out = render([mem("d", "just some notes", "daily")], daily_digest=True)
        assert {"Daily Log": ["- 14:30 just some notes"]} == parse_sectioned(out.text)

    def test_todays_sessions_shows_the_last_ones_of_today(self) -> None:
        """Today's Sessions: today's session entries, newest first, at most max_sessions,
        in PI's lines (a free-text session shows as written, with no time)."""
        entries = [
            MemoryEntry(f"s{h}", f"[app] session {h}", "session", NOW.replace(hour=h))
            for h in (9, 11, 13, 14)
        ] + [MemoryEntry("old", "[app] yesterday", "session", NOW - timedelta(days=1))]
        out = render(entries, max_sessions=3)
        assert {
            "Today's Sessions": [
                "- [app] session 14",
                "- [app] session 13",
                "- [app] session 11",
            ]
        } == parse_sectioned(out.text)
        head = "## Today's Sessions\nRecent sessions (2026-05-20):\n"
        assert head + "- [app] session 14\n" in out.text
        assert "sessions:max_sessions" == out.traces[0].dropped["s9"]
        assert "sessions:not_today" == out.traces[0].dropped["old"]

    def test_open_questions_by_priority_then_score(self) -> None:
        """Up to 3 inquiries of priority >= medium sharing words with the prompt: '? [p] q'."""
        q = [
            mem(
                "q1",
                "Which bundler should deploys use?",
                "inquiry",
                metadata={"priority": "medium"},
            ),
            mem("q2", "Is the deploy script idempotent?", "inquiry", metadata={"priority": "high"}),
            mem("q3", "Should deploys run on Fridays?", "inquiry", metadata={"priority": "low"}),
            mem("q4", "Why is OpenGL slow?", "inquiry", metadata={"priority": "high"}),
            mem(
                "q5",
                "Who owns the release?",
                "inquiry",
                tags=["deploy"],
                metadata={"priority": "medium"},
            ),
        ]
        out = render(q, "how do deploy scripts work for deploys?", max_questions=3)
        assert {
            "Open Questions": [
                "? [high] Is the deploy script idempotent?",
                "? [medium] Who owns the release?",
                "? [medium] Which bundler should deploys use?",
            ]
        } == parse_sectioned(out.text)
        dropped = out.traces[0].dropped
        assert ("questions:below_medium", "questions:no_overlap") == (dropped["q3"], dropped["q4"])

    def test_layer_budgets_put_l1_first_and_cap_each_layer(self) -> None:
        """PI's applyLayerBudgets: at most max_l1 L1 lines first, then max_l2, then the total."""
        entries = [mem(f"b{i}", f"playbook {i}", layer="L2") for i in range(3)] + [
            mem(f"a{i}", f"identity {i}", layer="L1") for i in range(3)
        ]
        out = render(entries, max_l1=2, max_l2=2, max_records=3)
        lines = parse_sectioned(out.text)["Selected Memory"]
        assert ["- a0 [L1] identity 0", "- a1 [L1] identity 1", "- b0 [L2] playbook 0"] == lines
        dropped = out.traces[0].dropped
        assert "selection:max_l1" == dropped["a2"]
        assert ("selection:max_l2", "selection:max_records") == (dropped["b2"], dropped["b1"])


class TestSectionedWithoutGovernance:
    def test_deprecated_contested_and_foreign_records_are_not_selected_memory(self) -> None:
        """renderer: sectioned with governance off still filters status and profile."""
        store = InMemoryStore(
            [
                MemoryRecord("live", "Deploys go to prod-3"),
                MemoryRecord("old", "Deploys go to prod-1", status="deprecated"),
                MemoryRecord("fight", "Deploys go to prod-2", status="contested"),
                MemoryRecord("elsewhere", "Deploys go to prod-9", profile_id="project:other"),
            ]
        )
        cfg = MemoryInjectConfig(renderer="sectioned", min_relevance_score=0.0)
        out = render_memory_context(store, "where do deploys go?", config=cfg, now=NOW)
        blocks = parse_sectioned(out.text)
        assert ["- live [core] Deploys go to prod-3"] == blocks["Selected Memory"]
        assert ["status_filter", "profile_scope"] == [t.name for t in out.trace[2:4]]
        assert "profile_mismatch:project:other" == out.trace[3].dropped["elsewhere"]


class TestPiTraceView:
    def test_governance_traces_in_pis_shape(self) -> None:
        """pi_traces gives PI's processor names and {excluded_ids, exclusion_reasons} by id."""
        store = InMemoryStore(
            [
                MemoryRecord("mem_active", "Release with make release"),
                MemoryRecord("mem_deprecated", "Release by hand", status="deprecated"),
                MemoryRecord("mem_other", "Release notes in the wiki", profile_id="project:other"),
            ]
        )
        cfg = parse_agent_config({"agent": "a", "memory": {"governance": {"enabled": True}}})
        out = render_memory_context(
            store, "how do we release?", config=cfg.memory, profile="project:app"
        )
        view = pi_traces(out.trace, {"mem_other": "id_other"})
        assert [
            "StatusFilterProcessor",
            "ProfileScopeProcessor",
            "BasicScopeProcessor",
            "PositiveApplicabilityProcessor",
            "NegativeScopeProcessor",
        ] == [v["processor"] for v in view]
        assert {
            "processor": "StatusFilterProcessor",
            "input_count": 3,
            "output_count": 2,
            "excluded_ids": ["mem_deprecated"],
            "exclusion_reasons": {"mem_deprecated": "status:deprecated"},
        } == view[0]
        assert {"id_other": "profile_mismatch:project:other"} == view[1]["exclusion_reasons"]


class TestPresetPi:
    def test_preset_sets_pis_whole_behaviour(self) -> None:
        """preset: pi = sectioned + budgets, governance, standing, trivial filter, RRF 0.45/0.55."""
        cfg = parse_agent_config({"agent": "a", "memory": {"preset": "pi"}}).memory
        r, b = cfg.renderer, cfg.backend
        assert ("sectioned", 12, 4, 8) == (r.kind, r.max_records, r.max_l1, r.max_l2)
        assert (True, 3, 3) == (r.daily_digest, r.max_sessions, r.max_questions)
        assert (True, True, True) == (
            cfg.governance.enabled,
            cfg.standing.enabled,
            cfg.trivial_prompt.enabled,
        )
        assert ("rrf", 60, 0.45, 0.55) == (b.fusion, b.rrf_k, b.keyword_weight, b.vector_weight)
        assert ("pi", 24) == (cfg.preset, cfg.recall_limit)

    def test_the_files_keys_win_over_the_preset(self) -> None:
        """A key the file sets replaces the preset's; nested groups merge."""
        cfg = parse_agent_config(
            {
                "agent": "a",
                "memory": {
                    "preset": "pi",
                    "renderer": {"kind": "sectioned", "max_l1": 1},
                    "backend": {"rrf_k": 30},
                },
            }
        ).memory
        assert (1, 12, 30, 0.55) == (
            cfg.renderer.max_l1,
            cfg.renderer.max_records,
            cfg.backend.rrf_k,
            cfg.backend.vector_weight,
        )

    def test_an_unknown_preset_names_the_file_and_path(self, tmp_path: Path) -> None:
        """A bad preset is a ConfigError with the file, the key and the choices."""
        path = tmp_path / "a.yaml"
        path.write_text("agent: a\nmemory: {preset: pie}\n")
        with pytest.raises(ConfigError) as err:
            load_agent_config(path)
        assert "'preset' must be one of 'founder_os', 'pi' (got 'pie') @ $.memory" in str(err.value)

    def test_the_shipped_pi_agent_loads(self) -> None:
        """config/agents/pi.yaml is PI's preset with an explicit profile."""
        agent = load_agent_config(ROOT / "config/agents/pi.yaml")
        assert ("pi", "sectioned", "project:my-project") == (
            agent.memory.preset,
            agent.memory.renderer.kind,
            agent.memory.governance.profile_id,
        )


#: Seed 002's record-schema example, with a validity window and a field of a later PI.
PI_RECORD: dict[str, Any] = {
    **SCHEMA_EXAMPLE,
    "updated_at": "2026-05-21T08:00:00Z",
    "valid_from": "2026-05-20",
    "valid_to": "2027-01-01",
    "future_field": {"kept": True},
}


class TestImportPiRecords:
    def test_a_pi_record_maps_its_fields_and_keeps_the_rest(self) -> None:
        """statement, ruleType, created_at, valid_to map; evidence, review, unknown stay."""
        r = record_from_json(dict(PI_RECORD))
        assert (
            "mem_20260520_abc",
            "Use bun not npm for local development in this project.",
            "prefer_pattern",
            "L2",
            datetime(2026, 5, 20, tzinfo=UTC),
            datetime(2026, 5, 21, 8, tzinfo=UTC),
            datetime(2027, 1, 1, tzinfo=UTC),
        ) == (r.key, r.content, r.rule_type, r.layer, r.timestamp, r.updated_at, r.expires_at)
        meta = r.metadata or {}
        assert {"kept": True} == meta["future_field"]
        assert ("semi-stable", "2026-05-20") == (meta["stability"], meta["valid_from"])
        assert PI_RECORD["review"] == meta["review"] and PI_RECORD["evidence"] == meta["evidence"]

    def test_import_and_export_round_trip_through_sqlite(self, tmp_path: Path) -> None:
        """A PI file imports into SQLite and exports with its metadata intact."""
        with SQLiteStore(tmp_path / "pi.db") as s:
            assert 1 == s.import_jsonl(io.StringIO(json.dumps(PI_RECORD) + "\n"))
            out = io.StringIO()
            s.export_jsonl(out)
        exported = json.loads(out.getvalue())
        assert record_from_json(dict(PI_RECORD)).metadata == exported["metadata"]
        assert record_to_json(record_from_json(exported)) == exported

    def test_a_bad_pi_field_is_named(self) -> None:
        """A PI confidence outside [0, 1] names the field and the value."""
        with pytest.raises(
            ValueError, match=r"'confidence' must be a number in \[0, 1\] \(got 92\)"
        ):
            record_from_json({**PI_RECORD, "confidence": 92})


class TestPiRecordErrors:
    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"id": ""}, "'id' must be a non-empty string (got '')"),
            ({"statement": 3}, "'statement' must be a non-empty string (got 3)"),
            ({"layer": "L4"}, "'layer' must be one of ['L1', 'L2', 'L3'] (got 'L4')"),
            ({"scope": "global"}, "'scope' must be an object or null (got 'global')"),
            ({"tags": "tooling"}, "'tags' must be a list of strings (got 'tooling')"),
            ({"profile_id": 7}, "'profile_id' must be a string or null (got 7)"),
            ({"superseded_by": 5}, "'superseded_by' must be a list of ids (got 5)"),
            ({"created_at": "May 20"}, "PI record 'mem_20260520_abc': 'timestamp' must be"),
        ],
    )
    def test_each_bad_field_is_named(self, change: dict[str, Any], message: str) -> None:
        """The first wrong field of a PI line is named with its value."""
        with pytest.raises(ValueError, match="PI record") as err:
            record_from_json({**PI_RECORD, **change})
        assert message in str(err.value)

    def test_successors_layers_and_inquiries(self) -> None:
        """Several successors stay in metadata; L3 is daily; a closed inquiry is not active."""
        r = record_from_json({**PI_RECORD, "superseded_by": ["mem_b", "mem_c"]})
        assert ("mem_b", ["mem_b", "mem_c"]) == (
            r.superseded_by,
            (r.metadata or {})["superseded_by"],
        )
        day = record_from_json(
            {"id": "d1", "layer": "L3", "statement": "notes", "confidence": None}
        )
        assert ("daily", None, None) == (day.category, day.confidence, day.metadata)
        q = record_from_json({"id": "q1", "question": "Why?", "status": "answered"})
        assert ("inquiry", "inquiry", "answered") == (q.category, q.memory_kind, q.status)
        assert {"inquiry_status": "answered"} == q.metadata


class TestPresetExpansion:
    def test_a_renderer_of_another_kind_replaces_the_presets(self) -> None:
        """A renderer of another kind (name or mapping) drops the preset's sectioned settings."""
        for renderer in ("bracket", {"kind": "relevant_memories", "max_entries": 2}):
            cfg = parse_agent_config(
                {"agent": "a", "memory": {"preset": "pi", "renderer": renderer}}
            ).memory
            assert (True, True) == (cfg.governance.enabled, cfg.renderer.kind != "sectioned")

    def test_renderer_sectioned_by_name_keeps_the_presets_settings(self) -> None:
        """renderer: sectioned under preset: pi keeps PI's budgets."""
        cfg = parse_agent_config(
            {"agent": "a", "memory": {"preset": "pi", "renderer": "sectioned"}}
        ).memory
        assert (12, 3) == (cfg.renderer.max_records, cfg.renderer.max_questions)


class TestStandingEdges:
    def test_a_store_without_the_capability_or_a_zero_limit_adds_nothing(self) -> None:
        """No standing_records, or standing.limit 0: only what recall returned."""
        cache = StandingCache()
        assert () == cache.get(object(), None, limit=4, min_confidence=0.85)
        store = InMemoryStore([MemoryRecord("l1", "identity", layer="L1")])
        assert () == cache.get(store, None, limit=0, min_confidence=0.85)
        assert 0 == cache.reads

    def test_a_store_without_weak_references_is_read_every_time(self) -> None:
        """A store that cannot be weakly referenced is answered, never cached."""

        class Slotted:
            __slots__ = ()
            data_version = 1

            def standing_records(self, *_a: Any, **_k: Any) -> list[MemoryEntry]:
                return [MemoryEntry("l1", "identity", "core", NOW), "junk"]  # type: ignore[list-item]

        cache = StandingCache()
        got = [cache.get(Slotted(), None, limit=4, min_confidence=0.85) for _ in range(2)]
        assert (["l1"], 2) == ([e.key for e in got[1]], cache.reads)
        cache.clear()

    def test_standing_entries_come_without_a_pinned_clock(self) -> None:
        """With the wall clock (now=None, or a naive now) today's sections are still read."""
        store = InMemoryStore(
            [
                MemoryRecord("todo", "Write the guide", "scratchpad"),
                MemoryRecord("l1", "Prefers terse answers", layer="L1"),
            ]
        )
        agent = load_agent_config(ROOT / "config/agents/pi.yaml")
        for now in (None, NOW.replace(tzinfo=None)):
            out = render_memory_context(store, "what next?", config=agent.memory, now=now)
            assert {"todo", "l1"} == {e.key for e in out.entries}

    def test_standing_with_another_renderer_reads_rules_and_l1_only(self) -> None:
        """standing.enabled with the bracket block adds L1 and rules, not the sections' rows."""
        store = InMemoryStore(
            [
                MemoryRecord("todo", "Write the guide", "scratchpad"),
                MemoryRecord("l1", "Prefers terse answers", layer="L1"),
            ]
        )
        cfg = parse_agent_config(
            {"agent": "a", "memory": {"standing": {"enabled": True}, "min_relevance_score": 0}}
        ).memory
        out = render_memory_context(store, "zebra migration", config=cfg, now=NOW)
        assert ["l1"] == [e.key for e in out.entries]
