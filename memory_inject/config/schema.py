"""The per-agent configuration classes and their defaults.

The defaults are zeroclaw's (spec section 4) but for the four docs/pipeline.md lists;
``config/defaults.yaml`` documents every key and a test keeps it equal to these classes.
Owns :class:`MemoryInjectConfig` (with per-origin overrides), the decay, rerank and budget
groups, the agent and cron files' classes and the converter; the other groups live in
``_backend``, ``_turn_groups``, ``_renderer`` and ``_recall_plan`` (re-exported here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import cattrs
from attrs import field, frozen

from memory_inject._tokens import load_encoding
from memory_inject.config._backend import BackendConfig, PoolConfig, check_backend
from memory_inject.config._constraints import (
    MAX_BLOCK_CHARS,
    MAX_CANDIDATE_POOL,
    MAX_DEADLINE_MS,
    MAX_RENDERED_ENTRIES,
    check_class,
    checked,
    described,
    did_you_mean,
    group,
    setting,
    to_tuple,
)
from memory_inject.config._presets import PRESET_NAMES
from memory_inject.config._recall_plan import RecallPlanConfig
from memory_inject.config._renderer import RendererConfig, check_renderer, to_renderer
from memory_inject.config._turn_groups import (
    THREAT_RULE_IDS,
    GovernanceConfig,
    SessionsConfig,
    StandingConfig,
    ThreatScanConfig,
    TrivialPromptConfig,
)
from memory_inject.models import TurnOrigin

__all__ = [
    "RETRIEVAL_STAGES",
    "STRATEGIES",
    "THREAT_RULE_IDS",
    "AgentConfig",
    "BackendConfig",
    "BudgetConfig",
    "CronJob",
    "CronJobsFile",
    "DecayConfig",
    "GovernanceConfig",
    "MemoryInjectConfig",
    "PoolConfig",
    "RerankConfig",
    "SessionsConfig",
    "StandingConfig",
    "ThreatScanConfig",
    "TrivialPromptConfig",
    "config_to_dict",
]

STRATEGIES = ("none", "mmr")


# -- the groups ----------------------------------------------------------------


@frozen
class DecayConfig:
    """Time decay on the default (non-rerank) arm: ``score * 2 ** (-age_days / half_life)``."""

    enabled: bool = setting(True, "bool", "decay scores with age (false: the arm keeps them)")
    half_life_days: float = setting(
        7.0, "float", "half-life of non-core scores, days", gt=0, le=36_500
    )


@frozen
class RerankConfig:
    """The gated rerank arm (replaces decay when enabled)."""

    enabled: bool = setting(False, "bool", "switch the decay arm for the rerank arm")
    strategy: str = setting(
        "none", "str", "none or mmr (blank: none)", choices=STRATEGIES, blank="none"
    )
    threshold: int = setting(
        5, "int", "min candidates for the strategy to run", ge=0, le=MAX_CANDIDATE_POOL
    )
    mmr_lambda: float = setting(0.7, "float", "relevance vs diversity (1 = relevance)", ge=0, le=1)
    importance_weight: float = setting(0.2, "float", "blend weight of importance", ge=0, le=1)
    recency_weight: float = setting(0.1, "float", "blend weight of recency", ge=0, le=1)
    candidate_multiplier: int = setting(4, "int", "over-fetch factor", ge=1, le=20)
    pool_cap: int = setting(
        MAX_CANDIDATE_POOL, "int", "ceiling of the candidate pool", ge=1, le=MAX_CANDIDATE_POOL
    )
    near_duplicate_threshold: float = setting(
        0.92, "float", "bigram Jaccard at which two entries collapse", gt=0, le=1
    )


@frozen
class BudgetConfig:
    """Caps on what is rendered."""

    max_entries: int = setting(4, "int", "max rendered entries", ge=0, le=MAX_RENDERED_ENTRIES)
    entry_max_chars: int = setting(
        800, "int", "per-entry content cap before '...'", ge=1, le=MAX_BLOCK_CHARS
    )
    max_total_chars: int = setting(
        4000, "int", "total chars of the entry lines", ge=0, le=MAX_BLOCK_CHARS
    )
    max_total_tokens: int | None = setting(
        None,
        "int",
        "total tokens of the whole block (null = no token cap)",
        ge=0,
        le=MAX_BLOCK_CHARS,
        nullable=True,
    )
    tokenizer: str = setting("cl100k_base", "str", "tiktoken encoding", nonempty=True)


#: ``memory.retrieval_stages`` items (zeroclaw's): ``fts`` and ``vector`` (the default) name
#: what the store's own ``search_mode`` runs; ``cache`` wraps the store in the hot cache
#: (``memory_inject.storage.hot_cache``).
RETRIEVAL_STAGES = ("fts", "vector", "cache")


_OVERRIDABLE = (
    "enabled",
    "recall_limit",
    "min_relevance_score",
    "min_companion_score",
    "min_prompt_similarity",
    "prompt_gate_bypass_score",
    "require_query_terms",
    "decay",
    "rerank",
    "budget",
    "renderer",
    "contain_content",
    "deadline_ms",
    "recall_plan",
    "governance",
    "trivial_prompt",
    "standing",
    "sessions",
    "threat_scan",
)


def _check_origins(raw: Any, path: str) -> list[str]:
    """Every problem of an ``origins`` mapping: unknown origins and bad overrides."""
    if not isinstance(raw, Mapping):
        return [f"'origins' must be a mapping of origin to overrides (got {raw!r:.80}) @ {path}"]
    problems: list[str] = []
    valid = [o.value for o in TurnOrigin]
    for name, override in raw.items():
        if name not in valid:
            hint = did_you_mean(name, valid)
            problems.append(f"'{name}' is not an origin{hint}; origins are {valid} @ {path}")
            continue
        if override is None:
            continue
        problems += check_class(
            MemoryInjectConfig, override, f"{path}.{name}", allowed=_OVERRIDABLE
        )
    return problems


@frozen
class MemoryInjectConfig:
    """The stable, per-agent half of the injection policy.

    ``origins`` maps an origin name to a partial mapping of the keys above (plus
    ``enabled``); :meth:`for_origin` applies it. Overrides are validated when
    the config is built, so a bad override fails at startup.
    """

    enabled: bool = setting(True, "bool", "inject at all (usually set per origin)")
    recall_limit: int = setting(
        5,
        "int",
        "entries asked of the store per scope (0 = pool cap)",
        ge=0,
        le=MAX_CANDIDATE_POOL,
    )
    min_relevance_score: float = setting(0.4, "float", "relevance floor", ge=0, le=1)
    min_companion_score: float | None = setting(
        0.25, "float", "floor of the turns beside one that reaches it", ge=0, le=1, nullable=True
    )
    min_prompt_similarity: float | None = setting(
        None, "float", "similarity the nearest memory needs (null: off)", ge=0, le=1, nullable=True
    )
    prompt_gate_bypass_score: float | None = setting(
        None, "float", "an entry this strong passes the gate anyway", ge=0, le=1, nullable=True
    )
    require_query_terms: bool = setting(
        True, "bool", "recall nothing for a prompt without content words (no_query_terms)"
    )
    decay: DecayConfig = group(DecayConfig)
    rerank: RerankConfig = group(RerankConfig)
    budget: BudgetConfig = group(BudgetConfig)
    renderer: RendererConfig = field(
        default=RendererConfig(),
        converter=to_renderer,
        validator=attrs.validators.instance_of(RendererConfig),
        metadata={"check": check_renderer, "doc": "block format and its settings"},
    )
    contain_content: bool = setting(
        True, "bool", "bracket: indent continuation lines and defuse markers in stored text"
    )
    deadline_ms: int | None = setting(
        2000,
        "int",
        "per-turn recall deadline (null = none)",
        ge=1,
        le=MAX_DEADLINE_MS,
        nullable=True,
    )
    recall_plan: RecallPlanConfig = group(RecallPlanConfig)
    governance: GovernanceConfig = group(GovernanceConfig)
    trivial_prompt: TrivialPromptConfig = group(TrivialPromptConfig)
    standing: StandingConfig = group(StandingConfig)
    sessions: SessionsConfig = group(SessionsConfig)
    threat_scan: ThreatScanConfig = group(ThreatScanConfig)
    preset: str | None = setting(
        None,
        "str",
        "a seed system's whole behaviour, under the file's own keys (founder_os, pi)",
        nullable=True,
        choices=PRESET_NAMES,
    )
    origins: Mapping[str, Mapping[str, Any]] = field(
        factory=dict, hash=False, repr=False, metadata={"check": _check_origins}
    )
    backend: BackendConfig = group(BackendConfig, check=check_backend)
    retrieval_stages: tuple[str, ...] = setting(
        RETRIEVAL_STAGES[:2],
        "strlist",
        "the store's retrieval stages; 'cache' adds the hot cache of recall answers",
        choices_list=RETRIEVAL_STAGES,
    )
    _resolved: dict[str, MemoryInjectConfig] = field(
        factory=dict, init=False, eq=False, repr=False, hash=False
    )

    def __attrs_post_init__(self) -> None:
        problems = _check_origins(self.origins, "$.origins")
        if problems:
            raise ValueError("; ".join(problems))
        for origin in self.origins:
            self.for_origin(origin)
        if self.budget.max_total_tokens is not None:
            try:
                load_encoding(self.budget.tokenizer)
            except ValueError as exc:
                raise ValueError(f"'tokenizer' {exc}") from None

    def for_origin(self, origin: TurnOrigin | str) -> MemoryInjectConfig:
        """This config with the origin's overrides applied (cached)."""
        name = str(origin)
        hit = self._resolved.get(name)
        if hit is not None:
            return hit
        override = self.origins.get(name)
        if not override:
            resolved = self
        else:
            base = _converter.unstructure(self)
            base.pop("origins", None)
            merged = _apply_override(base, override)
            resolved = _converter.structure(merged, MemoryInjectConfig)
        self._resolved[name] = resolved
        return resolved

    def is_enabled_for(self, origin: TurnOrigin | str) -> bool:
        """Whether turns of this origin get memory at all (its override's ``enabled`` wins)."""
        override = self.origins.get(str(origin))
        if override is not None and "enabled" in override:
            return bool(override["enabled"])
        return self.enabled

    @property
    def origin_names(self) -> tuple[str, ...]:
        """The origins that have an override, in file order."""
        return tuple(self.origins)


@frozen
class AgentConfig:
    """One agent's YAML file, loaded."""

    agent: str = described("name", "the agent's name")
    memory: MemoryInjectConfig = field(factory=MemoryInjectConfig)
    source: str = field(default="<memory>", eq=False)

    def for_origin(self, origin: TurnOrigin | str) -> MemoryInjectConfig:
        """The agent's memory config with the origin's overrides applied."""
        return self.memory.for_origin(origin)


@frozen(kw_only=True)
class CronJob:
    """One scheduled job. ``uses_memory=False`` runs it without any memory."""

    id: str = checked("name", "unique id, in the query's [cron:<id> <name>] prefix")
    name: str = checked("name", "human name, in the query's prefix")
    prompt: str = checked("name", "what the model is asked")
    uses_memory: bool = checked("bool", "false: no recall and no memory bound", default=True)


@frozen
class CronJobsFile:
    """A cron jobs file: ``{jobs: [...]}``, the ids unique."""

    jobs: tuple[CronJob, ...] = field(
        converter=to_tuple,
        metadata={"kind": "list_of", "item": CronJob, "unique": "id", "doc": "the jobs"},
    )


# -- structuring ---------------------------------------------------------------


def _structure_renderer(value: Any, _type: Any) -> RendererConfig:
    if isinstance(value, str):
        return to_renderer(value)
    return _structure_renderer_mapping(value, RendererConfig)


def _unstructure_renderer(renderer: RendererConfig) -> dict[str, Any]:
    """``kind`` and the kind's own settings: what a file would write."""
    data = _unstructure_renderer_fields(renderer)
    return {k: v for k, v in data.items() if k == "kind" or k in renderer.settings}


_converter = cattrs.Converter(forbid_extra_keys=True)
_structure_renderer_mapping = cattrs.gen.make_dict_structure_fn(RendererConfig, _converter)
_unstructure_renderer_fields = cattrs.gen.make_dict_unstructure_fn(RendererConfig, _converter)
_converter.register_structure_hook(RendererConfig, _structure_renderer)
_converter.register_unstructure_hook(RendererConfig, _unstructure_renderer)
_converter.register_unstructure_hook(
    MemoryInjectConfig,
    cattrs.gen.make_dict_unstructure_fn(
        MemoryInjectConfig,
        _converter,
        _cattrs_omit_if_default=False,
        _resolved=cattrs.gen.override(omit=True),
    ),
)
_converter.register_structure_hook(
    MemoryInjectConfig,
    cattrs.gen.make_dict_structure_fn(
        MemoryInjectConfig,
        _converter,
        _cattrs_forbid_extra_keys=True,
        _resolved=cattrs.gen.override(omit=True),
        origins=cattrs.gen.override(struct_hook=lambda v, _t: dict(v or {})),
    ),
)


def _apply_override(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` deep-merged with ``override``, whose renderer of another kind replaces the base's.

    A format name is short for ``{kind: name}``. A renderer of the base's kind merges into
    the base's settings like any group; one of another kind replaces them (the other format's).
    """
    raw = override.get("renderer")
    if raw is not None:
        over = {"kind": raw} if isinstance(raw, str) else dict(raw)
        kind = over.get("kind")
        if not (isinstance(kind, str) and kind.strip().lower() == base["renderer"]["kind"]):
            base = {**base, "renderer": {}}
        override = {**override, "renderer": over}
    return _deep_merge(base, override)


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _deep_merge(dict(out[k]), v)
        else:
            out[k] = v
    return out


def config_to_dict(config: MemoryInjectConfig) -> dict[str, Any]:
    """The plain-data form of a config (what ``defaults.yaml`` holds under ``memory``)."""
    data: dict[str, Any] = _converter.unstructure(config)
    data["origins"] = {k: dict(v) for k, v in config.origins.items()}
    return data
