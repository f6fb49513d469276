"""``memory-inject init``: create a store and an agent file with every key at its default.

This module owns the first command a user runs: it creates
``.memory/memory.db`` and ``agent.yaml`` (the shipped ``defaults.yaml``,
:func:`defaults_text`, under the agent's name), or with ``--agent FILE`` the
SQLite store that file names.
"""

from __future__ import annotations

import json
import re
import shlex
from importlib import resources
from pathlib import Path

import click

from memory_inject.cli._common import DEFAULT_DB, load_agent
from memory_inject.exceptions import MemoryInjectError
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.stores import sqlite_path

__all__ = ["defaults_text", "init"]


def defaults_text() -> str:
    """The shipped ``defaults.yaml`` (a copy of ``config/defaults.yaml``, kept equal by a test)."""
    return (
        resources.files("memory_inject").joinpath("data/defaults.yaml").read_text(encoding="utf-8")
    )


@click.command()
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
    db = directory / DEFAULT_DB
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
    where = shlex.quote(str(agent_file))  # a path with a space runs as printed (round 35)
    click.echo(f'next:   memory-inject add my_fact "Something worth knowing." --agent {where}')
    click.echo(f'        memory-inject render "your question" --agent {where} --explain')


def _init_agent_store(agent_path: Path) -> None:
    """``init --agent FILE``: create the SQLite store the agent file names (paths in the file
    are relative to it, as everywhere)."""
    agent = load_agent(agent_path)
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
