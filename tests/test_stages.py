"""The skip set and the small stages, with the spec's exact rules."""

from __future__ import annotations

import pytest

from memory_inject.stages import should_skip_entry, skip_reason


class TestSkipRules:
    @pytest.mark.parametrize(
        "key",
        [
            "assistant_resp",
            "assistant_resp_1234",
            "ASSISTANT_RESP_abcd",
            "user_msg",
            "user_msg_1234",
            "USER_MSG_abcd",
            " user_msg ",
            "telegram_123_history",
        ],
    )
    def test_autosave_and_history_keys_are_skipped(self, key: str) -> None:
        """Autosave keys and *_history keys are skipped whatever their content."""
        assert should_skip_entry(key, "plain content")

    @pytest.mark.parametrize(
        "key",
        ["assistant_response", "user_message", "telegram_user_msg_101", "telegram_123_45", "hi"],
    )
    def test_lookalike_keys_are_kept(self, key: str) -> None:
        """Keys that only contain the autosave words elsewhere are kept."""
        assert not should_skip_entry(key, "plain content")

    @pytest.mark.parametrize(
        "content",
        [
            "[cron:auto] nightly run",
            "[DISTILLED_MEMORY_CHUNK 1/2] DISTILLED_INDEX_SIG:abc123",
            "[Heartbeat Task | decision] check mail",
            "[Memory context]\n- a: b\n[/Memory context]",
            "  [memory CONTEXT] nested",
            "",
            "   \n",
        ],
    )
    def test_autosave_noise_content_is_skipped(self, content: str) -> None:
        """Cron, heartbeat, distilled and nested-block content, and blank content, are skipped."""
        assert should_skip_entry("k", content)

    def test_image_and_tool_result_markers_are_case_sensitive(self) -> None:
        """'[IMAGE:' and '<tool_result' skip; other casings do not."""
        assert "skip:image" == skip_reason("k", "see [IMAGE:/tmp/a.jpg]")
        assert "skip:tool_result" == skip_reason("k", '<tool_result name="shell">ls')
        assert skip_reason("k", "see [image:/tmp/a.jpg] <TOOL_RESULT") is None

    def test_ordinary_fact_is_kept(self) -> None:
        """'User prefers concise answers.' passes every rule."""
        assert skip_reason("pref", "User prefers concise answers.") is None


class TestWithScore:
    def test_with_score_equals_evolve(self) -> None:
        """with_score copies every field and converts only the new score, as evolve would."""
        from datetime import UTC, datetime

        import attrs

        from memory_inject.models import MemoryEntry

        e = MemoryEntry(
            "k",
            "c",
            "daily",
            datetime(2026, 1, 1, tzinfo=UTC),
            "s",
            0.5,
            0.2,
            "id1",
            "ns",
            {"tags": ["a"]},
        )
        for score in (0.25, None, 1, 0.0):
            got = e.with_score(score)
            assert attrs.evolve(e, score=score) == got
            assert got.extra == e.extra and got.id == "id1" and got is not e
            assert type(got) is MemoryEntry
