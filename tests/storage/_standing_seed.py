"""The thirty-second round's standing-context scene: one shared daily note under a DM's 40."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from memory_inject.config import parse_agent_config

NOW = datetime(2026, 5, 20, 15, tzinfo=UTC)
PI = parse_agent_config({"agent": "pi", "memory": {"preset": "pi"}}).memory
DAILY = {"daily": NOW.replace(hour=0)}


def seed(store: Any) -> Any:
    """One shared daily note and one of session B, then 40 of session A, all today."""
    store.store("shared_day", "Shared note: deploy window at noon", "daily", timestamp=NOW)
    store.store(
        "b_day", "Session B note: ship the invoice fix", "daily", session_id="b", timestamp=NOW
    )
    for i in range(40):
        store.store(
            f"a_day_{i}",
            f"Session A private note {i}",
            "daily",
            session_id="a",
            timestamp=NOW + timedelta(minutes=i + 1),
        )
    return store
