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
from memory_inject.render import SectionedRenderer, parse_sectioned
from memory_inject.stages import StageContext
from memory_inject.stages.governance import pi_traces
from memory_inject.storage import SQLiteStore
from memory_inject.storage._jsonl import record_from_json, record_to_json
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
        """Today's Sessions: today's session entries, newest first, at most max_sessions."""
        entries = [
            MemoryEntry(f"s{h}", f"[app] session {h}", "session", NOW.replace(hour=h))
            for h in (9, 11, 13, 14)
        ] + [MemoryEntry("old", "[app] yesterday", "session", NOW - timedelta(days=1))]
        out = render(entries, max_sessions=3)
        assert {
            "Today's Sessions": [
                "- 14:30 [app] session 14",
                "- 13:30 [app] session 13",
                "- 11:30 [app] session 11",
            ]
        } == parse_sectioned(out.text)
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
        assert "'preset' must be one of 'pi' (got 'pie') @ $.memory" in str(err.value)

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
