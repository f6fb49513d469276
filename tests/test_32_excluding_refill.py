"""A chat's thousand autosaves must not hide its fact (issue 29, round 32).

Round 31's refill asked the store for 4 times as many rows each round, at most 16 times
the limit: a chat with 1,000 autosaved messages that share the prompt's words ranked the
fact below all of them, and the widening stopped before it. A store that honours
``RecallQuery.exclude`` (``SupportsExcludingRecall``: the in-memory, SQLite and
PostgreSQL stores) is now asked once more, past every row no stage would show; the first
page is asked and reported as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_inject import arender_memory_context, render_memory_context, resolve_inject_policy
from memory_inject.contract import (
    RecallExclusion,
    RecallQuery,
    SupportsExcludingRecall,
    supports,
)
from memory_inject.signals import MemoryRecall
from memory_inject.storage import InMemoryStore
from memory_inject.storage.hot_cache import HotCacheStore
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording

FACT = "Production deploys go to prod-3."
CROWDED = "where do production deploys go? (asked 7x)"
AUTOSAVES = RecallExclusion(skip_keys=True)


def crowd(store: Any, n: int) -> Any:
    """One fact and ``n`` autosaved questions of chat ``c`` that share the prompt's words."""
    store.store("deploy_target", FACT, "core", session_id="c")
    for i in range(n):
        text = f"where do production deploys go? (asked {i}x)"
        store.store(f"user_msg_{i}", text, "conversation", session_id="c")
    for i in range(20):
        store.store(f"f{i}", f"unrelated fact number {i} about gardening and tomatoes")
    return store


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """An empty store of each engine that honours ``exclude``."""
    if request.param == "memory":
        yield InMemoryStore()
        return
    if request.param == "sqlite":
        s: Any = SQLiteStore(tmp_path / "m.db")
    else:
        from tests.storage._pg_backend import make_postgres_store

        s = make_postgres_store(request.getfixturevalue("pg_dsn"))
    yield s
    s.close()


def render(store: Any, prompt: str = CROWDED, **kw: Any) -> tuple[Any, MemoryRecall]:
    with recording() as rec:
        out = render_memory_context(store, prompt, sessions=["c"], origin="interactive", **kw)
    ev = rec.events[0]
    assert isinstance(ev, MemoryRecall)
    return out, ev


class TestAThousandAutosaves:
    def test_the_crowded_prompt_renders_the_fact(self, backend: Any) -> None:
        """Round 31 stopped 80 rows deep (0 of 300 renders showed it); one excluding query
        reaches the fact under all 1,000."""
        assert supports(backend, SupportsExcludingRecall) and backend.recall_excludes
        out, ev = render(crowd(backend, 1000))
        assert "- deploy_target: Production deploys go to prod-3." in out.text
        assert ev.success and () == ev.degraded

    def test_the_first_page_is_reported_as_before(self, backend: Any) -> None:
        """The first query is unchanged and its autosaves are still named as skipped, with
        the reasons a store without the capability reports for them."""
        store = crowd(backend, 30)
        first = store.answer(RecallQuery(CROWDED, 5, session_id="c")).entries
        assert all(e.key.startswith("user_msg_") for e in first)
        out, ev = render(store)
        old, old_ev = render(RecallOnly(store))
        assert "prod-3" in out.text and "prod-3" in old.text
        for e in first:
            assert "skip:user_autosave" == ev.dropped[e.key] == old_ev.dropped[e.key]

    def test_the_async_render_too(self, tmp_path: Path) -> None:
        with SQLiteStore(tmp_path / "m.db") as store:
            crowd(store, 300)
            out = asyncio.run(
                arender_memory_context(store, CROWDED, sessions=["c"], origin="interactive")
            )
            assert "- deploy_target: Production deploys go to prod-3." in out.text

    def test_a_hot_cache_and_the_explain_recorder_pass_it_on(self, tmp_path: Path) -> None:
        from memory_inject.cli._explain import recorder_for

        with SQLiteStore(tmp_path / "m.db") as inner:
            crowd(inner, 300)
            for store in (HotCacheStore(inner), recorder_for(inner)):
                assert supports(store, SupportsExcludingRecall)
                out, _ = render(store)
                assert "prod-3" in out.text


class TestScheduledTurns:
    def test_two_thousand_bound_rows_above_the_shared_one(self, backend: Any) -> None:
        """A cron turn sees only rows bound to no session; 2,000 chats' rows outrank the
        shared one, past the 1,024 the widening could reach."""
        for i in range(2000):
            backend.store(f"dm{i}", f"Globex interview news {i}: Globex hiring", session_id=f"s{i}")
        backend.store("shared", "Globex interviews happen on Tuesdays")
        policy = resolve_inject_policy("cron", has_session=False)
        with recording() as rec:
            out = render_memory_context(backend, "Globex interview news", policy=policy)
        assert "- shared: Globex interviews happen on Tuesdays" in out.text
        ev = rec.events[0]
        assert isinstance(ev, MemoryRecall) and ev.success
        assert 5 == sum(v == "foreign_session" for v in ev.dropped.values())  # the first page


class TestScores:
    def test_a_kept_row_scores_as_without_the_exclusion(self, backend: Any) -> None:
        """An excluded row never takes a slot; the rows kept keep their scores."""
        crowd(backend, 40)
        deep = backend.answer(RecallQuery(CROWDED, 200, session_id="c")).entries
        shown = [e for e in deep if not e.key.startswith("user_msg_")]
        got = backend.answer(RecallQuery(CROWDED, 5, session_id="c", exclude=AUTOSAVES)).entries
        assert [e.key for e in got] == [e.key for e in shown[:5]]
        assert [e.score for e in got] == pytest.approx([e.score for e in shown[:5]], abs=1e-9)

    @pytest.mark.parametrize(
        ("key", "excluded"),
        [
            ("USER_MSG_abc", True),
            ("  user_msg\t", True),
            ("Assistant_Resp", True),
            ("chat_HISTORY", True),
            ("user_message", False),
            ("assistant_response", False),
            ("user_msgs", False),
            ("history_of_x", False),
        ],
    )
    def test_keys_are_told_as_the_skip_set_tells_them(
        self, backend: Any, key: str, excluded: bool
    ) -> None:
        backend.store(key, "the release train leaves on Friday", session_id="c")
        q = RecallQuery("release train", 5, session_id="c", exclude=AUTOSAVES)
        assert excluded == (key not in [e.key for e in backend.answer(q).entries])

    def test_categories_and_sessions(self, backend: Any) -> None:
        backend.store("chat", "the release train leaves on Friday", "conversation")
        backend.store("bound", "the release train has ten cars", session_id="c")
        backend.store("fact", "the release train is green")
        ex = RecallExclusion(categories=("conversation",), sessionless=True)
        got = backend.answer(RecallQuery("release train", 5, exclude=ex)).entries
        assert ["fact"] == [e.key for e in got]


class RecallOnly:
    """A store with only ``name`` and ``recall``: no ``answer``, so no exclusion."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = "recall-only"
        self.asked: list[int] = []

    def recall(self, query: str, limit: int, **kw: Any) -> Any:
        self.asked.append(limit)
        return self.inner.recall(query, limit, **kw)


class TestWithoutTheCapability:
    def test_the_widening_still_runs(self, tmp_path: Path) -> None:
        """A store that cannot exclude is asked 4 times as many rows each round, as before:
        30 autosaves are within its reach."""
        with SQLiteStore(tmp_path / "m.db") as inner:
            store = RecallOnly(crowd(inner, 30))
            out, ev = render(store)
            assert "prod-3" in out.text and [5, 20, 80] == store.asked
            assert 30 == sum(v == "skip:user_autosave" for v in ev.dropped.values())

    def test_a_store_that_says_false_is_not_asked_to_exclude(self) -> None:
        class Declines(InMemoryStore):
            recall_excludes = False

        store = crowd(Declines(), 30)
        asked: list[RecallQuery] = []
        answer = store.answer

        def noted(q: RecallQuery) -> Any:
            asked.append(q)
            return answer(q)

        store.answer = noted
        out, _ = render(store)
        assert "prod-3" in out.text and all(q.exclude is None for q in asked)
        assert [5, 20, 80] == [q.limit for q in asked]


def test_a_key_holding_a_nul_is_left_to_the_skip_set(tmp_path: Path) -> None:
    """SQLite's LIKE stops at a NUL: ``user_msg\\0_note`` matched ``user_msg`` there, though
    the skip set keeps it (an attack on the first version, helper 118)."""
    from memory_inject.storage.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "nul.db")
    try:
        for key in ("user_msg\0_note", "notes_history\0v2", "plain"):
            store.store(key, "the quarterly budget review", "core")
        ex = RecallExclusion(skip_keys=True, categories=(), sessionless=False)
        answer = store.answer(RecallQuery("quarterly budget", 10, exclude=ex))
        found = {e.key for e in answer.entries}
        assert found == {"user_msg\0_note", "notes_history\0v2", "plain"}
    finally:
        store.close()
