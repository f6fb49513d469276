"""The text of a PI file, cut into lines as PI cuts them, and its JSON lines and fields.

PI writes one JSON object (or one scratchpad item) per line and splits its files on
``"\\n"`` only (a trailing ``"\\r"`` dropped): a record whose text holds U+2028, U+0085,
a form feed or another character ``str.splitlines`` breaks on is still one line.
Every problem is a ``ValueError`` naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_inject.models import parse_timestamp
from memory_inject.storage._jsonl import check_regular_file

__all__ = ["file_text", "json_lines", "pi_lines", "string_field", "when_field"]


def file_text(path: Path) -> str:
    """The file's text; ``ValueError`` naming the line of a byte that is not UTF-8 or a NUL."""
    try:
        check_regular_file(path)  # a FIFO blocks, /dev/zero never ends
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ValueError(f"{path}: line {line}: not UTF-8 text ({exc.reason})") from None
    nul = text.find("\x00")
    if nul >= 0:  # PostgreSQL text cannot hold it
        raise ValueError(f"{path}: line {text.count(chr(10), 0, nul) + 1}: holds a NUL byte")
    return text


def pi_lines(text: str) -> list[str]:
    """``text``'s lines as PI reads them: split on ``"\\n"`` only, a trailing ``"\\r"`` dropped."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline ends the last line, it starts none
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def json_lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``("FILE: line N", object)`` per non-blank line; a line that is not one names itself."""
    for n, line in enumerate(pi_lines(file_text(path)), start=1):
        if not line.strip():
            continue
        where = f"{path}: line {n}"
        try:
            value = json.loads(line, parse_constant=_no_constant)
        except RecursionError:
            raise ValueError(f"{where}: the JSON is nested too deeply") from None
        except ValueError as exc:
            raise ValueError(f"{where}: not a JSON line ({exc})") from None
        if not isinstance(value, dict):
            kind = type(value).__name__
            raise ValueError(f"{where}: each line must be a JSON object (got {kind})")
        yield where, value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def string_field(
    obj: Mapping[str, Any], name: str, where: str, *, required: bool = False
) -> str | None:
    """``obj[name]``: a string (non-empty when ``required``) or None; else a ``ValueError``."""
    value = obj.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        need = "a non-empty string" if required else "a string or null"
        raise ValueError(f"{where}: '{name}' must be {need} (got {value!r:.80})")
    return value


def when_field(obj: Mapping[str, Any], name: str, where: str) -> datetime | None:
    """``obj[name]`` read as an RFC 3339 date-time, or None; else a ``ValueError``."""
    value = string_field(obj, name, where)
    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except ValueError:
        raise ValueError(
            f"{where}: '{name}' must be an RFC 3339 date-time (got {value!r:.80})"
        ) from None
