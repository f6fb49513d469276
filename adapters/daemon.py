"""Daemon-initiated turns: heartbeat tasks and background task runs (origin ``daemon``).

Sessionless, so the core policy excludes conversation memory: a background
run never sees what people said in chats (zeroclaw issues 5415/5456). The
heartbeat query is the prefixed task, ``[Heartbeat Task | <priority>] <text>``,
which is also the model's input; daemon turns never autosave.
"""

from __future__ import annotations

from attrs import frozen

from memory_inject.models import TurnOrigin

from . import _core
from ._base import Adapter, turn_of

__all__ = ["DaemonAdapter", "DaemonTurn", "heartbeat_query"]


def heartbeat_query(task_text: str, priority: str = "normal") -> str:
    """The heartbeat query zeroclaw builds: ``[Heartbeat Task | <priority>] <task>``;
    ``TypeError`` naming the argument unless both are str (``None`` became "None")."""
    for name, value in (("task_text", task_text), ("priority", priority)):
        if not isinstance(value, str):
            raise TypeError(f"heartbeat: {name!r} must be a str (got {type(value).__name__})")
    return f"[Heartbeat Task | {priority}] {task_text}"


def _recall_query(task_text: str, priority: str) -> str:
    """:func:`heartbeat_query`, or the bare task when it holds no word ("", "   ", "👍"):
    a task with nothing to ask abstains, as ``run_task("")`` does, instead of recalling
    on the wrapper's own words ("Heartbeat", "Task", "high")."""
    query = heartbeat_query(task_text, priority)
    return query if any(ch.isalnum() for ch in task_text) else task_text


@frozen(kw_only=True)
class DaemonTurn(_core.Injection):
    """A daemon run: ``prompt`` is the block followed by the task."""


class DaemonAdapter(Adapter):
    """Maps a heartbeat or a background task to the core's request."""

    default_channel = "daemon"
    autosaves = False

    def _request(self, query: str, turn_id: str | None) -> _core.TurnInput:
        return _core.TurnInput(origin=TurnOrigin.DAEMON, query=query, turn=self._meta(turn_id))

    def _run(self, query: str, turn_id: str | None) -> DaemonTurn:
        return turn_of(DaemonTurn, self._serve_turn(self._request(query, turn_id)))

    async def _arun(self, query: str, turn_id: str | None) -> DaemonTurn:
        return turn_of(DaemonTurn, await self._aserve_turn(self._request(query, turn_id)))

    def heartbeat(
        self, task_text: str, priority: str = "normal", *, turn_id: str | None = None
    ) -> DaemonTurn:
        """One heartbeat task; never raises because of memory."""
        return self._run(_recall_query(task_text, priority), turn_id)

    def run_task(self, text: str, *, turn_id: str | None = None) -> DaemonTurn:
        """A background task (an SOP step, a decision run) with ``text`` as its query."""
        return self._run(text, turn_id)

    async def aheartbeat(
        self, task_text: str, priority: str = "normal", *, turn_id: str | None = None
    ) -> DaemonTurn:
        """The async twin of :meth:`heartbeat`."""
        return await self._arun(_recall_query(task_text, priority), turn_id)

    async def arun_task(self, text: str, *, turn_id: str | None = None) -> DaemonTurn:
        """The async twin of :meth:`run_task`."""
        return await self._arun(text, turn_id)
