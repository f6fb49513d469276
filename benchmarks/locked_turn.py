"""A turn's own writes on a locked SQLite file: how long the turn takes.

Another connection holds the file in ``BEGIN IMMEDIATE`` (a bulk import, another tool)
while a ``MemoryLoop`` with ``autosave=True`` and ``memory.sessions.record: true`` runs
turns. The block is read past the lock (WAL); the autosave and the session row are the
turn's own writes, which wait within ``deadline_ms`` and are deferred past it. Prints the
median and the worst turn per deadline, and what the turns' errors said.

    python benchmarks/locked_turn.py [--turns 8] [--deadlines 300 1000]
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from memory_inject import SQLiteStore
from memory_inject.adapters import MemoryLoop
from memory_inject.config import parse_agent_config

_CODES = re.compile(r"\b(?:autosave|session)_(?:deferred|failed)\b")


def _turns(deadline_ms: int, turns: int) -> tuple[list[float], Counter[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "m.db"
        with SQLiteStore(db) as store:
            store.store("deploy_target", "Production deploys go to prod-3.", "core")
            memory = {"deadline_ms": deadline_ms, "sessions": {"record": True}}
            loop = MemoryLoop(
                store, parse_agent_config({"agent": "a", "memory": memory}), autosave=True
            )
            other = sqlite3.connect(db, isolation_level=None)
            other.execute("BEGIN IMMEDIATE")
            took: list[float] = []
            said: Counter[str] = Counter()
            try:
                for n in range(turns):
                    ask = [{"role": "user", "content": f"where do deploys go? #decision {n}"}]
                    start = time.perf_counter()
                    result = loop.inject(ask, sessions=["s1"])
                    took.append(time.perf_counter() - start)
                    error = (result.injection.error if result.injection else None) or ""
                    said[", ".join(_CODES.findall(error)) or "none"] += 1
            finally:
                other.execute("ROLLBACK")
                other.close()
    return took, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--deadlines", type=int, nargs="+", default=[300, 1000])
    args = parser.parse_args()
    print("| deadline_ms | turns | median turn s | worst turn s | the turns' errors |")
    print("|---:|---:|---:|---:|---|")
    for deadline in args.deadlines:
        took, said = _turns(deadline, args.turns)
        errors = "; ".join(f"{k} x{v}" for k, v in said.items())
        print(
            f"| {deadline} | {len(took)} | {statistics.median(took):.3f} | {max(took):.3f} "
            f"| {errors} |"
        )


if __name__ == "__main__":
    main()
