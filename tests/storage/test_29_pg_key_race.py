"""Writers of one new key at once on PostgreSQL: the later ones update it (or are refused as
another scope's), none fails on a duplicate id.

A new key's id is the key, and the upsert's ``ON CONFLICT`` names the key: two inserts of
one new key could both find no row, and the one that waited then failed on the primary
key with "duplicate id or key" (a helper's 6 threads x 400 rounds: about 4 writes lost
per 400 rounds, in one session and across sessions; SQLite, one writer at a time, none).
The race needs two inserts to pass the conflict check together, so this test makes many
such rounds: without the fix it fails in about 49 runs of 50.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from memory_inject.exceptions import KeyOwnedError
from memory_inject.storage.postgres import PostgresStore

pytestmark = pytest.mark.postgres

WRITERS = 6
ROUNDS = 400


@pytest.mark.parametrize("scopes", ["one session", "a session each"])
def test_writers_of_one_new_key_never_fail_on_its_id(pg_scratch_dsn: str, scopes: str) -> None:
    store = PostgresStore(pg_scratch_dsn, max_size=WRITERS)
    failed: list[str] = []
    refused = 0
    lock = threading.Lock()
    try:
        for n in range(ROUNDS):
            start = threading.Barrier(WRITERS)

            def write(i: int, key: str = f"k{n}", start: threading.Barrier = start) -> None:
                nonlocal refused
                start.wait(10)
                session = "s" if scopes == "one session" else f"s{i}"
                try:
                    store.store(key, f"fact {i}", session_id=session)
                except KeyOwnedError:
                    with lock:
                        refused += 1
                except Exception as exc:  # what it raised is the result
                    with lock:
                        failed.append(f"{type(exc).__name__}: {exc}")

            threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(20)
        rows: Any = store.count()
    finally:
        store.close()
    assert failed == []
    assert rows == ROUNDS
    # One session: every write is an upsert. A session each: one wins, the rest are refused.
    assert refused == (0 if scopes == "one session" else ROUNDS * (WRITERS - 1))
