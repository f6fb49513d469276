"""Heuristic importance: what a store writes when a memory arrives without one.

zeroclaw's rule (spec section 7.2): a base by category (``core`` 0.7, ``daily``
0.3, ``conversation`` 0.2, any other category 0.4), plus 0.1 for each
high-signal keyword the content holds (case-insensitive substring: "must" in
"mustard" counts, as upstream), the keyword bonus capped at 0.2 and the total
at 1.0. Every built-in store applies it in ``store()`` (and so ``remember()``,
autosave and the CLI's ``add``); a record written with ``upsert`` or imported
keeps exactly the importance it carries. Only the rerank arm reads importance
(``0.2 * importance`` of the blend); the default decay arm never does.

It lives in ``storage`` because the stores compute it and storage imports
nothing from the core but models; the package root exports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from memory_inject.models import MemoryCategory

__all__ = [
    "CUSTOM_IMPORTANCE",
    "HIGH_SIGNAL_KEYWORDS",
    "IMPORTANCE_BY_CATEGORY",
    "KEYWORD_BONUS",
    "MAX_KEYWORD_BONUS",
    "heuristic_importance",
]

#: The base importance of the three built-in categories.
IMPORTANCE_BY_CATEGORY: Mapping[str, float] = MappingProxyType(
    {MemoryCategory.CORE: 0.7, MemoryCategory.DAILY: 0.3, MemoryCategory.CONVERSATION: 0.2}
)
#: The base importance of any other (custom) category.
CUSTOM_IMPORTANCE = 0.4
#: Words that mark a decision or a rule; each one the content holds adds :data:`KEYWORD_BONUS`.
HIGH_SIGNAL_KEYWORDS: tuple[str, ...] = (
    "decision",
    "always",
    "never",
    "important",
    "critical",
    "must",
    "requirement",
    "policy",
    "rule",
    "principle",
)
#: What one high-signal keyword adds.
KEYWORD_BONUS = 0.1
#: The most the keywords add together.
MAX_KEYWORD_BONUS = 0.2


def heuristic_importance(category: str, content: str) -> float:
    """The importance (0..1) zeroclaw's stores give a memory written without one.

    ``category``'s base, plus :data:`KEYWORD_BONUS` per distinct keyword of
    :data:`HIGH_SIGNAL_KEYWORDS` found anywhere in ``content`` (any case), at
    most :data:`MAX_KEYWORD_BONUS`; rounded to two decimals, so a core fact
    with one keyword is ``0.8``, not ``0.7999999999999999``.
    """
    base = IMPORTANCE_BY_CATEGORY.get(str(category), CUSTOM_IMPORTANCE)
    text = content.lower()
    hits = sum(1 for word in HIGH_SIGNAL_KEYWORDS if word in text)
    bonus = min(hits * KEYWORD_BONUS, MAX_KEYWORD_BONUS)
    return min(1.0, round(base + bonus, 2))
