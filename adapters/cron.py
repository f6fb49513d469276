"""Scheduled jobs: origin ``cron``, query ``[cron:<id> <name>] <prompt>``, sessionless.

The core policy gives cron turns a block without conversation memory. A job
with ``uses_memory: false`` is memory-free end to end (zeroclaw issue 8695):
the turn is suppressed, the store is never called (no recall; one memory_skipped) and
the run is bound to no memory at all (:attr:`CronTurn.store` is None, so
the host offers the job no memory tools either). The same holds for every run
the policy gives no memory: ``origins: {cron: {enabled: false}}``, and a run
started inside a live turn (a ``sub_turn``). Cron turns never autosave.

The jobs file and :class:`CronJob` belong to :mod:`memory_inject.config`, so a
bad jobs file is checked, and worded, like a bad agent file; they are
re-exported here.
"""

from __future__ import annotations

from attrs import frozen

from memory_inject.config import CronJob, load_cron_jobs
from memory_inject.contract import Memory
from memory_inject.models import TurnOrigin

from . import _core
from ._base import Adapter, turn_of

__all__ = ["CronAdapter", "CronJob", "CronTurn", "cron_query", "load_cron_jobs"]


def cron_query(job: CronJob) -> str:
    """zeroclaw's prefixed prompt, which is both the recall query and the model's input."""
    return f"[cron:{job.id} {job.name}] {job.prompt}"


@frozen(kw_only=True)
class CronTurn(_core.Injection):
    """The job's run: ``prompt`` is what the model gets; ``store`` the store bound to it
    (None when the run's policy gives it no memory: bind no memory tools then)."""

    job: CronJob
    store: Memory | None = None


class CronAdapter(Adapter):
    """Maps a :class:`CronJob` to the core's request."""

    default_channel = "cron"
    autosaves = False

    def _request(self, job: CronJob, turn_id: str | None) -> _core.TurnInput:
        if not isinstance(job, CronJob):
            raise TypeError(
                f"CronAdapter: 'job' must be a CronJob (load_cron_jobs or CronJob(...)), "
                f"got {type(job).__name__}"
            )
        return _core.TurnInput(
            origin=TurnOrigin.CRON,
            query=cron_query(job),
            suppress=not job.uses_memory,
            turn=self._meta(turn_id),
        )

    def _turn(self, job: CronJob, injection: _core.Injection) -> CronTurn:
        # A run the policy gives no memory (suppressed, origin_disabled, sub_turn) hands
        # out no store: tools bound to it would read and write what the turn may not.
        store = self.store if injection.policy.inject else None
        return turn_of(CronTurn, injection, job=job, store=store)

    def run(self, job: CronJob, *, turn_id: str | None = None) -> CronTurn:
        """The job's prompt with its block; never raises because of memory.

        A memory-free job never reaches the store: its policy is a skip
        (suppressed), which the render announces without touching the store.
        """
        return self._turn(job, self._serve_turn(self._request(job, turn_id)))

    async def arun(self, job: CronJob, *, turn_id: str | None = None) -> CronTurn:
        """The async twin of :meth:`run`."""
        return self._turn(job, await self._aserve_turn(self._request(job, turn_id)))
