"""The direct-call adapter (adapters/agent_direct.py) against a real SQLite store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import AgentConfig, MemoryInjectConfig

# The adapters ship as memory_inject.adapters from the adapters/ folder (package-dir);
# type checkers read the folder, which has no such mapping.
if TYPE_CHECKING:
    from adapters import AgentDirectAdapter
else:
    from memory_inject.adapters import AgentDirectAdapter
from memory_inject.config import TrivialPromptConfig
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording
from tests._twins import call, twin  # noqa: F401


class LimitRecorder:
    """Wraps a store and records the limit of every recall."""

    def __init__(self, inner: SQLiteStore, name: str | None = None) -> None:
        self.inner = inner
        self.limits: list[int] = []
        self._name = name

    @property
    def name(self) -> str:
        return self._name or self.inner.name

    def recall(self, query: str, limit: int, **kw: Any) -> Any:
        self.limits.append(limit)
        return self.inner.recall(query, limit, **kw)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / ".memory" / "memory.db")
    s.store("billing_contact", "The Acme billing contact is Priya.", "core")
    s.store(
        "ws_chat",
        "In this session we agreed Acme billing goes monthly.",
        "conversation",
        session_id="ws-1",
    )
    yield s
    s.close()


def agent(**origin: Any) -> AgentConfig:
    return AgentConfig(
        agent="api", memory=MemoryInjectConfig(origins={"agent_direct": origin} if origin else {})
    )


class TestRequest:
    def test_a_session_sees_its_conversation_and_no_session_sees_none(
        self, store: SQLiteStore
    ) -> None:
        """Per-request session: with it the session's chat rows, without it none."""
        adapter = AgentDirectAdapter(store, agent())
        scoped = call(adapter, "request", "how is Acme billing done?", session_id="ws-1")
        unscoped = call(adapter, "request", "how is Acme billing done?")
        assert "ws_chat" in scoped.block and "ws_chat" not in unscoped.block
        assert (False, True) == (
            scoped.policy.exclude_conversation,
            unscoped.policy.exclude_conversation,
        )
        assert "agent_direct" == scoped.event.origin
        assert scoped.block + "how is Acme billing done?" == scoped.prompt

    def test_the_recall_limit_comes_from_the_config(self, store: SQLiteStore) -> None:
        """recall_limit per origin reaches the store; 0 means the pool cap (1024)."""
        two, unlimited = LimitRecorder(store), LimitRecorder(store)
        call(AgentDirectAdapter(two, agent(recall_limit=2)), "request", "Acme billing")
        call(AgentDirectAdapter(unlimited, agent(recall_limit=0)), "request", "Acme billing")
        assert ([2], [1024]) == (two.limits, unlimited.limits)

    def test_the_async_twin_matches(self, store: SQLiteStore) -> None:
        """arequest renders what request renders."""
        adapter = AgentDirectAdapter(store, agent())
        sync = call(adapter, "request", "Acme billing", session_id="ws-1")
        async_ = asyncio.run(adapter.arequest("Acme billing", session_id="ws-1"))
        assert sync.block == async_.block

    def test_a_failing_store_never_raises(self, store: SQLiteStore) -> None:
        """With the store closed the request has no block and one failed event."""
        store.close()
        with recording() as rec:
            turn = call(
                AgentDirectAdapter(store, agent(), autosave=True),
                "request",
                "who is the Acme billing contact?",
                session_id="ws-1",
            )
        assert ("", [False]) == (turn.block, [e.success for e in rec.events])
        assert "autosave_failed" in (turn.error or "")


class TestInjectionActive:
    def test_it_mirrors_the_policy_and_a_none_backend(self, store: SQLiteStore) -> None:
        """Active by default; not for a store named none, a disabled origin or a trivial text."""
        trivial = AgentConfig(
            agent="api", memory=MemoryInjectConfig(trivial_prompt=TrivialPromptConfig(enabled=True))
        )
        assert AgentDirectAdapter(store, agent()).injection_active("ws-1")
        assert not AgentDirectAdapter(LimitRecorder(store, "none"), agent()).injection_active()
        assert not AgentDirectAdapter(store, agent(enabled=False)).injection_active()
        assert not AgentDirectAdapter(store, trivial).injection_active(text="thanks")
        assert AgentDirectAdapter(store, trivial).injection_active(text="Acme billing?")


class TestAutosave:
    def test_requests_are_saved_as_user_msg_in_their_session(self, store: SQLiteStore) -> None:
        """autosave=True stores the request text as user_msg_<turn_id> in its session."""
        adapter = AgentDirectAdapter(store, agent(), autosave=True)
        turn = call(
            adapter,
            "request",
            "Please switch Acme billing to quarterly.",
            session_id="ws-1",
            turn_id="r1",
        )
        record = store.get("user_msg_r1")
        assert record is not None
        assert "user_msg_r1" == turn.autosaved_key
        assert ("conversation", "ws-1") == (
            record.category,
            record.session_id,
        )
