"""Loading: agent files into ``AgentConfig``, checked with every problem reported at once.

Loading never raises anything but :class:`ConfigError`, which lists every
problem found with the file name, the key and the path to it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from memory_inject._tokens import load_encoding
from memory_inject.config._constraints import check_class
from memory_inject.config._yaml import read_yaml_file
from memory_inject.config.schema import AgentConfig, MemoryInjectConfig, _converter
from memory_inject.exceptions import ConfigError

__all__ = ["load_agent_config", "parse_agent_config"]


def parse_agent_config(data: Any, source: str = "<memory>") -> AgentConfig:
    """Validate already-parsed YAML data; raise ``ConfigError`` listing every problem."""
    if data is None:
        raise ConfigError(
            source, ["the file is empty; expected a mapping with 'agent' and 'memory' @ $"]
        )
    if not isinstance(data, Mapping):
        kind = type(data).__name__
        article = "an" if kind[0] in "aeiou" else "a"
        raise ConfigError(source, [f"the top level must be a mapping (got {article} {kind}) @ $"])
    problems = check_class(AgentConfig, data, "$", allowed=("agent", "memory"))
    if "agent" not in data:
        problems.insert(0, "'agent' is required (got nothing) @ $")
    if problems:
        raise ConfigError(source, problems)
    memory = data.get("memory") or {}
    problems = _raw_tokenizer_problems(memory)
    if problems:
        raise ConfigError(source, problems)
    try:
        config = _converter.structure(dict(memory), MemoryInjectConfig)
    except Exception as exc:  # noqa: BLE001 - the checker should have caught it; no traceback
        raise ConfigError(source, [f"{exc} @ $.memory"]) from None
    _check_tokenizers(config, source)
    return AgentConfig(agent=str(data["agent"]), memory=config, source=source)


def _raw_tokenizer_problems(memory: Mapping[str, Any]) -> list[str]:
    """Tokenizers named in the raw ``memory`` mapping that cannot load offline."""
    found = [("$.memory.budget", (memory.get("budget") or {}).get("tokenizer"))]
    for origin, override in (memory.get("origins") or {}).items():
        budget = (override or {}).get("budget") or {}
        found.append((f"$.memory.origins.{origin}.budget", budget.get("tokenizer")))
    problems = []
    for path, name in found:
        if name is None:
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
    source = str(path)
    return parse_agent_config(data, source)
