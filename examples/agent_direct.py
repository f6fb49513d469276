"""An application embedding the agent: AgentDirectAdapter with per-request sessions.

The agent's YAML gives direct calls an unlimited recall limit (0 = the pool cap).

    python examples/agent_direct.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from memory_inject.adapters import AgentDirectAdapter
from memory_inject.config import parse_agent_config
from memory_inject.storage.sqlite import SQLiteStore

AGENT = parse_agent_config(
    {"agent": "api", "memory": {"origins": {"agent_direct": {"recall_limit": 0}}}}, "<example>"
)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "memory.db")
        store.store("billing_contact", "The Acme billing contact is Priya.", "core")
        store.store(
            "ws_note",
            "In this session we agreed Acme billing goes monthly.",
            "conversation",
            session_id="ws-42",
        )
        api = AgentDirectAdapter(store, AGENT, channel="wss", autosave=True)
        print("memory active for session ws-42:", api.injection_active("ws-42"))
        for session in ("ws-42", None):
            turn = api.request("how is Acme billing handled?", session_id=session)
            print(
                f"session {session}: exclude_conversation="
                f"{turn.policy.exclude_conversation}, bypass response cache: {turn.injected}"
            )
            print("  prompt:", repr(turn.prompt))
        if "ws_note" in api.request("Acme billing").block:
            raise SystemExit("a sessionless request saw a session's conversation")
        store.close()
    print("ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
