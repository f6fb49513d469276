"""``memory-inject``: set up a store, fill it, look inside it and see what a turn would get.

Needs the ``cli`` extra (click and rich); ``import memory_inject`` never imports
this package. The store is ``--db PATH`` (a SQLite file), else the backend of
``--agent FILE``, else ``.memory/memory.db`` in the current directory.
``render`` prints the exact block on stdout and everything else on stderr, so
``memory-inject render "..." > block.txt`` captures the bytes a model would get.

The commands live one group per module: ``init`` in ``_init``; ``add``,
``import``, ``export``, ``forget`` and ``erase`` in ``_records``; ``stats`` and ``render``
in ``_inspect`` (``render --explain``'s recorder and tables in ``_explain``);
``validate`` in ``_validate``; what they share (opening the store, the
``--db``/``--agent`` options) in ``_common``. This module is the group and the
console script.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from memory_inject import __version__
from memory_inject.cli._init import defaults_text, init
from memory_inject.cli._inspect import render, stats
from memory_inject.cli._records import add, erase, export, forget, import_
from memory_inject.cli._validate import validate

__all__ = ["cli", "defaults_text", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="memory-inject")
def cli() -> None:
    """Decide, per agent turn, whether the model gets its memory and exactly what it gets."""


for _command in (init, add, import_, export, forget, erase, stats, render, validate):
    cli.add_command(_command)


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
