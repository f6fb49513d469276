"""PI's Today's Sessions in a session turn shows the profile's sessions (twenty-ninth round).

docs/adapters.md ("Who sees it") promises the profile's sessions of the day, the other
sessions included: that is the section's purpose. The scope rule dropped every other
session's record as ``foreign_session``, so a turn with a session (every turn PI's
adapters run) showed its own session at most, and a new session's first turn nothing.
A session record bound to a profile now passes the session rule; other profiles' and
unbound records of other sessions do not.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from memory_inject import render_memory_context
from memory_inject.config import parse_agent_config
from memory_inject.sessions import record_session
from memory_inject.storage import SQLiteStore

NOW = datetime(2026, 5, 20, 15, tzinfo=UTC)
PI = parse_agent_config(
    {"agent": "pi", "memory": {"preset": "pi", "governance": {"profile_id": "project:app"}}}
).memory


def _lines(text: str) -> list[str]:
    parts = text.split("## Today's Sessions\n")
    return parts[1].split("\n\n")[0].splitlines()[1:] if len(parts) > 1 else []


def test_a_session_turn_sees_the_profiles_other_sessions(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "pi.db")
    for sid, name, hour in (("morning", "fix the typecheck", 9), ("noon", "release notes", 12)):
        record_session(
            store,
            session_id=sid,
            project="app",
            name=name,
            tools=["bash"],
            profile_id="project:app",
            now=NOW.replace(hour=hour),
        )
    record_session(  # another profile's session: never shown
        store, session_id="x", project="web", name="secret", profile_id="project:web", now=NOW
    )
    store.store("session:y", "unbound record", "session", session_id="y", timestamp=NOW)
    for sessions in (["afternoon"], ["noon"]):
        result = render_memory_context(
            store, "how do we release the app?", config=PI, sessions=sessions, now=NOW
        )
        assert ["- [app] release notes (bash)", "- [app] fix the typecheck (bash)"] == _lines(
            result.text
        ), sessions
        assert "secret" not in result.text
        assert "unbound record" not in result.text
    # A turn with no session sees every record of the day, as before.
    result = render_memory_context(store, "how do we release the app?", config=PI, now=NOW)
    assert "- [app] release notes (bash)" in _lines(result.text)
    assert "secret" not in result.text
    store.close()
