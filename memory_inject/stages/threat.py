"""The recall-time threat scan: rows that read as instructions to the model are withheld.

zeroclaw wraps every store in ``ScannedMemory`` (``memory.policy.threat_scan_load_time``,
on by default): a recalled row its content scan flags is withheld from the turn, and
the store is asked for more rows to refill the window. Here the scan is this stage,
run by the recall step (``memory_inject.pipeline``), because a refill is a store call
and the stage chain after recall is pure: a withheld row is named on the ``recall``
trace as ``threat:<rule id>``, and the recall step asks each scope again for as many
more rows as it withheld (docs/pipeline.md, "1a. threat_scan").

The rule set is :data:`RULES`, versioned by :data:`RULESET_VERSION`. Each rule is a
phrasing that addresses the model, never a topic: "Ignore all previous instructions"
at the head of a sentence is withheld, "I told my boss to ignore previous
instructions from HR" is a memory about the boss and is kept. False positives on
ordinary memories are the cost of a rule, so every rule names the words it needs,
and ``benchmarks/threat_scan.py`` measures the set on the LoCoMo dev conversations
(false positives), on look-alikes of each rule (ordinary memories that share its
words) and on a hostile set (what it catches).

What a rule reads is a folded view of the text: NFKC (full-width letters are ASCII),
invisible format characters (zero-width, bidi controls, soft hyphen) dropped, Unicode
tag characters read as the ASCII they hide, lower case. Homoglyphs that NFKC keeps
apart (Cyrillic ``о`` for ``o``) are not folded. The key and the content are scanned;
of a content longer than twice :func:`scan_window` only the head and the tail are,
since no renderer of the config can show a character further from both ends.

This module owns the scan (:class:`ThreatScan`, :func:`threat_rule`, the window);
the rule set is ``_threat_rules`` and the folded view ``_threat_view``, both
re-exported here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from attrs import field, frozen

from memory_inject._cache import PerObject
from memory_inject.config import MemoryInjectConfig
from memory_inject.config.schema import THREAT_RULE_IDS
from memory_inject.models import MemoryEntry
from memory_inject.stages._base import StageContext, StageResult
from memory_inject.stages._threat_rules import RULES, RULESET_VERSION, ThreatRule
from memory_inject.stages._threat_view import fold, fold_case_kept

__all__ = [
    "RULES",
    "RULESET_VERSION",
    "ThreatRule",
    "ThreatScan",
    "fold",
    "scan_window",
    "threat_reason",
    "threat_rule",
    "threat_scan_for",
]

#: The prefix of a withheld row's reason on the event: ``threat:<rule id>``.
REASON_PREFIX = "threat:"


def scan_window(config: MemoryInjectConfig) -> int:
    """Characters scanned from each end of a long content under ``config``.

    No renderer shows more of one content than its largest character budget, and
    a renderer cleans at most 8 x (room + 64) raw characters of an entry before it
    stops (docs/reliability.md, 5b), so a character further than this from both
    ends never reaches the block.
    """
    room = max(
        config.budget.entry_max_chars,
        config.budget.max_total_chars,
        config.renderer.max_total_chars,
    )
    return 8 * (room + 64) + 4096


# The words and marks of every rule: a text holding none of them is clean.
_TOKEN = re.compile(r"[a-z0-9_]+")
_ALL_WORDS = frozenset().union(*(r.words for r in RULES))
_ALL_MARKS = tuple(dict.fromkeys(m for r in RULES if not r.raw for m in r.marks))
_RAW_MARKS = tuple(dict.fromkeys(m for r in RULES if r.raw for m in r.marks))
# Every match holds a space, one of these characters, a non-ASCII one or an upper-case
# marker word: a key with none (``user_pref_42``, ``conv-26:D1:3``) is not scanned.
_KEY_WORTH_SCANNING = re.compile("[\\s<\\[{#|!$@\"'=.\x80-\U0010ffff]|" + "|".join(_RAW_MARKS))


# A key of three or more words joined by "_" or "-" (most keys are one or two: "deploy",
# "user_pref", "conv-26:D1:3"), scanned with its joints read as spaces.
# A match starts where a run of letters starts: from inside the run each start read the
# rest of it again (a 30,000-letter key took 4.2 s, round 35); the matches are the same.
_KEY_WORDS = re.compile(r"(?<![A-Za-z])[A-Za-z]+[_-][A-Za-z]+[_-][A-Za-z]")
_KEY_SEPARATORS = re.compile(r"[_-]+")


#: The line breaks other than "\n" (``str.splitlines``' set): a renderer, the block's own
#: included, shows each as a new line, so a rule about "a line that starts with" must see it.
_BREAKS = re.compile("\r\n?|[\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_ASCII_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")


def threat_rule(text: str, rules: Sequence[ThreatRule] = RULES, *, window: int = 0) -> str | None:
    """The id of the first rule that flags ``text``, or None.

    With ``window`` > 0 a text longer than twice the window is scanned at its head
    and tail only (``window`` characters each; see :func:`scan_window`).
    """
    if not text:
        return None
    if window > 0 and len(text) > 2 * window:
        return threat_rule(text[:window], rules) or threat_rule(text[-window:], rules)
    if (not text.isascii() or any(map(text.__contains__, _ASCII_BREAKS))) and (
        _BREAKS.search(text) is not None
    ):  # every line break the block shows starts a line (``render._contain``)
        text = _BREAKS.sub("\n", text)
    original, text = text, fold_case_kept(text)  # what the rules that read case read
    view = text.lower()  # ``fold``: the same fold, lower case (folded once)
    tokens = _TOKEN.findall(view)
    contains, raw_contains = view.__contains__, text.__contains__
    if (
        _ALL_WORDS.isdisjoint(tokens)
        and not any(map(contains, _ALL_MARKS))
        and not any(map(raw_contains, _RAW_MARKS))
    ):
        return None
    words = set(tokens)
    for rule in rules:
        has = raw_contains if rule.raw else contains
        if rule.words.isdisjoint(words) and not any(map(has, rule.marks)):
            continue
        if rule.matches(text, view, original):
            return rule.id
    return None


def threat_reason(
    entry: MemoryEntry, rules: Sequence[ThreatRule] = RULES, window: int = 0
) -> str | None:
    """``threat:<rule id>`` when a rule flags the entry's content or key, else None."""
    return ThreatScan(tuple(rules), window).reason(entry)


#: The fields of a session row the sectioned block shows besides its content (PI's
#: ``- [project] name (tools)`` line and its decisions: ``render._sections.session_parts``).
_SESSION_FIELDS = ("project", "name", "tools", "decisions")


def _session_texts(entry: MemoryEntry) -> list[str]:
    """Every text a session row shows from its ``metadata`` or ``extra``."""
    meta = entry.extra.get("metadata")
    out: list[str] = []
    for source in (meta if isinstance(meta, Mapping) else {}, entry.extra):
        for name in _SESSION_FIELDS:
            value = source.get(name)
            values = value if isinstance(value, list | tuple) else (value,)
            out.extend(v for v in values if isinstance(v, str) and v)
    return out


#: The ``extra`` fields a block shows as labels (``render.sectioned``'s ``[layer]``,
#: ``[rule type]`` and ``? [priority]``).
_LABEL_FIELDS = ("layer", "rule_type", "ruleType", "priority")

_CACHED = 4096
_CACHED_CHARS = 2048
_UNSEEN = object()


@frozen
class ThreatScan:
    """The stage: withhold entries a rule flags, named ``threat:<rule id>``.

    Pure, like every stage; the recall step runs it on what the store returned and
    asks the store again for what it withheld (``memory_inject.pipeline``).
    """

    rules: tuple[ThreatRule, ...] = RULES
    window: int = 0
    #: Verdicts on the short texts scanned so far: the same memories come back turn after
    #: turn. At most ``_CACHED`` texts of at most ``_CACHED_CHARS`` characters each.
    _seen: dict[str, str | None] = field(factory=dict, init=False, eq=False, repr=False)

    def verdict(self, text: str) -> str | None:
        """The id of the first rule that flags ``text``, or None (see :func:`threat_rule`)."""
        if len(text) > _CACHED_CHARS:
            return threat_rule(text, self.rules, window=self.window)
        seen = self._seen
        found = seen.get(text, _UNSEEN)
        if found is not _UNSEEN:
            return found  # type: ignore[return-value]
        found = threat_rule(text, self.rules, window=self.window)
        if len(seen) >= _CACHED:
            seen.clear()
        seen[text] = found
        return found

    def reason(self, entry: MemoryEntry) -> str | None:
        """``threat:<rule id>`` when a rule flags the entry's content, key or a label it
        shows (category, layer, rule type, priority; a session row's fields), else None."""
        content = entry.content if isinstance(entry.content, str) else ""
        found = self.verdict(content)
        if found is None:
            # The key, and the labels a block shows beside the content (a category, a PI
            # layer, rule type or priority: round 36 found them unscanned).
            labels = (entry.key, entry.category, *map(entry.extra.get, _LABEL_FIELDS))
            found = next(filter(None, map(self._label, labels)), None)
        if found is None and entry.category == "session":
            # Today's Sessions shows the project and tools as labels: read as one too.
            texts = _session_texts(entry)
            found = next(filter(None, (self.verdict(t) or self._label(t) for t in texts)), None)
        return None if found is None else REASON_PREFIX + found

    def _label(self, label: object) -> str | None:
        """:meth:`verdict` on a key or label, read also as the words its ``_`` and ``-``
        join ("ignore_all_previous_instructions" reads as words to the model)."""
        if not isinstance(label, str) or not label:
            return None
        found = None
        if _KEY_WORTH_SCANNING.search(label) is not None:
            found = self.verdict(label[: self.window or None])
        if found is None and _KEY_WORDS.search(label) is not None:
            found = self.verdict(_KEY_SEPARATORS.sub(" ", label[: self.window or None]))
        return found

    def withhold(self, entries: Sequence[MemoryEntry]) -> StageResult:
        """The entries no rule flags, in order, and ``{key: threat:<rule id>}`` for the rest."""
        kept: list[MemoryEntry] = []
        dropped: dict[str, str] = {}
        for e in entries:
            reason = self.reason(e)
            if reason is None:
                kept.append(e)
            else:
                dropped[e.key] = reason
        return StageResult(kept, dropped)

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
        return self.withhold(entries)


def _build(config: MemoryInjectConfig) -> ThreatScan | None:
    ts = config.threat_scan
    if not ts.enabled:
        return None
    names = ts.rules if ts.rules is not None else THREAT_RULE_IDS
    wanted = {n.strip().lower() for n in names}
    rules = tuple(r for r in RULES if r.id in wanted)
    return ThreatScan(rules, scan_window(config)) if rules else None


#: The config's scan (None when ``threat_scan.enabled`` is false), built once per config.
threat_scan_for: Callable[[MemoryInjectConfig], ThreatScan | None] = PerObject(_build)
