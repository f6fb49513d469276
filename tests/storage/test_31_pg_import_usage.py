"""``import_jsonl`` beside ``mark_used`` on PostgreSQL: no deadlock, every use counted.

A helper's stress (round 31): one thread importing 3,000 rows again and again, in a
shuffled order, beside four threads marking 20 of their ids used, gave the import
``StoreLockedError: deadlock detected`` 11 times in 30 s, and no import went through.
The merge locks rows in the file's order, then its context refresh locks their
neighbours; ``mark_used``'s one UPDATE locked its rows in its own order. Now
``mark_used`` takes the namespace's shared lock first, as every write does, and the
import's merge holds that lock alone.
"""

from __future__ import annotations

import io
import json
import random
import threading
import time

import psycopg
import pytest

from memory_inject.storage import PostgresStore
from memory_inject.storage.postgres import neighbours as nb

ROWS = 1200


def _file(n: int) -> list[str]:
    """``n`` rows as export lines: a third in sessions of ten, the rest sessionless."""
    lines = []
    for i in range(n):
        session = f"s{i // 30}" if i % 3 == 0 else None
        category = "conversation" if session else "core"
        lines.append(
            json.dumps(
                {
                    "key": f"k{i}",
                    "id": f"id-{i:05d}",
                    "content": f"row {i} about topic {i % 17}",
                    "category": category,
                    "session_id": session,
                    "timestamp": f"2026-03-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
                }
            )
        )
    return lines


@pytest.mark.postgres
def test_imports_beside_mark_used_raise_nothing(pg_scratch_dsn: str) -> None:
    store = PostgresStore(pg_scratch_dsn, max_size=8, timeout=30)
    lines = _file(ROWS)
    store.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
    ids = [json.loads(line)["id"] for line in lines]
    errors: list[BaseException] = []
    done = {"imports": 0, "marks": 0}
    stop = time.monotonic() + 6.0

    def importer() -> None:
        rnd = random.Random(1)
        while time.monotonic() < stop:
            order = lines[:]
            rnd.shuffle(order)
            try:
                store.import_jsonl(io.StringIO("\n".join(order) + "\n"))
                done["imports"] += 1
            except Exception as exc:
                errors.append(exc)

    def marker(seed: int) -> None:
        rnd = random.Random(seed)
        while time.monotonic() < stop:
            try:
                store.mark_used(rnd.sample(ids, 20))
                done["marks"] += 1
            except Exception as exc:
                errors.append(exc)

    threads = [threading.Thread(target=importer)]
    threads += [threading.Thread(target=marker, args=(s,)) for s in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        store.close()
    assert errors == []
    assert done["imports"] >= 1 and done["marks"] >= 1


@pytest.mark.postgres
def test_mark_used_waits_for_an_import_before_it_locks_a_row(pg_scratch_dsn: str) -> None:
    """The lock order itself: while a session holds the namespace's lock as an import's
    merge does, ``mark_used`` has locked no row; it counts once the lock is let go."""
    store = PostgresStore(pg_scratch_dsn, timeout=30)
    try:
        row = store.store("a", "alpha", "core")
        q = store._engine.q
        counted: list[int] = []
        with psycopg.connect(pg_scratch_dsn) as held:
            lock = nb.lock_namespace(q.t, q.names.table, q.ns)
            held.execute(lock.query, lock.params)
            marker = threading.Thread(target=lambda: counted.append(store.mark_used([row.id])))
            marker.start()
            time.sleep(0.5)
            # The import's merge could lock the row now: mark_used holds no row lock.
            held.execute("SET LOCAL lock_timeout = 200")
            locked = held.execute(
                "SELECT 1 FROM memories WHERE id = %s FOR UPDATE", (row.id,)
            ).fetchall()
            assert locked == [(1,)] and counted == []
            held.commit()
        marker.join(10)
        assert counted == [1]
        got = store.get("a")
        assert got is not None and got.times_used == 1
    finally:
        store.close()
