"""Daemon-initiated turns: heartbeat tasks and background task runs (origin ``daemon``).

Sessionless, so the core policy excludes conversation memory: a background
run never sees what people said in chats (zeroclaw issues 5415/5456). The
heartbeat query is the prefixed task, ``[Heartbeat Task | <priority>] <text>``,
which is also the model's input; daemon turns never autosave.
"""

from __future__ import annotations

import os

import attrs
from attrs import frozen

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory
from memory_inject.models import TurnMeta, TurnOrigin

from . import _core

__all__ = ["DaemonAdapter", "DaemonTurn", "heartbeat_query"]


def heartbeat_query(task_text: str, priority: str = "normal") -> str:
    return f"[Heartbeat Task | {priority}] {task_text}"


@frozen(kw_only=True)
class DaemonTurn(_core.Injection):
    """A daemon run: ``prompt`` is the block followed by the task."""

    @property
    def prompt(self) -> str:
        return self.block + self.query


class DaemonAdapter:
    """Maps a heartbeat or a background task to the core's request."""

    def __init__(
        self,
        store: Memory,
        agent_config: AgentConfig,
        *,
        channel: str = "daemon",
        agent_alias: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.store = store
        self.agent_config = agent_config
        self.channel = channel
        self.agent_alias = agent_alias if agent_alias is not None else agent_config.agent
        self.cwd = cwd

    def _request(self, query: str, turn_id: str | None) -> _core.Request:
        return _core.Request(
            origin=TurnOrigin.DAEMON,
            query=query,
            turn=TurnMeta(self.channel, self.agent_alias, turn_id or _core.new_turn_id()),
        )

    def _run(self, query: str, turn_id: str | None) -> DaemonTurn:
        injection = _core.run(
            self.store, self.agent_config, self._request(query, turn_id), cwd=self.cwd
        )
        return DaemonTurn(**attrs.asdict(injection, recurse=False))

    async def _arun(self, query: str, turn_id: str | None) -> DaemonTurn:
        injection = await _core.arun(
            self.store, self.agent_config, self._request(query, turn_id), cwd=self.cwd
        )
        return DaemonTurn(**attrs.asdict(injection, recurse=False))

    def heartbeat(
        self, task_text: str, priority: str = "normal", *, turn_id: str | None = None
    ) -> DaemonTurn:
        """One heartbeat task; never raises because of memory."""
        return self._run(heartbeat_query(task_text, priority), turn_id)

    def run_task(self, text: str, *, turn_id: str | None = None) -> DaemonTurn:
        """A background task (an SOP step, a decision run) with ``text`` as its query."""
        return self._run(text, turn_id)

    async def aheartbeat(
        self, task_text: str, priority: str = "normal", *, turn_id: str | None = None
    ) -> DaemonTurn:
        """The async twin of :meth:`heartbeat`."""
        return await self._arun(heartbeat_query(task_text, priority), turn_id)

    async def arun_task(self, text: str, *, turn_id: str | None = None) -> DaemonTurn:
        """The async twin of :meth:`run_task`."""
        return await self._arun(text, turn_id)
