"""``memory.preset``: a seed system's whole behaviour, set by one key.

A preset is a mapping of ordinary settings laid *under* the file's own keys
when an agent file is loaded: whatever the file sets wins, key by key (nested
groups merge). The loaded config holds the expanded values (and the preset's
name, for ``explain`` and ``config_to_dict``), so nothing downstream knows
presets exist. In Python, build a preset's config with
``parse_agent_config({"agent": ..., "memory": {"preset": "pi", ...}})``.

``founder_os`` is founder-os's memory context injection skill (seed 003): the
three-query recall plan (semantic 5, company 3, plugin 2; merged by hit
count, confidence, relevance; capped at 5) over confirmed and applied rows
only, filtered in each query before its limit; no time decay; the
``## Relevant Memories`` block of at most 5 lines; one usage UPDATE of the
injected ids; the 2 s budget. ``recall_plan.preset: founder_os`` names it too.

``pi`` is PI v0.12 as its users know it (seeds 000, 002): the sectioned block
with its selection budgets (12 records, 4 L1, 8 L2), the governance stages,
the standing context (hard rules and L1 every turn), the trivial-prompt
filter, 24 candidates per turn (PI's ``maxRecords * 2``) and hybrid ranking by
reciprocal rank fusion, k = 60, keyword 0.45 and semantic 0.55. The adapters record
each turn's session (``sessions.record``), which Today's Sessions shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PRESETS", "PRESET_NAMES", "expand_preset"]

PRESETS: Mapping[str, Mapping[str, Any]] = {
    "founder_os": {
        "recall_plan": {
            "enabled": True,
            "preset": "founder_os",
            "cap": 5,
            "priority": "hits",
            "statuses": ["confirmed", "applied"],
            "track_usage": True,
        },
        "decay": {"enabled": False},
        "min_companion_score": None,  # founder-os's one floor for every row
        "renderer": {"kind": "relevant_memories"},
        "budget": {"max_entries": 5},
        "deadline_ms": 2000,
        # founder-os's skip-guard: no memory file is created by a turn, and a file that
        # cannot be opened means no memory and a status line, never an error.
        "backend": {"missing": "degrade", "unavailable": "degrade"},
    },
    "pi": {
        "recall_limit": 24,
        # PI's Selected Memory has no relevance floor and no time decay: every record that
        # passes the governance stages and matches the prompt competes for its slots.
        "min_relevance_score": 0.0,
        "min_companion_score": None,
        "decay": {"enabled": False},
        "renderer": {
            "kind": "sectioned",
            "max_records": 12,
            "max_l1": 4,
            "max_l2": 8,
            "daily_digest": True,
            # PI reads today's daily log only; its Selected Memory holds records (L1, L2).
            "daily_today_only": True,
            "max_sessions": 3,
            "max_questions": 3,
        },
        "governance": {"enabled": True},
        "standing": {"enabled": True},
        "sessions": {"record": True},
        # PI is one person's coding agent: Today's Sessions shows every session of the
        # profile. A channel bot's chats are many people's, whose lines showed in every
        # chat (round 35), so its turns record none unless the file turns them on.
        "origins": {"channel": {"sessions": {"record": False}}},
        "trivial_prompt": {"enabled": True},
        "backend": {
            "search_mode": "hybrid",
            "fusion": "rrf",
            "rrf_k": 60,
            "keyword_weight": 0.45,
            "vector_weight": 0.55,
        },
    },
}

PRESET_NAMES: tuple[str, ...] = tuple(PRESETS)


def _under(preset: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(preset)
    for key, value in own.items():
        base = out.get(key)
        if isinstance(value, Mapping) and isinstance(base, Mapping):
            out[key] = _under(base, value)
        elif key == "renderer" and isinstance(value, str) and isinstance(base, Mapping):
            # ``renderer: sectioned`` keeps the preset's sectioned settings; another
            # format replaces them (they would belong to the wrong format).
            out[key] = base if base.get("kind") == value.strip().lower() else value
        else:
            out[key] = value
    return out


def expand_preset(memory: Mapping[str, Any]) -> Mapping[str, Any]:
    """``memory`` laid over its preset's settings; unchanged without a (known) preset.

    An unknown preset is left for the checker to report with the file's path.
    """
    name = memory.get("preset")
    plan = memory.get("recall_plan")
    if name is None and isinstance(plan, Mapping) and plan.get("preset") == "founder_os":
        # It used to set the recall plan alone; a founder-os user means the whole preset.
        name = "founder_os"
    if not isinstance(name, str) or name.strip().lower() not in PRESETS:
        return memory
    preset = PRESETS[name.strip().lower()]
    if isinstance(memory.get("renderer"), Mapping):
        kind = memory["renderer"].get("kind")
        if isinstance(kind, str) and kind.strip().lower() != preset["renderer"]["kind"]:
            preset = {k: v for k, v in preset.items() if k != "renderer"}
    return _under(preset, memory)
