"""Renderers: the last stage, and the only code that knows the output format.

A renderer takes the context and the surviving candidates and returns the
block text, the entries it rendered and one trace per budget it applied. Each
format lives in its own module (:mod:`~memory_inject.render.bracket`,
:mod:`~memory_inject.render.sectioned`,
:mod:`~memory_inject.render.relevant_memories`); all of them make stored text
safe with the one neutraliser in ``_contain``. This package builds the
registry the pipeline looks renderers up in by their config name.
"""

from __future__ import annotations

from memory_inject.render._base import Rendered, Renderer
from memory_inject.render._contain import contain_content, contain_key, neutralize
from memory_inject.render.bracket import (
    MEMORY_CONTEXT_CLOSE,
    MEMORY_CONTEXT_OPEN,
    BracketRenderer,
    parse_bracket,
)
from memory_inject.render.relevant_memories import (
    RELEVANT_MEMORIES_HEADER,
    RelevantMemoriesRenderer,
    parse_relevant,
)
from memory_inject.render.sectioned import (
    CONTESTED_WARNING,
    DEFAULT_SECTION_CAPS,
    SECTION_TITLES,
    SECTIONED_TITLE,
    TRUNCATED,
    SectionedRenderer,
    parse_sectioned,
)

__all__ = [
    "CONTESTED_WARNING",
    "DEFAULT_SECTION_CAPS",
    "MEMORY_CONTEXT_CLOSE",
    "MEMORY_CONTEXT_OPEN",
    "RELEVANT_MEMORIES_HEADER",
    "RENDERERS",
    "RENDERER_CLASSES",
    "SECTIONED_TITLE",
    "SECTION_TITLES",
    "TRUNCATED",
    "BracketRenderer",
    "RelevantMemoriesRenderer",
    "Rendered",
    "Renderer",
    "SectionedRenderer",
    "contain_content",
    "contain_key",
    "get_renderer",
    "neutralize",
    "parse_bracket",
    "parse_relevant",
    "parse_sectioned",
]

#: The configurable formats besides the default ``bracket``: config name -> class.
RENDERER_CLASSES: dict[str, type[SectionedRenderer | RelevantMemoriesRenderer]] = {
    "sectioned": SectionedRenderer,
    "relevant_memories": RelevantMemoriesRenderer,
}

#: Config name -> a renderer with its default settings.
RENDERERS: dict[str, Renderer] = {
    "bracket": BracketRenderer(),
    **{name: cls() for name, cls in RENDERER_CLASSES.items()},
}


def get_renderer(name: str) -> Renderer:
    """The registered renderer called ``name``; ``ValueError`` naming the choices if none is."""
    try:
        return RENDERERS[name]
    except KeyError:
        raise ValueError(f"'renderer' must be one of {sorted(RENDERERS)} (got {name!r})") from None
