"""Multi-source recall (founder-os): several queries per turn, merged, de-duplicated, capped.

A plan is a list of queries, each with a source and a limit:

* ``default``  the store's own recall (hybrid when it has an embedder);
* ``semantic`` / ``lexical``  recall forced to one modality (stores that support it);
* ``entity``   rows tagged with an entity (company) resolved from the turn's input;
* ``plugin``   rows written by the calling plugin/agent (``source``);
* ``time``     rows written in the past time the prompt names ("yesterday", "last week",
  "on 8 May 2023": :mod:`memory_inject.temporal`, resolved at the turn's ``now``). When
  the rest of the prompt asks nothing but when ("what did we talk about yesterday?"),
  the window's rows come newest first and unscored, as an entity's rows do; otherwise
  the rest of the prompt is searched inside the window. Either way the plan's other
  queries search the prompt without its time phrase. No time phrase: no query.

Results are merged by id and ordered by the plan's priority rule: founder-os
ranks ids returned by more queries first, then confidence, then relevance;
the merged list is capped. A scored row the relevance floor will drop takes
no slot (the plan's ``floor``): it is cut here as the floor would cut it.
Pure functions here; the pipeline does the I/O.

Owns the plan values, :func:`plan_for` (a config's plan), :func:`recall_limit_for`
(what each scope is asked for), entity extraction and :func:`merge_results`.
The store calls a plan makes are built by ``memory_inject._calls``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from attrs import evolve, field, frozen

from memory_inject._stopwords import REQUEST_WORDS, STOPWORDS
from memory_inject.config import MemoryInjectConfig
from memory_inject.models import MemoryEntry
from memory_inject.stages._base import format_score
from memory_inject.stages.rerank import rerank_recall_limit

__all__ = [
    "FOUNDER_OS_PLAN",
    "Entities",
    "PlanQuery",
    "RecallPlan",
    "extract_entities",
    "merge_results",
    "plan_for",
    "recall_limit_for",
]

SOURCES = ("default", "semantic", "lexical", "entity", "plugin", "time")


@frozen
class PlanQuery:
    """One query of a plan: its ``source`` and how many rows it asks for.

    ``ValueError`` when ``source`` is not one of :data:`SOURCES` or ``limit`` is below 1.
    """

    source: str
    limit: int

    def __attrs_post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"'source' must be one of {SOURCES} (got {self.source!r})")
        if self.limit < 1:
            raise ValueError(f"'limit' must be >= 1 (got {self.limit!r})")


def _queries(value: Iterable[PlanQuery]) -> tuple[PlanQuery, ...]:
    return tuple(value)


@frozen
class RecallPlan:
    """``queries`` run for each session scope; ``cap`` bounds the merged list.

    ``floor``: a row a query scored under it (and no unscored query returned) takes
    no cap slot (:func:`merge_results`); :func:`plan_for` sets the lowest score the
    config's relevance floor can keep, None when a rerank rescores the rows.
    """

    queries: tuple[PlanQuery, ...] = field(converter=_queries)
    cap: int = 5
    #: ``hits`` (founder-os: hit count, confidence, relevance) or ``score`` (relevance only).
    priority: str = "hits"
    #: Only rows whose ``status`` is one of these take part (None: any status).
    statuses: tuple[str, ...] | None = None
    #: Bump ``times_used``/``last_used_at`` of the rendered entries (one statement).
    track_usage: bool = True
    floor: float | None = None


#: founder-os's plan: semantic on the task (5), the company (3), the calling plugin (2); cap 5.
FOUNDER_OS_PLAN = RecallPlan(
    queries=(PlanQuery("semantic", 5), PlanQuery("entity", 3), PlanQuery("plugin", 2)),
    cap=5,
    priority="hits",
    statuses=("confirmed", "applied"),
)

PRESETS = {"founder_os": FOUNDER_OS_PLAN}


def recall_limit_for(cfg: MemoryInjectConfig) -> int:
    """Entries to ask of each scope: the limit, or the rerank arm's over-fetched pool."""
    limit = cfg.recall_limit or cfg.rerank.pool_cap
    if cfg.rerank.enabled:
        return rerank_recall_limit(limit, cfg.rerank)
    return limit


def plan_for(cfg: MemoryInjectConfig) -> RecallPlan | None:
    """The recall plan of a config, or None for one recall per session scope.

    Its ``floor`` is the least score the config's relevance floor keeps (the
    companion score when lower); None with a rerank, whose scores are not the recall's.
    """
    rp = cfg.recall_plan
    if not rp.enabled:
        return None
    floor: float | None = cfg.min_relevance_score
    if cfg.min_companion_score is not None:
        floor = min(cfg.min_relevance_score, cfg.min_companion_score)
    if cfg.rerank.enabled:
        floor = None
    if rp.preset is not None:
        return evolve(PRESETS[rp.preset], floor=floor)
    queries = tuple(PlanQuery(q.source, q.limit) for q in rp.queries) or (
        PlanQuery("default", recall_limit_for(cfg)),
    )
    return RecallPlan(
        queries,
        cap=rp.cap,
        priority=rp.priority,
        statuses=rp.statuses,
        track_usage=rp.track_usage,
        floor=floor,
    )


@frozen
class Entities:
    """What :func:`extract_entities` found in a turn's text.

    Emails, domains (lower-cased; of the emails and bare ones), known company
    names, and contact names found just before an email.
    """

    emails: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    companies: tuple[str, ...] = ()
    contacts: tuple[str, ...] = ()


_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)\b")
_BARE_DOMAIN = re.compile(
    r"(?<![@\w.-])@?((?:[A-Za-z0-9-]+\.)+(?:com|org|net|io|co|ai|dev|app|"
    r"example|[a-z]{2}))\b"
)
_NAME = re.compile(r"\b([A-Z][a-z]+(?:[-'][A-Z][a-z]+)?)\s+([A-Z][a-z]+(?:[-'][A-Z][a-z]+)?)\b")
_WORD = re.compile(r"[a-z0-9]+")


def _norm_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def extract_entities(text: str, known_companies: Iterable[str] = ()) -> Entities:
    """Emails, domains, known company names and contact names near emails in ``text``.

    A company matches when its whole name appears as a word sequence, or when
    its name is the stem of an email or domain in the text (``jane@acme.io`` →
    ``Acme``). A contact is a capitalised first + last name pair within a few
    words before an email address.
    """
    emails = tuple(m.group(0) for m in _EMAIL.finditer(text))
    domains = [m.group(1).lower() for m in _EMAIL.finditer(text)]
    domains += [
        m.group(1).lower() for m in _BARE_DOMAIN.finditer(text) if m.group(1).lower() not in domains
    ]
    stems = {d.split(".")[0] for d in domains}
    words = _norm_words(text)
    joined = f" {' '.join(words)} "
    companies = []
    for name in known_companies:
        nw = _norm_words(name)
        if not nw:
            continue
        if f" {' '.join(nw)} " in joined or "".join(nw) in stems or nw[0] in stems:
            companies.append(name)
    contacts = []
    for m in _EMAIL.finditer(text):
        window = text[max(0, m.start() - 60) : m.start()]
        names = list(_NAME.finditer(window))
        if names:
            contacts.append(f"{names[-1].group(1)} {names[-1].group(2)}")
    return Entities(emails, tuple(dict.fromkeys(domains)), tuple(companies), tuple(contacts))


#: A capitalised run of one to four words ("Acme Corp", "NaluForge", "O'Brien & Sons").
_PROPER = re.compile(r"\b[A-Z][\w'&.-]*(?:\s+(?:&\s+)?[A-Z][\w'&.-]*){0,3}")
#: A capitalised run after one of these does not open a sentence (any other text does).
_NOT_SENTENCE_START = tuple("abcdefghijklmnopqrstuvwxyz0123456789,;:")
#: Mail providers: their domain names no company.
_WEBMAIL = frozenset(
    "gmail googlemail outlook hotmail live msn yahoo icloud me mac aol proton protonmail "
    "gmx mail zoho yandex fastmail hey".split()
)


def company_mentions(text: str, entities: Entities) -> tuple[str, ...]:
    """The names in ``text`` that may be a company no known name matched, for
    :class:`~memory_inject.contract.SupportsMentions`.

    Capitalised runs of words (``Acme Corp``; a contact's name too, whose
    rows name the contact's company) that are not a single stopword, and the stems of email or bare
    domains that are not a mail provider's (``acmecorp``), as founder-os
    matches ``content LIKE '%<Company Name>%' OR '%<domain-stem>%'``.
    Already-matched company names are left out.
    """
    known = {" ".join(_norm_words(c)) for c in entities.companies}
    out: list[str] = []
    for m in _PROPER.finditer(text):
        name = m.group(0).strip(" .'&-")
        names = [name]
        rest = name.partition(" ")[2]
        if rest and not text[: m.start()].rstrip(" \t\"'(").endswith(_NOT_SENTENCE_START):
            names.append(rest)  # "Ask Jane Roe" opens a sentence: "Jane Roe" too
        for candidate in names:
            words = _norm_words(candidate)
            if not words or " ".join(words) in known:
                continue
            if len(words) == 1 and (words[0] in STOPWORDS or words[0] in REQUEST_WORDS):
                continue
            out.append(candidate)
    for domain in entities.domains:
        stem = domain.split(".")[0]
        if len(stem) >= 3 and stem not in _WEBMAIL and stem not in known:
            out.append(stem)
    return tuple(dict.fromkeys(out))


def _confidence(e: MemoryEntry) -> float:
    c = e.extra.get("confidence") if e.extra else None
    return float(c) if isinstance(c, int | float) else -1.0


def merge_results(
    batches: Sequence[Sequence[MemoryEntry]], plan: RecallPlan, in_time: Sequence[int] = ()
) -> tuple[list[MemoryEntry], dict[str, str]]:
    """Union by id, filter by status, order by the plan's priority, cap.

    Returns the merged entries and ``{key: reason}`` for those cut (status, cap or
    floor). A row every query that returned it scored under ``plan.floor`` would be
    dropped by the relevance floor: it takes no cap slot and is cut here with the
    floor's reason, ``below_relevance:<score>`` (a hit at 0.0 took a slot, and the
    row the floor would keep was cut as ``plan:cap``).
    An entry that an unscored query (entity, plugin) returned leaves unscored,
    whatever relevance another query gave it: it was chosen for its company or
    plugin, so the relevance floor must not drop it; its best relevance still
    ranks it. ``in_time`` lists the batches a ``time`` query answered: their rows
    were written when the prompt says, so they come before every other row (the
    other queries search any time: what they add is the fallback).
    """
    timely = {e.id for b in in_time for e in batches[b]}
    chosen: set[str] = set()
    hits: dict[str, int] = {}
    first: dict[str, MemoryEntry] = {}
    best_score: dict[str, float] = {}
    order: list[str] = []
    dropped: dict[str, str] = {}
    for batch in batches:
        for e in batch:
            if plan.statuses is not None:
                status = e.extra.get("status") if e.extra else None
                if status is not None and status not in plan.statuses:
                    dropped[e.key] = f"status:{status}"
                    continue
            if e.id not in first:
                first[e.id] = e
                order.append(e.id)
                hits[e.id] = 0
            hits[e.id] += 1
            if e.score is None:
                chosen.add(e.id)
            else:
                best_score[e.id] = max(best_score.get(e.id, 0.0), e.score)
                if first[e.id].score is None or e.score > (first[e.id].score or 0.0):
                    first[e.id] = e
    if plan.priority == "hits":
        ranked = sorted(
            order,
            key=lambda i: (
                i not in timely,
                -hits[i],
                -_confidence(first[i]),
                -best_score.get(i, -1.0),
            ),
        )
    else:
        ranked = sorted(order, key=lambda i: (i not in timely, -best_score.get(i, -1.0)))
    kept: list[MemoryEntry] = []
    for i in ranked:
        e = first[i]
        if i in chosen:
            e = e.with_score(None)
        elif plan.floor is not None and e.score is not None and e.score < plan.floor:
            dropped[e.key] = f"below_relevance:{format_score(e.score)}"
            continue
        if len(kept) < plan.cap:
            kept.append(e)
        else:
            dropped[e.key] = "plan:cap"
    return kept, dropped
