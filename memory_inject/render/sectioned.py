"""``sectioned``: PI's ``# Persistent Intelligence Context`` block.

Every entry sits on exactly one line that starts with its section's prefix,
its text neutralised by :mod:`memory_inject.render._contain`, so no memory can
forge a header, a section or another entry. ``memory_inject.testing.parse_sectioned``
reads a block back; the tests use it to prove that a block holds exactly the
entries it rendered.

This module owns the writer (:class:`SectionedRenderer`); the format's constants
live in ``_sectioned_format`` and are re-exported here.

The block ends with a blank line, like ``bracket``, so a host may prepend it
to the user's message with plain concatenation (PI ends with one newline
because it sends the block as a separate message).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime

from memory_inject.config import MemoryInjectConfig
from memory_inject.models import MemoryEntry
from memory_inject.render._base import Rendered
from memory_inject.render._budget import CHARS_REASON, TOKENS_REASON, most_that_fit, token_fit
from memory_inject.render._contain import neutralize_content, neutralize_label
from memory_inject.render._fields import (
    conf_suffix,
    confidence,
    lower_field,
    overlap,
    query_tokens,
    stale_marker,
    text_field,
    utc,
)
from memory_inject.render._sectioned_format import (
    CONTESTED_WARNING,
    DEFAULT_SECTION_CAPS,
    RULE_PREFIXES,
    SECTION_TITLES,
    SECTIONED_TITLE,
    TITLE_BLOCK,
)
from memory_inject.render._sections import (
    TRUNCATED,
    Section,
    bounded_items,
    daily_digest,
    fit_lines,
    layer_budgets,
    priority_name,
    priority_rank,
    question_score,
    session_item,
)
from memory_inject.stages import StageContext, StageTrace
from memory_inject.stages.threat import scan_window

__all__ = [
    "CONTESTED_WARNING",
    "DEFAULT_SECTION_CAPS",
    "SECTIONED_TITLE",
    "SECTION_TITLES",
    "TRUNCATED",
    "SectionedRenderer",
]

_CLOSED = frozenset({"done", "closed"})
_ANSWERED = frozenset({"answered", "closed", "resolved", "done", "dismissed"})


# -- the sectioned block -------------------------------------------------------


class SectionedRenderer:
    """PI's ``# Persistent Intelligence Context`` block, sections in a fixed order.

    Hard Rules, Selected Memory, Scratchpad, Contested Memory (from
    ``ctx.routed["contested"]``) and Daily Log. An empty section is omitted and
    a block with no section is ``""``. Each section's text (preamble and entry
    lines, not its title) is capped by ``section_caps``; the whole block,
    title, blank lines and newlines included, never exceeds
    ``max_total_chars``. Sections fill in order, so the later ones are
    truncated first; a section cut by the total budget ends the block. A cut
    section ends with ``[...truncated]``. ``budget.max_total_tokens``, when
    set, then drops whole entries from the end until the block fits.

    ``budget.max_entries``, ``entry_max_chars`` and ``max_total_chars`` of the
    config are *not* applied: this format has its own caps, and ``demand``
    is ``None`` because every section may use every candidate.
    """

    name = "sectioned"

    def __init__(
        self,
        *,
        max_total_chars: int = 14_000,
        section_caps: Mapping[str, int] | None = None,
        max_hard_rules: int = 8,
        hard_rule_min_confidence: float = 0.85,
        max_contested: int = 2,
        contested_min_overlap: float = 0.15,
        max_records: int | None = None,
        max_l1: int | None = None,
        max_l2: int | None = None,
        daily_digest: bool = False,
        daily_today_only: bool = False,
        max_sessions: int = 0,
        max_questions: int = 0,
    ) -> None:
        """``max_hard_rules`` caps Hard Rules, and only active layer ``l2`` rules whose
        confidence is at least ``hard_rule_min_confidence`` qualify (most confident
        first). ``max_contested`` caps Contested Memory, and only routed entries whose
        word overlap with the query exceeds ``contested_min_overlap`` qualify.
        ``max_l1``, ``max_l2`` and ``max_records`` are PI's selection budgets for
        Selected Memory (L1 lines first; ``None``: no cap). ``daily_digest``
        shows PI's digest of each daily entry; ``daily_today_only`` leaves the
        daily entries of past days out (PI reads today's log only) instead of
        listing them under Selected Memory; ``max_sessions`` and
        ``max_questions`` turn on Today's Sessions (``category: session``, in PI's
        ``- [project] name (tools)`` lines with their decisions) and Open
        Questions (inquiries).
        ``ValueError`` for a count or cap that is not an integer >= 0, or an unknown
        ``section_caps`` key.
        """
        for field, value in (
            ("max_total_chars", max_total_chars),
            ("max_hard_rules", max_hard_rules),
            ("max_contested", max_contested),
            ("max_sessions", max_sessions),
            ("max_questions", max_questions),
            *(
                (n, v)
                for n, v in (("max_records", max_records), ("max_l1", max_l1), ("max_l2", max_l2))
                if v is not None
            ),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"'{field}' must be an integer >= 0 (got {value!r})")
        caps = dict(DEFAULT_SECTION_CAPS)
        for slug, cap in (section_caps or {}).items():
            if slug not in caps:
                raise ValueError(f"'section_caps' keys must be in {list(caps)} (got {slug!r})")
            if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
                raise ValueError(f"'{slug}' must be an integer >= 0 (got {cap!r})")
            caps[slug] = cap
        self.max_total_chars = max_total_chars
        self.section_caps: Mapping[str, int] = caps
        self.max_hard_rules = max_hard_rules
        self.hard_rule_min_confidence = hard_rule_min_confidence
        self.max_contested = max_contested
        self.contested_min_overlap = contested_min_overlap
        self.max_records, self.max_l1, self.max_l2 = max_records, max_l1, max_l2
        self.daily_digest = daily_digest
        self.daily_today_only = daily_today_only
        self.max_sessions = max_sessions
        self.max_questions = max_questions

    def demand(self, config: MemoryInjectConfig) -> int | None:
        """``None``: every section may use every candidate."""
        return None

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> Rendered:
        """The block for ``entries`` (best first) and the contested ones in ``ctx.routed``."""
        now = utc(ctx.now)
        sections, classify_dropped, scores, n_in = self._sections(ctx, now, entries)
        n_items = sum(len(s.items) for s in sections)
        text, rendered, dropped = self._layout(sections, None)
        fits = token_fit(ctx.config.budget) if text else None  # "" needs no encoding
        if fits is not None and not fits(text):
            # keep=0 renders "", which always fits
            keep = most_that_fit(len(rendered) - 1, lambda k: fits(self._layout(sections, k)[0]))
            text, rendered, dropped = self._layout(sections, keep)
        traces = (
            StageTrace("sections", n_in, n_items, classify_dropped, scores),
            StageTrace("total_budget", n_items, len(rendered), dropped),
        )
        return Rendered(text, tuple(rendered), traces)

    def _sections(
        self, ctx: StageContext, now: datetime, entries: Sequence[MemoryEntry]
    ) -> tuple[list[Section], dict[str, str], dict[str, float | None], int]:
        today: date = now.date()
        hard: list[tuple[MemoryEntry, float, str]] = []
        scratch: list[MemoryEntry] = []
        daily: list[MemoryEntry] = []
        dropped: dict[str, str] = {}
        closed: set[int] = set()
        sessions: list[MemoryEntry] = []
        questions: list[MemoryEntry] = []
        for e in entries:
            ts = e.timestamp
            today_entry = ts is not None and utc(ts).date() == today
            if e.category == "daily" and today_entry:
                daily.append(e)
            elif self.daily_today_only and e.category == "daily":
                dropped[e.key] = "daily:not_today"
                closed.add(id(e))
            elif self.max_sessions and e.category == "session":
                if today_entry:
                    sessions.append(e)
                else:
                    dropped[e.key] = "sessions:not_today"
                    closed.add(id(e))
            elif self.max_questions and (
                e.category == "inquiry" or lower_field(e, "memory_kind") == "inquiry"
            ):
                questions.append(e)
            elif lower_field(e, "memory_kind") == "task" or e.category == "scratchpad":
                if lower_field(e, "status") in _CLOSED:
                    dropped[e.key] = "scratchpad:closed"
                    closed.add(id(e))
                else:
                    scratch.append(e)
            else:
                prefix = RULE_PREFIXES.get(lower_field(e, "rule_type", "ruleType") or "")
                conf = confidence(e)
                if (
                    prefix is not None
                    and conf is not None
                    and conf >= self.hard_rule_min_confidence
                    and lower_field(e, "status") == "active"
                    and lower_field(e, "layer") == "l2"
                ):
                    hard.append((e, conf, prefix))
        hard.sort(key=lambda h: -h[1])
        hard = hard[: self.max_hard_rules]
        special = closed | {id(x) for x in (*scratch, *daily, *sessions, *questions)}
        special |= {id(h[0]) for h in hard}
        selected, cut = layer_budgets(
            [e for e in entries if id(e) not in special], self.max_l1, self.max_l2, self.max_records
        )
        dropped.update(cut)
        daily.sort(key=lambda e: e.timestamp or now, reverse=True)
        # Newest first, whatever the recall ranked first: an imported scratchpad.md's first
        # item is its newest (memory_inject.storage.pi_import), so this is the file's order.
        scratch.sort(key=lambda e: e.timestamp or now, reverse=True)
        sessions.sort(key=lambda e: e.timestamp or now, reverse=True)
        for e in sessions[self.max_sessions :]:
            dropped[e.key] = "sessions:max_sessions"
        sessions = sessions[: self.max_sessions]

        tokens = query_tokens(ctx.query)
        routed = list(ctx.routed.get("contested", ()))
        scores: dict[str, float | None] = {}
        relevant: list[tuple[float, MemoryEntry]] = []
        for e in routed:
            score = overlap(e, tokens)
            scores[e.key] = score
            if score > self.contested_min_overlap:
                relevant.append((score, e))
            else:
                dropped[e.key] = f"contested:below_overlap:{score:.4g}"
        relevant.sort(key=lambda r: -r[0])
        for _, e in relevant[self.max_contested :]:
            dropped[e.key] = "contested:max_contested"
        contested = [e for _, e in relevant[: self.max_contested]]
        asked = self._questions(questions, tokens, dropped)
        # The raw-tail fallback keeps what fits the section after the line's prefix.
        tail = self.section_caps["daily_log"] - len("- 00:00 ") - 1
        window = scan_window(ctx.config)
        digest = (
            {id(e): daily_digest(e.content, tail, window) for e in daily}
            if self.daily_digest
            else {}
        )
        sessions_today = sum(n for _, n in digest.values())
        if digest:  # a day with only closed sessions shows its header, not an empty line
            for e in [e for e in daily if not digest[id(e)][0]]:
                dropped[e.key] = "daily:no_notable_lines"
            daily = [e for e in daily if digest[id(e)][0]]

        def selected_prefix(e: MemoryEntry) -> str:
            rule = text_field(e, "rule_type", "ruleType")
            tag = neutralize_label(text_field(e, "layer") or str(e.category))
            meta = tag + conf_suffix(confidence(e)) + stale_marker(e, now)
            meta += f" [{neutralize_label(rule)}]" if rule else ""
            return f"- {neutralize_label(e.key)} [{meta}] "

        def contested_prefix(e: MemoryEntry) -> str:
            return f"⚠️ CONTESTED: [{neutralize_label(e.key)}{conf_suffix(confidence(e))}] "

        def daily_prefix(e: MemoryEntry) -> str:
            return f"- {utc(e.timestamp or now):%H:%M} "

        rules = {id(e): f"{p} [conf {c:.2f}] " for e, c, p in hard}

        def daily_text(e: MemoryEntry) -> str:
            return digest[id(e)][0] if digest else e.content

        def question_prefix(e: MemoryEntry) -> str:
            return f"? [{neutralize_label(priority_name(e))}] "

        sessions_line = f"Sessions today: {sessions_today}\n" if sessions_today else ""
        recent = f"Recent sessions ({today.isoformat()}):\n"  # PI's Today's Sessions header
        built: list[tuple[str, str, list[MemoryEntry], Callable[[MemoryEntry], str]]] = [
            ("hard_rules", "", [e for e, _, _ in hard], lambda e: rules[id(e)]),
            ("selected_memory", "", selected, selected_prefix),
            ("scratchpad", "", scratch, lambda _e: "- [ ] "),
            ("contested_memory", CONTESTED_WARNING + "\n", contested, contested_prefix),
            ("daily_log", sessions_line, daily, daily_prefix),
            ("todays_sessions", recent, sessions, lambda _e: "- "),
            ("open_questions", "", asked, question_prefix),
        ]
        sections = []
        for slug, preamble, members, line_prefix in built:
            # A day of closed sessions only shows its "Sessions today: N" header, as in PI.
            if not members and not (slug == "daily_log" and sessions_line):
                continue
            room = max(0, min(self.section_caps[slug] - len(preamble), self.max_total_chars))
            text = daily_text if slug == "daily_log" else None
            if slug == "todays_sessions":  # max_sessions entries at most
                items = [session_item(e, room) for e in members]
            else:
                items = bounded_items(members, line_prefix, neutralize_content, room, text)
            title = SECTION_TITLES[slug]
            if slug == "daily_log":
                title += f" ({today.isoformat()})"
            sections.append(
                Section(
                    slug, f"## {title}\n{preamble}", items, self.section_caps[slug] - len(preamble)
                )
            )
        return sections, dropped, scores, len(entries) + len(routed)

    def _questions(
        self, questions: Sequence[MemoryEntry], tokens: set[str], dropped: dict[str, str]
    ) -> list[MemoryEntry]:
        """PI's Open Questions: open, priority >= medium, sharing words with the prompt."""
        scored: list[tuple[int, int, int, MemoryEntry]] = []
        for n, e in enumerate(questions):
            rank = priority_rank(e)
            if lower_field(e, "status") in _ANSWERED:
                dropped[e.key] = "questions:closed"
            elif rank is None or rank < 1:
                dropped[e.key] = "questions:below_medium"
            elif (score := question_score(e, tokens, query_tokens)) <= 0:
                dropped[e.key] = "questions:no_overlap"
            else:
                scored.append((-rank, -score, n, e))
        scored.sort(key=lambda s: s[:3])
        for *_, e in scored[self.max_questions :]:
            dropped[e.key] = "questions:max_questions"
        return [e for *_, e in scored[: self.max_questions]]

    def _layout(
        self, sections: Sequence[Section], keep: int | None
    ) -> tuple[str, list[MemoryEntry], dict[str, str]]:
        """Assemble the block with at most ``keep`` entries; count every emitted character."""
        parts: list[str] = []
        rendered: list[MemoryEntry] = []
        dropped: dict[str, str] = {}
        used = len(TITLE_BLOCK)
        left = sum(len(s.items) for s in sections) if keep is None else keep
        stopped: str | None = None
        for section in sections:
            if stopped is not None:
                dropped.update((e.key, stopped) for e, _, _ in section.items)
                continue
            global_room = self.max_total_chars - used - len(section.header) - 1
            by_cap = section.cap < global_room
            room = section.cap if by_cap else global_room
            lines, n, stop = fit_lines(section.items, room, left)
            reason = (
                TOKENS_REASON
                if stop == "keep"
                else f"budget:section_chars:{section.slug}"
                if by_cap
                else CHARS_REASON
            )
            if lines or (not section.items and 0 <= global_room):  # a header alone: a
                text = section.header + "".join(lines)  # day of closed sessions (PI)
                parts.append(text)
                used += len(text) + 1
                rendered.extend(e for e, _, _ in section.items[:n])
                left -= n
            dropped.update((e.key, reason) for e, _, _ in section.items[n:])
            if stop == "keep" or (stop == "room" and not by_cap):
                stopped = reason
        if not rendered:  # headers alone are no block
            return "", [], dropped
        return TITLE_BLOCK + "".join(p + "\n" for p in parts), rendered, dropped
