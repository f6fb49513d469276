"""Run scheduled jobs through CronAdapter; a `uses_memory: false` job never touches the store.

python examples/cron_jobs.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from memory_inject import AgentConfig
from memory_inject.adapters import CronAdapter, load_cron_jobs
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording

HERE = Path(__file__).resolve().parent


def main() -> int:
    jobs = load_cron_jobs(HERE / "cron_jobs.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "memory.db")
        store.store("incident_2231", "Incident 2231: the prod-3 backup failed, disk full.", "daily")
        store.store(
            "chat",
            "Alice thinks the prod-3 incidents are her fault.",
            "conversation",
            session_id="telegram_alice",
        )
        cron = CronAdapter(store, AgentConfig(agent="scheduler"))
        for job in jobs:
            with recording() as rec:
                run = cron.run(job)
            print(
                f"job {job.id} (uses_memory={job.uses_memory}): {len(rec.events)} recall "
                f"event(s), memory bound: {run.store is not None}, policy: {run.policy}"
            )
            print("  prompt:", repr(run.prompt))
            if "chat" in run.block:  # scheduled runs never see conversations
                raise SystemExit("a cron run saw conversation memory")
        store.close()
    print("ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
