"""A recall plan's cap and the session scope rule: the turn's own rows are never crowded out
by rows the scope rule drops anyway (a helper's find, round 25).

With a plan (``default`` + ``time``, cap 4), ``sessions=[None, "bob"]`` rendered nothing for
"what did we talk about yesterday?": the unscoped recall's eight rows of alice's session
filled the cap, ``session_scope`` then dropped them as ``foreign_session``, and bob's own
row was reported as ``plan:cap``. ``["bob"]`` and ``["bob", None]`` rendered it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_inject import render_memory_context
from memory_inject.config import parse_agent_config
from memory_inject.signals import MemoryRecall
from memory_inject.storage.sqlite import SQLiteStore

NOW = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
YESTERDAY = datetime(2026, 3, 9, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize("sessions", [["bob"], ["bob", None], [None, "bob"]])
def test_a_plans_cap_is_shared_by_the_turns_own_rows_only(
    tmp_path: Path, sessions: list[str | None]
) -> None:
    cfg = parse_agent_config(
        {
            "agent": "t",
            "memory": {
                "recall_plan": {
                    "enabled": True,
                    "queries": [{"source": "default", "limit": 8}, {"source": "time", "limit": 8}],
                    "cap": 4,
                }
            },
        }
    ).memory
    store = SQLiteStore(tmp_path / "m.db")
    store.store(
        "bob_chat",
        "Bob asked about the holiday party budget and venue options.",
        "conversation",
        session_id="bob",
        timestamp=YESTERDAY,
    )
    for i in range(8):
        store.store(
            f"alice_{i}",
            f"Alice discussed quarterly planning item number {i} with detailed notes.",
            "conversation",
            session_id="alice",
            timestamp=YESTERDAY + timedelta(minutes=10 + i),
        )
    result = render_memory_context(
        store,
        "what did we talk about yesterday?",
        config=cfg,
        now=NOW,
        sessions=sessions,
        origin="channel",
    )
    store.close()
    assert isinstance(result.event, MemoryRecall)
    assert result.event.rendered_keys == ("bob_chat",)
    assert "alice" not in result.text
    dropped = dict(result.event.dropped)
    assert all(dropped.get(f"alice_{i}") in (None, "foreign_session") for i in range(8))
