"""Issue 29, thirty-second round: the standing read limits after the session rule.

The standing context read each category's newest ``limit`` (32) rows of the
whole profile, and only then did the render drop the rows of other sessions:
40 daily notes of a DM session pushed the one shared note out of a cron turn's
Daily Log, and a channel turn of session B lost its own note the same way.
Every store now filters by the turn's sessions before it limits; these run on
each built-in store (in-memory, SQLite, PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memory_inject import render_memory_context
from memory_inject.contract import SupportsStandingContext
from memory_inject.sessions import record_session
from memory_inject.stages import StageContext
from memory_inject.stages.filters import session_scope
from memory_inject.standing import CACHE
from tests.storage._standing_seed import DAILY, NOW, PI, seed


def keys(entries: Any) -> set[str]:
    """The keys of ``entries``."""
    return {e.key for e in entries}


@pytest.mark.needs.with_args(SupportsStandingContext)
class TestScopedStandingRecords:
    def test_shared_only_sees_the_shared_row_under_forty_session_rows(
        self, store_factory: Callable[..., Any]
    ) -> None:
        """A scheduled turn's read counts only rows bound to no session."""
        s = store_factory()
        seed(s)
        got = s.standing_records(
            None, limit=32, min_confidence=0.85, categories=DAILY, shared_only=True
        )
        assert {"shared_day"} == keys(got)

    def test_a_session_sees_its_own_and_shared_rows_never_anothers(
        self, store_factory: Callable[..., Any]
    ) -> None:
        """Session B's read has B's and the shared note, none of session A's 40."""
        s = store_factory()
        seed(s)
        got = s.standing_records(
            None, limit=32, min_confidence=0.85, categories=DAILY, sessions=("b",)
        )
        assert {"shared_day", "b_day"} == keys(got)

    def test_no_scope_reads_the_whole_profile_as_before(
        self, store_factory: Callable[..., Any]
    ) -> None:
        """Without a scope the newest 32 rows come, whatever their session."""
        s = store_factory()
        seed(s)
        got = s.standing_records(None, limit=32, min_confidence=0.85, categories=DAILY)
        assert {f"a_day_{i}" for i in range(8, 40)} == keys(got)

    def test_the_read_keeps_what_the_session_stage_keeps(
        self, store_factory: Callable[..., Any]
    ) -> None:
        """Scoped reads equal the session stage over the unscoped read, session records too
        (the stage of a turn of the profile read: round 36 keeps another profile's out)."""
        s = store_factory()
        seed(s)
        s.store("l1_a", "identity of session a", layer="L1", session_id="a")
        s.store("l1", "shared identity", layer="L1", profile_id="project:app")
        for sid, profile in (("a", "project:app"), ("c", "project:app"), ("d", None)):
            record_session(
                s, session_id=sid, project="app", name=f"work {sid}", profile_id=profile, now=NOW
            )
        cats = {**DAILY, "session": NOW.replace(hour=0), "scratchpad": None}
        whole = s.standing_records("project:app", limit=100, min_confidence=0.85, categories=cats)
        for sessions, shared_only in (((), True), (("b",), False), (("a", "b"), False)):
            ctx = StageContext(
                PI, NOW, profile_id="project:app", sessions=sessions, shared_only=shared_only
            )
            want = keys(session_scope(ctx, whole).survivors)
            got = s.standing_records(
                "project:app",
                limit=100,
                min_confidence=0.85,
                categories=cats,
                sessions=sessions,
                shared_only=shared_only,
            )
            assert want == keys(got), (sessions, shared_only)


def _daily_log(text: str) -> str:
    parts = text.split("## Daily Log")
    return parts[1].split("\n## ")[0] if len(parts) > 1 else ""


@pytest.mark.needs.with_args(SupportsStandingContext)
class TestTheRender:
    def test_a_cron_turn_shows_the_shared_daily_note(
        self, store_factory: Callable[..., Any]
    ) -> None:
        """preset pi: a cron turn's Daily Log has the shared note, not a DM's."""
        s = store_factory()
        seed(s)
        CACHE.clear()
        out = render_memory_context(s, "status report", config=PI, origin="cron", now=NOW)
        log = _daily_log(out.text)
        assert ("Shared note" in log, "Session A" in log) == (True, False), out.text

    def test_a_channel_turn_of_session_b_shows_its_own_and_the_shared_note(
        self, store_factory: Callable[..., Any]
    ) -> None:
        """preset pi: session B's Daily Log has B's and the shared note, none of A's."""
        s = store_factory()
        seed(s)
        CACHE.clear()
        out = render_memory_context(
            s, "what is on today?", config=PI, origin="channel", sessions=["b"], now=NOW
        )
        log = _daily_log(out.text)
        assert (True, True, False) == (
            "Shared note" in log,
            "Session B note" in log,
            "Session A" in out.text,
        ), out.text
