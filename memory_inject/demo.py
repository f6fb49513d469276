"""The main job, end to end: one store, turns from every origin, one block and event each.

``python -m memory_inject.demo`` seeds a store from the bundled example file and
runs a CLI turn, a Telegram DM, a group chat, a cron job, a daemon heartbeat,
an embedding application's call and a sub-agent, printing what each turn's
model would be given and the recall event that explains it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from memory_inject.config import MemoryInjectConfig, load_agent_config
from memory_inject.contract import Memory, MemoryStore, SupportsClose
from memory_inject.models import TurnMeta, TurnOrigin
from memory_inject.pipeline import render_memory_context
from memory_inject.policy import resolve_inject_policy
from memory_inject.signals import MemoryRecall, memory_recall
from memory_inject.storage.memory import InMemoryStore

__all__ = ["DEMO_TURNS", "example_records", "main", "run_demo"]

#: (origin, channel, query, sessions, suppress)
DEMO_TURNS: tuple[tuple[TurnOrigin, str, str, tuple[str | None, ...], bool], ...] = (
    (
        TurnOrigin.INTERACTIVE,
        "cli",
        "which server do production deploys go to?",
        ("cli_main",),
        False,
    ),
    (
        TurnOrigin.CHANNEL,
        "telegram",
        "can the staging deploy wait until Friday?",
        ("telegram_alice", "alice"),
        False,
    ),
    (
        TurnOrigin.CRON,
        "daemon",
        "[cron:nightly Nightly report] summarise the latest incidents on prod-3",
        (None,),
        False,
    ),
    (
        TurnOrigin.DAEMON,
        "daemon",
        "[Heartbeat Task | high] check the backup job on prod-3",
        (None,),
        False,
    ),
    (TurnOrigin.AGENT_DIRECT, "wss", "who is the Acme billing contact?", (None,), False),
    (TurnOrigin.SUB_TURN, "cli", "summarise the deploy docs", ("cli_main",), False),
)


def example_records(now: datetime) -> Iterator[dict[str, Any]]:
    """The bundled example memories, with ``days_ago`` turned into timestamps."""
    text = (
        resources.files("memory_inject")
        .joinpath("data/example_memories.jsonl")
        .read_text(encoding="utf-8")
    )
    for line in text.splitlines():
        if line.strip():
            rec = json.loads(line)
            rec["timestamp"] = now - timedelta(days=rec.pop("days_ago", 0))
            yield rec


def open_demo_store(path: Path | None, now: datetime) -> MemoryStore:
    """The embedded default store, seeded; InMemoryStore when SQLite is not available."""
    try:
        from memory_inject.storage.sqlite import SQLiteStore
    except ImportError:  # pragma: no cover - the SQLite store ships with the package
        store: MemoryStore = InMemoryStore()
    else:
        db = path or Path(tempfile.mkdtemp(prefix="memory-inject-demo-")) / "memory.db"
        store = SQLiteStore(db)
    for rec in example_records(now):
        key, content = rec.pop("key"), rec.pop("content")
        store.store(key, content, rec.pop("category"), **rec)
    return store


def _print_event(out: TextIO) -> Any:
    def receiver(sender: Memory, *, event: MemoryRecall) -> None:
        dropped = ", ".join(f"{k}={v}" for k, v in event.dropped.items()) or "-"
        out.write(
            f"  event: backend={event.backend} success={event.success} "
            f"recalled={event.num_entries} rendered={event.rendered_entries} "
            f"chars={event.rendered_chars} duration={event.duration * 1e3:.2f}ms\n"
            f"  dropped: {dropped}\n"
        )

    return receiver


def run_demo(store: Memory, config: MemoryInjectConfig, out: TextIO, now: datetime) -> int:
    """Run every demo turn; return how many blocks were rendered."""
    receiver = _print_event(out)
    memory_recall.connect(receiver)
    rendered = 0
    try:
        for n, (origin, channel, query, sessions, suppress) in enumerate(DEMO_TURNS, 1):
            out.write(f"\n=== turn {n}: {origin.value} via {channel}: {query!r}\n")
            policy = resolve_inject_policy(
                origin,
                has_session=any(s is not None for s in sessions),
                suppress=suppress,
                config=config,
            )
            if not policy.inject:
                out.write(f"  skipped: {policy.reason} (no recall)\n")
                continue
            result = render_memory_context(
                store,
                query,
                sessions=sessions,
                policy=policy,
                now=now,
                turn=TurnMeta(channel, "demo", f"turn-{n}"),
            )
            if result.text:
                rendered += 1
                out.write(
                    "  block:\n" + "".join(f"    | {line}\n" for line in result.text.splitlines())
                )
            else:
                out.write("  block: (empty: nothing relevant survived)\n")
    finally:
        memory_recall.disconnect(receiver)
    return rendered


def main(argv: list[str] | None = None, prog: str = "python -m memory_inject.demo") -> int:
    """``python -m memory_inject.demo``: run the demo turns, printing to stdout; returns 0.

    ``argv`` defaults to the command line. ``--agent`` reads the config from an
    agent YAML file (default: the built-in defaults); ``--db`` keeps the store in
    that SQLite file instead of a temporary one.
    """
    ap = argparse.ArgumentParser(prog=prog, description=__doc__)
    ap.add_argument("--agent", type=Path, help="agent YAML file (default: built-in defaults)")
    ap.add_argument("--db", type=Path, help="SQLite file to use (default: a temporary one)")
    args = ap.parse_args(argv)
    config = load_agent_config(args.agent).memory if args.agent else MemoryInjectConfig()
    now = datetime.now(UTC)
    if args.db is not None:
        foreign = _not_the_demos(args.db, now)
        if foreign:
            sys.stderr.write(
                f"{prog}: {args.db} holds {foreign} memories the demo did not write; the demo "
                "writes its example rows into --db (and would replace its own keys there): "
                "pass a new file\n"
            )
            return 2
    with tempfile.TemporaryDirectory(prefix="memory-inject-demo-") as scratch:
        store = open_demo_store(args.db or Path(scratch) / "memory.db", now)
        sys.stdout.write(f"memory-inject demo: {store.count()} memories in {store.name!r}\n")
        try:
            run_demo(store, config, sys.stdout, now)
        finally:
            if isinstance(store, SupportsClose):
                store.close()
    return 0


def _not_the_demos(path: Path, now: datetime) -> int:
    """How many live memories of the SQLite file at ``path`` the demo did not write (a key
    it does not write, or its key with other content); 0 for no file."""
    if not path.exists():
        return 0
    from memory_inject.storage.sqlite import SQLiteStore

    demo = {rec["key"]: rec["content"] for rec in example_records(now)}
    with SQLiteStore(path) as store:
        return sum(1 for r in store.list() if demo.get(r.key) != r.content)


if __name__ == "__main__":
    raise SystemExit(main())
