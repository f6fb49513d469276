"""The commands that look inside a store: ``stats`` and ``render``.

This module owns what a user reads: the live memories counted by category,
status, use and session (``stats``), and the exact block a turn would get
(``render``: the block on stdout, everything else on stderr, ``--explain``
showing every candidate, from :mod:`._explain`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Table

from memory_inject.cli._common import make_console, opened_store, store_options
from memory_inject.cli._explain import print_explain, recorder_for
from memory_inject.contract import SupportsPath
from memory_inject.models import TurnMeta, TurnOrigin
from memory_inject.stages.filters import SHARED_CATEGORIES

if TYPE_CHECKING:
    # The adapters ship as memory_inject.adapters from the top-level adapters/ folder
    # (package-dir); type checkers read the folder, which has no such mapping.
    from adapters import _core
else:
    from memory_inject.adapters import _core


__all__ = ["render", "stats"]

_ORIGINS = [o.value for o in TurnOrigin]


@click.command()
@store_options
def stats(db: Path | None, agent_path: Path | None) -> None:
    """Count the live memories by category and session."""
    with opened_store(db, agent_path, create=False) as (store, _agent_cfg):
        records = store.list()
        total = store.count()
        where = store.path if isinstance(store, SupportsPath) else store.name
    console = make_console(stderr=False)
    console.print(f"store: {where}")
    console.print(f"live memories: {total}")
    table = Table("category", "memories")
    for category, n in sorted(Counter(str(r.category) for r in records).items()):
        table.add_row(category, str(n))
    console.print(table)
    by_status = Table("status", "memories")
    for status, n in sorted(Counter(str(r.status) for r in records).items()):
        by_status.add_row(status, str(n))
    console.print(by_status)
    used = [r for r in records if r.times_used]
    console.print(
        f"used: {len(used)} memories, {sum(r.times_used for r in used)} uses"
        + (
            f" (most: {max(used, key=lambda r: r.times_used).key}, "
            f"{max(r.times_used for r in used)})"
            if used
            else ""
        )
    )
    sessions = {r.session_id for r in records if r.session_id is not None}
    console.print(f"sessions: {len(sessions)}")
    if records:
        stamps = sorted(r.timestamp for r in records)
        console.print(f"oldest: {stamps[0].isoformat()}  newest: {stamps[-1].isoformat()}")


# -- render --------------------------------------------------------------------------


@click.command()
@click.argument("text")
@click.option("--origin", type=click.Choice(_ORIGINS), default="interactive", show_default=True)
@click.option("--session", "sessions", multiple=True, help="A session scope (repeatable).")
@click.option("--suppress", is_flag=True, help="The spawn-site opt-out.")
@click.option("--channel", default="cli", show_default=True, help="Channel name on the event.")
@click.option("--explain", is_flag=True, help="Show every candidate and why it was dropped.")
@click.option("--source", default=None, help="The calling plugin's id (a plan's plugin query).")
@store_options
def render(
    text: str,
    origin: str,
    sessions: Sequence[str],
    suppress: bool,
    channel: str,
    explain: bool,
    db: Path | None,
    agent_path: Path | None,
    source: str | None = None,
) -> None:
    """Print the exact block a turn with TEXT would get (details on stderr)."""
    console = make_console(stderr=True)
    with opened_store(db, agent_path, create=False) as (store, agent):
        recorder = recorder_for(store)
        req = _core.TurnInput(
            origin=TurnOrigin(origin),
            query=text,
            sessions=tuple(sessions),
            suppress=suppress,
            turn=TurnMeta(channel, agent.agent, _core.new_turn_id()),
            source=source,
        )
        injection = _core.run(recorder, agent, req)
        hidden = 0
        if sessions and injection.block == "" and hasattr(store, "list"):
            hidden = sum(
                1
                for r in store.list(limit=1000)
                if r.session_id is None and str(r.category) not in SHARED_CATEGORIES
            )
    policy = injection.policy
    if not policy.inject:
        console.print(f"skipped: {policy.reason} (no recall)")
        return
    click.echo(injection.block, nl=False)
    event = injection.event
    if event is not None:
        console.print(
            f"origin={origin} exclude_conversation={policy.exclude_conversation} "
            f"recalled={event.num_entries} rendered={event.rendered_entries} "
            f"success={event.success}"
            + (f" abstained={event.abstained}" if event.abstained else "")
            + (
                f" prompt_similarity={event.prompt_similarity:.3f}"
                if event.prompt_similarity is not None
                else ""
            )
            + (f" error={event.error}" if event.error else "")
            # a deadline, a lock, a busy pool: why a recall failed may be told here only
            + (f" degraded={'; '.join(event.degraded)}" if event.degraded else "")
        )
    if not injection.block:
        why = {
            "no_query_terms": "the prompt has no content word, so nothing was recalled",
            "below_relevance": "every hit scored under min_relevance_score",
            "unrelated_prompt": "no memory is near the prompt (min_prompt_similarity)",
            "other_owner": "the hits past the floor are about someone else than the one asked",
        }
        abstained = event.abstained if event is not None else None
        cause = why.get(abstained or "", "nothing survived")
        if event is not None and not event.success and not event.num_entries:
            cause = "the recall failed (error or degraded above)"
        console.print(f"(empty block: {cause})")
        if sessions and event is not None and event.num_entries == 0 and hidden:
            console.print(
                f"note: {hidden} agent-wide memories (no session) of categories that are not "
                f"shared ({', '.join(sorted(SHARED_CATEGORIES))}) are never shown to a turn "
                "scoped to a session; founder-os memories are agent-wide: render without "
                "--session to see them"
            )
    if explain and injection.result is not None:
        print_explain(console, recorder.seen, injection.result)
    if event is not None and not event.success:
        # What the turn would get is printed (less memory, or none); the store failed, and
        # a script or a health check must not read that as "nothing relevant" (round 35).
        raise SystemExit(1)
