"""What every store command shares: the console, the agent file and the store it opens.

This module owns how a command finds its store (``--db PATH``, else the
backend of ``--agent FILE``, else ``.memory/memory.db``), opens it with the
CLI's own degrade settings (create what the command may create, say why a
store cannot be opened) and closes it, and the ``--db`` / ``--agent`` options
every store command takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import click
from rich.console import Console

from memory_inject.config import AgentConfig, load_agent_config
from memory_inject.contract import MemoryStore, SupportsClose
from memory_inject.exceptions import ConfigError, MemoryInjectError
from memory_inject.storage.unavailable import UnavailableStore
from memory_inject.stores import open_store, sqlite_path

__all__ = ["DEFAULT_DB", "load_agent", "make_console", "opened_store", "store_options"]

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_DB = Path(".memory/memory.db")


def make_console(*, stderr: bool) -> Console:
    """A rich console on stdout or stderr; 160 columns when not a terminal."""
    # No markup: keys, categories and prompts are the memory's text ("deploy [/note]")
    console = Console(stderr=stderr, highlight=False, soft_wrap=False, markup=False)
    if not console.is_terminal:
        console.width = 160  # pipes and test runners: do not fold tables at 80 columns
    return console


# -- opening the store -------------------------------------------------------------


def load_agent(path: Path | None) -> AgentConfig:
    """The agent file at ``path`` (a default agent without one); a bad file exits with its
    config error."""
    if path is None:
        return AgentConfig(agent="default")
    try:
        return load_agent_config(path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _check_exists(path: Path, create: bool) -> None:
    if not create and not path.exists():
        raise click.ClickException(f"no store at {path}: run 'memory-inject init' or pass --db")
    if not create and path.is_file() and path.stat().st_size == 0:
        # A truncated memory file: a read would have written a new, empty store into it.
        raise click.ClickException(f"{path} is empty (0 bytes): not a memory store")


@contextmanager
def opened_store(
    db: Path | None, agent_path: Path | None, *, create: bool
) -> Iterator[tuple[MemoryStore, AgentConfig]]:
    """The command's store and agent, closed on exit; a store that cannot be opened, or
    fails while the command uses it (locked, damaged), exits with why (``create``: the
    command may create a missing SQLite file)."""
    agent = load_agent(agent_path)
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
            path = db if db is not None else DEFAULT_DB
            _check_exists(path, create)
            backend = attrs.evolve(backend, kind="sqlite", path=str(path.resolve()))
        elif backend.kind == "sqlite":
            _check_exists(sqlite_path(agent), create)
        elif create and backend.kind in ("memory", "none"):
            raise click.ClickException(
                f"{agent_path}: 'memory.backend.kind' is {backend.kind!r}: what this command "
                "writes would not outlive it; pass --db FILE, or use a sqlite, postgres or "
                "markdown backend"
            )
        opened = open_store(attrs.evolve(agent, memory=attrs.evolve(agent.memory, backend=backend)))
        if isinstance(opened, UnavailableStore):  # pragma: no cover - degrade is off here
            raise click.ClickException(opened.status)
        store: MemoryStore = opened
    except (MemoryInjectError, ValueError) as exc:
        raise click.ClickException(f"cannot open the store: {exc}") from None
    try:
        yield store, agent
    except MemoryInjectError as exc:  # a locked or damaged store: one line, not a traceback
        raise click.ClickException(str(exc)) from None
    except UnicodeError as exc:  # an argument that is not text (a byte of no encoding)
        raise click.ClickException(
            f"an argument is not valid text ({exc.reason}: {exc.object[exc.start : exc.end]!r})"
            if isinstance(exc, UnicodeEncodeError)
            else f"an argument is not valid text ({exc})"
        ) from None
    finally:
        if isinstance(store, SupportsClose):
            store.close()


def store_options(fn: F) -> F:
    """Add ``--agent FILE`` and ``--db PATH`` to a command."""
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
