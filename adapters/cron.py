"""Scheduled jobs: origin ``cron``, query ``[cron:<id> <name>] <prompt>``, sessionless.

The core policy gives cron turns a block without conversation memory. A job
with ``uses_memory: false`` is memory-free end to end (zeroclaw issue 8695):
the turn is suppressed, the store is never called (no recall; one memory_skipped) and
the run is bound to no memory at all (:attr:`CronTurn.memory` is None, so
the host offers the job no memory tools either). Cron turns never autosave.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs
from attrs import frozen

from memory_inject.config import AgentConfig, read_yaml_file
from memory_inject.contract import Memory
from memory_inject.exceptions import ConfigError
from memory_inject.models import TurnMeta, TurnOrigin

from . import _core

__all__ = ["CronAdapter", "CronJob", "CronTurn", "cron_query", "load_cron_jobs"]

_KEYS = ("id", "name", "prompt", "uses_memory")


@frozen(kw_only=True)
class CronJob:
    """One scheduled job. ``uses_memory=False`` runs it without any memory."""

    id: str
    name: str
    prompt: str
    uses_memory: bool = True


def cron_query(job: CronJob) -> str:
    """zeroclaw's prefixed prompt, which is both the recall query and the model's input."""
    return f"[cron:{job.id} {job.name}] {job.prompt}"


@frozen(kw_only=True)
class CronTurn(_core.Injection):
    """The job's run: ``prompt`` is what the model gets; ``memory`` the store bound to it."""

    job: CronJob
    memory: Memory | None = None

    @property
    def prompt(self) -> str:
        return self.block + self.query


class CronAdapter:
    """Maps a :class:`CronJob` to the core's request."""

    def __init__(
        self,
        store: Memory,
        agent_config: AgentConfig,
        *,
        channel: str = "cron",
        agent_alias: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.store = store
        self.agent_config = agent_config
        self.channel = channel
        self.agent_alias = agent_alias if agent_alias is not None else agent_config.agent
        self.cwd = cwd

    def _request(self, job: CronJob, turn_id: str | None) -> _core.Request:
        return _core.Request(
            origin=TurnOrigin.CRON,
            query=cron_query(job),
            suppress=not job.uses_memory,
            turn=TurnMeta(self.channel, self.agent_alias, turn_id or _core.new_turn_id()),
        )

    def _turn(self, job: CronJob, injection: _core.Injection) -> CronTurn:
        return CronTurn(
            job=job,
            memory=self.store if job.uses_memory else None,
            **attrs.asdict(injection, recurse=False),
        )

    def run(self, job: CronJob, *, turn_id: str | None = None) -> CronTurn:
        """The job's prompt with its block; never raises because of memory."""
        req = self._request(job, turn_id)
        # A memory-free job never reaches the store: its policy is a skip (suppressed),
        # which the render announces (memory_skipped) without touching the store.
        return self._turn(job, _core.run(self.store, self.agent_config, req, cwd=self.cwd))

    async def arun(self, job: CronJob, *, turn_id: str | None = None) -> CronTurn:
        """The async twin of :meth:`run`."""
        req = self._request(job, turn_id)
        return self._turn(job, await _core.arun(self.store, self.agent_config, req, cwd=self.cwd))


# -- the jobs file ---------------------------------------------------------------


def _check_job(raw: Any, path: str, seen: set[str]) -> list[str]:
    if not isinstance(raw, Mapping):
        return [f"each job must be a mapping (got {raw!r:.80}) @ {path}"]
    problems = [
        f"'{k}' is not a known key; keys are {list(_KEYS)} (got {v!r:.80}) @ {path}"
        for k, v in raw.items()
        if k not in _KEYS
    ]
    for key in ("id", "name", "prompt"):
        value = raw.get(key)
        if key not in raw:
            problems.append(f"'{key}' is required (got nothing) @ {path}")
        elif not isinstance(value, str) or not value.strip():
            problems.append(f"'{key}' must be a non-empty string (got {value!r:.80}) @ {path}")
    uses = raw.get("uses_memory", True)
    if not isinstance(uses, bool):
        problems.append(f"'uses_memory' must be true or false (got {uses!r}) @ {path}")
    job_id = raw.get("id")
    if isinstance(job_id, str):
        if job_id in seen:
            problems.append(f"'id' must be unique (got {job_id!r} twice) @ {path}")
        seen.add(job_id)
    return problems


def parse_cron_jobs(data: Any, source: str = "<memory>") -> tuple[CronJob, ...]:
    """Validate parsed YAML (``{jobs: [...]}``); ``ConfigError`` lists every problem."""
    if not isinstance(data, Mapping):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise ConfigError(source, [f"the top level must be a mapping with 'jobs' (got {kind}) @ $"])
    problems = [
        f"'{k}' is not a known key; the file has only 'jobs' @ $" for k in data if k != "jobs"
    ]
    jobs = data.get("jobs")
    if not isinstance(jobs, list):
        problems.append(f"'jobs' must be a list of jobs (got {jobs!r:.80}) @ $")
        raise ConfigError(source, problems)
    seen: set[str] = set()
    for n, raw in enumerate(jobs):
        problems += _check_job(raw, f"$.jobs[{n}]", seen)
    if problems:
        raise ConfigError(source, problems)
    return tuple(
        CronJob(
            id=j["id"], name=j["name"], prompt=j["prompt"], uses_memory=j.get("uses_memory", True)
        )
        for j in jobs
    )


def load_cron_jobs(yaml_path: str | os.PathLike[str]) -> tuple[CronJob, ...]:
    """Read a jobs file; every failure is a ``ConfigError`` naming the file and the path.

    ::

        jobs:
          - {id: nightly, name: Nightly report, prompt: "Summarise the incidents."}
          - {id: ping, name: Uptime ping, prompt: "curl the health check", uses_memory: false}
    """
    source = str(yaml_path)
    data = read_yaml_file(yaml_path)
    return parse_cron_jobs(data, source)
