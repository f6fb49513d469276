"""The signal catalog (Flask style): what a turn announces.

Exactly one event per render (``render_turn`` or ``render_memory_context``, and
so per adapter turn), sent with ``receiver(sender, event=...)``. Each signal is
named after the event it carries (``memory_recall`` sends ``MemoryRecall``,
``memory_skipped`` sends ``MemorySkipped``); the sender is the store:

- ``memory_recall`` with :class:`MemoryRecall` when the policy said inject:
  also when nothing was recalled, when every recall failed and when a stage
  raised;
- ``memory_skipped`` with :class:`MemorySkipped` when the policy said skip
  (``reason``: ``suppressed``, ``sub_turn``, ``origin_disabled``,
  ``trivial_prompt``): no store was touched.

Observers never steer behaviour; an observer that raises is isolated (the
error is logged by the pipeline, the turn goes on).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING

from attrs import field, frozen
from blinker import Namespace

if TYPE_CHECKING:
    from memory_inject.stages import StageTrace

__all__ = ["MemoryRecall", "MemorySkipped", "memory_recall", "memory_skipped"]

_signals = Namespace()

#: Sent once per render with ``event=MemoryRecall(...)``.
memory_recall = _signals.signal("memory-recall")
#: Sent once per skipped turn with ``event=MemorySkipped(...)``.
memory_skipped = _signals.signal("memory-skipped")


@frozen(slots=True)
class MemorySkipped:
    """A turn the policy decided not to give memory, and why (no store was touched)."""

    reason: str
    origin: str | None = None
    sessions: tuple[str | None, ...] = ()
    channel: str | None = None
    agent_alias: str | None = None
    turn_id: str | None = None
    #: What went wrong when the skip reports a failure of the turn's own inputs (an
    #: unreadable message, a host callback that raised); credential-scrubbed.
    detail: str | None = None

    #: A skip is a decision, not a failure.
    success = True


@frozen(slots=False)
class MemoryRecall:
    """What one render recalled, what it dropped and why.

    zeroclaw's fields keep their meaning: ``query_summary`` (credential-scrubbed,
    at most 200 chars + ``...``, None for an empty query), ``duration`` (seconds
    of all recalls together), ``num_entries`` (after key de-dup, before any
    filter), ``backend``, ``success`` (False when every scope's recall failed,
    when the store returned garbage or when a stage raised), ``channel``,
    ``agent_alias``, ``turn_id``. ``abstained`` says why a render injected
    nothing on purpose: ``"no_query_terms"`` (the prompt has no content words,
    so nothing was recalled), ``"unrelated_prompt"`` (``min_prompt_similarity``:
    the memory nearest the prompt, by the store's embedder, was not close
    enough) or ``"below_relevance"`` (entries were recalled but none was
    relevant enough to show); None otherwise. ``prompt_similarity`` is that
    nearest memory's calibrated similarity (0..1) when the store told one.
    """

    query_summary: str | None
    duration: float
    num_entries: int
    backend: str
    success: bool
    channel: str | None = None
    agent_alias: str | None = None
    turn_id: str | None = None
    origin: str | None = None
    sessions: tuple[str | None, ...] = ()
    rendered_entries: int = 0
    rendered_chars: int = 0
    rendered_keys: tuple[str, ...] = ()
    trace: tuple[StageTrace, ...] = ()
    error: str | None = None
    degraded: tuple[str, ...] = ()
    partial: bool = False
    abstained: str | None = None
    tokenizer: str = field(default="cl100k_base", repr=False)
    text: str = field(default="", repr=False)
    prompt_similarity: float | None = None

    @functools.cached_property
    def rendered_tokens(self) -> int:
        """Tokens of the rendered block (counted on first access, then cached)."""
        if not self.text:
            return 0
        from memory_inject._tokens import count_tokens

        return count_tokens(self.text, self.tokenizer)

    @property
    def dropped(self) -> Mapping[str, str]:
        """Every dropped entry key with the reason of the stage that dropped it; never a
        key the block shows (a governed stage drops a contested memory from the list, and
        the sectioned renderer shows it in its own section: the trace keeps PI's record)."""
        out: dict[str, str] = {}
        for t in self.trace:
            out.update(t.dropped)
        if out and self.rendered_keys:
            shown = set(self.rendered_keys)
            return {k: v for k, v in out.items() if k not in shown}
        return out
