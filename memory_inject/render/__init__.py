"""Renderers: the last stage, and the only code that knows the output format.

A renderer takes the context and the surviving candidates and returns the
block text, the entries it rendered and one trace per budget it applied. Each
format lives in its own module (:mod:`~memory_inject.render.bracket`,
:mod:`~memory_inject.render.sectioned`,
:mod:`~memory_inject.render.relevant_memories`); all of them make stored text
safe with the one neutraliser in ``_contain``. This package builds the
renderer a config names (:func:`renderer_for`, once per config object) and
keeps each format of ``memory_inject.config.RENDERERS`` with its default
settings (:func:`get_renderer`). ``memory_inject.testing`` reads blocks back.
"""

from __future__ import annotations

from typing import Any

import attrs

from memory_inject._cache import PerObject
from memory_inject.config import RENDERERS, MemoryInjectConfig, RendererConfig
from memory_inject.render._base import Rendered, Renderer
from memory_inject.render._contain import contain_content, contain_key, neutralize
from memory_inject.render.bracket import (
    MEMORY_CONTEXT_CLOSE,
    MEMORY_CONTEXT_OPEN,
    BracketRenderer,
)
from memory_inject.render.relevant_memories import (
    RELEVANT_MEMORIES_HEADER,
    RelevantMemoriesRenderer,
)
from memory_inject.render.sectioned import (
    CONTESTED_WARNING,
    DEFAULT_SECTION_CAPS,
    SECTION_TITLES,
    SECTIONED_TITLE,
    TRUNCATED,
    SectionedRenderer,
)

__all__ = [
    "CONTESTED_WARNING",
    "DEFAULT_SECTION_CAPS",
    "MEMORY_CONTEXT_CLOSE",
    "MEMORY_CONTEXT_OPEN",
    "RELEVANT_MEMORIES_HEADER",
    "RENDERER_CLASSES",
    "SECTIONED_TITLE",
    "SECTION_TITLES",
    "TRUNCATED",
    "BracketRenderer",
    "RelevantMemoriesRenderer",
    "Rendered",
    "Renderer",
    "SectionedRenderer",
    "build_renderer",
    "contain_content",
    "contain_key",
    "get_renderer",
    "neutralize",
    "renderer_for",
]

#: The configurable formats besides the default ``bracket``: config name -> class.
RENDERER_CLASSES: dict[str, type[SectionedRenderer | RelevantMemoriesRenderer]] = {
    "sectioned": SectionedRenderer,
    "relevant_memories": RelevantMemoriesRenderer,
}

#: Each name of ``memory_inject.config.RENDERERS`` -> its renderer with default settings.
_DEFAULTS: dict[str, Renderer] = {
    "bracket": BracketRenderer(),
    **{name: cls() for name, cls in RENDERER_CLASSES.items()},
}


def get_renderer(name: str) -> Renderer:
    """The registered renderer called ``name``; ``ValueError`` naming the choices if none is."""
    try:
        return _DEFAULTS[name]
    except KeyError:
        raise ValueError(f"'renderer' must be one of {sorted(RENDERERS)} (got {name!r})") from None


def build_renderer(config: RendererConfig) -> Renderer:
    """A renderer of ``config.kind`` with ``config``'s settings."""
    if config.kind == "sectioned":
        # Every sectioned setting is a keyword of the class, under the same name.
        kwargs: dict[str, Any] = {name: getattr(config, name) for name in config.settings}
        kwargs["section_caps"] = attrs.asdict(config.section_caps)
        return SectionedRenderer(**kwargs)
    if config.kind == "relevant_memories":
        return RelevantMemoriesRenderer(max_entries=config.max_entries)
    return _DEFAULTS[config.kind]  # bracket has no settings


#: The renderer ``config.renderer`` configures, built once for the life of the config object
#: (as the stage chain is): a render must not pay for building its renderer.
renderer_for: PerObject[MemoryInjectConfig, Renderer] = PerObject(
    lambda config: build_renderer(config.renderer)
)
