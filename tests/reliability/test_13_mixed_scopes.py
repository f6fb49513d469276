"""Issue 13, class 3: a mixed scope list (``[s, None]``, ``[None, s]``) sees only its sessions.

The rule (docs/storage.md, "Mixed scope lists"): a turn that names a session
renders rows bound to its sessions and sessionless rows of the shared
categories (``core``, ``daily``), nothing else, whatever scope recalled them;
the ``session_scope`` stage enforces it. Each store (InMemoryStore, SQLite,
PostgreSQL) gets rows of every kind: its own session's, another session's, and
sessionless rows of every category; random mixed lists are rendered through the
whole pipeline, decay and rerank arms, sync and async.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from memory_inject import InMemoryStore, MemoryInjectConfig, render_memory_context
from memory_inject.config.schema import BudgetConfig, RerankConfig
from memory_inject.pipeline import arender_memory_context
from memory_inject.storage.sqlite import SQLiteStore

CATEGORIES = ("core", "daily", "conversation", "project_notes")
SESSIONS = ("telegram_alice", "telegram_bob", "telegram_group_1")
WORD = "invoice"
BASE = MemoryInjectConfig(
    recall_limit=100, budget=BudgetConfig(max_entries=64), min_relevance_score=0.0
)
CONFIGS = {
    "decay": BASE,
    "rerank": attrs.evolve(BASE, rerank=RerankConfig(enabled=True)),
}


def fill(store: Any) -> dict[str, tuple[str | None, str]]:
    """Three rows of each (session, category) and of each sessionless category."""
    owners: dict[str, tuple[str | None, str]] = {}
    for session in (*SESSIONS, None):
        for category in CATEGORIES:
            for n in range(3):
                key = f"{session or 'none'}_{category}_{n}"
                store.store(key, f"{WORD} note {n} of {key}", category, session_id=session)
                owners[key] = (session, category)
    return owners


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    if request.param == "sqlite":
        s: Any = SQLiteStore(tmp_path / "memory.db")
    else:
        from tests.storage._pg_backend import make_postgres_store

        s = make_postgres_store(request.getfixturevalue("pg_dsn"))
    try:
        yield s
    finally:
        s.close()


def visible(owner: tuple[str | None, str], sessions: tuple[str | None, ...]) -> bool:
    session, category = owner
    if session is None:
        return category in ("core", "daily")
    return session in sessions


class TestMixedScopeLists:
    @pytest.mark.parametrize("arm", sorted(CONFIGS))
    def test_random_mixed_lists_render_only_their_sessions_rows(self, store: Any, arm: str) -> None:
        """60 random mixed lists, sync and async: every rendered row is the turn's to see."""
        owners = fill(store)
        rng = random.Random(13)
        cfg = CONFIGS[arm]
        leaks: list[tuple[tuple[str | None, ...], str]] = []
        shared_seen = 0
        for i in range(60):
            named = rng.sample(SESSIONS, rng.randint(1, 2))
            sessions = tuple(rng.sample([*named, None], len(named) + 1))
            query = f"{WORD} note {i % 3}"
            if i % 2:
                result = render_memory_context(store, query, sessions=sessions, config=cfg)
            else:
                result = asyncio.run(
                    arender_memory_context(store, query, sessions=sessions, config=cfg)
                )
            assert result.success, result.event
            for e in result.entries:
                if not visible(owners[e.key], sessions):
                    leaks.append((sessions, e.key))
                shared_seen += owners[e.key][0] is None
        assert [] == leaks
        assert shared_seen > 0  # the rule keeps the agent-wide facts

    @pytest.mark.parametrize("sessions", [("telegram_alice", None), (None, "telegram_alice")])
    def test_the_issues_shape_names_what_it_dropped(
        self, store: Any, sessions: tuple[str | None, ...]
    ) -> None:
        """Sessionless conversation and custom rows are dropped by session_scope, by name."""
        fill(store)
        result = render_memory_context(store, f"{WORD} note 0", sessions=sessions, config=BASE)
        [trace] = [t for t in result.trace if t.name == "session_scope"]
        assert "sessionless_unshared" == trace.dropped.get("none_conversation_0")
        assert "foreign_session" == trace.dropped.get("telegram_bob_core_0")
        rendered = {e.key for e in result.entries}
        assert {"none_core_0", "telegram_alice_conversation_0"} <= rendered
        assert not rendered & {"none_conversation_0", "none_project_notes_0"}
