"""The hardened YAML reader behind every config file (agent files and cron job files).

It refuses what a safe loader still lets through: aliases (a billion-laughs
file), duplicate keys (including ``1`` and ``true``, compared by type), keys
that cannot be hashed, tags that cannot be built, nesting deeper than 32
levels, files over 256 KiB, directories, FIFOs and devices. Every failure is
a ``ConfigError`` naming the file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from memory_inject.exceptions import ConfigError

__all__ = ["read_yaml_file"]

_MAX_CONFIG_BYTES = 256 * 1024
_MAX_DEPTH = 32  # the deepest real config is 5 levels; far below the recursion limit


class _TooDeepError(yaml.YAMLError):
    """Nesting past ``_MAX_DEPTH``: reported as a recursion too deep would be."""


class _SafeLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases (a billion-laughs file cannot expand) and deep nesting."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        """Compose a node, refusing an alias before it can expand and nesting past the limit."""
        if self._depth >= _MAX_DEPTH:
            raise _TooDeepError
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.MarkedYAMLError(
                "while composing",
                None,
                "YAML aliases are not allowed in config files",
                event.start_mark,
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        """Build a mapping, refusing duplicate keys (by type and value) and unhashable keys."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                marker = (type(key), key)  # 1 and true are different keys
                duplicate = marker in seen
            except TypeError:
                raise yaml.MarkedYAMLError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"a {type(key).__name__} cannot be a key",
                    key_node.start_mark,
                ) from None
            if duplicate:
                raise yaml.MarkedYAMLError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"key {key!r} is given twice",
                    key_node.start_mark,
                )
            seen.add(marker)
        return super().construct_mapping(node, deep=deep)


# YAML 1.2 reads "1e-3" as a number; PyYAML's YAML 1.1 resolver wants a dot ("1.0e-3")
# and reads it as text, which a number setting then refused as "must be a number (got
# '1e-3')". Exponents without a dot are numbers here too.
_SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def read_yaml_file(path: str | os.PathLike[str]) -> Any:
    """Parse one YAML file safely: size-capped, no aliases, no duplicate keys.

    Every failure is a ``ConfigError`` naming the file (used for agent files and
    by adapters for their own YAML, e.g. cron jobs).
    """
    p = Path(path)
    source = str(path)
    try:
        if p.is_dir():
            raise ConfigError(source, ["is a directory, not a YAML file @ $"])
        if p.exists() and not p.is_file():
            raise ConfigError(source, ["cannot be read: not a regular file @ $"])
        with p.open("rb") as f:  # read at most the limit: never a whole device or pipe
            raw = f.read(_MAX_CONFIG_BYTES + 1)
        if len(raw) > _MAX_CONFIG_BYTES:
            raise ConfigError(
                source,
                [
                    f"file is over {_MAX_CONFIG_BYTES} bytes; config files "
                    f"are limited to {_MAX_CONFIG_BYTES} bytes @ $"
                ],
            )
        text = raw.decode("utf-8")
    except ConfigError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(source, [f"cannot be read: {exc} @ $"]) from None
    try:
        return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - a SafeLoader subclass
    except (_TooDeepError, RecursionError):
        raise ConfigError(source, ["is nested too deeply @ $"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(source, [f"is not valid YAML{where}: {problem} @ $"]) from None
    except Exception as exc:  # noqa: BLE001 - a tag that cannot be built (!!int abc, ...)
        raise ConfigError(source, [f"is not valid YAML: {exc} @ $"]) from None
