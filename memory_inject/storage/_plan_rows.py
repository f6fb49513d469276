"""The rules every store's ``recall_where`` / ``known_entities`` share (recall plans).

One place for what the contract says, so SQLite, PostgreSQL and the in-memory
store cannot drift: how an entity id becomes the display name that entity
extraction matches. Restricting a ranked query by status
or profile is :mod:`memory_inject._filter_first`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable

__all__ = [
    "MENTION_ROWS",
    "entity_names",
    "like_pattern",
    "like_prefix",
    "mentioned_entity",
    "mentions_of",
    "resolve_mentions",
]

#: How many candidate rows one mention reads (the SQL pre-filter is a substring match).
MENTION_ROWS = 500


def entity_names(ids: Iterable[str]) -> dict[str, str]:
    """``{display name: entity id}``: the part after the last ``:``, ``-``/``_`` read as spaces.

    ``company:acme-corp`` is ``acme corp``; an id whose name is blank is left out.
    """
    out: dict[str, str] = {}
    for eid in ids:
        name = str(eid).rsplit(":", 1)[-1].replace("-", " ").replace("_", " ").strip()
        if name:
            out[name] = str(eid)
    return out


def mentions_of(mentions: Iterable[str]) -> list[str]:
    """The mentions to resolve: stripped, non-blank strings, once each, in order."""
    out = (m.strip() for m in mentions if isinstance(m, str))
    return list(dict.fromkeys(m for m in out if m))


def like_pattern(text: str) -> str:
    """``%text%`` for ``LIKE ... ESCAPE '\\'``, with ``%``, ``_`` and ``\\`` escaped."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def like_prefix(prefix: str) -> str:
    """``prefix%`` for ``LIKE ... ESCAPE '\\'``, escaped as :func:`like_pattern` does."""
    return like_pattern(prefix)[1:]


def mentioned_entity(mention: str, pairs: Iterable[tuple[str, str]], prefix: str) -> str | None:
    """The entity whose rows name ``mention``, from ``(entity id, content)`` pairs.

    founder-os resolves a company named in a command by ``content LIKE
    '%<name>%' ... LIMIT 1``; here the name must appear as whole words with
    its capitals (``Acme Corp`` is not ``acme corporation`` nor ``Acmeville``),
    only ids starting with ``prefix`` count, and one id must hold more than
    half of the rows that name it, else the mention is ambiguous (None).
    """
    word = re.compile(rf"(?<!\w){re.escape(mention)}(?!\w)")
    votes: Counter[str] = Counter()
    for entity_id, content in pairs:
        if str(entity_id).startswith(prefix) and word.search(str(content)):
            votes[str(entity_id)] += 1
    if not votes:
        return None
    best, n = votes.most_common(1)[0]
    return best if n * 2 > sum(votes.values()) else None


def resolve_mentions(
    mentions: Iterable[str], rows_for: Callable[[str], Iterable[tuple[str, str]]], prefix: str
) -> dict[str, str]:
    """``{mention: entity id}``: each mention (:func:`mentions_of`) resolved by
    :func:`mentioned_entity` over the ``(entity id, content)`` rows ``rows_for(mention)``
    reads; a mention no row names, or an ambiguous one, is left out."""
    out: dict[str, str] = {}
    for mention in mentions_of(mentions):
        found = mentioned_entity(mention, rows_for(mention), prefix)
        if found is not None:
            out[mention] = found
    return out
