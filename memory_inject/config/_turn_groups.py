"""The turn groups ported from PI and zeroclaw: governance, trivial prompts, standing
context, session records and the recall-time threat scan.

Owns :class:`GovernanceConfig`, :class:`TrivialPromptConfig`,
:class:`StandingConfig`, :class:`SessionsConfig`, :class:`ThreatScanConfig`
and the threat scan's rule ids (:data:`THREAT_RULE_IDS`). All but the threat
scan are off by default. Re-exported by ``memory_inject.config.schema``.
"""

from __future__ import annotations

from attrs import frozen

from memory_inject.config._constraints import MAX_CANDIDATE_POOL, setting

__all__ = [
    "THREAT_RULE_IDS",
    "GovernanceConfig",
    "SessionsConfig",
    "StandingConfig",
    "ThreatScanConfig",
    "TrivialPromptConfig",
]

_GOVERNANCE_STAGES = ("status", "profile", "project", "applicability", "negative_scope")


@frozen
class GovernanceConfig:
    """PI's governance stages, run on recalled entries before the arm. Off by default."""

    enabled: bool = setting(False, "bool", "run the governance stages")
    stages: tuple[str, ...] = setting(
        _GOVERNANCE_STAGES, "strlist", "which stages, in order", choices_list=_GOVERNANCE_STAGES
    )
    profile_id: str | None = setting(
        None,
        "str",
        "explicit profile (null: resolved from the cwd; never blank)",
        nullable=True,
        nonempty=True,
    )
    include_working_directory: bool = setting(
        False, "bool", "match applicability phrases against the cwd too"
    )
    min_token_length: int = setting(
        4, "int", "shortest word the phrase matcher stems", ge=1, le=100
    )


@frozen
class TrivialPromptConfig:
    """Skip injection for prompts that carry no question (PI's injection filter). Off by default."""

    enabled: bool = setting(False, "bool", "skip trivial prompts with reason trivial_prompt")
    min_chars: int = setting(4, "int", "prompts shorter than this are trivial", ge=0, le=100_000)
    acknowledgements: tuple[str, ...] | None = setting(
        None,
        "strlist",
        "phrases that are trivial on their own (null = built-in list)",
        nullable=True,
    )
    slash_commands: bool = setting(True, "bool", "'/command args' prompts are trivial")


@frozen
class StandingConfig:
    """PI's standing context: the profile's hard rules and L1 records every turn. Off by default."""

    enabled: bool = setting(False, "bool", "add active L1 records and L2 hard rules to every turn")
    limit: int = setting(
        32, "int", "most records of each layer read per turn", ge=0, le=MAX_CANDIDATE_POOL
    )


@frozen
class SessionsConfig:
    """PI's session records, written by the adapters at each turn (Today's Sessions reads them)."""

    record: bool = setting(False, "bool", "the adapters upsert the turn's session row")
    project: str | None = setting(
        None, "str", "the sessions' project (null = the cwd's package or directory)", nullable=True
    )


#: The rule ids of the recall-time threat scan, in check order (``stages/threat.py`` holds
#: the rules; docs/pipeline.md, "1a. threat_scan").
THREAT_RULE_IDS = (
    "override_instructions",
    "role_hijack",
    "prompt_leak",
    "role_tag",
    "system_header",
    "tool_call",
    "exfiltration",
    "hidden_instruction",
    "exfil_curl",
    "exfil_wget",
    "read_secrets",
    "send_to_url",
    "agent_config_mod",
    "hardcoded_secret",
    "private_key",
)


@frozen
class ThreatScanConfig:
    """zeroclaw's recall-time threat scan (``threat_scan_load_time``): on by default."""

    enabled: bool = setting(
        True, "bool", "withhold recalled rows a rule flags (threat:<rule>) and refill"
    )
    rules: tuple[str, ...] | None = setting(
        None,
        "strlist",
        "the rules that run (null = every rule)",
        nullable=True,
        choices_list=THREAT_RULE_IDS,
    )
