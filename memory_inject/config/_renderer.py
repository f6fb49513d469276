"""``memory.renderer``: the block format and that format's own settings.

A renderer is named (``renderer: sectioned``) or configured (``renderer:
{kind: sectioned, max_total_chars: 12000}``); both load into one
:class:`RendererConfig`. Each setting belongs to one format, and the checker
refuses a setting of another format by name, so no setting is silently
ignored. :func:`memory_inject.render.renderer_for` builds the renderer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from attrs import frozen

from memory_inject.config._constraints import (
    MAX_BLOCK_CHARS,
    MAX_CANDIDATE_POOL,
    MAX_RENDERED_ENTRIES,
    check_class,
    group,
    problem,
    setting,
)

__all__ = [
    "RENDERERS",
    "RendererConfig",
    "SectionCapsConfig",
    "check_renderer",
    "to_renderer",
]

#: Renderers a config may name (see docs/renderers.md).
RENDERERS = ("bracket", "sectioned", "relevant_memories")


@frozen
class SectionCapsConfig:
    """``sectioned``: characters of each section's text (warning and entry lines, not its title)."""

    hard_rules: int = setting(2000, "int", "Hard Rules", ge=0, le=MAX_BLOCK_CHARS)
    selected_memory: int = setting(6000, "int", "Selected Memory", ge=0, le=MAX_BLOCK_CHARS)
    scratchpad: int = setting(800, "int", "Scratchpad", ge=0, le=MAX_BLOCK_CHARS)
    contested_memory: int = setting(800, "int", "Contested Memory", ge=0, le=MAX_BLOCK_CHARS)
    daily_log: int = setting(3000, "int", "Daily Log", ge=0, le=MAX_BLOCK_CHARS)
    todays_sessions: int = setting(800, "int", "Today's Sessions", ge=0, le=MAX_BLOCK_CHARS)
    open_questions: int = setting(800, "int", "Open Questions", ge=0, le=MAX_BLOCK_CHARS)


_SECTIONED = ("sectioned",)
_RELEVANT = ("relevant_memories",)


def _sectioned_cap(doc: str) -> Any:
    """A ``sectioned`` selection budget: an integer >= 0, or null for no cap (PI's budgets)."""
    return setting(
        None,
        "int",
        f"sectioned: {doc} (null = no cap)",
        ge=0,
        le=MAX_RENDERED_ENTRIES,
        nullable=True,
        formats=_SECTIONED,
    )


@frozen
class RendererConfig:
    """The block format (``kind``) and that format's own settings (``memory.renderer``).

    Each setting belongs to one format (the ``formats`` of its metadata). One
    of another format than ``kind`` must keep its default, so a config never
    carries a setting that silently does nothing. In YAML ``renderer:
    sectioned`` is short for ``renderer: {kind: sectioned}``; in Python
    ``MemoryInjectConfig(renderer="sectioned")`` is too.
    """

    kind: str = setting(
        "bracket", "str", "bracket, sectioned or relevant_memories", choices=RENDERERS
    )
    max_total_chars: int = setting(
        14_000,
        "int",
        "sectioned: chars of the whole block",
        ge=0,
        le=MAX_BLOCK_CHARS,
        formats=_SECTIONED,
    )
    section_caps: SectionCapsConfig = group(SectionCapsConfig, formats=_SECTIONED)
    max_hard_rules: int = setting(
        8,
        "int",
        "sectioned: most Hard Rules shown",
        ge=0,
        le=MAX_CANDIDATE_POOL,
        formats=_SECTIONED,
    )
    hard_rule_min_confidence: float = setting(
        0.85, "float", "sectioned: confidence a Hard Rule needs", ge=0, le=1, formats=_SECTIONED
    )
    max_contested: int = setting(
        2,
        "int",
        "sectioned: most contested entries shown",
        ge=0,
        le=MAX_CANDIDATE_POOL,
        formats=_SECTIONED,
    )
    contested_min_overlap: float = setting(
        0.15,
        "float",
        "sectioned: query overlap a contested entry must exceed",
        ge=0,
        le=1,
        formats=_SECTIONED,
    )
    max_records: int | None = _sectioned_cap("most Selected Memory lines")
    max_l1: int | None = _sectioned_cap("most L1 lines, listed first")
    max_l2: int | None = _sectioned_cap("most other Selected lines")
    daily_digest: bool = setting(
        False,
        "bool",
        "sectioned: Daily Log shows PI's digest of notable lines",
        formats=_SECTIONED,
    )
    daily_today_only: bool = setting(
        False,
        "bool",
        "sectioned: past days' daily notes are left out, not Selected Memory (PI)",
        formats=_SECTIONED,
    )
    max_sessions: int = setting(
        0,
        "int",
        "sectioned: Today's Sessions lines (0 = no section)",
        ge=0,
        le=MAX_CANDIDATE_POOL,
        formats=_SECTIONED,
    )
    max_questions: int = setting(
        0,
        "int",
        "sectioned: Open Questions lines (0 = no section)",
        ge=0,
        le=MAX_CANDIDATE_POOL,
        formats=_SECTIONED,
    )
    max_entries: int | None = setting(
        None,
        "int",
        "relevant_memories: entries kept (null = budget.max_entries)",
        ge=0,
        le=MAX_RENDERED_ENTRIES,
        nullable=True,
        formats=_RELEVANT,
    )

    def __attrs_post_init__(self) -> None:
        for a in attrs.fields(RendererConfig):
            formats = a.metadata.get("formats")
            if formats is None or self.kind in formats:
                continue
            value = getattr(self, a.name)
            if value != _field_default(a):
                raise ValueError(_foreign(a.name, self.kind, value))

    @property
    def settings(self) -> tuple[str, ...]:
        """The names of this kind's own settings, in declaration order."""
        return _RENDERER_SETTINGS[self.kind]

    def __repr__(self) -> str:
        """``kind`` and the kind's own settings only."""
        own = "".join(f", {name}={getattr(self, name)!r}" for name in self.settings)
        return f"RendererConfig(kind={self.kind!r}{own})"


def _field_default(a: attrs.Attribute[Any]) -> Any:
    factory = getattr(a.default, "factory", None)  # a group's default is an attrs.Factory
    return factory() if callable(factory) else a.default


#: Renderer kind -> the names of its settings (``bracket`` has none).
_RENDERER_SETTINGS: Mapping[str, tuple[str, ...]] = {
    kind: tuple(
        a.name for a in attrs.fields(RendererConfig) if kind in a.metadata.get("formats", ())
    )
    for kind in RENDERERS
}


def _foreign(key: str, kind: str, value: Any) -> str:
    """The problem of a setting that belongs to another format than ``kind``."""
    owners = [k for k, names in _RENDERER_SETTINGS.items() if key in names]
    return (
        f"'{key}' is not a known key for kind '{kind}' (a {owners[0]} setting) (got {value!r:.80})"
    )


_KIND_META = attrs.fields(RendererConfig).kind.metadata


def to_renderer(value: str | RendererConfig) -> RendererConfig:
    """A format name is short for ``RendererConfig(kind=name)``."""
    if isinstance(value, str):
        msg = problem("renderer", value, _KIND_META)
        if msg is not None:
            raise ValueError(msg)
        return RendererConfig(kind=value)
    return value


def check_renderer(raw: Any, path: str) -> list[str]:
    """Every problem of ``renderer``: a format name, or a mapping with ``kind`` and its settings.

    A name is reported at the enclosing mapping's path, as any scalar key is; a
    mapping's problems at the renderer's own path.
    """
    parent = path.rsplit(".", 1)[0]
    if isinstance(raw, str):
        msg = problem("renderer", raw, _KIND_META)
        return [] if msg is None else [f"{msg} @ {parent}"]
    if not isinstance(raw, Mapping):
        names = ", ".join(repr(r) for r in RENDERERS)
        return [
            f"'renderer' must be one of {names} or a mapping with 'kind' (got {raw!r:.80})"
            f" @ {parent}"
        ]
    kind = raw.get("kind")
    head = (
        "'kind' is required (got nothing)"
        if "kind" not in raw
        else problem("kind", kind, _KIND_META)
    )
    if head is not None:  # no format to hold the settings to: check them against every format
        rest = {k: v for k, v in raw.items() if k != "kind"}
        return [f"{head} @ {path}", *check_class(RendererConfig, rest, path)]
    kind = str(kind).strip().lower()
    own = ("kind", *_RENDERER_SETTINGS[kind])
    others = {name for names in _RENDERER_SETTINGS.values() for name in names} - set(own)
    problems = [f"{_foreign(k, kind, v)} @ {path}" for k, v in raw.items() if k in others]
    rest = {k: v for k, v in raw.items() if k not in others}
    return problems + check_class(RendererConfig, rest, path, allowed=own)
