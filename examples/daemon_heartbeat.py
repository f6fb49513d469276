"""Heartbeat and background task runs through DaemonAdapter (sessionless, no chat memory).

python examples/daemon_heartbeat.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from memory_inject import AgentConfig
from memory_inject.adapters import DaemonAdapter
from memory_inject.storage.sqlite import SQLiteStore


async def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "memory.db")
        store.store("backup_job", "The nightly backup on prod-3 writes to /srv/backup.", "core")
        store.store(
            "chat",
            "Bob complained about the backup job in chat.",
            "conversation",
            session_id="slack_bob",
        )
        daemon = DaemonAdapter(store, AgentConfig(agent="ops"))
        beat = daemon.heartbeat("check the backup job on prod-3", "high")
        print("heartbeat prompt:", repr(beat.prompt))
        print("  dropped:", dict(beat.event.dropped) if beat.event else {})
        task = await daemon.arun_task("rotate the backup job logs")
        print("task prompt:", repr(task.prompt))
        if "chat" in beat.block or "backup_job" not in task.block:
            raise SystemExit("unexpected daemon blocks")
        store.close()
    print("ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
