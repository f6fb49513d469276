"""Per-agent configuration: the attrs classes, their defaults and the YAML loader.

The defaults are zeroclaw's production defaults (spec section 4), so
``MemoryInjectConfig()`` renders the reference bytes. ``config/defaults.yaml``
documents every key and a test keeps it equal to these classes.

Loading never raises anything but :class:`ConfigError`, which lists every
problem found with the file name, the key and the path to it.
"""

from __future__ import annotations

import difflib
import math
import os
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import cattrs
import yaml
from attrs import field, frozen

from memory_inject._tokens import load_encoding
from memory_inject.exceptions import ConfigError
from memory_inject.models import TurnOrigin

if TYPE_CHECKING:
    from memory_inject.storage.memory import InMemoryStore
    from memory_inject.storage.postgres import PostgresStore
    from memory_inject.storage.sqlite import SQLiteStore

__all__ = [
    "MAX_CANDIDATE_POOL",
    "AgentConfig",
    "BackendConfig",
    "BudgetConfig",
    "DecayConfig",
    "GovernanceConfig",
    "MemoryInjectConfig",
    "PlanQueryConfig",
    "RecallPlanConfig",
    "RerankConfig",
    "TrivialPromptConfig",
    "load_agent_config",
]

#: Absolute ceiling on the rerank candidate pool (spec: ``MAX_CANDIDATE_POOL``).
MAX_CANDIDATE_POOL = 1024

#: Renderers a config may name (see docs/renderers.md).
RENDERERS = ("bracket", "sectioned", "relevant_memories")
STRATEGIES = ("none", "mmr")


# -- declarative settings ------------------------------------------------------
#
# Every setting carries its constraints in ``metadata`` so that the attrs
# validator (programmatic construction) and the YAML checker (which reports
# *all* problems with their paths) say exactly the same thing.


def _problem(name: str, value: Any, meta: Mapping[str, Any]) -> str | None:
    kind = meta.get("kind")
    nullable = meta.get("nullable", False)
    if value is None:
        return None if nullable else f"'{name}' must not be null (got None)"
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"'{name}' must be an integer (got {value!r})"
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"'{name}' must be a number (got {value!r})"
        if not math.isfinite(value):
            return f"'{name}' must be a finite number (got {value!r})"
    elif kind == "bool":
        if not isinstance(value, bool):
            return f"'{name}' must be true or false (got {value!r})"
    elif kind == "strlist":
        if (
            isinstance(value, str)
            or not isinstance(value, list | tuple)
            or not all(isinstance(v, str) for v in value)
        ):
            return f"'{name}' must be a list of strings (got {value!r:.80})"
        allowed_items: tuple[str, ...] = meta.get("choices_list") or ()
        bad = [v for v in value if allowed_items and v not in allowed_items]
        if bad:
            return f"'{name}' must name items from {list(allowed_items)} (got {bad!r})"
        return None
    elif kind == "str":
        if not isinstance(value, str):
            return f"'{name}' must be a string (got {value!r})"
        choices = meta.get("choices")
        if choices is not None and value.strip().lower() not in choices:
            allowed = ", ".join(repr(c) for c in choices)
            return f"'{name}' must be one of {allowed} (got {value!r})"
        if meta.get("nonempty") and not value.strip():
            return f"'{name}' must be a non-empty string (got {value!r})"
    if "ge" in meta and value < meta["ge"]:
        return f"'{name}' must be >= {meta['ge']} (got {value!r})"
    if "gt" in meta and value <= meta["gt"]:
        return f"'{name}' must be > {meta['gt']} (got {value!r})"
    if "le" in meta and value > meta["le"]:
        return f"'{name}' must be <= {meta['le']} (got {value!r})"
    return None


def _validator(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    msg = _problem(attribute.name, value, attribute.metadata)
    if msg is not None:
        raise ValueError(msg)


def _setting(default: Any, kind: str, doc: str, **meta: Any) -> Any:
    meta.update(kind=kind, doc=doc)
    conv: Callable[[Any], Any] | None = None
    if kind == "str" and "choices" in meta:
        conv = _norm_choice
    elif kind == "float":
        conv = _to_float
    elif kind == "strlist":
        conv = _to_tuple
    return field(default=default, validator=_validator, converter=conv, metadata=meta)


def _to_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _norm_choice(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _to_float(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


# -- the groups ----------------------------------------------------------------


@frozen
class DecayConfig:
    """Time decay on the default (non-rerank) arm: ``score * 2 ** (-age_days / half_life)``."""

    half_life_days: float = _setting(7.0, "float", "half-life of non-core scores, days", gt=0)


@frozen
class RerankConfig:
    """The gated rerank arm (replaces decay when enabled)."""

    enabled: bool = _setting(False, "bool", "switch the decay arm for the rerank arm")
    strategy: str = _setting("none", "str", "none or mmr", choices=STRATEGIES)
    threshold: int = _setting(5, "int", "min candidates for the strategy to run", ge=0)
    mmr_lambda: float = _setting(0.7, "float", "relevance vs diversity (1 = relevance)", ge=0, le=1)
    importance_weight: float = _setting(0.2, "float", "blend weight of importance", ge=0, le=1)
    recency_weight: float = _setting(0.1, "float", "blend weight of recency", ge=0, le=1)
    candidate_multiplier: int = _setting(4, "int", "over-fetch factor", ge=1, le=20)
    pool_cap: int = _setting(
        MAX_CANDIDATE_POOL, "int", "ceiling of the candidate pool", ge=1, le=MAX_CANDIDATE_POOL
    )
    near_duplicate_threshold: float = _setting(
        0.92, "float", "bigram Jaccard at which two entries collapse", gt=0, le=1
    )


@frozen
class BudgetConfig:
    """Caps on what is rendered."""

    max_entries: int = _setting(4, "int", "max rendered entries", ge=0)
    entry_max_chars: int = _setting(800, "int", "per-entry content cap before '...'", ge=1)
    max_total_chars: int = _setting(4000, "int", "total chars of the entry lines", ge=0)
    max_total_tokens: int | None = _setting(
        None, "int", "total tokens of the whole block (null = no token cap)", ge=0, nullable=True
    )
    tokenizer: str = _setting("cl100k_base", "str", "tiktoken encoding", nonempty=True)


@frozen
class BackendConfig:
    """Where the agent's memories live (``memory.backend``)."""

    kind: str = _setting(
        "sqlite", "str", "sqlite, postgres or memory", choices=("sqlite", "postgres", "memory")
    )
    path: str = _setting(
        ".memory/memory.db", "str", "SQLite file (relative to the cwd)", nonempty=True
    )
    dsn: str | None = _setting(None, "str", "PostgreSQL connection string", nullable=True)
    namespace: str = _setting("default", "str", "namespace inside the store", nonempty=True)
    search_mode: str = _setting(
        "hybrid", "str", "bm25, embedding or hybrid", choices=("bm25", "embedding", "hybrid")
    )
    embedder: str = _setting(
        "none",
        "str",
        "none, hashing, sentence-transformers or model2vec",
        choices=("none", "hashing", "sentence-transformers", "model2vec"),
    )
    embedder_model: str | None = _setting(None, "str", "model name or local path", nullable=True)
    fusion: str = _setting(
        "weighted", "str", "weighted (zeroclaw) or rrf", choices=("weighted", "rrf")
    )
    vector_weight: float = _setting(0.7, "float", "weighted fusion: vector weight", ge=0, le=1)
    keyword_weight: float = _setting(0.3, "float", "weighted fusion: keyword weight", ge=0, le=1)
    rrf_k: int = _setting(60, "int", "reciprocal-rank fusion constant", ge=1)


@frozen
class PlanQueryConfig:
    """One query of a recall plan."""

    source: str = _setting(
        "default",
        "str",
        "default, semantic, lexical, entity or plugin",
        choices=("default", "semantic", "lexical", "entity", "plugin"),
    )
    limit: int = _setting(5, "int", "rows this query may contribute", ge=1)


@frozen
class RecallPlanConfig:
    """Multi-source recall (founder-os). Off by default: one recall per session scope."""

    enabled: bool = _setting(False, "bool", "use the plan instead of one recall per scope")
    preset: str | None = _setting(
        None,
        "str",
        "founder_os: the preset plan (overrides the rest)",
        choices=("founder_os",),
        nullable=True,
    )
    queries: tuple[PlanQueryConfig, ...] = field(
        default=(),
        converter=_to_tuple,
        metadata={
            "kind": "list_of",
            "item": PlanQueryConfig,
            "doc": "the queries, in precedence order",
        },
    )
    cap: int = _setting(5, "int", "max merged entries", ge=1)
    priority: str = _setting(
        "hits", "str", "hits (count, confidence, relevance) or score", choices=("hits", "score")
    )
    statuses: tuple[str, ...] | None = _setting(
        None, "strlist", "only rows with these statuses (null = any)", nullable=True
    )
    track_usage: bool = _setting(False, "bool", "bump times_used of rendered rows")


_GOVERNANCE_STAGES = ("status", "profile", "project", "applicability", "negative_scope")


@frozen
class GovernanceConfig:
    """PI's governance stages, run on recalled entries before the arm. Off by default."""

    enabled: bool = _setting(False, "bool", "run the governance stages")
    stages: tuple[str, ...] = _setting(
        _GOVERNANCE_STAGES, "strlist", "which stages, in order", choices_list=_GOVERNANCE_STAGES
    )
    profile_id: str | None = _setting(
        None, "str", "explicit profile (else resolved from the cwd)", nullable=True
    )
    include_working_directory: bool = _setting(
        False, "bool", "match applicability phrases against the cwd too"
    )
    min_token_length: int = _setting(4, "int", "shortest word the phrase matcher stems", ge=1)


@frozen
class TrivialPromptConfig:
    """Skip injection for prompts that carry no question (PI's injection filter). Off by default."""

    enabled: bool = _setting(False, "bool", "skip trivial prompts with reason trivial_prompt")
    min_chars: int = _setting(4, "int", "prompts shorter than this are trivial", ge=0)
    acknowledgements: tuple[str, ...] | None = _setting(
        None,
        "strlist",
        "phrases that are trivial on their own (null = built-in list)",
        nullable=True,
    )
    slash_commands: bool = _setting(True, "bool", "'/command args' prompts are trivial")


def _group(cls: type) -> Any:
    return field(factory=cls, validator=attrs.validators.instance_of(cls))


_OVERRIDABLE = (
    "enabled",
    "recall_limit",
    "min_relevance_score",
    "decay",
    "rerank",
    "budget",
    "renderer",
    "contain_content",
    "deadline_ms",
    "recall_plan",
    "governance",
    "trivial_prompt",
)


@frozen
class MemoryInjectConfig:
    """The stable, per-agent half of the injection policy.

    ``origins`` maps an origin name to a partial mapping of the keys above (plus
    ``enabled``); :meth:`for_origin` applies it. Overrides are validated when
    the config is built, so a bad override fails at startup.
    """

    enabled: bool = _setting(True, "bool", "inject at all (usually set per origin)")
    recall_limit: int = _setting(
        5, "int", "entries asked of the store per scope (0 = pool cap)", ge=0
    )
    min_relevance_score: float = _setting(0.4, "float", "relevance floor", ge=0, le=1)
    decay: DecayConfig = _group(DecayConfig)
    rerank: RerankConfig = _group(RerankConfig)
    budget: BudgetConfig = _group(BudgetConfig)
    renderer: str = _setting("bracket", "str", "block format", choices=RENDERERS)
    contain_content: bool = _setting(
        True, "bool", "bracket: indent continuation lines and defuse markers in stored text"
    )
    deadline_ms: int | None = _setting(
        2000, "int", "per-turn recall deadline (null = none)", ge=1, nullable=True
    )
    recall_plan: RecallPlanConfig = _group(RecallPlanConfig)
    governance: GovernanceConfig = _group(GovernanceConfig)
    trivial_prompt: TrivialPromptConfig = _group(TrivialPromptConfig)
    origins: Mapping[str, Mapping[str, Any]] = field(factory=dict, hash=False, repr=False)
    backend: BackendConfig = _group(BackendConfig)
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
            resolved = _converter.structure(_deep_merge(base, override), MemoryInjectConfig)
        self._resolved[name] = resolved
        return resolved

    def is_enabled_for(self, origin: TurnOrigin | str) -> bool:
        override = self.origins.get(str(origin))
        if override is not None and "enabled" in override:
            return bool(override["enabled"])
        return self.enabled

    @property
    def origin_names(self) -> tuple[str, ...]:
        return tuple(self.origins)


@frozen
class AgentConfig:
    """One agent's YAML file, loaded."""

    agent: str
    memory: MemoryInjectConfig = field(factory=MemoryInjectConfig)
    source: str = field(default="<memory>", eq=False)

    def for_origin(self, origin: TurnOrigin | str) -> MemoryInjectConfig:
        return self.memory.for_origin(origin)

    def open_store(
        self, base_dir: str | os.PathLike[str] | None = None
    ) -> InMemoryStore | SQLiteStore | PostgresStore:
        """Open the store ``memory.backend`` names; SQLite at ``.memory/memory.db`` by default."""
        from memory_inject.storage import open_store

        return open_store(**_converter.unstructure(self.memory.backend), base_dir=base_dir)


# -- structuring ---------------------------------------------------------------

_converter = cattrs.Converter(forbid_extra_keys=True)
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


# -- the checker ---------------------------------------------------------------


def _type_args(tp: Any) -> tuple[Any, ...]:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return typing.get_args(tp)
    return (tp,)


def _check_class(
    cls: type, raw: Any, path: str, *, allowed: tuple[str, ...] | None = None
) -> list[str]:
    if not isinstance(raw, Mapping):
        return [f"'{path.rsplit('.', 1)[-1]}' must be a mapping (got {raw!r:.80}) @ {path}"]
    problems: list[str] = []
    hints = typing.get_type_hints(cls)
    fields = {a.name: a for a in attrs.fields(cls) if a.init}
    names = allowed if allowed is not None else tuple(fields)
    for key, value in raw.items():
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            problems.append(f"'{key}' is not a known key{hint} (got {value!r:.80}) @ {path}")
            continue
        attr = fields[key]
        nested = [t for t in _type_args(hints[key]) if attrs.has(t)]
        if nested:
            problems += _check_class(nested[0], value, f"{path}.{key}")
        elif key == "origins":
            problems += _check_origins(value, f"{path}.origins")
        elif attr.metadata.get("kind") == "list_of":
            item_cls = attr.metadata["item"]
            if not isinstance(value, list | tuple):
                problems.append(f"'{key}' must be a list (got {value!r:.80}) @ {path}")
            else:
                for n, item in enumerate(value):
                    problems += _check_class(item_cls, item, f"{path}.{key}[{n}]")
        elif key == "agent":
            if not isinstance(value, str) or not value.strip():
                problems.append(f"'agent' must be a non-empty string (got {value!r}) @ {path}")
        else:
            msg = _problem(key, value, attr.metadata)
            if msg is not None:
                problems.append(f"{msg} @ {path}")
    return problems


def _check_origins(raw: Any, path: str) -> list[str]:
    if not isinstance(raw, Mapping):
        return [f"'origins' must be a mapping of origin to overrides (got {raw!r:.80}) @ {path}"]
    problems: list[str] = []
    valid = [o.value for o in TurnOrigin]
    for name, override in raw.items():
        if name not in valid:
            close = difflib.get_close_matches(str(name), valid, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            problems.append(f"'{name}' is not an origin{hint}; origins are {valid} @ {path}")
            continue
        if override is None:
            continue
        problems += _check_class(
            MemoryInjectConfig, override, f"{path}.{name}", allowed=_OVERRIDABLE
        )
    return problems


# -- loading -------------------------------------------------------------------

_MAX_CONFIG_BYTES = 256 * 1024


class _SafeLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases, so a billion-laughs file cannot expand."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.MarkedYAMLError(
                "while composing",
                None,
                "YAML aliases are not allowed in agent files",
                event.start_mark,
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                marker = (type(key), key)  # 1 and true are different keys
                duplicate = marker in seen
            except TypeError:
                raise yaml.MarkedYAMLError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"a {type(key).__name__} cannot be a key",
                    key_node.start_mark,
                ) from None
            if duplicate:
                raise yaml.MarkedYAMLError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"key {key!r} is given twice",
                    key_node.start_mark,
                )
            seen.add(marker)
        return super().construct_mapping(node, deep=deep)


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
    problems = _check_class(AgentConfig, data, "$", allowed=("agent", "memory"))
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


def read_yaml_file(path: str | os.PathLike[str]) -> Any:
    """Parse one YAML file safely: size-capped, no aliases, no duplicate keys.

    Every failure is a ``ConfigError`` naming the file (used for agent files and
    by adapters for their own YAML, e.g. cron jobs).
    """
    p = Path(path)
    source = str(path)
    try:
        if p.is_dir():
            raise ConfigError(source, ["is a directory, not a YAML file @ $"])
        if p.exists() and not p.is_file():
            raise ConfigError(source, ["cannot be read: not a regular file @ $"])
        with p.open("rb") as f:  # read at most the limit: never a whole device or pipe
            raw = f.read(_MAX_CONFIG_BYTES + 1)
        if len(raw) > _MAX_CONFIG_BYTES:
            raise ConfigError(
                source,
                [
                    f"file is over {_MAX_CONFIG_BYTES} bytes; agent files "
                    f"are limited to {_MAX_CONFIG_BYTES} bytes @ $"
                ],
            )
        text = raw.decode("utf-8")
    except ConfigError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(source, [f"cannot be read: {exc} @ $"]) from None
    try:
        return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(source, [f"is not valid YAML{where}: {problem} @ $"]) from None
    except RecursionError:
        raise ConfigError(source, ["is nested too deeply @ $"]) from None
    except Exception as exc:  # noqa: BLE001 - a tag that cannot be built (!!int abc, ...)
        raise ConfigError(source, [f"is not valid YAML: {exc} @ $"]) from None


def load_agent_config(path: str | os.PathLike[str]) -> AgentConfig:
    """Load one agent YAML file. Every failure is a ``ConfigError`` naming the file."""
    data = read_yaml_file(path)
    source = str(path)
    return parse_agent_config(data, source)
