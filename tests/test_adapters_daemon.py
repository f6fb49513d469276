"""The daemon adapter (adapters/daemon.py) against a real SQLite store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from memory_inject import AgentConfig, load_agent_config

# The adapters ship as memory_inject.adapters from the adapters/ folder (package-dir);
# type checkers read the folder, which has no such mapping.
if TYPE_CHECKING:
    from adapters import DaemonAdapter
else:
    from memory_inject.adapters import DaemonAdapter
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording
from tests._twins import call, twin  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / ".memory" / "memory.db")
    s.store("backup_job", "The nightly backup job on prod-3 writes to /srv/backup.", "core")
    s.store(
        "chat",
        "Alice asked about the backup job yesterday.",
        "conversation",
        session_id="telegram_alice",
    )
    s.store("cli_chat", "I asked at the CLI whether the backup job ran.", "conversation")
    s.store(
        "dm_fact",
        "Alice is moving the backup job to Friday, she said in private.",
        "core",
        session_id="telegram_alice",
    )
    yield s
    s.close()


class TestHeartbeat:
    def test_the_query_is_the_prefixed_task_and_the_turn_is_sessionless(
        self, store: SQLiteStore
    ) -> None:
        """A heartbeat recalls with [Heartbeat Task | prio] text, no session, no chat rows,
        and no row bound to a session (a fact stored in Alice's chat is not the daemon's)."""
        with recording() as rec:
            turn = call(
                DaemonAdapter(store, AgentConfig(agent="ops")),
                "heartbeat",
                "check the backup job",
                "high",
                turn_id="h1",
            )
        assert "[Heartbeat Task | high] check the backup job" == turn.query
        assert turn.block.startswith("[Memory context]\n- backup_job: ")
        assert turn.block + turn.query == turn.prompt
        ev = rec.events[0]
        assert ("daemon", "daemon", "h1", (None,)) == (
            ev.origin,
            ev.channel,
            ev.turn_id,
            ev.sessions,
        )
        assert {
            "cli_chat": "conversation_excluded",
            "chat": "foreign_session",
            "dm_fact": "foreign_session",
        } == {k: ev.dropped.get(k) for k in ("cli_chat", "chat", "dm_fact")}
        assert "Friday" not in turn.block

    def test_the_default_priority_is_normal(self, store: SQLiteStore) -> None:
        """Without a priority the task is marked normal."""
        turn = call(
            DaemonAdapter(store, AgentConfig(agent="ops")), "heartbeat", "check the backup job"
        )
        assert "[Heartbeat Task | normal] check the backup job" == turn.query

    @pytest.mark.parametrize(("task", "priority"), [(None, "normal"), (5, "normal"), ("x", None)])
    def test_a_task_or_priority_that_is_not_a_str_is_refused(
        self, store: SQLiteStore, task: object, priority: object
    ) -> None:
        """``heartbeat(None)`` sent the query "[Heartbeat Task | normal] None"."""
        daemon = DaemonAdapter(store, AgentConfig(agent="ops"))
        with pytest.raises(TypeError, match=r"heartbeat: '(task_text|priority)' must be a str"):
            daemon.heartbeat(task, priority)  # type: ignore[arg-type]

    def test_an_agent_with_daemon_disabled_gets_nothing(self, store: SQLiteStore) -> None:
        """scheduler.yaml disables daemon turns: skipped with origin_disabled, no event."""
        agent = load_agent_config(ROOT / "config" / "agents" / "scheduler.yaml")
        with recording() as rec:
            turn = call(DaemonAdapter(store, agent), "heartbeat", "check the backup job")
        assert ("origin_disabled", "", []) == (turn.policy.reason, turn.block, rec.events)


class TestTasks:
    def test_a_task_run_uses_its_text_as_the_query(self, store: SQLiteStore) -> None:
        """run_task recalls with the text as given."""
        turn = call(
            DaemonAdapter(store, AgentConfig(agent="ops")), "run_task", "rotate the backup job"
        )
        assert ("rotate the backup job", True) == (turn.query, "backup_job" in turn.block)

    def test_the_async_twins_match(self, store: SQLiteStore) -> None:
        """aheartbeat and arun_task give what heartbeat and run_task give."""
        adapter = DaemonAdapter(store, AgentConfig(agent="ops"))

        async def both() -> tuple[str, str]:
            a = await adapter.aheartbeat("check the backup job", "low")
            b = await adapter.arun_task("rotate the backup job")
            return a.prompt, b.prompt

        assert (
            call(adapter, "heartbeat", "check the backup job", "low").prompt,
            call(adapter, "run_task", "rotate the backup job").prompt,
        ) == asyncio.run(both())

    def test_a_failing_store_never_raises(self, store: SQLiteStore) -> None:
        """With the store closed the run has no block and one failed event."""
        store.close()
        with recording() as rec:
            turn = call(DaemonAdapter(store, AgentConfig(agent="ops")), "run_task", "backup job")
        assert ("backup job", [False]) == (turn.prompt, [e.success for e in rec.events])


class TestConstruction:
    @pytest.mark.parametrize("bad", [None, "memory.db", Path("memory.db"), {"recall": 1}, 42])
    def test_a_thing_that_is_no_store_is_refused_at_construction(self, bad: object) -> None:
        """None, a path or a mapping fails when the adapter is built, naming the adapter."""
        with pytest.raises(TypeError, match=r"DaemonAdapter: 'store' must be a memory store"):
            DaemonAdapter(bad, AgentConfig(agent="ops"))  # type: ignore[arg-type]  # on purpose

    def test_a_daemon_never_autosaves(self, store: SQLiteStore) -> None:
        """autosave=True is refused: a heartbeat is not a person's message."""
        with pytest.raises(TypeError, match="never autosave"):
            DaemonAdapter(store, AgentConfig(agent="ops"), autosave=True)

    def test_options_default_and_override(self, store: SQLiteStore) -> None:
        """channel defaults to 'daemon', agent_alias to the agent file's name."""
        default = DaemonAdapter(store, AgentConfig(agent="ops"))
        custom = DaemonAdapter(store, AgentConfig(agent="ops"), channel="sop", agent_alias="ops-2")
        assert ("daemon", "ops") == (default.channel, default.agent_alias)
        assert ("sop", "ops-2") == (custom.channel, custom.agent_alias)
