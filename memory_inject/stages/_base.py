"""What every stage shares: the turn context, a stage's result and its trace.

``stage(ctx, candidates) -> StageResult``: a stage takes the turn context and
the candidates (``MemoryEntry``, best first) and returns the survivors plus
``{key: reason}`` for each entry it dropped. Stages are pure: time comes in as
``ctx.now``; no I/O, no logging, no signals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from attrs import field, frozen

from memory_inject.config import MemoryInjectConfig
from memory_inject.models import MemoryEntry

__all__ = ["Stage", "StageContext", "StageResult", "StageTrace", "format_score"]


@frozen(slots=True)
class StageContext:
    """What every stage may read: the resolved config, the clock and the policy outcome."""

    config: MemoryInjectConfig
    now: datetime
    exclude_conversation: bool = False
    query: str = ""
    #: At most how many survivors the rest of the pipeline can use (None: unknown).
    #: A stage that produces lazily (the rerank arm) may stop there.
    demand: int | None = None
    #: The turn's resolved profile (governance: ProfileScope).
    profile_id: str | None = None
    #: Normalised project keys of the turn (governance: ProjectScope).
    project_keys: frozenset[str] = frozenset()
    #: Text the applicability stages match against: the prompt, plus the working
    #: directory only when configured.
    context_text: str = ""
    #: Entries a stage routed aside for a renderer section (e.g. ``contested``).
    routed: Mapping[str, Sequence[MemoryEntry]] = field(factory=dict)
    #: The turn's session scopes (``None`` is the unscoped recall).
    sessions: tuple[str | None, ...] = (None,)
    #: A scheduled turn (``InjectPolicy.shared_only``): named no session, it keeps only
    #: the rows bound to none.
    shared_only: bool = False
    #: How close the nearest row the recall searched is to the prompt, by the store's
    #: embedder (``RecallAnswer.similarity``; None: no store told one).
    similarity: float | None = None


@frozen(slots=True)
class StageResult:
    """A stage's survivors (best first) and ``{key: reason}`` for what it dropped."""

    survivors: list[MemoryEntry]
    dropped: dict[str, str] = field(factory=dict)
    #: Entries taken out of the main flow for a renderer section, by section name.
    routed: dict[str, list[MemoryEntry]] = field(factory=dict)
    #: When set, the routed sections after this stage (a stage that filters them).
    rerouted: dict[str, list[MemoryEntry]] | None = None


@frozen(slots=True)
class StageTrace:
    """What one stage did: counts in and out, why each dropped entry went, scores after."""

    name: str
    input_count: int
    output_count: int
    dropped: Mapping[str, str]
    scores: Mapping[str, float | None] = field(factory=dict)


Stage = Callable[[StageContext, Sequence[MemoryEntry]], StageResult]


def format_score(score: float) -> str:
    """A score as the traces print it (four significant digits)."""
    return f"{score:.4g}"
