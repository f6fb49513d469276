"""``memory-inject``: set up a store, fill it, look inside it and see what a turn would get.

Needs the ``cli`` extra (click and rich); ``import memory_inject`` never imports
this package. The store is ``--db PATH`` (a SQLite file), else the backend of
``--agent FILE``, else ``.memory/memory.db`` in the current directory.
``render`` prints the exact block on stdout and everything else on stderr, so
``memory-inject render "..." > block.txt`` captures the bytes a model would get.

The commands that open a store (``init``, ``add``, ``import``, ``export``,
``forget``, ``stats``, ``render``) live here; ``render --explain``'s recorder
and tables are in ``_explain`` and ``validate`` is in ``_validate``.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from memory_inject import __version__
from memory_inject.cli._explain import print_explain, recorder_for
from memory_inject.cli._validate import validate
from memory_inject.config import AgentConfig, load_agent_config
from memory_inject.contract import MemoryStore, SupportsClose, SupportsJsonl, SupportsPath
from memory_inject.exceptions import ConfigError, MemoryInjectError
from memory_inject.models import TurnMeta, TurnOrigin
from memory_inject.stages.filters import SHARED_CATEGORIES
from memory_inject.storage import open_store
from memory_inject.storage._jsonl import check_regular_file
from memory_inject.storage._open import sqlite_path
from memory_inject.storage.founder_os import import_founder_os, is_founder_os_db
from memory_inject.storage.pi_import import import_pi, is_pi_path
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.unavailable import UnavailableStore

if TYPE_CHECKING:
    # The adapters ship as memory_inject.adapters from the top-level adapters/ folder
    # (package-dir); type checkers read the folder, which has no such mapping.
    from adapters import _core
else:
    from memory_inject.adapters import _core

__all__ = ["cli", "main"]

F = TypeVar("F", bound=Callable[..., Any])
_DEFAULT_DB = Path(".memory/memory.db")
_PROGRESS_MIN_LINES = 1000
_ORIGINS = [o.value for o in TurnOrigin]


def _console(*, stderr: bool) -> Console:
    console = Console(stderr=stderr, highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console.width = 160  # pipes and test runners: do not fold tables at 80 columns
    return console


def defaults_text() -> str:
    """The shipped ``defaults.yaml`` (a copy of ``config/defaults.yaml``, kept equal by a test)."""
    return (
        resources.files("memory_inject").joinpath("data/defaults.yaml").read_text(encoding="utf-8")
    )


# -- opening the store -------------------------------------------------------------


def _agent(path: Path | None) -> AgentConfig:
    if path is None:
        return AgentConfig(agent="default")
    try:
        return load_agent_config(path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _check_exists(path: Path, create: bool) -> None:
    if not create and not path.exists():
        raise click.ClickException(f"no store at {path}: run 'memory-inject init' or pass --db")


@contextmanager
def _store(
    db: Path | None, agent_path: Path | None, *, create: bool
) -> Iterator[tuple[MemoryStore, AgentConfig]]:
    agent = _agent(agent_path)
    # The CLI is where a store is inspected and filled: it creates what its command may
    # create and says why a store cannot be opened (the agent's degrade settings are for
    # its turns).
    backend = attrs.evolve(agent.memory.backend, missing="create", unavailable="raise")
    try:
        if db is not None and agent_path is not None:
            # The agent's backend settings (embedder, fusion, readers...) on this file, so a
            # preview ranks as the agent's turns do.
            _check_exists(db, create)
            backend = attrs.evolve(backend, kind="sqlite", path=str(db.resolve()))
        elif db is not None or agent_path is None:
            path = db if db is not None else _DEFAULT_DB
            _check_exists(path, create)
            backend = attrs.evolve(backend, kind="sqlite", path=str(path.resolve()))
        elif backend.kind == "sqlite":
            _check_exists(sqlite_path(agent), create)
        opened = open_store(attrs.evolve(agent, memory=attrs.evolve(agent.memory, backend=backend)))
        if isinstance(opened, UnavailableStore):  # pragma: no cover - degrade is off here
            raise click.ClickException(opened.status)
        store: MemoryStore = opened
    except (MemoryInjectError, ValueError) as exc:
        raise click.ClickException(f"cannot open the store: {exc}") from None
    try:
        yield store, agent
    finally:
        if isinstance(store, SupportsClose):
            store.close()


def _store_options(fn: F) -> F:
    fn = click.option(
        "--agent",
        "agent_path",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Agent YAML file (its memory.backend is the store).",
    )(fn)
    return click.option(
        "--db",
        type=click.Path(dir_okay=False, path_type=Path),
        help="SQLite file to use instead of the agent's backend.",
    )(fn)


# -- the commands ----------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="memory-inject")
def cli() -> None:
    """Decide, per agent turn, whether the model gets its memory and exactly what it gets."""


@cli.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Where to create the files.",
)
@click.option("--name", default="default", show_default=True, help="The agent's name.")
@click.option("--force", is_flag=True, help="Overwrite an existing agent.yaml.")
@click.option(
    "--agent",
    "agent_path",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Create the store this existing agent file names instead (no agent.yaml is written).",
)
def init(directory: Path, name: str, force: bool, agent_path: Path | None) -> None:
    """Create .memory/memory.db and agent.yaml (every key with its default)."""
    if agent_path is not None:
        _init_agent_store(agent_path)
        return
    if not name.strip():
        raise click.BadParameter("must be a non-empty string", param_hint="--name")
    db = directory / _DEFAULT_DB
    try:
        SQLiteStore(db).close()
    except MemoryInjectError as exc:
        raise click.ClickException(f"cannot create {db}: {exc}") from None
    click.echo(f"store:  {db}")
    agent_file = directory / "agent.yaml"
    if agent_file.exists() and not force:
        click.echo(f"agent:  {agent_file} (kept; --force overwrites it)")
        return
    text = re.sub(
        r"(?m)^agent: default(\s)",
        lambda m: f"agent: {json.dumps(name)}{m[1]}",
        defaults_text(),
        count=1,
    )
    agent_file.write_text(text, encoding="utf-8")
    click.echo(f"agent:  {agent_file}")
    _next_steps(agent_file)


def _next_steps(agent_file: Path) -> None:
    click.echo(f'next:   memory-inject add my_fact "Something worth knowing." --agent {agent_file}')
    click.echo(f'        memory-inject render "your question" --agent {agent_file} --explain')


def _init_agent_store(agent_path: Path) -> None:
    """``init --agent FILE``: create the SQLite store the agent file names (paths in the file
    are relative to it, as everywhere)."""
    agent = _agent(agent_path)
    if agent.memory.backend.kind != "sqlite":
        raise click.ClickException(
            f"{agent_path}: 'memory.backend.kind' is {agent.memory.backend.kind!r}; "
            "init creates SQLite stores only"
        )
    db = sqlite_path(agent)
    try:
        SQLiteStore(db, namespace=agent.memory.backend.namespace).close()
    except MemoryInjectError as exc:
        raise click.ClickException(f"cannot create {db}: {exc}") from None
    click.echo(f"store:  {db}")
    _next_steps(agent_path)


@cli.command()
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
@_store_options
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
    with _store(db, agent_path, create=True) as (store, agent):
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
        _console(stderr=True).print(
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
    with _store(db, agent_path, create=True) as (store, _agent_cfg):
        try:
            done = import_founder_os(store, file, companies=names, batch_size=batch_size)
        except (MemoryInjectError, TypeError, ValueError) as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(f"imported {done} memories from founder-os {file}")


def _import_pi(path: Path, batch_size: int, db: Path | None, agent_path: Path | None) -> None:
    with _store(db, agent_path, create=True) as (store, agent):
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


@cli.command("import")
@click.argument("file", type=click.Path(exists=True, path_type=Path))
@click.option("--batch-size", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option(
    "--company",
    "companies",
    multiple=True,
    metavar="ID=NAME",
    help="founder-os memory.db: the name of a company_id (repeatable).",
)
@_store_options
def import_(
    file: Path,
    batch_size: int,
    db: Path | None,
    agent_path: Path | None,
    companies: tuple[str, ...] = (),
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
    total = _count_lines(file)
    progress = Progress(
        TextColumn("importing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_console(stderr=True),
        transient=True,
        disable=total < _PROGRESS_MIN_LINES,
    )
    with _store(db, agent_path, create=True) as (store, _agent_cfg), progress:
        if not isinstance(store, SupportsJsonl):
            raise click.ClickException(f"the {store.name!r} store cannot import")
        task = progress.add_task("import", total=total)
        try:
            done = store.import_jsonl(
                file, batch_size=batch_size, progress=lambda n: progress.update(task, completed=n)
            )
        except (MemoryInjectError, ValueError, OSError) as exc:
            raise click.ClickException(f"{file}: {exc}") from None
    click.echo(f"imported {done} memories from {file}")


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@_store_options
def export(file: Path, db: Path | None, agent_path: Path | None) -> None:
    """Write every record (forgotten ones too) as JSON Lines to FILE ('-': stdout)."""
    with _store(db, agent_path, create=False) as (store, _agent_cfg):
        if not isinstance(store, SupportsJsonl):
            raise click.ClickException(f"the {store.name!r} store cannot export")
        try:
            n = store.export_jsonl(sys.stdout if str(file) == "-" else file)
        except OSError as exc:
            raise click.ClickException(f"cannot write {file}: {exc.strerror or exc}") from None
    if str(file) != "-":
        click.echo(f"exported {n} memories to {file}")


@cli.command()
@click.argument("key")
@_store_options
def forget(key: str, db: Path | None, agent_path: Path | None) -> None:
    """Forget KEY (exit 1 when there is no live memory under it)."""
    with _store(db, agent_path, create=False) as (store, _agent_cfg):
        if not store.forget(key):
            raise click.ClickException(f"no live memory under {key!r}")
    click.echo(f"forgot {key}")


@cli.command()
@_store_options
def stats(db: Path | None, agent_path: Path | None) -> None:
    """Count the live memories by category and session."""
    with _store(db, agent_path, create=False) as (store, _agent_cfg):
        records = store.list()
        total = store.count()
        where = store.path if isinstance(store, SupportsPath) else store.name
    console = _console(stderr=False)
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


@cli.command()
@click.argument("text")
@click.option("--origin", type=click.Choice(_ORIGINS), default="interactive", show_default=True)
@click.option("--session", "sessions", multiple=True, help="A session scope (repeatable).")
@click.option("--suppress", is_flag=True, help="The spawn-site opt-out.")
@click.option("--channel", default="cli", show_default=True, help="Channel name on the event.")
@click.option("--explain", is_flag=True, help="Show every candidate and why it was dropped.")
@click.option("--source", default=None, help="The calling plugin's id (a plan's plugin query).")
@_store_options
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
    console = _console(stderr=True)
    with _store(db, agent_path, create=False) as (store, agent):
        recorder = recorder_for(store)
        req = _core.Request(
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
            + (f" error={event.error}" if event.error else "")
        )
    if not injection.block:
        why = {
            "no_query_terms": "the prompt has no content word, so nothing was recalled",
            "below_relevance": "every hit scored under min_relevance_score",
        }
        abstained = event.abstained if event is not None else None
        console.print(f"(empty block: {why.get(abstained or '', 'nothing survived')})")
        if sessions and event is not None and event.num_entries == 0 and hidden:
            console.print(
                f"note: {hidden} agent-wide memories (no session) of categories that are not "
                f"shared ({', '.join(sorted(SHARED_CATEGORIES))}) are never shown to a turn "
                "scoped to a session; founder-os memories are agent-wide: render without "
                "--session to see them"
            )
    if explain and injection.result is not None:
        print_explain(console, recorder.seen, injection.result)


# -- validate and demo -------------------------------------------------------------------

cli.add_command(validate)


# --help goes to the demo's own parser, which lists its options (--agent, --db).
@cli.command(
    context_settings={
        "ignore_unknown_options": True,
        "allow_extra_args": True,
        "help_option_names": [],
    }
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def demo(args: Sequence[str]) -> None:
    """Run the demo: turns from every origin on a seeded store (--help lists its options)."""
    from memory_inject.demo import main as demo_main

    raise SystemExit(demo_main(list(args), prog="memory-inject demo"))


def main() -> None:
    """The ``memory-inject`` console script."""
    cli(prog_name="memory-inject")
