"""Issue 29, thirty-second round: the standing read is scoped per session, not per profile.

The stores' side runs on every built-in store in
``tests/storage/test_32_standing_sessions.py``; here the paths around them: the
hot cache and the CLI's explain wrapper pass the scope through, the standing
cache keeps one answer per scope, and a third-party store whose
``standing_records`` predates the scope keywords still works.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from memory_inject import render_memory_context
from memory_inject.cli._explain import recorder_for
from memory_inject.models import MemoryEntry
from memory_inject.sessions import SESSION_KEY_PREFIX
from memory_inject.standing import CACHE, StandingCache, read_standing, standing_scope
from memory_inject.storage._standing_scope import SESSION_RECORD_PREFIX
from memory_inject.storage.hot_cache import HotCacheStore
from memory_inject.storage.memory import InMemoryStore
from tests.storage._standing_seed import DAILY, NOW, PI, seed


class LegacyStore(InMemoryStore):
    """A third party's store whose ``standing_records`` predates the scope keywords."""

    def __init__(self) -> None:
        """An empty store that records the keywords each standing read got."""
        super().__init__()
        self.calls: list[set[str]] = []

    def standing_records(  # type: ignore[override]
        self,
        profile_id: str | None,
        *,
        limit: int,
        min_confidence: float,
        categories: Mapping[str, datetime | None] | None = None,
    ) -> list[MemoryEntry]:
        """The old signature: no ``sessions``, no ``shared_only``."""
        self.calls.append({"limit", "min_confidence", "categories"})
        return super().standing_records(
            profile_id, limit=limit, min_confidence=min_confidence, categories=categories
        )


class TestWrappers:
    def test_the_hot_cache_passes_the_scope_to_its_store(self) -> None:
        """A cron turn over a hot-cached store shows the shared note."""
        CACHE.clear()
        store = HotCacheStore(seed(InMemoryStore()))
        out = render_memory_context(store, "status report", config=PI, origin="cron", now=NOW)
        assert ("Shared note" in out.text, "Session A" in out.text) == (True, False)

    def test_the_explain_wrapper_passes_the_scope_and_notes_the_rows(self) -> None:
        """The CLI's recorder reads the scoped rows and notes them as seen."""
        rec = recorder_for(seed(InMemoryStore()))
        got = read_standing(
            rec, None, limit=32, min_confidence=0.85, categories=DAILY, shared_only=True
        )
        assert (["shared_day"], ["shared_day"]) == ([e.key for e in got], list(rec.seen))

    def test_the_explain_wrapper_over_a_legacy_store_calls_it_the_old_way(self) -> None:
        """The recorder takes the scope; the legacy store under it is called without it."""
        legacy = seed(LegacyStore())
        got = read_standing(
            recorder_for(legacy),
            None,
            limit=32,
            min_confidence=0.85,
            categories=DAILY,
            sessions=("b",),
        )
        assert (32, 1) == (len(got), len(legacy.calls))


class TestLegacyStores:
    def test_a_store_without_the_scope_keywords_still_renders(self) -> None:
        """A cron turn over a legacy store succeeds; the session stage drops A's rows."""
        CACHE.clear()
        store = seed(LegacyStore())
        out = render_memory_context(store, "status report", config=PI, origin="cron", now=NOW)
        assert (True, False, 1) == (out.success, "Session A" in out.text, len(store.calls))

    def test_a_catch_all_signature_is_not_taken_for_the_scope(self) -> None:
        """``**kwargs`` may forward to a store without the keywords: called the old way."""
        seen: list[dict[str, Any]] = []

        class Forwarder:
            data_version = 0

            def standing_records(self, *args: Any, **kwargs: Any) -> Sequence[MemoryEntry]:
                seen.append(kwargs)
                return []

        read_standing(Forwarder(), None, limit=4, min_confidence=0.85, sessions=("b",))
        assert ["categories", "limit", "min_confidence"] == sorted(seen[0])


class TestTheCache:
    def test_each_scope_is_its_own_entry(self) -> None:
        """A cron read and a session read of one store do not share a cached answer."""
        store = seed(InMemoryStore())
        cache = StandingCache()
        cron = cache.get(
            store, None, limit=32, min_confidence=0.85, categories=DAILY, shared_only=True
        )
        whole = cache.get(store, None, limit=32, min_confidence=0.85, categories=DAILY)
        assert (["shared_day"], 32, 2) == ([e.key for e in cron], len(whole), cache.reads)

    def test_the_turns_scope(self) -> None:
        """Own sessions win over shared_only; a turn naming none reads everything."""
        assert [(("a", "b"), False), ((), True), ((), False)] == [
            standing_scope(["b", None, "a"], True),
            standing_scope([None], True),
            standing_scope([None], False),
        ]

    def test_the_session_record_prefix_is_the_sessions_one(self) -> None:
        """Storage's copy of the session-record prefix equals ``memory_inject.sessions``'."""
        assert SESSION_KEY_PREFIX == SESSION_RECORD_PREFIX
