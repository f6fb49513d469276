"""A PI user's memory, written in PI's own JSONL schema from the seed documents' examples.

The records are the examples of seeds 000 ("Retrieval and Injection": the hard
rule lines, ``mem_abc``/``mem_def``, the contested ``mem_xyz``, the Daily Log
with ``Sessions today: 3``) and 002 ("Memory Model": the record-schema example
``mem_20260520_abc`` verbatim, the rule-type table's examples, L1 identity),
plus a scratchpad item and today's sessions, which PI keeps outside its record
files (here: ordinary JSONL lines of our own schema).
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

NOW = datetime(2026, 5, 20, 15, 30, tzinfo=UTC)
PROFILE = "project:my-project"

_EVIDENCE = [{"type": "user_correction", "ref": "daily/2026-05-20.md", "note": "User said so."}]
_REVIEW = {"cadence_days": 30, "next_review": "2026-06-20", "change_condition": "If it changes."}


def _pi(
    id_: str,
    statement: str,
    *,
    layer: str = "L2",
    rule: str | None = None,
    conf: float = 0.9,
    status: str = "active",
    profile: str | None = PROFILE,
    updated: str = "2026-05-18",
    **more: Any,
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": id_,
        "layer": layer,
        "scope": {"type": "global"},
        "tags": [],
        "statement": statement,
        "evidence": _EVIDENCE,
        "confidence": conf,
        "stability": "semi-stable",
        "status": status,
        "created_at": "2026-03-01",
        "updated_at": updated,
        "review": _REVIEW,
        "supersedes": [],
        "superseded_by": [],
        "vault_ref": None,
    }
    if profile is not None:
        rec["profile_id"] = profile
    if rule is not None:
        rec["ruleType"] = rule
    rec.update(more)
    return rec


#: Seed 002's record-schema example, verbatim.
SCHEMA_EXAMPLE: dict[str, Any] = {
    "id": "mem_20260520_abc",
    "layer": "L2",
    "profile_id": "project:my-project",
    "scope": {"type": "global"},
    "tags": ["tooling", "workflow"],
    "statement": "Use bun not npm for local development in this project.",
    "evidence": [
        {
            "type": "user_correction",
            "ref": "daily/2026-05-20.md",
            "note": "User stated this directly.",
        }
    ],
    "confidence": 0.92,
    "stability": "semi-stable",
    "status": "active",
    "normalized_key": "project-my-project|global|global|tooling|prefer_pattern",
    "applies_when": [],
    "does_not_apply_when": ["publishing to npm registry"],
    "known_exceptions": ["CI publish step uses npm explicitly"],
    "review": {
        "cadence_days": 30,
        "next_review": "2026-06-20",
        "change_condition": "If the project moves away from bun.",
    },
    "supersedes": [],
    "superseded_by": [],
    "vault_ref": None,
    "ruleType": "prefer_pattern",
    "memory_kind": "instruction",
    "created_at": "2026-05-20",
    "updated_at": "2026-05-20",
}

LINES: list[dict[str, Any]] = [
    SCHEMA_EXAMPLE,
    _pi("mem_echo", "Don't use echo >> for file writes", rule="avoid_pattern", conf=0.92),
    _pi("mem_memory_md", "Never edit MEMORY.md directly", rule="avoid_pattern", profile=None),
    _pi("mem_orders", "This project uses event-sourcing for orders", rule="convention", conf=0.88),
    _pi("mem_rule", "Ask before deleting a branch", rule="correction", conf=0.88),
    _pi("mem_abc", "Auth service owns all JWT validation", rule="architecture", conf=0.94),
    _pi(
        "mem_def",
        "Always run typecheck before pushing",
        rule="workflow",
        conf=0.91,
        updated="2026-04-05",
    ),
    _pi("mem_commits", "Use conventional commits", rule="preference", conf=0.9),
    _pi("mem_identity", "Prefer TypeScript over JavaScript for new code", layer="L1", conf=0.95),
    _pi("mem_kv", "Keep the system prompt stable across turns", layer="L1", conf=0.9),
    _pi("mem_old", "Use npm for local development", rule="avoid_pattern", status="deprecated"),
    _pi(
        "mem_xyz",
        "Run typecheck only in CI, never before pushing",
        rule="workflow",
        conf=0.88,
        status="contested",
        tags=["typecheck"],
    ),
    _pi("mem_friday", "Never deploy on Fridays", rule="avoid_pattern", profile="project:other"),
    {
        "id": "inq_ci",
        "question": "Should typecheck run in CI as well as before pushing?",
        "priority": "high",
        "tags": ["typecheck"],
        "status": "open",
        "created_at": "2026-05-19",
    },
    {
        "id": "inq_low",
        "question": "Is typecheck output too noisy?",
        "priority": "low",
        "tags": ["typecheck"],
        "status": "open",
        "created_at": "2026-05-19",
    },
    {
        "id": "daily_0520",
        "layer": "L3",
        "statement": (
            "<!-- PI daily log -->\n## Session ended\n## Typecheck cleanup\n"
            "- fixed 12 type errors\nchatter that is not notable\n"
            "Typecheck before a push #decision\n## Session ended\n## Session ended"
        ),
        "created_at": "2026-05-20T10:00:00Z",
    },
    {
        "key": "todo_ci",
        "content": "Add typecheck to the CI workflow",
        "category": "scratchpad",
        "timestamp": "2026-05-19T09:00:00Z",
    },
    {
        "key": "sess_1",
        "content": "[my-project] typecheck fixes (bash, edit, read)",
        "category": "session",
        "timestamp": "2026-05-20T11:00:00Z",
    },
    {
        "key": "sess_2",
        "content": "[my-project] release notes (read, write)",
        "category": "session",
        "timestamp": "2026-05-20T13:00:00Z",
    },
]


def jsonl() -> io.StringIO:
    """The seed as a JSONL stream, one line per record."""
    return io.StringIO("".join(json.dumps(line) + "\n" for line in LINES))
