"""The prompt's vector, embedded once per render and not once per session scope.

A render asks a store once per session scope (a channel turn: the user's session and
the shared rows), each with the same prompt, and each call embedded it again, one after
another: with a 1.2 s model, two scopes ran past a 2 s deadline and the second scope's
memory was lost. :class:`QueryVectors` keeps the last prompts' vectors of one store's
embedder; a vector depends on the text alone, so a prompt asked again is not embedded
again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from memory_inject.embedders import embedder_name
from memory_inject.exceptions import EmbedderError
from memory_inject.storage._store_checks import VectorEmbedder, embed_checked

__all__ = ["QueryVectors"]

#: Prompts remembered per store: the scopes of the turns running at once.
KEPT = 32


class QueryVectors:
    """The vectors of the last :data:`KEPT` prompts a store's embedder was asked for."""

    def __init__(self, embedder: VectorEmbedder) -> None:
        """Remember the vectors ``embedder`` gives (a failure is never remembered)."""
        self.embedder = embedder
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[float, ...]] = OrderedDict()

    def vector(self, query: str) -> tuple[float, ...]:
        """``query``'s checked vector (``EmbedderError`` as :func:`embed_checked` raises,
        and for a vector of zeros: the recall is then by keywords, and says why)."""
        with self._lock:
            found = self._kept.get(query)
            if found is not None:
                self._kept.move_to_end(query)
                return found
        made = embed_checked(self.embedder, [query])[0]
        if not any(made):
            # A static model knows none of the prompt's words: its vector is 0, near
            # nothing, and a vector-only recall found nothing without a word of why.
            name = embedder_name(self.embedder)
            raise EmbedderError(f"embedder {name!r} gave the prompt a vector of zeros")
        with self._lock:
            self._kept[query] = made
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
        return made
