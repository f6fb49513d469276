"""Forgotten or replaced text leaves no trace in the live rows (issue 29, thirtieth round).

A row's context columns (``ctx_prev``, ``ctx_prev2``, ``ctx_near``) hold its
neighbours' text. They were set once, at insert: a forgotten row's words kept
lifting the row written after it, whose score then confirmed a guess of the
forgotten text, and a key written again (a user's forgotten chat row, then
another user's tool write under the same key) kept the old row's context. Now a
write of a held key computes the row's context afresh, a forget or a rewrite
computes again the context of the rows that took it, and forgotten rows no
longer count in the keyword statistics: with the row forgotten, every score is
what it would be had the row never been written. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import random
import sqlite3
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memory_inject.models import parse_timestamp
from memory_inject.storage.day_vote import NEAR_MINUTES
from tests.storage import _pg_backend as pgb
from tests.storage._sqlite_backend import make_sqlite_store

ENGINES = ["sqlite", "postgres"]
PROMPTS = ("what is the office wifi password?", "office sunflower22", "office sunflower21")


@pytest.fixture
def open_store(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Any]]:
    """``open_store(**kwargs)``: an empty store of ``engine``."""
    made: list[Any] = []

    def factory(**kwargs: Any) -> Any:
        if engine == "sqlite":
            store: Any = make_sqlite_store(tmp_path / f"s{len(made)}", **kwargs)
        else:
            store = pgb.make_postgres_store(request.getfixturevalue("pg_dsn"), **kwargs)
        made.append(store)
        return store

    yield factory
    for s in made:
        s.close()


def _rows(store: Any) -> list[dict[str, Any]]:
    """Every live row of the store as the file or table holds it, in write order."""
    sql = (
        "SELECT rid, key, content, session_id, category, timestamp, source, "
        "ctx_prev, ctx_prev2, ctx_near FROM memories WHERE deleted_at IS NULL ORDER BY rid"
    )
    if isinstance(store, pgb.ScratchPostgresStore):
        with psycopg.connect(store.database.dsn) as conn:
            found = conn.execute(sql.replace("timestamp", '"timestamp"', 1)).fetchall()
    else:
        conn3 = sqlite3.connect(store.path)
        try:
            found = conn3.execute(sql).fetchall()
        finally:
            conn3.close()
    names = "rid key content session category ts source prev prev2 near".split()
    return [dict(zip(names, r, strict=True)) for r in found]


def _scores(store: Any, prompt: str, session: str | None = None) -> dict[str, float]:
    return {e.key: round(e.score, 4) for e in store.recall(prompt, 10, session_id=session)}


def _context_text(store: Any) -> str:
    """All the context text the live rows hold."""
    return " ".join(f"{r['prev'] or ''} {r['prev2'] or ''}" for r in _rows(store))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("session", [None, "u1"])
def test_a_forgotten_neighbour_no_longer_lifts_the_score(
    open_store: Callable[..., Any], session: str | None
) -> None:
    """repro1: the office hours written after the wifi password, then the password
    forgotten. The hours score as in a store that never held it (0.25, 0.4, 0.4; it was
    0.667 and 0.75 for the right guess, 0.4 for a wrong one), in a session (session
    context) and without (near context), and no live row holds the password."""
    category = "conversation" if session else "core"
    never, forgot = open_store(), open_store()
    forgot.store("wifi", "The office wifi password is sunflower22.", category, session_id=session)
    for store in (never, forgot):
        store.store("hours", "The office opens at 8am.", category, session_id=session)
    assert forgot.forget("wifi")
    for prompt in PROMPTS:
        assert _scores(never, prompt, session) == _scores(forgot, prompt, session), prompt
    assert {"hours": 0.4} == _scores(forgot, "office sunflower22", session)
    assert "sunflower22" not in _context_text(forgot)
    [hours] = _rows(forgot)
    assert (None, None, None) == (hours["prev"], hours["prev2"], hours["near"])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("source", ["tool", None])
def test_a_key_written_again_by_another_user_holds_none_of_the_first_users_text(
    open_store: Callable[..., Any], source: str | None
) -> None:
    """repro2: u1's chat rows forgotten, then u2 writes under u1's key "plan" (the memory
    tools: source "tool", which takes no neighbours; or a plain write, whose neighbours
    are u2's). u2's row holds nothing of u1 on disk and scores as if u1 never existed."""
    never, reused = open_store(), open_store()
    reused.store("diag", "I was diagnosed with melanoma in March.", "conversation", session_id="u1")
    reused.store("plan", "Plan: ask the dermatologist about the biopsy.", "conversation",
                 session_id="u1")  # fmt: skip
    for key in ("plan", "diag"):
        assert reused.forget(key, sessions=["u1"])
    for store in (never, reused):
        store.store("plan", "Plan: see the doctor on Friday.", "conversation",
                    session_id="u2", source=source)  # fmt: skip
    [row] = _rows(reused)
    assert ("plan", "u2", None, None) == (row["key"], row["session"], row["prev"], row["prev2"])
    for prompt in ("doctor melanoma", "melanoma biopsy doctor", "dermatologist March"):
        assert _scores(never, prompt, "u2") == _scores(reused, prompt, "u2"), prompt


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("layout", ["session", "event", "near"])
def test_an_updated_neighbours_old_text_is_gone_from_its_successors(
    open_store: Callable[..., Any], layout: str
) -> None:
    """A row rewritten: the two rows after it hold its new text, none its old one, in a
    session, an event (one timestamp) and near context (a second apart)."""
    store = open_store()
    base = parse_timestamp("2024-03-01T10:00:00Z")
    session = "s" if layout == "session" else None
    for i, content in enumerate(
        ["The zebra crossing is on Elm street.", "Meet at the corner.", "Bring an umbrella."]
    ):
        at = base if layout == "event" else base + timedelta(seconds=i)
        store.store(f"r{i}", content, "core", session_id=session, timestamp=at)
    assert "zebra" in _context_text(store)
    store.store("r0", "The crossing moved to Oak avenue.", "core", session_id=session)
    rows = {r["key"]: r for r in _rows(store)}
    assert "zebra" not in _context_text(store)
    assert "Oak avenue" in rows["r1"]["prev"]
    assert "Oak avenue" in rows["r2"]["prev2"]
    # A row with near context comes back for its own words only.
    lifted = ["r0"] if layout == "near" else ["r0", "r1", "r2"]
    assert lifted == list(_scores(store, "Oak avenue crossing", session))
    assert {} == _scores(store, "zebra Elm", session)


def _expected_context(rows: list[dict[str, Any]]) -> dict[str, tuple[Any, Any]]:
    """Each live row's context as an insert computes it, from the live rows alone: its
    session's two rows before it (within NEAR_MINUTES), or its event's (one timestamp),
    or its near ones (the NEAR_MINUTES before it, by time)."""
    window = timedelta(minutes=NEAR_MINUTES)
    for r in rows:
        r["at"] = parse_timestamp(r["ts"]) if isinstance(r["ts"], str) else r["ts"]
    expected = {}
    for r in rows:
        before = [p for p in rows if p["rid"] < r["rid"]]
        if r["session"] is not None:
            mine = [p for p in before if p["session"] == r["session"]][::-1][:2]
            found = [p["content"] if abs(p["at"] - r["at"]) <= window else None for p in mine]
        else:
            group = [p for p in before if p["session"] is None and p["category"] == r["category"]]
            found = [p["content"] for p in group if p["at"] == r["at"]][::-1][:2]
            if not found:
                near = [p for p in group if r["at"] - window <= p["at"] < r["at"]]
                near.sort(key=lambda p: (p["at"], p["rid"]), reverse=True)
                found = [p["content"] for p in near[:2]]
        found += [None, None]
        expected[r["key"]] = (found[0], found[1])
    return expected


@pytest.mark.parametrize("engine", ENGINES)
def test_concurrent_writers_and_forgetters_lose_no_rows_and_leave_no_residue(
    open_store: Callable[..., Any], engine: str
) -> None:
    """Threads write, rewrite and forget in two shared sessions and without one, at once.
    Every write that returned is there, every forget stays done, and each live row's
    context is what an insert would compute from the live rows (so none holds forgotten
    or replaced text)."""
    threads_n, rounds = 6, 40
    store = open_store(**({"max_size": threads_n} if engine == "postgres" else {}))
    expected: dict[str, str] = {}
    scopes: dict[str, str | None] = {}
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(threads_n)

    def work(t: int) -> None:
        rng = random.Random(t)
        mine: dict[str, str] = {}
        start.wait(20)
        try:
            for j in range(rounds):
                scope = (f"s{j % 2}", None)[j % 3 == 2]
                roll = rng.random()
                if mine and roll < 0.25:
                    key = rng.choice(sorted(mine))
                    assert store.forget(key)
                    del mine[key]
                elif mine and roll < 0.4:
                    key = rng.choice(sorted(mine))
                    content = f"rewritten t{t} n{j} word{t}x{j}r"
                    store.store(key, content, "core", session_id=scopes[key])
                    mine[key] = content
                else:
                    key, content = f"k{t}-{j}", f"fact t{t} n{j} word{t}x{j}"
                    store.store(key, content, "core", session_id=scope)
                    mine[key], scopes[key] = content, scope
        except Exception as exc:  # what it raised is the result
            with lock:
                failures.append(f"{type(exc).__name__}: {exc}")
        with lock:
            expected.update(mine)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert failures == []
    rows = _rows(store)
    assert expected == {r["key"]: r["content"] for r in rows}
    want = _expected_context(rows)
    assert want == {r["key"]: (r["prev"], r["prev2"]) for r in rows}
