"""Issue 29: once a turn of a conversation reaches the floor, that day's other turns need less.

``memory.min_companion_score`` (default 0.25): a chat's evidence is spread over its turns,
so when one turn of a session reaches ``min_relevance_score`` the block takes the other turns
of that session and day down to the companion score. Whether a turn gets memory is still the
floor's call; rows without a session and facts stored on purpose (``remember()``, the memory
tools) always need the floor. ``null`` is zeroclaw's one floor for every entry.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_inject import MemoryInjectConfig, render_memory_context
from memory_inject.config import parse_agent_config
from memory_inject.exceptions import ConfigError
from memory_inject.models import MemoryEntry
from memory_inject.stages import StageContext
from memory_inject.stages.filters import RelevanceFilter
from memory_inject.storage import SQLiteStore
from memory_inject.testing import FixtureMemory, recording

_DAY = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
_NOW = datetime(2026, 5, 2, tzinfo=UTC)


def _e(
    key: str,
    score: float | None,
    session: str | None = "chat",
    day: int = 0,
    source: str | None = None,
) -> MemoryEntry:
    return MemoryEntry(
        key=key,
        content=key,
        category="conversation",
        timestamp=_DAY + timedelta(days=day),
        session_id=session,
        score=score,
        extra={"source": source},
    )


def _kept(stage: RelevanceFilter, entries: list[MemoryEntry]) -> tuple[list[str], dict[str, str]]:
    out = stage(StageContext(MemoryInjectConfig(), _NOW), entries)
    return [e.key for e in out.survivors], dict(out.dropped)


class TestTheStage:
    def test_the_turns_beside_a_strong_one_need_only_the_companion_score(self) -> None:
        entries = [
            _e("best", 0.55),
            _e("same_day", 0.3),
            _e("other_day", 0.3, day=3),
            _e("no_session", 0.3, session=None),
            _e("remembered", 0.3, source="remember"),
            _e("tool_fact", 0.3, source="tool"),
            _e("too_weak", 0.2),
            _e("unscored", None),
        ]
        kept, dropped = _kept(RelevanceFilter(0.4, 0.25), entries)
        assert kept == ["best", "same_day", "unscored"]
        assert dropped == {
            "other_day": "below_relevance:0.3",
            "no_session": "below_relevance:0.3",
            "remembered": "below_relevance:0.3",
            "tool_fact": "below_relevance:0.3",
            "too_weak": "below_relevance:0.2",
        }

    def test_without_a_turn_at_the_floor_nothing_is_let_in(self) -> None:
        # The floor still decides whether the turn gets memory at all.
        entries = [_e("a", 0.39), _e("b", 0.3), _e("unscored", None)]
        kept, _ = _kept(RelevanceFilter(0.4, 0.25), entries)
        assert kept == ["unscored"]

    def test_a_strong_fact_or_sessionless_row_brings_no_companions(self) -> None:
        for strong in (_e("s", 0.9, source="remember"), _e("s", 0.9, session=None)):
            kept, _ = _kept(RelevanceFilter(0.4, 0.25), [strong, _e("turn", 0.3)])
            assert kept == ["s"]

    def test_another_sessions_strong_turn_lets_in_none_of_this_ones(self) -> None:
        entries = [_e("theirs", 0.8, session="s1"), _e("ours", 0.3, session="s2")]
        kept, _ = _kept(RelevanceFilter(0.4, 0.25), entries)
        assert kept == ["theirs"]

    @pytest.mark.parametrize("companion", [None, 0.4, 0.6])
    def test_no_companion_or_one_at_the_floor_is_one_floor(self, companion: float | None) -> None:
        entries = [_e("best", 0.9), _e("beside", 0.39)]
        kept, dropped = _kept(RelevanceFilter(0.4, companion), entries)
        assert kept == ["best"] and dropped == {"beside": "below_relevance:0.39"}


def _turns(*entries: MemoryEntry) -> FixtureMemory:
    return FixtureMemory({"c": list(entries)})


def _core(key: str, score: float, day: int = 0, source: str | None = None) -> MemoryEntry:
    return MemoryEntry(
        key=key,
        content=f"{key} said something",
        category="core",  # no time decay: the scores stay as given
        timestamp=_NOW - timedelta(days=day),
        session_id="c",
        score=score,
        extra={"source": source},
    )


class TestRenders:
    def test_a_render_shows_the_turns_of_the_matching_day(self) -> None:
        mem = _turns(
            _core("t1", 0.6),
            _core("t2", 0.3),
            _core("t3", 0.3, day=3),
            _core("fact", 0.3, source="remember"),
        )
        both = render_memory_context(mem, "what did they say?", sessions=["c"], now=_NOW)
        assert [e.key for e in both.entries] == ["t1", "t2"]
        assert "- t2: t2 said something" in both.text
        drops = next(t for t in both.trace if t.name == "relevance_filter").dropped
        assert dict(drops) == {"t3": "below_relevance:0.3", "fact": "below_relevance:0.3"}
        one = MemoryInjectConfig(min_companion_score=None)
        alone = render_memory_context(
            mem, "what did they say?", config=one, sessions=["c"], now=_NOW
        )
        assert [e.key for e in alone.entries] == ["t1"]

    def test_a_prompt_no_turn_answers_still_gets_nothing(self) -> None:
        mem = _turns(_core("t1", 0.39), _core("t2", 0.3))
        with recording() as rec:
            out = render_memory_context(mem, "what did they say?", sessions=["c"], now=_NOW)
        assert out.text == "" and out.entries == ()
        assert [e.abstained for e in rec.events] == ["below_relevance"]

    def test_a_real_store_keeps_a_fact_the_floor_drops_out(self, tmp_path: Path) -> None:
        # On the built-in store: facts written by remember() (source "remember") in one
        # session are never each other's companions, whatever they share.
        with SQLiteStore(tmp_path / "f.db") as store:
            store.store("dog", "The dog is named Biscuit", session_id="c", source="remember")
            store.store(
                "vet", "Biscuit sees Dr. Ames at the vet", session_id="c", source="remember"
            )
            cfg = MemoryInjectConfig(min_companion_score=0.0)
            out = render_memory_context(
                store, "what is my dog named?", config=cfg, sessions=["c"], now=_NOW
            )
            scores = {e.key: e.score for e in store.recall("what is my dog named?", 5)}
        kept = [e.key for e in out.entries]
        assert "dog" in kept
        assert ("vet" in kept) == ((scores.get("vet") or 0.0) >= 0.4)


class TestConfig:
    def test_default_presets_and_overrides(self) -> None:
        assert MemoryInjectConfig().min_companion_score == 0.25
        cfg = parse_agent_config(
            {"agent": "a", "memory": {"origins": {"cron": {"min_companion_score": None}}}}
        )
        assert cfg.memory.min_companion_score == 0.25
        assert cfg.memory.for_origin("cron").min_companion_score is None
        for preset in ("pi", "founder_os"):
            got = parse_agent_config({"agent": "a", "memory": {"preset": preset}})
            assert got.memory.min_companion_score is None, preset

    def test_a_bad_value_names_the_file_and_the_key(self, tmp_path: Path) -> None:
        path = tmp_path / "agent.yaml"
        path.write_text("agent: a\nmemory:\n  min_companion_score: 1.5\n", encoding="utf-8")
        from memory_inject import load_agent_config

        with pytest.raises(ConfigError) as err:
            load_agent_config(path)
        assert "min_companion_score" in str(err.value) and "agent.yaml" in str(err.value)
