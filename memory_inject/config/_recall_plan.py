"""``memory.recall_plan``: multi-source recall (founder-os), one query per source.

Off by default, when a render makes one recall per session scope. On, each
scope gets the plan's queries (default, semantic, lexical, entity or plugin
rows), merged by :func:`memory_inject.plan.merge_results`.
"""

from __future__ import annotations

from attrs import field, frozen

from memory_inject.config._constraints import MAX_CANDIDATE_POOL, setting, to_tuple

__all__ = ["PlanQueryConfig", "RecallPlanConfig"]


@frozen
class PlanQueryConfig:
    """One query of a recall plan."""

    source: str = setting(
        "default",
        "str",
        "default, semantic, lexical, entity, plugin or time",
        choices=("default", "semantic", "lexical", "entity", "plugin", "time"),
    )
    limit: int = setting(5, "int", "rows this query may contribute", ge=1, le=MAX_CANDIDATE_POOL)


@frozen
class RecallPlanConfig:
    """Multi-source recall (founder-os). Off by default: one recall per session scope."""

    enabled: bool = setting(False, "bool", "use the plan instead of one recall per scope")
    preset: str | None = setting(
        None,
        "str",
        "founder_os: the preset plan (overrides the rest)",
        choices=("founder_os",),
        nullable=True,
    )
    queries: tuple[PlanQueryConfig, ...] = field(
        default=(),
        converter=to_tuple,
        metadata={
            "kind": "list_of",
            "item": PlanQueryConfig,
            "doc": "the queries, in precedence order",
        },
    )
    cap: int = setting(5, "int", "max merged entries", ge=1, le=MAX_CANDIDATE_POOL)
    priority: str = setting(
        "hits", "str", "hits (count, confidence, relevance) or score", choices=("hits", "score")
    )
    statuses: tuple[str, ...] | None = setting(
        None, "strlist", "only rows with these statuses (null = any)", nullable=True
    )
    track_usage: bool = setting(False, "bool", "bump times_used of rendered rows")
