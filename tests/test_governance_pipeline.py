"""Governance stages inside render_memory_context, on a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_inject import (
    MemoryInjectConfig,
    MemoryRecall,
    render_memory_context,
    resolve_inject_policy,
)
from memory_inject.config import GovernanceConfig, RendererConfig, TrivialPromptConfig
from memory_inject.storage.sqlite import SQLiteStore

GOV = MemoryInjectConfig(
    min_relevance_score=0.0, recall_limit=10, governance=GovernanceConfig(enabled=True)
)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "gov.db")
    s.store("ok", "deploy with the release script", profile_id="project:app")
    s.store("old", "deploy with the legacy script", status="deprecated")
    s.store("other", "deploy notes for another project", profile_id="project:other")
    s.store("scoped", "deploy app via helm", scope={"type": "project", "project": "billing"})
    s.store("neg", "deploy by publishing to npm", does_not_apply_when=["publishing"])
    s.store("fp", "deploy tokens rotate weekly", does_not_apply_when=["tokens"])
    s.store("disputed", "deploy on fridays is fine", status="contested", profile_id="project:other")
    return s


class TestGovernanceRender:
    def test_each_stage_drops_with_pis_reason(self, store: SQLiteStore, tmp_path: Path) -> None:
        """Status, profile, project and negative scope drop with PI's reason strings."""
        out = render_memory_context(
            store,
            "how do I deploy? publish to npm registry",
            config=GOV,
            profile="project:app",
            cwd=tmp_path,
        )
        assert isinstance(out.event, MemoryRecall)
        dropped = out.event.dropped
        assert "status:deprecated" == dropped["old"]
        assert "profile_mismatch:project:other" == dropped["other"]
        assert "project_scope_mismatch:billing" == dropped["scoped"]
        assert "does_not_apply_when:publishing" == dropped["neg"]
        assert {"ok", "fp"} <= {e.key for e in out.entries}
        names = [t.name for t in out.trace]
        assert names[:7] == [
            "recall",
            "session_scope",
            "status_filter",
            "profile_scope",
            "project_scope",
            "positive_applicability",
            "negative_scope",
        ]
        store.close()

    def test_pi_false_positive_is_not_excluded(self, store: SQLiteStore, tmp_path: Path) -> None:
        """'tokens' is not excluded by a prompt containing 'to' (PI's false positive)."""
        out = render_memory_context(
            store,
            "explain how to deploy and run tests",
            config=GOV,
            profile="project:app",
            cwd=tmp_path,
        )
        assert "fp" in {e.key for e in out.entries}
        store.close()

    def test_contested_entries_from_other_profiles_are_not_routed(
        self, store: SQLiteStore, tmp_path: Path
    ) -> None:
        """A contested record of another profile is dropped from the routed section too."""
        out = render_memory_context(
            store, "deploy on fridays?", config=GOV, profile="project:app", cwd=tmp_path
        )
        routed = next(t for t in out.trace if t.name == "routed_scope")
        assert "profile_mismatch:project:other" == routed.dropped["disputed"]
        store.close()

    def test_contested_entries_face_the_skip_set_and_the_conversation_exclusion(
        self, tmp_path: Path
    ) -> None:
        """The Contested Memory section showed what every block leaves out: autosaves,
        history blobs, image markers and tool results, and, in a cron turn, a user's
        private chat line (its active twin was excluded). Found by a fuzzing helper."""
        cfg = MemoryInjectConfig(renderer=RendererConfig(kind="sectioned", max_contested=10))
        s = SQLiteStore(tmp_path / "c.db")
        rows = {
            "assistant_resp_3": "deploy friday reply",
            "tz_history": "deploy friday history blob",
            "img": "deploy friday [IMAGE:/tmp/x.png]",
            "tool": "deploy friday <tool_result>secret</tool_result>",
        }
        for key, content in rows.items():
            s.store(key, content, "core", status="contested")
        s.store("fine", "deploy friday needs a second reviewer", "core", status="contested")
        s.store(
            "chat",
            "alice said the deploy password is tulip7",
            "conversation",
            session_id="alice_dm",
            status="contested",
        )
        out = render_memory_context(s, "deploy friday", config=cfg)
        assert "second reviewer" in out.text
        assert not any(c in out.text for c in rows.values())
        routed = next(t for t in out.trace if t.name == "routed_scope")
        assert {"assistant_resp_3", "tz_history", "img", "tool"} <= set(routed.dropped)
        cron = render_memory_context(s, "what is the deploy password?", config=cfg, origin="cron")
        assert "tulip7" not in cron.text
        s.close()

    def test_governance_off_keeps_the_zeroclaw_path(self, store: SQLiteStore) -> None:
        """With governance off (the default) no governance stage runs."""
        out = render_memory_context(store, "deploy", config=MemoryInjectConfig())
        assert ["recall", "session_scope", "decay"] == [t.name for t in out.trace][:3]
        store.close()


class TestTrivialPrompt:
    @pytest.mark.parametrize("text", ["ok", "Thanks!!", "sounds good", "/clear", "hi"])
    def test_trivial_prompts_skip(self, text: str) -> None:
        """Acknowledgements, slash commands and very short inputs skip with trivial_prompt."""
        cfg = MemoryInjectConfig(trivial_prompt=TrivialPromptConfig(enabled=True))
        assert (
            "trivial_prompt"
            == resolve_inject_policy("interactive", has_session=True, config=cfg, query=text).reason
        )

    def test_real_questions_inject_and_the_filter_is_opt_in(self) -> None:
        """A question injects; without the filter even 'ok' injects (zeroclaw)."""
        on = MemoryInjectConfig(trivial_prompt=TrivialPromptConfig(enabled=True))
        assert resolve_inject_policy(
            "channel", has_session=True, config=on, query="which server hosts prod?"
        ).inject
        assert resolve_inject_policy(
            "channel", has_session=True, config=MemoryInjectConfig(), query="ok"
        ).inject
