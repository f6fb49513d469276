"""Governance stages: PI's processor pipeline (spec 1.5) as ordinary stages.

Status -> profile -> project -> positive applicability -> negative scope, each
a pure filter over the governance fields a store puts in ``entry.extra``
(``status``, ``profile_id``, ``scope``, ``layer``, ``applies_when``,
``does_not_apply_when``, ``known_exceptions``). The drop reasons are PI's
strings, so a trace reads the same: ``status:deprecated``,
``profile_mismatch:project:other``, ``project_scope_mismatch:other``,
``applies_when_unmatched``, ``does_not_apply_when:publishing``,
``known_exceptions:GitHub Packages``.

Three deliberate differences from PI:

- Entries from plain stores carry no governance fields: no status counts as
  active, no profile, scope or conditions pass.
- A turn without a profile (PI always has one; a host of ours may not)
  drops every entry bound to a profile, so nothing leaks across profiles.
- Contested entries leave the main flow but are routed to
  ``routed["contested"]`` for their warning section, and
  :func:`apply_scope_to_routed` runs the scope stages over them; PI takes
  contested records from every profile and project (spec 1.17.5).

The matcher is :func:`memory_inject._phrases.phrase_matches`, which keeps PI's
"publishing" / "publish" behaviour without its false positives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from attrs import field, frozen

from memory_inject._phrases import normalize, phrase_matches
from memory_inject.models import MemoryEntry
from memory_inject.stages._base import Stage, StageContext, StageResult

__all__ = [
    "GOVERNANCE_ORDER",
    "GOVERNANCE_STAGES",
    "PI_PROCESSORS",
    "NegativeScope",
    "PositiveApplicability",
    "ProfileScope",
    "ProjectScope",
    "RoutedScope",
    "StatusFilter",
    "apply_scope_to_routed",
    "build_governance",
    "pi_traces",
]


def _phrases(value: Any) -> tuple[str, ...]:
    """A condition field as phrases: one string, a list of strings, or nothing."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    return tuple(str(v) for v in value if v is not None and str(v).strip())


def _min_length(_inst: Any, _attr: Any, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"'min_token_length' must be an integer >= 1 (got {value!r})")


@frozen(kw_only=True)
class StatusFilter:
    """Only active entries pass; ``route`` statuses go aside to ``routed[<status>]``.

    An entry with no status (a plain store's) is active. Every other status
    is dropped as ``status:<status>``; the routed ones are dropped from the
    main flow with the same reason *and* handed to their renderer section.
    """

    active: tuple[str, ...] = ("active",)
    route: tuple[str, ...] = ("contested",)

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
        out: list[MemoryEntry] = []
        dropped: dict[str, str] = {}
        routed: dict[str, list[MemoryEntry]] = {}
        for e in entries:
            status = e.extra.get("status")
            if status is None or status == "" or str(status).strip().lower() in self.active:
                out.append(e)
                continue
            dropped[e.key] = f"status:{status}"
            section = str(status).strip().lower()
            if section in self.route:
                routed.setdefault(section, []).append(e)
        return StageResult(out, dropped, routed)


@frozen(kw_only=True)
class ProfileScope:
    """Entries bound to another profile are dropped as ``profile_mismatch:<profile>``.

    Unbound entries (legacy records, plain stores) pass unless
    ``allow_unbound`` is false (then: ``profile_unbound``). When the turn has
    no profile, every bound entry is dropped.
    """

    allow_unbound: bool = True

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
        out: list[MemoryEntry] = []
        dropped: dict[str, str] = {}
        for e in entries:
            profile = e.extra.get("profile_id")
            if profile is None or profile == "":
                if self.allow_unbound:
                    out.append(e)
                else:
                    dropped[e.key] = "profile_unbound"
            elif ctx.profile_id is not None and profile == ctx.profile_id:
                out.append(e)
            else:
                dropped[e.key] = f"profile_mismatch:{profile}"
        return StageResult(out, dropped)


@frozen(kw_only=True)
class ProjectScope:
    """Project-scoped entries pass only in their project: ``project_scope_mismatch:<project>``.

    Layers in ``unscoped_layers`` (PI's L1 identity) always pass, as do
    entries with no scope, ``global`` and ``domain`` scopes (domains are never
    compared, as in PI), any other scope type, and a project scope naming no
    project. A named project passes when its normalised name is one of the
    turn's ``project_keys``.
    """

    unscoped_layers: tuple[str, ...] = ("L1",)

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
        keys = {normalize(k) for k in ctx.project_keys}
        out: list[MemoryEntry] = []
        dropped: dict[str, str] = {}
        for e in entries:
            project = self._project(e)
            if project is None or normalize(project) in keys:
                out.append(e)
            else:
                dropped[e.key] = f"project_scope_mismatch:{project}"
        return StageResult(out, dropped)

    def _project(self, entry: MemoryEntry) -> str | None:
        """The project the entry is confined to, or None when it is not confined."""
        if entry.extra.get("layer") in self.unscoped_layers:
            return None
        scope = entry.extra.get("scope")
        if not isinstance(scope, Mapping) or scope.get("type") != "project":
            return None
        project = scope.get("project")
        if project is None or project == "":
            return None
        return str(project)


@frozen(kw_only=True)
class PositiveApplicability:
    """Entries with ``applies_when`` pass only when one condition matches the context text.

    Entries without conditions pass; the others are dropped as
    ``applies_when_unmatched`` (PI 0.15's optional fifth stage).
    """

    min_token_length: int = field(default=4, validator=_min_length)

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
        out: list[MemoryEntry] = []
        dropped: dict[str, str] = {}
        text, n = ctx.context_text, self.min_token_length
        for e in entries:
            conditions = _phrases(e.extra.get("applies_when"))
            if not conditions or any(
                phrase_matches(c, text, min_token_length=n) for c in conditions
            ):
                out.append(e)
            else:
                dropped[e.key] = "applies_when_unmatched"
        return StageResult(out, dropped)


@frozen(kw_only=True)
class NegativeScope:
    """The first ``does_not_apply_when`` then ``known_exceptions`` phrase that matches drops it.

    Reasons keep the phrase as written: ``does_not_apply_when:<phrase>``,
    ``known_exceptions:<phrase>``.
    """

    min_token_length: int = field(default=4, validator=_min_length)

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
        out: list[MemoryEntry] = []
        dropped: dict[str, str] = {}
        text, n = ctx.context_text, self.min_token_length
        for e in entries:
            reason = None
            for name in ("does_not_apply_when", "known_exceptions"):
                hit = next(
                    (
                        p
                        for p in _phrases(e.extra.get(name))
                        if phrase_matches(p, text, min_token_length=n)
                    ),
                    None,
                )
                if hit is not None:
                    reason = f"{name}:{hit}"
                    break
            if reason is None:
                out.append(e)
            else:
                dropped[e.key] = reason
        return StageResult(out, dropped)


#: Config name -> stage factory. Every factory can be called with no arguments.
GOVERNANCE_STAGES: dict[str, Callable[..., Stage]] = {
    "status": StatusFilter,
    "profile": ProfileScope,
    "project": ProjectScope,
    "applicability": PositiveApplicability,
    "negative_scope": NegativeScope,
}

#: PI's order (with 0.15's applicability stage); the order a config should list them in.
GOVERNANCE_ORDER: tuple[str, ...] = tuple(GOVERNANCE_STAGES)

_TRACE_NAMES = {
    "status": "status_filter",
    "profile": "profile_scope",
    "project": "project_scope",
    "applicability": "positive_applicability",
    "negative_scope": "negative_scope",
}
_MATCHING = frozenset({"applicability", "negative_scope"})


def build_governance(
    names: Iterable[str] = GOVERNANCE_ORDER, *, min_token_length: int = 4
) -> list[tuple[str, Stage]]:
    """The named stages in the order given, each with its trace name.

    Unknown or repeated names raise ``ValueError``. The stages are per-entry
    filters, so the order changes only which reason an entry is dropped with
    (and whether a contested entry is routed before another stage drops it);
    :data:`GOVERNANCE_ORDER` is PI's.
    """
    built: list[tuple[str, Stage]] = []
    seen: set[str] = set()
    for raw in names:
        name = raw.strip().lower()
        if name not in GOVERNANCE_STAGES:
            known = ", ".join(repr(n) for n in GOVERNANCE_ORDER)
            raise ValueError(f"'governance' stages must be among {known} (got {raw!r})")
        if name in seen:
            raise ValueError(f"'governance' stages must not repeat (got {raw!r} twice)")
        seen.add(name)
        factory = GOVERNANCE_STAGES[name]
        stage = factory(min_token_length=min_token_length) if name in _MATCHING else factory()
        built.append((_TRACE_NAMES[name], stage))
    return built


def apply_scope_to_routed(
    ctx: StageContext,
    routed: Mapping[str, Sequence[MemoryEntry]],
    stages: Iterable[tuple[str, Stage]],
) -> tuple[dict[str, list[MemoryEntry]], dict[str, str]]:
    """Run the non-status stages over each routed section: ``(routed_after, dropped)``.

    Contested entries must not leak across profiles, projects or negative
    scope just because they are shown as warnings. Sections keep their
    order; a section emptied by the stages stays as an empty list.
    """
    scoped = [stage for _name, stage in stages if not isinstance(stage, StatusFilter)]
    after: dict[str, list[MemoryEntry]] = {}
    dropped: dict[str, str] = {}
    for section, entries in routed.items():
        current = list(entries)
        for stage in scoped:
            result = stage(ctx, current)
            current = result.survivors
            dropped.update(result.dropped)
        after[section] = current
    return after, dropped


@frozen
class RoutedScope:
    """Routed (contested) entries face the scope stages too; PI forgot to.

    Works on the routed sections, not the main flow: the pipeline traces it
    with routed counts (``routed_scope``), and only when something was routed.
    """

    stages: tuple[tuple[str, Stage], ...]

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
        """Pass the main flow through; filter ``ctx.routed`` with the scope stages."""
        kept, dropped = apply_scope_to_routed(ctx, ctx.routed, self.stages)
        return StageResult(list(entries), dropped, rerouted=kept)


#: Our governance trace names -> PI's processor names (``runMemoryProcessorPipeline``).
PI_PROCESSORS: Mapping[str, str] = {
    "status_filter": "StatusFilterProcessor",
    "profile_scope": "ProfileScopeProcessor",
    "project_scope": "BasicScopeProcessor",
    "positive_applicability": "PositiveApplicabilityProcessor",
    "negative_scope": "NegativeScopeProcessor",
}


def pi_traces(traces: Iterable[Any], ids: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """PI's view of a render's governance traces: the shape PI's consumers read.

    One ``{processor, input_count, output_count, excluded_ids,
    exclusion_reasons}`` per governance stage that ran, in order, with PI's
    processor names; ``excluded_ids`` in drop order and ``exclusion_reasons``
    keyed by record id. ``traces`` are :class:`StageTrace` values (a
    ``RenderResult.trace``), whose drops are keyed by entry key; ``ids`` maps
    a key to its record id where they differ (PI's imported records use the id
    as key, so by default the key is the id).
    """
    out: list[dict[str, Any]] = []
    for trace in traces:
        processor = PI_PROCESSORS.get(getattr(trace, "name", ""))
        if processor is None:
            continue
        reasons = {(ids or {}).get(key, key): reason for key, reason in trace.dropped.items()}
        out.append(
            {
                "processor": processor,
                "input_count": trace.input_count,
                "output_count": trace.output_count,
                "excluded_ids": list(reasons),
                "exclusion_reasons": reasons,
            }
        )
    return out
