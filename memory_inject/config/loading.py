"""Loading: an agent file into an ``AgentConfig``, a cron jobs file into ``CronJob`` values.

Both are read by the hardened reader and checked by the one checker, so a bad
agent file and a bad jobs file word their problems the same way.

Loading never raises anything but :class:`ConfigError`, which lists every
problem found with the file name, the key and the path to it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs

from memory_inject._tokens import load_encoding
from memory_inject.config._constraints import check_file, problem
from memory_inject.config._presets import expand_preset
from memory_inject.config._yaml import read_yaml_file
from memory_inject.config.schema import (
    AgentConfig,
    BudgetConfig,
    CronJob,
    CronJobsFile,
    MemoryInjectConfig,
    _converter,
)
from memory_inject.exceptions import ConfigError
from memory_inject.models import TurnOrigin

__all__ = ["load_agent_config", "load_cron_jobs", "parse_agent_config", "parse_cron_jobs"]

_TOKENIZER_META = attrs.fields(BudgetConfig).tokenizer.metadata


def parse_agent_config(data: Any, source: str = "<memory>") -> AgentConfig:
    """Validate already-parsed YAML data; raise ``ConfigError`` listing every problem.

    A ``memory.preset`` is expanded first (:mod:`memory_inject.config._presets`),
    so the file's keys are checked, and win, over the preset's.
    """
    if isinstance(data, Mapping) and "memory" in data and data["memory"] is None:
        # every key under ``memory:`` commented out (the file ``init`` writes lists them
        # all): the defaults, as a file without the key, or an origin mapped to nothing
        data = {k: v for k, v in data.items() if k != "memory"}
    if isinstance(data, Mapping) and isinstance(data.get("memory"), Mapping):
        data = {**data, "memory": expand_preset(data["memory"])}
    problems = check_file(AgentConfig, data, allowed=("agent", "memory"))
    memory = data.get("memory") if isinstance(data, Mapping) else None
    memory = memory if isinstance(memory, Mapping) else {}
    problems += _raw_tokenizer_problems(memory)  # beside the rest: every problem at once
    if problems:
        raise ConfigError(source, problems)
    try:
        config = _converter.structure(dict(memory), MemoryInjectConfig)
    except Exception as exc:  # noqa: BLE001 - the checker should have caught it; no traceback
        raise ConfigError(source, [f"{exc} @ $.memory"]) from None
    _check_tokenizers(config, source)
    return AgentConfig(agent=str(data["agent"]), memory=config, source=source)


def _raw_tokenizer_problems(memory: Mapping[str, Any]) -> list[str]:
    """Tokenizers named in the raw ``memory`` mapping that cannot load offline.

    Only a tokenizer that is a valid name where it stands is tried: a bad shape around
    it, or a bad value, is the checker's problem, reported once.
    """
    found = [("$.memory", memory)]
    origins = memory.get("origins")
    if isinstance(origins, Mapping):
        valid = {o.value for o in TurnOrigin}
        found += [(f"$.memory.origins.{o}", v) for o, v in origins.items() if o in valid]
    problems = []
    for where, group in found:
        budget = group.get("budget") if isinstance(group, Mapping) else None
        if not isinstance(budget, Mapping) or "tokenizer" not in budget:
            continue
        path, name = f"{where}.budget", budget["tokenizer"]
        if problem("tokenizer", name, _TOKENIZER_META) is not None:
            continue
        try:
            load_encoding(name)
        except ValueError as exc:
            problems.append(f"'tokenizer' {exc} @ {path}")
    return problems


def _check_tokenizers(config: MemoryInjectConfig, source: str) -> None:
    problems = []
    for label, cfg in [
        ("$.memory.budget", config),
        *((f"$.memory.origins.{o}.budget", config.for_origin(o)) for o in config.origins),
    ]:
        try:
            load_encoding(cfg.budget.tokenizer)
        except ValueError as exc:
            problems.append(f"'tokenizer' {exc} @ {label}")
    if problems:
        raise ConfigError(source, problems)


def load_agent_config(path: str | os.PathLike[str]) -> AgentConfig:
    """Load one agent YAML file. Every failure is a ``ConfigError`` naming the file."""
    data = read_yaml_file(path)
    config = parse_agent_config(data, str(path))
    # Absolute: a relative backend path is the file's folder's even after a chdir.
    return attrs.evolve(config, source=os.path.abspath(path))


def parse_cron_jobs(data: Any, source: str = "<memory>") -> tuple[CronJob, ...]:
    """Validate parsed YAML (``{jobs: [...]}``); ``ConfigError`` lists every problem."""
    problems = check_file(CronJobsFile, data)
    if problems:
        raise ConfigError(source, problems)
    return _converter.structure(dict(data), CronJobsFile).jobs


def load_cron_jobs(yaml_path: str | os.PathLike[str]) -> tuple[CronJob, ...]:
    """Read a cron jobs file; every failure is a ``ConfigError`` naming the file and the path.

    ::

        jobs:
          - {id: nightly, name: Nightly report, prompt: "Summarise the incidents."}
          - {id: ping, name: Uptime ping, prompt: "curl the health check", uses_memory: false}
    """
    return parse_cron_jobs(read_yaml_file(yaml_path), str(yaml_path))
