"""``validate``: check agent files and cron job files without opening a store."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from memory_inject.config import parse_agent_config, parse_cron_jobs, read_yaml_file
from memory_inject.exceptions import ConfigError

__all__ = ["validate"]


def _problems(path: Path) -> list[str]:
    source = str(path)
    try:
        data = read_yaml_file(path)  # the hardened reader: no hang on a FIFO, no alias bomb
        if isinstance(data, dict) and "jobs" in data and "agent" not in data:
            parse_cron_jobs(data, source)
        else:
            parse_agent_config(data, source)
    except ConfigError as exc:
        return list(exc.problems)
    return []


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate(files: Sequence[Path]) -> None:
    """Check agent files (and cron job files); print every problem with its path."""
    failed = 0
    for path in files:
        problems = _problems(path)
        if problems:
            failed += 1
            for problem in problems:
                click.echo(problem)
        else:
            click.echo(f"{path}: ok")
    if failed:
        raise SystemExit(1)
