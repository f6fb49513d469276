"""The commands that change a store: ``add``, ``import``, ``export``, ``forget``, ``erase``.

This module owns writing records in and out: one record by hand (``add``),
a JSON Lines export, founder-os's ``memory.db`` or PI's memory (``import``,
with a progress bar past a thousand lines), every record as JSON Lines
(``export``), forgetting a key (``forget``: a soft delete) and erasing one, or every
forgotten record, for good (``erase``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from memory_inject.cli._common import make_console, opened_store, store_options
from memory_inject.contract import SupportsErase, SupportsJsonl
from memory_inject.exceptions import MemoryInjectError
from memory_inject.storage._jsonl import check_regular_file
from memory_inject.storage.founder_os import (
    import_founder_os,
    is_founder_os_db,
    is_sqlite_file,
    why_not_founder_os,
)
from memory_inject.storage.pi_import import import_pi, is_pi_path

if TYPE_CHECKING:
    # The adapters ship as memory_inject.adapters from the top-level adapters/ folder
    # (package-dir); type checkers read the folder, which has no such mapping.
    from adapters import _core
else:
    from memory_inject.adapters import _core


__all__ = ["add", "erase", "export", "forget", "import_"]

_PROGRESS_MIN_LINES = 1000


@click.command()
@click.argument("key")
@click.argument("content")
@click.option(
    "--category",
    default="core",
    show_default=True,
    help="core, daily, conversation or a custom category.",
)
@click.option("--session", default=None, help="Session id (none: an agent-wide memory).")
@click.option(
    "--importance",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="0..1, used by the rerank arm.",
)
@click.option(
    "--status",
    default=None,
    help="The record's status (default active; founder-os injects confirmed and applied).",
)
@click.option(
    "--confidence", type=click.FloatRange(0.0, 1.0), default=None, help="0..1 (PI, founder-os)."
)
@click.option("--source", default=None, help="Who wrote it (founder-os: the plugin id, P11...).")
@store_options
def add(
    key: str,
    content: str,
    category: str,
    session: str | None,
    importance: float | None,
    status: str | None,
    confidence: float | None,
    source: str | None,
    db: Path | None,
    agent_path: Path | None,
) -> None:
    """Store CONTENT under KEY (an existing KEY is updated)."""
    with opened_store(db, agent_path, create=True) as (store, agent):
        fields: dict[str, Any] = dict(_core.profile_fields(agent.memory))
        for name, value in (("status", status), ("confidence", confidence), ("source", source)):
            if value is not None:
                fields[name] = value
        try:
            store.store(key, content, category, session_id=session, importance=importance, **fields)
        except (MemoryInjectError, ValueError) as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(f"stored {key}")
    plan = agent.memory.recall_plan
    shown = plan.statuses if plan.enabled else None
    if shown and (status or "active") not in shown:
        make_console(stderr=True).print(
            f"note: this agent injects only memories with status {', '.join(shown)}; "
            f"{key!r} has status {status or 'active'!r} and will not be shown "
            f"(pass --status {shown[0]})"
        )


def _count_lines(path: Path) -> int:
    """Non-blank lines, for the progress bar; a FIFO or a device is refused first."""
    try:
        check_regular_file(path)
        with path.open(encoding="utf-8", errors="replace") as fh:
            return sum(1 for line in fh if line.strip())
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"{path}: {exc}") from None


def _company_names(pairs: Sequence[str]) -> dict[str, str]:
    names = {}
    for pair in pairs:
        company_id, sep, name = pair.partition("=")
        if not sep or not company_id.strip() or not name.strip():
            raise click.BadParameter(f"must be ID=NAME (got {pair!r})", param_hint="--company")
        names[company_id.strip()] = name.strip()
    return names


def _import_founder_os(
    file: Path, batch_size: int, db: Path | None, agent_path: Path | None, companies: Sequence[str]
) -> None:
    names = _company_names(companies)
    with opened_store(db, agent_path, create=True) as (store, _agent_cfg):
        try:
            done = import_founder_os(store, file, companies=names, batch_size=batch_size)
        except (MemoryInjectError, TypeError, ValueError) as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(f"imported {done} memories from founder-os {file}")


def _import_pi(path: Path, batch_size: int, db: Path | None, agent_path: Path | None) -> None:
    with opened_store(db, agent_path, create=True) as (store, agent):
        try:
            done = import_pi(store, path, batch_size=batch_size)
        except (MemoryInjectError, TypeError, ValueError, OSError) as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(f"imported from PI {done.root or path}: {done.summary()}")
    for warning in done.warnings:  # plain echo: rich would read "[ ]" as markup
        click.echo(f"warning: {warning}", err=True)
    configured = agent.memory.governance.profile_id
    if done.profile_id is not None and configured != done.profile_id:
        click.echo(
            f"note: PI's .pi/settings.json names the profile {done.profile_id!r}; set "
            f'governance: {{profile_id: "{done.profile_id}"}} in the agent\'s YAML to use it',
            err=True,
        )


@click.command("import")
@click.argument("file", type=click.Path(exists=True, path_type=Path))
@click.option("--batch-size", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option(
    "--company",
    "companies",
    multiple=True,
    metavar="ID=NAME",
    help="founder-os memory.db: the name of a company_id (repeatable).",
)
@click.option(
    "--reembed",
    is_flag=True,
    help="JSON Lines: embed every row again with the agent's embedder, whatever vector its "
    "line brings (after a switch to another model of the same size).",
)
@store_options
def import_(
    file: Path,
    batch_size: int,
    db: Path | None,
    agent_path: Path | None,
    companies: tuple[str, ...] = (),
    reembed: bool = False,
) -> None:
    """Upsert every record of FILE into the store: a JSON Lines export, founder-os's memory.db,
    or PI's memory (its directory, project or .pi dir, scratchpad.md, daily/YYYY-MM-DD.md,
    tombstones.jsonl, evidence.jsonl, profiles.jsonl or .pi/settings.json)."""
    try:
        if not file.is_dir():  # a directory is PI's memory
            check_regular_file(file)  # before any read: a FIFO blocks, /dev/zero never ends
    except ValueError as exc:
        raise click.ClickException(f"{file}: {exc}") from None
    if is_pi_path(file):
        _import_pi(file, batch_size, db, agent_path)
        return
    if is_founder_os_db(file):
        _import_founder_os(file, batch_size, db, agent_path, companies)
        return
    if is_sqlite_file(file):  # not JSON Lines: say what it is (a hot journal, a foreign db)
        raise click.ClickException(why_not_founder_os(file))
    total = _count_lines(file)
    progress = Progress(
        TextColumn("importing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=make_console(stderr=True),
        transient=True,
        disable=total < _PROGRESS_MIN_LINES,
    )
    with opened_store(db, agent_path, create=True) as (store, _agent_cfg), progress:
        if not isinstance(store, SupportsJsonl):
            raise click.ClickException(f"the {store.name!r} store cannot import")
        task = progress.add_task("import", total=total)
        again = {"reembed": True} if reembed else {}  # a store of one's own may not take it
        try:
            done = store.import_jsonl(
                file,
                batch_size=batch_size,
                progress=lambda n: progress.update(task, completed=n),
                **again,
            )
        except TypeError as exc:
            if not again:
                raise
            raise click.ClickException(f"the {store.name!r} store cannot reembed: {exc}") from None
        except (MemoryInjectError, ValueError, OSError) as exc:
            raise click.ClickException(f"{file}: {exc}") from None
    click.echo(f"imported {done} memories from {file}")


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@store_options
def export(file: Path, db: Path | None, agent_path: Path | None) -> None:
    """Write every record (forgotten ones too) as JSON Lines to FILE ('-': stdout)."""
    with opened_store(db, agent_path, create=False) as (store, _agent_cfg):
        if not isinstance(store, SupportsJsonl):
            raise click.ClickException(f"the {store.name!r} store cannot export")
        try:
            n = store.export_jsonl(sys.stdout if str(file) == "-" else file)
        except OSError as exc:
            raise click.ClickException(f"cannot write {file}: {exc.strerror or exc}") from None
    if str(file) != "-":
        click.echo(f"exported {n} memories to {file}")


@click.command()
@click.argument("key")
@store_options
def forget(key: str, db: Path | None, agent_path: Path | None) -> None:
    """Forget KEY (exit 1 when there is no live memory under it)."""
    with opened_store(db, agent_path, create=False) as (store, _agent_cfg):
        if not store.forget(key):
            raise click.ClickException(f"no live memory under {key!r}")
    click.echo(f"forgot {key}")


@click.command()
@click.argument("key", required=False)
@click.option("--forgotten", is_flag=True, help="Erase every forgotten memory instead of KEY.")
@store_options
def erase(key: str | None, forgotten: bool, db: Path | None, agent_path: Path | None) -> None:
    """Erase KEY for good, live or forgotten (exit 1 when there is no memory under it), or
    with --forgotten every forgotten memory: unlike forget, nothing is kept for export."""
    if forgotten == (key is not None):
        raise click.UsageError("give either KEY or --forgotten")
    with opened_store(db, agent_path, create=False) as (store, _agent_cfg):
        if not isinstance(store, SupportsErase):
            raise click.ClickException(f"the {store.name!r} store cannot erase")
        if key is None:
            n = store.erase_forgotten()
        elif not store.erase(key):
            raise click.ClickException(f"no memory under {key!r}")
    click.echo(f"erased {key}" if key is not None else f"erased {n} forgotten memories")
