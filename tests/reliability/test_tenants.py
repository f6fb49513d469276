"""Tenant isolation: thousands of sessions, senders, groups and profiles in one SQLite file.

Two agents (namespaces) share one database. In each, 1,000 senders have a
personal scope (their sanitised sender id, as the channel adapter builds it)
and a direct-message conversation, 500 groups have a group conversation, 50
operators a CLI session and 50 scheduled jobs a job session, plus seven
session ids a sender could choose to attack the SQL; every scope belongs to
one of 200 profiles, and the same ids exist in both agents. Every memory says
who owns it (``m<id>`` in its content maps to agent, session, profile and
category). Random turns from every origin, channel turns scoped exactly as
:mod:`memory_inject.adapters.channel` scopes them, then recall with prompts
that name other tenants' memories on purpose, and every memory that reaches
a block is checked against the scope it belongs to.
"""

from __future__ import annotations

import io
import json
import random
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from attrs import frozen

from memory_inject import (
    BudgetConfig,
    MemoryInjectConfig,
    TurnMeta,
    TurnOrigin,
    render_memory_context,
    resolve_inject_policy,
)
from memory_inject.config import GovernanceConfig
from memory_inject.policy import has_session
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording

if TYPE_CHECKING:
    # The adapters ship as memory_inject.adapters from the top-level adapters/ folder
    # (package-dir); type checkers read the folder, which has no such mapping.
    from adapters.channel import InboundMessage, person_scope, session_scopes
else:
    from memory_inject.adapters.channel import InboundMessage, person_scope, session_scopes

NOW = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)
NAMESPACES = ("alice-bot", "ops-bot")
SHARED = ("core", "daily")  # the store's shared categories: unsessioned rows every session sees
N_SENDERS, N_GROUPS, N_CLI, N_JOBS, N_PROFILES = 1000, 500, 50, 50, 200
TURNS = 6000
VOCAB = tuple(a + b + c for a in "bdfklmprst" for b in "aeiou" for c in ("n", "x", "lo", "ry"))
MEMORY_TAG = re.compile(r"\bm(\d+)\b")
#: Session ids a sender can choose are untrusted too: wildcards and quotes must not widen scope.
ODD_SESSIONS = ("", "%", "_", "*", "' OR '1'='1", "telegram_group_%", "dm_\x00x")
SCHEDULED = (TurnOrigin.CRON, TurnOrigin.DAEMON)


@frozen
class Owner:
    namespace: str
    session: str | None
    profile: str | None
    category: str


@frozen
class Turn:
    namespace: str
    origin: TurnOrigin
    sessions: tuple[str | None, ...]
    profile: str
    exclude_conversation: bool


def allowed(owner: Owner, turn: Turn) -> bool:
    """The scope a memory belongs to, as the library documents it.

    Same agent; same profile or no profile; no conversation when the policy
    excludes it; and when the turn names sessions: theirs plus the agent's
    unsessioned core and daily memories. A sessionless turn recalls unscoped
    (policy.md), which is why its policy always excludes conversation.
    """
    if owner.namespace != turn.namespace:
        return False
    if owner.profile is not None and owner.profile != turn.profile:
        return False
    if turn.exclude_conversation and owner.category == "conversation":
        return False
    named = [s for s in turn.sessions if s is not None]
    if not named:
        return True
    return owner.session in named or (owner.session is None and owner.category in SHARED)


def topic(session: str) -> str:
    """A word only the memories of ``session`` contain."""
    return "topic" + "".join(f"{ord(c):x}" for c in session)


@frozen
class World:
    path: Path
    owners: dict[int, Owner]
    scopes: dict[str, list[str]]  # kind -> scope ids
    profile_of: dict[str, str]


def sender_id(i: int) -> str:
    return f"tg:{i}"


def build_world(path: Path, rng: random.Random) -> World:
    scopes = {
        "sender": [person_scope("telegram", sender_id(i)) for i in range(N_SENDERS)],
        "dm": [f"telegram_dm_{i}" for i in range(N_SENDERS)],
        "group": [f"telegram_group_{g}" for g in range(N_GROUPS)],
        "cli": [f"cli_{i}" for i in range(N_CLI)],
        "job": [f"cron_job_{i}" for i in range(N_JOBS)],
        "odd": list(ODD_SESSIONS),
    }
    profiles = [f"project:p{i}" for i in range(N_PROFILES)]
    profile_of = {s: rng.choice(profiles) for ids in scopes.values() for s in ids}
    for i in range(N_SENDERS):  # a sender and their direct messages share a profile
        profile_of[f"telegram_dm_{i}"] = profile_of[person_scope("telegram", sender_id(i))]
    owners: dict[int, Owner] = {}
    for ns in NAMESPACES:
        lines: list[str] = []

        def add(
            session: str | None,
            profile: str | None,
            category: str,
            ns: str = ns,
            lines: list[str] = lines,
        ) -> None:
            mid = len(owners)
            owners[mid] = Owner(ns, session, profile, category)
            words = " ".join([topic(session) if session is not None else "", *rng.sample(VOCAB, 2)])
            lines.append(
                json.dumps(
                    {
                        "key": f"mem_{mid}",
                        "content": f"{words} m{mid}",
                        "category": category,
                        "session_id": session,
                        "profile_id": profile,
                        "timestamp": (NOW - timedelta(minutes=rng.randint(0, 600))).isoformat(),
                    }
                )
                + "\n"
            )

        for kind, ids in scopes.items():
            for s in ids:
                bound = profile_of[s] if rng.random() < 0.8 else None
                add(s, bound, rng.choice(["core", "daily", "project_notes"]))
                add(s, bound, "conversation")
                if kind != "sender":  # conversations live under the history key
                    add(s, bound, "conversation")
        for _ in range(100):  # the agent's own, unsessioned memories
            add(
                None,
                rng.choice([None, rng.choice(profiles)]),
                rng.choice(["core", "daily", "conversation", "project_notes"]),
            )
        with SQLiteStore(path, namespace=ns, synchronous="NORMAL") as store:
            store.import_jsonl(io.StringIO("".join(lines)), batch_size=2000)
    return World(path, owners, scopes, profile_of)


def channel_scopes(world: World, rng: random.Random) -> tuple[tuple[str, ...], str]:
    """A direct or group message from a random sender, scoped by the real channel adapter."""
    i = rng.randrange(N_SENDERS)
    if rng.random() < 0.5:
        g = rng.randrange(N_GROUPS)
        history, target = f"telegram_group_{g}", f"group:{g}"
    else:
        history, target = f"telegram_dm_{i}", f"dm:{i}"
    if rng.random() < 0.05:
        # A blank history key is refused by InboundMessage (one id for everyone).
        odd = [s for s in ODD_SESSIONS if s.strip()]
        history = rng.choice([*odd, f"telegram_dm_new_{rng.randrange(10**6)}"])
    message = InboundMessage(
        channel="telegram",
        sender=sender_id(i),
        text="",
        message_id="1",
        reply_target=target,
        history_key=history,
    )
    return session_scopes(message), history


def random_turn(world: World, rng: random.Random) -> Turn:
    ns = rng.choice(NAMESPACES)
    origin = rng.choice(list(TurnOrigin))
    s = world.scopes
    sessions: tuple[str | None, ...]
    owner_scope: str | None = None
    if origin is TurnOrigin.CHANNEL:
        sessions, owner_scope = channel_scopes(world, rng)
    elif origin is TurnOrigin.INTERACTIVE:
        owner_scope = rng.choice(s["cli"]) if rng.random() < 0.8 else None
        sessions = (owner_scope,)
    elif origin in SCHEDULED:
        owner_scope = rng.choice(s["job"]) if rng.random() < 0.5 else None
        sessions = (owner_scope,)
    else:  # agent_direct and sub_turn: any one scope, or none
        if rng.random() < 0.7:
            owner_scope = rng.choice(rng.choice(list(s.values())))
        sessions = (owner_scope,)
    profile = (
        world.profile_of[owner_scope]
        if owner_scope in world.profile_of
        else f"project:p{rng.randrange(N_PROFILES)}"
    )
    policy = resolve_inject_policy(origin, has_session=has_session(sessions), config=CONFIG)
    return Turn(ns, origin, sessions, profile, policy.exclude_conversation)


def random_query(world: World, turn: Turn, rng: random.Random) -> str:
    """The turn's own topics, other scopes' topics and memory ids named outright, or nothing."""
    if rng.random() < 0.1:
        return ""
    words = rng.sample(VOCAB, rng.randint(0, 2))
    words += [topic(s) for s in turn.sessions if s is not None and rng.random() < 0.7]
    every = list(world.scopes.values())
    words += [topic(rng.choice(rng.choice(every))) for _ in range(rng.randint(0, 3))]
    words += [f"m{rng.randrange(len(world.owners))}" for _ in range(rng.randint(0, 3))]
    return " ".join(words)


CONFIG = MemoryInjectConfig(
    recall_limit=25,
    min_relevance_score=0.0,
    # The renders read every visible row through the empty (time-only) query.
    require_query_terms=False,
    budget=BudgetConfig(max_entries=25, max_total_chars=20_000),
    governance=GovernanceConfig(enabled=True),
    origins={"sub_turn": {"enabled": True}},  # must not open sub-turns (policy.md)
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return build_world(tmp_path_factory.mktemp("tenants") / "shared.db", random.Random(20260520))


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def stores(world: World, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """Both agents' stores on one SQLite file, or on one PostgreSQL database (same rows)."""
    opened: dict[str, Any] = {ns: SQLiteStore(world.path, namespace=ns) for ns in NAMESPACES}
    if request.param == "postgres":
        from tests.storage._pg_backend import make_postgres_store

        dsn = request.getfixturevalue("pg_dsn")
        sqlite = opened
        first = None
        opened = {}
        for ns in NAMESPACES:
            store = (
                make_postgres_store(dsn, namespace=ns)
                if first is None
                else make_postgres_store(dsn, namespace=ns, same_database_as=first)
            )
            first = first or store
            buf = io.StringIO()
            sqlite[ns].export_jsonl(buf)
            # PostgreSQL text cannot hold NUL: rows of the NUL session id stay out (its
            # store raises StorageError for them, and a recall naming it degrades).
            lines = [ln for ln in buf.getvalue().splitlines() if "\\u0000" not in ln]
            store.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
            opened[ns] = store
        for s in sqlite.values():
            s.close()
    yield opened
    for s in reversed(list(opened.values())):
        s.close()


def turns_for(stores: dict[str, Any]) -> int:
    """Every turn on SQLite; a quarter of them on PostgreSQL (a few ms per render)."""
    return TURNS if isinstance(next(iter(stores.values())), SQLiteStore) else TURNS // 4


class TestTenantIsolation:
    def test_the_shared_file_holds_every_tenant(self, world: World, stores: dict[str, Any]) -> None:
        """Both agents' rows are in one file: 2,607 scope ids each, 5,214 scopes in all."""
        on_pg = not isinstance(next(iter(stores.values())), SQLiteStore)
        expected = Counter(
            o.namespace
            for o in world.owners.values()
            if not (on_pg and o.session is not None and "\x00" in o.session)
        )
        assert dict(expected) == {ns: s.count() for ns, s in stores.items()}
        pairs = {(o.namespace, o.session) for o in world.owners.values() if o.session is not None}
        assert (2607, 5214) == (len({s for _, s in pairs}), len(pairs))

    def test_random_turns_render_nothing_outside_their_scope(
        self,
        world: World,
        stores: dict[str, Any],
    ) -> None:
        """6,000 random turns (1,500 on PostgreSQL): zero memories outside their scope."""
        rng = random.Random(7)
        leaks: list[tuple[Turn, int, Owner]] = []
        seen = Counter[str]()
        turns = turns_for(stores)
        on_pg = not isinstance(next(iter(stores.values())), SQLiteStore)
        for n in range(turns):
            turn = random_turn(world, rng)
            query = random_query(world, turn, rng)
            policy = resolve_inject_policy(
                turn.origin, has_session=has_session(turn.sessions), config=CONFIG
            )
            if not policy.inject:
                seen["skipped:" + str(policy.reason)] += 1
                continue
            with recording() as rec:
                out = render_memory_context(
                    stores[turn.namespace],
                    query,
                    sessions=turn.sessions,
                    policy=policy,
                    profile=turn.profile,
                    now=NOW,
                    turn=TurnMeta("test", turn.namespace, str(n)),
                )
            nul = any("\x00" in (sid or "") for sid in turn.sessions)
            # PostgreSQL refuses NUL in a session id: that recall fails (and says so).
            assert 1 == len(rec.events)
            assert rec.events[0].success or (on_pg and nul)
            tags = [int(m) for m in MEMORY_TAG.findall(out.text)]
            assert sorted(tags) == sorted(int(e.key[4:]) for e in out.entries)
            for mid in tags:
                owner = world.owners[mid]
                seen[owner.category] += 1
                seen["session-bound" if owner.session is not None else "unsessioned"] += 1
                if not allowed(owner, turn):
                    leaks.append((turn, mid, owner))
                if turn.origin in SCHEDULED:
                    assert "conversation" != owner.category
        assert [] == leaks
        scale = turns / TURNS
        assert seen["conversation"] > 2000 * scale and seen["session-bound"] > 5000 * scale, seen
        assert seen["skipped:sub_turn"] > 600 * scale

    def test_sub_turns_see_nothing(self) -> None:
        """A nested turn is skipped before recall, whatever its session and config."""
        for sessions in (
            (),
            (None,),
            ("telegram_dm_1",),
            (person_scope("telegram", "tg:1"), "telegram_group_1"),
        ):
            policy = resolve_inject_policy(
                TurnOrigin.SUB_TURN, has_session=has_session(sessions), config=CONFIG
            )
            assert (False, "sub_turn") == (policy.inject, policy.reason)

    def test_other_agent_with_the_same_session_ids_is_invisible(
        self,
        world: World,
        stores: dict[str, Any],
    ) -> None:
        """The same scope id in two agents: each agent recalls only its own rows."""
        for ns, store in stores.items():
            for session in (
                "telegram_dm_3",
                "telegram_group_3",
                person_scope("telegram", "tg:3"),
                "%",
                "' OR '1'='1",
            ):
                out = render_memory_context(
                    store,
                    "",
                    sessions=[session],
                    config=CONFIG,
                    origin="channel",
                    profile=world.profile_of[session],
                    now=NOW,
                )
                owners = [world.owners[int(m)] for m in MEMORY_TAG.findall(out.text)]
                assert owners and {ns} == {o.namespace for o in owners}
                assert {session, None} >= {o.session for o in owners}
