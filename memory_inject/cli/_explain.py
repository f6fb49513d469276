"""``render --explain``: record what the store recalled, then show each candidate's fate.

The render runs against a :class:`Recorder` wrapped around the store, which
keeps every entry recalled; :func:`explain_rows` lines those up with the
render's trace (scores per scoring stage, who dropped it and why).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from rich.console import Console
from rich.table import Table

from memory_inject.contract import (
    Memory,
    RecallAnswer,
    RecallQuery,
    SupportsAnswer,
    SupportsEntities,
    SupportsExcludingRecall,
    SupportsFilteredRecall,
    SupportsStandingContext,
    SupportsUsage,
    supports,
)
from memory_inject.models import MemoryEntry
from memory_inject.pipeline import RenderResult
from memory_inject.standing import read_standing

__all__ = ["Recorder", "explain_rows", "print_explain", "recorder_for"]


class Recorder:
    """A store proxy that keeps the first entry recalled under each key (for --explain).

    :func:`recorder_for` gives it the render capabilities of the store it wraps,
    so the render takes the same paths; never ``arecall`` (the CLI is sync).
    """

    def __init__(self, inner: Memory) -> None:
        """Wrap ``inner``; :attr:`seen` starts empty."""
        self._inner = inner
        self.seen: dict[str, MemoryEntry] = {}

    @property
    def name(self) -> str:
        """The wrapped store's name."""
        return str(self._inner.name)

    def _note(self, batch: Sequence[MemoryEntry]) -> Sequence[MemoryEntry]:
        for e in batch or ():
            if isinstance(e, MemoryEntry):
                self.seen.setdefault(e.key, e)
        return batch

    def recall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Sequence[MemoryEntry]:
        """The wrapped store's recall, each entry noted in :attr:`seen`."""
        found = self._inner.recall(query, limit, session_id=session_id, since=since, until=until)
        return self._note(found)


def recorder_for(inner: Memory) -> Recorder:
    """A :class:`Recorder` with exactly the optional render capabilities of ``inner``."""
    members: dict[str, object] = {}
    if isinstance(inner, SupportsFilteredRecall):
        where = inner.recall_where
        members["recall_where"] = lambda self, *a, **kw: self._note(where(*a, **kw))
    if isinstance(inner, SupportsEntities):
        members["known_entities"] = lambda _self: inner.known_entities()
    if isinstance(inner, SupportsAnswer):
        answer = inner.answer

        def noted(self: Recorder, q: RecallQuery) -> RecallAnswer:
            found = answer(q)
            self._note(found.entries)
            return found

        members["answer"] = noted
        if supports(inner, SupportsExcludingRecall):
            # A refill asks past the rows no stage shows, as the render does.
            members["recall_excludes"] = property(lambda _self: inner.recall_excludes)
    if isinstance(inner, SupportsStandingContext):
        # The preview shows the standing context too (hard rules, L1, PI's sections).
        members["data_version"] = property(lambda _self: inner.data_version)

        def standing(
            self: Recorder,
            profile_id: str | None,
            *,
            limit: int,
            min_confidence: float,
            categories: Mapping[str, datetime | None] | None = None,
            sessions: Sequence[str] = (),
            shared_only: bool = False,
        ) -> Sequence[MemoryEntry]:
            found = read_standing(
                inner,
                profile_id,
                limit=limit,
                min_confidence=min_confidence,
                categories=categories,
                sessions=sessions,
                shared_only=shared_only,
            )
            return self._note(found)

        members["standing_records"] = standing
    if isinstance(inner, SupportsUsage):
        # A preview changes nothing: the render takes the same path, no use is counted.
        members["mark_used"] = lambda _self, ids: 0
    cls: type[Recorder] = type("_Recorder", (Recorder,), members)
    return cls(inner)


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def explain_rows(
    seen: dict[str, MemoryEntry], result: RenderResult
) -> tuple[list[str], list[list[str]]]:
    """Header and rows: each candidate, its score after each scoring stage and its fate."""
    scoring = [t for t in result.trace if t.scores]
    # the event's: a governed render shows a contested memory its status stage took off
    # the list in its own section (it read "dropped by status_filter" while shown, round 35)
    rendered = {e.key for e in result.entries} | set(getattr(result.event, "rendered_keys", ()))
    keys = list(seen) + [k for t in result.trace for k in t.dropped if k not in seen]
    header = ["key", "category", "recall", *(t.name for t in scoring), "outcome"]
    rows = []
    for key in dict.fromkeys(keys):
        entry = seen.get(key)
        outcome = "rendered" if key in rendered else "not rendered"
        named = [f"{t.name}: {t.dropped[key]}" for t in result.trace if key in t.dropped]
        if named and key in rendered:
            outcome = f"rendered, in its section ({named[0]})"
        elif named:
            # the last stage that named it decided: an earlier one may only have routed it
            # (status_filter's contested memory, then another profile's: round 36)
            outcome = f"dropped by {named[-1]}"
            if len(named) > 1:
                outcome += f" (after {'; '.join(named[:-1])})"
        rows.append(
            [
                key,
                str(entry.category) if entry else "-",
                _score(entry.score) if entry else "-",
                *(_score(t.scores.get(key)) if key in t.scores else "-" for t in scoring),
                outcome,
            ]
        )
    return header, rows


def print_explain(console: Console, seen: dict[str, MemoryEntry], result: RenderResult) -> None:
    """Print the candidates table (:func:`explain_rows`) and each stage's counts."""
    header, rows = explain_rows(seen, result)
    table = Table(title="candidates")
    for name in header:
        table.add_column(
            name,
            justify="right" if name not in ("key", "category", "outcome") else "left",
            overflow="fold",
        )
    for row in rows:
        table.add_row(*row)
    console.print(table)
    stages = Table("stage", "in", "out", "dropped", title="stages")
    for t in result.trace:
        stages.add_row(t.name, str(t.input_count), str(t.output_count), str(len(t.dropped)))
    console.print(stages)
