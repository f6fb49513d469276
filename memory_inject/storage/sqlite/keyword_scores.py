"""The mirror's calibrated scores: each kept row's coverage of the query, from its postings.

:func:`kept_scores` is what :func:`~.keyword_phrases.coverage_of` computes from
``highlight()`` marks on the FTS5 path, from the postings the mirror holds
(:class:`~.keyword_index.MirrorIndex`), by the same rules: the column a word is
in, the day words' rule for numbers, a prompt's named words.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from memory_inject.storage.calibration import calibrated, coverage, named_weights
from memory_inject.storage.sqlite.keyword_phrases import dated_coverage, is_number
from memory_inject.storage.sqlite.keyword_postings import DAY_BIT, Posting, present_weight

__all__ = ["kept_scores"]


def kept_scores(
    postings: Mapping[str, Mapping[int, Posting]],
    phrases: Sequence[str],
    weights: Sequence[float],
    df: Sequence[int],
    groups: Sequence[int] | None,
    rids: Sequence[int],
    named: Collection[int] | None = None,
    mine: Callable[[int], bool] | None = None,
) -> list[float]:
    """Each row's :func:`~memory_inject.storage.calibration.coverage` of ``phrases``
    (``groups``: each phrase's word when some spell one, ``_variants.with_variants``;
    ``named``: the rows that name a word of the prompt, where a phrase no row holds
    weighs ``calibration.NAMED_ABSENT_WEIGHT``). ``df`` counts the rows ``mine`` says
    are the namespace's (all rows without it), as the day words' rule does."""
    held = [postings.get(t, {}) for t in phrases]
    heavier = named_weights(weights, df) if named else weights
    numbers = [d > 0 and is_number(t) for t, d in zip(phrases, df, strict=True)]
    if any(numbers):  # the day words' rule (``keyword_phrases.dated_coverage``)
        loose = [
            n
            and not any(
                mask & ~DAY_BIT for rid, (_, mask) in p.items() if mine is None or mine(rid)
            )
            for n, p in zip(numbers, held, strict=True)
        ]
        return [
            _dated(
                heavier if named and rid in named else weights, held, numbers, loose, groups, rid
            )
            for rid in rids
        ]
    if groups is not None or named:
        return [
            coverage(
                heavier if named and rid in named else weights,
                [present_weight(p.get(rid)) for p in held],
                groups,
            )
            for rid in rids
        ]
    total = sum(weights)
    if total <= 0.0:
        return [0.0] * len(rids)
    pairs = list(zip(weights, held, strict=True))
    out = []
    for rid in rids:  # coverage(weights, present), summed here: the hot loop of a recall
        share = 0.0
        own = False
        for w, posting in pairs:
            found = posting.get(rid)
            if found is not None:
                present = present_weight(found)
                share += w * present
                own = own or present >= 1.0
        out.append(calibrated(share, total, own=own))
    return out


def _dated(
    weights: Sequence[float],
    held: Sequence[Mapping[int, Posting]],
    numbers: Sequence[bool],
    loose: Sequence[bool],
    groups: Sequence[int] | None,
    rid: int,
) -> float:
    """Row ``rid``'s coverage by ``keyword_phrases.dated_coverage``, from its postings."""
    found = [p.get(rid) for p in held]
    present = [present_weight(f) for f in found]
    dated = any(
        f is not None and f[1] & DAY_BIT and not n for f, n in zip(found, numbers, strict=True)
    )
    text = [
        present_weight((f[0], f[1] & ~DAY_BIT)) if n and f is not None else 0.0
        for f, n in zip(found, numbers, strict=True)
    ]
    return dated_coverage(weights, present, numbers, text, loose, dated, groups)
