"""Per-agent configuration: the attrs classes, their defaults and the YAML loader.

``schema`` holds the classes and their defaults (``_renderer`` those of
``memory.renderer``, ``_recall_plan`` those of ``memory.recall_plan``,
``_backend`` those of ``memory.backend``, ``_turn_groups`` the governance,
trivial-prompt, standing, sessions and threat-scan groups),
``loading`` reads agent files and cron jobs files (through the hardened
reader in ``_yaml``) and ``_constraints`` checks them and words every
problem. Import from here: ``from memory_inject.config import load_agent_config``.
"""

from memory_inject.config._constraints import MAX_CANDIDATE_POOL
from memory_inject.config._recall_plan import PlanQueryConfig, RecallPlanConfig
from memory_inject.config._renderer import RENDERERS, RendererConfig, SectionCapsConfig
from memory_inject.config._yaml import read_yaml_file
from memory_inject.config.loading import (
    load_agent_config,
    load_cron_jobs,
    parse_agent_config,
    parse_cron_jobs,
)
from memory_inject.config.schema import (
    STRATEGIES,
    AgentConfig,
    BackendConfig,
    BudgetConfig,
    CronJob,
    DecayConfig,
    GovernanceConfig,
    MemoryInjectConfig,
    RerankConfig,
    TrivialPromptConfig,
    config_to_dict,
)
from memory_inject.exceptions import ConfigError  # what the loaders raise, where they live

__all__ = [
    "MAX_CANDIDATE_POOL",
    "RENDERERS",
    "STRATEGIES",
    "AgentConfig",
    "BackendConfig",
    "BudgetConfig",
    "ConfigError",
    "CronJob",
    "DecayConfig",
    "GovernanceConfig",
    "MemoryInjectConfig",
    "PlanQueryConfig",
    "RecallPlanConfig",
    "RendererConfig",
    "RerankConfig",
    "SectionCapsConfig",
    "TrivialPromptConfig",
    "config_to_dict",
    "load_agent_config",
    "load_cron_jobs",
    "parse_agent_config",
    "parse_cron_jobs",
    "read_yaml_file",
]
