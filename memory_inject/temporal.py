"""Temporal grounding: the past time window a prompt names, resolved against the turn's clock.

"What did we talk about yesterday?" shares no word with yesterday's memories, and its one
content word, "yesterday", matches every memory that *says* yesterday, whenever it was
written. :func:`time_window` finds such a phrase and turns it into the window of time it
means for a turn at ``now``; a recall plan's ``time`` source (``memory_inject.plan``) then
asks the store for the memories written inside it (the seam's ``since`` / ``until``).

English phrases, day boundaries in ``now``'s time zone (UTC when ``now`` is naive):

* ``today``, ``tonight``, ``this morning`` / ``afternoon`` / ``evening``, ``earlier today``:
  from midnight to now; ``yesterday``; ``last night`` (yesterday noon to 6 am today);
  ``the day before yesterday``; ``N days ago`` (``a``, ``one`` ... ``ten``, digits);
* ``this week`` (Monday to now), ``last week`` / ``this past week`` (the calendar week
  before), ``N weeks ago`` (that calendar week);
* ``over the weekend`` / ``last weekend`` / ``this past weekend``: the weekend going on,
  on a Saturday or Sunday (``last`` and ``this past``: the one before), else the last one;
  ``this weekend`` on a weekday means the coming one and is not grounded;
* ``last monday`` ... ``last sunday`` (``this past``, ``past``): the latest such day before
  today; ``on Monday`` in a prompt in the past tense ("what did we decide on Monday?"): the
  latest Monday not after today;
* ``this month`` (the first to now), ``last month``, ``N months ago`` (calendar months);
* ``this year`` (1 January to now), ``last year`` / ``this past year``, ``N years ago``
  (calendar years), and a year named after ``in``, ``during`` or ``throughout``
  (``in 2023``: from 1970 to this year, this one up to now);
* dates: ``8 May 2023``, ``May 8th, 2023``, ``2023-05-08``, and without a year the latest
  such day not after today; months: ``May 2023``, ``in May`` (the latest May not after this
  month);
* ``since`` before any of these runs the window on to now ("since last week": from last
  week's Monday); ``since Monday`` / ``since May`` start at the latest such day or month not
  after today.

The future ("tomorrow", "next week", a date after today), a year with no ``in`` before it
("the 2023 model") and ``on Monday`` in a prompt not in the past tense (the next one) are
not grounded: the answer is None and the turn recalls as before. A date, month or year
named outright wins over a relative phrase ("last Friday, on 23 January 2022" is about
January); otherwise the first phrase in the text.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from attrs import frozen

__all__ = ["TimeWindow", "time_window", "without_phrase"]


@frozen
class TimeWindow:
    """``since`` <= a memory's time <= ``until`` (inclusive, aware datetimes), and where in the
    text the phrase that named it was (``start``, ``end``; ``phrase`` as written; ``kind``
    the pattern's name: ``yesterday``, ``last_week``, ``day_month``, ...; ``since_`` before
    it when the window runs on to now: ``since_last_week``, ``since_weekday``)."""

    since: datetime
    until: datetime
    phrase: str
    start: int
    end: int
    kind: str = ""


_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH_RE = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "a couple of": 2,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_COUNT = r"(\d{1,2}|a couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(\d{4})"

#: ``(name, pattern)``; each name has a resolver in ``_resolve``.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("day_before_yesterday", r"\bthe day before yesterday\b"),
        ("yesterday", r"\byesterday\b"),
        ("last_night", r"\blast night\b"),
        ("today", r"\b(?:earlier )?today\b|\btonight\b|\bthis (?:morning|afternoon|evening)\b"),
        ("days_ago", rf"\b{_COUNT} days? ago\b"),
        ("weeks_ago", rf"\b{_COUNT} weeks? ago\b"),
        ("months_ago", rf"\b{_COUNT} months? ago\b"),
        ("years_ago", rf"\b{_COUNT} years? ago\b"),
        ("this_week", r"\b(?:earlier )?this week\b"),
        ("last_week", r"\b(?:last|this past|the past) week\b"),
        ("this_month", r"\b(?:earlier )?this month\b"),
        ("last_month", r"\b(?:last|this past|the past) month\b"),
        ("this_year", r"\b(?:earlier )?this year\b"),
        ("last_year", r"\b(?:last|this past|the past) year\b"),
        ("this_weekend", r"\bthis weekend\b"),
        ("last_weekend", r"\b(?:over the|last|this past|the past) weekend\b"),
        ("last_weekday", rf"\b(?:last|this past|past) ({'|'.join(_WEEKDAYS)})\b"),
        ("on_weekday", rf"\bon ({'|'.join(_WEEKDAYS)})\b"),
        ("iso_date", r"\b(\d{4})-(\d{2})-(\d{2})\b"),
        ("day_month", rf"\b{_DAY}(?: of)? {_MONTH_RE}\b(?:,? {_YEAR}\b)?"),
        ("month_day", rf"\b{_MONTH_RE} {_DAY}\b(?!:)(?:,? {_YEAR}\b)?"),
        ("month_year", rf"\b{_MONTH_RE},? {_YEAR}\b"),
        ("in_month", rf"\bin {_MONTH_RE}(?=\s*(?:[?.!,;]|$))"),
        ("in_year", rf"\b(?:in|during|throughout) {_YEAR}\b(?![-:/.]\d)"),
        ("since_weekday", rf"\bsince ({'|'.join(_WEEKDAYS)})\b"),
        ("since_month", rf"\bsince {_MONTH_RE}\b(?!,? \d)"),
    )
)


#: A prompt in the past tense: "on Monday" in it is the last Monday.
_PAST = re.compile(
    r"\b(?:did|was|were|had|went|said|told|talked|discussed|decided|happened|met|saw|ate|"
    r"made|agreed|mentioned|wrote|sent|got|asked|bought|paid|called)\b",
    re.IGNORECASE,
)
_MONTH_STEMS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
#: What each pattern's match must contain (lowercased): the pattern runs only if one is there.
_NEEDS: dict[str, tuple[str, ...]] = {
    "day_before_yesterday": ("yesterday",),
    "yesterday": ("yesterday",),
    "last_night": ("night",),
    "today": ("today", "tonight", "this "),
    "days_ago": ("ago",),
    "weeks_ago": ("ago",),
    "months_ago": ("ago",),
    "years_ago": ("ago",),
    "this_week": ("week",),
    "last_week": ("week",),
    "this_month": ("month",),
    "last_month": ("month",),
    "this_year": ("year",),
    "last_year": ("year",),
    "this_weekend": ("weekend",),
    "last_weekend": ("weekend",),
    "last_weekday": _WEEKDAYS,
    "on_weekday": _WEEKDAYS,
    "iso_date": ("-",),
    "day_month": _MONTH_STEMS,
    "month_day": _MONTH_STEMS,
    "month_year": _MONTH_STEMS,
    "in_month": _MONTH_STEMS,
    "in_year": ("19", "20"),
    "since_weekday": ("since",),
    "since_month": ("since",),
}
_NEEDS_ANY = frozenset(need for needs in _NEEDS.values() for need in needs)
#: At most this many phrases are tried (a pasted log of dates stays cheap).
_MAX_TRIED = 64
_ABSOLUTE = frozenset(
    {"iso_date", "day_month", "month_day", "month_year", "in_month", "in_year", "since_month"}
)
#: The first year ``in_year`` grounds: no memory was written before the Unix epoch.
_FIRST_YEAR = 1970
#: "since" right before a phrase: the window runs on to now.
_SINCE = re.compile(r"\bsince\s+$", re.IGNORECASE)


def _start_of(day: date, tz: object) -> datetime:
    return datetime.combine(day, time(0), tzinfo=tz)  # type: ignore[arg-type]


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _month_of(name: str) -> int:
    return next(i for i, m in enumerate(_MONTHS, start=1) if m.startswith(name.lower()[:3]))


def _count(text: str) -> int | None:
    value = _NUMBERS.get(text.lower())
    if value is None and text.isdigit():
        value = int(text)
    return value if value is not None and 0 < value <= 99 else None


def _latest_date(month: int, day: int, year: int | None, today: date) -> date | None:
    """The date, or without a year the latest one not after ``today``; None if invalid."""
    if year is not None:
        try:
            return date(year, month, day)
        except ValueError:
            return None
    # Back from this year: "Feb 29" is the last leap day (up to 8 years back: 2100 is none).
    for back in range(9):
        try:
            found = date(today.year - back, month, day)
        except ValueError:
            continue
        if found <= today:
            return found
    return None


#: A window that runs up to the turn ends just after it: ``until`` (one tick before the end)
#: is then ``now`` itself, at midnight too ("today" was an empty window at 00:00:00).
_TICK = timedelta(microseconds=1)


def _just_after(now: datetime, ticks: int = 1) -> datetime:
    """``now`` and a tick (``ticks`` of them), counted in UTC: ``now + _TICK`` drops
    ``fold``, so in the hour a clock repeats (01:10 the second time) it was an hour off."""
    return (now.astimezone(UTC) + ticks * _TICK).astimezone(now.tzinfo)


def _from_year_one(since: datetime) -> datetime:
    """``since``, or the first UTC instant when it falls before it (midnight of 1 January
    of year 1 east of UTC is a time of its zone, and of no UTC day)."""
    try:
        since.astimezone(UTC)
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC)
    return since


def _before(a: datetime, b: datetime) -> bool:
    """``a < b`` as instants (two times of one zone compare by their clocks, fold unseen)."""
    return a.astimezone(UTC) < b.astimezone(UTC)


#: A clock in these years grounds time phrases; at the ends of ``datetime``'s calendar
#: (years 1 and 9999) a window and the days read around it overflow it.
_GROUNDED_YEARS = (2, 9998)


def _resolve(name: str, m: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    tz = now.tzinfo
    today = now.date()
    day = timedelta(days=1)
    if name == "today":
        return _start_of(today, tz), _just_after(now)
    if name in ("yesterday", "day_before_yesterday", "days_ago"):
        back = {"yesterday": 1, "day_before_yesterday": 2}.get(name) or _count(m.group(1))
        if back is None:
            return None
        first = today - back * day
        return _start_of(first, tz), _start_of(first + day, tz)
    if name == "last_night":
        noon = _start_of(today - day, tz) + timedelta(hours=12)
        return noon, _start_of(today, tz) + timedelta(hours=6)
    monday = today - timedelta(days=today.weekday())
    if name == "this_week":
        return _start_of(monday, tz), _just_after(now)
    back = 1 if name.startswith("last_") else _count(m.group(1)) if name.endswith("_ago") else 0
    if back is None:
        return None
    if name in ("last_week", "weeks_ago"):
        first = monday - timedelta(weeks=back)
        return _start_of(first, tz), _start_of(first + timedelta(weeks=1), tz)
    month_start = date(today.year, today.month, 1)
    if name == "this_month":
        return _start_of(month_start, tz), _just_after(now)
    if name in ("last_month", "months_ago"):
        first = _add_months(month_start, -back)
        return _start_of(first, tz), _start_of(_add_months(first, 1), tz)
    if name in ("this_year", "last_year", "years_ago", "in_year"):
        year = int(m.group(1)) if name == "in_year" else today.year - back
        if not _FIRST_YEAR <= year <= today.year:
            return None
        return _start_of(date(year, 1, 1), tz), _start_of(date(year + 1, 1, 1), tz)
    saturday = monday + timedelta(days=5)
    if name == "this_weekend":
        return (_start_of(saturday, tz), _just_after(now)) if today >= saturday else None
    if name == "last_weekend":
        if today >= saturday and not m.group(0).lower().startswith(("last", "this past")):
            return _start_of(saturday, tz), _just_after(now)
        first = saturday - timedelta(weeks=1)
        return _start_of(first, tz), _start_of(first + 2 * day, tz)
    if name == "on_weekday" and not _PAST.search(m.string):
        return None  # "what do I have on Monday?" is the next one
    if name in ("last_weekday", "on_weekday", "since_weekday"):
        wanted = _WEEKDAYS.index(m.group(1).lower())
        back = (today.weekday() - wanted) % 7 or (7 if name == "last_weekday" else 0)
        if back == 0:  # "what did we decide on Friday?", asked on a Friday
            return _start_of(today, tz), _just_after(now)
        first = today - back * day
        return _start_of(first, tz), _start_of(first + day, tz)
    if name in ("iso_date", "day_month", "month_day"):
        if name == "iso_date":
            year, month, dd = int(m.group(1)), int(m.group(2)), int(m.group(3))
            found = _latest_date(month, dd, year, today) if 1 <= month <= 12 else None
        else:
            dd_text, month_text = (
                (m.group(1), m.group(2)) if name == "day_month" else (m.group(2), m.group(1))
            )
            year_text = m.group(3)
            found = _latest_date(
                _month_of(month_text), int(dd_text), int(year_text) if year_text else None, today
            )
        if found is None or found > today:
            return None
        return _start_of(found, tz), _start_of(found + day, tz)
    # month_year, in_month, since_month
    month = _month_of(m.group(1))
    year = int(m.group(2)) if name == "month_year" else today.year
    if name != "month_year" and (year, month) > (today.year, today.month):
        year -= 1
    first = date(year, month, 1)
    if first > today:
        return None
    return _start_of(first, tz), _start_of(_add_months(first, 1), tz)


def time_window(text: str, now: datetime) -> TimeWindow | None:
    """The past window the first time phrase of ``text`` names at ``now``, or None.

    None when the text names no time, only a future one, or one this module does
    not ground (see the module docstring). ``until`` is inclusive (one microsecond
    before the next period starts, or ``now``).
    """
    if not isinstance(text, str) or not text:
        return None
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    if not _GROUNDED_YEARS[0] <= now.year <= _GROUNDED_YEARS[1]:
        return None  # the window, and the days read around it, would leave the calendar
    found: list[tuple[int, int, str, re.Match[str]]] = []
    lowered = text.lower()
    # Each pattern runs only where a word it needs is in the text: a long prompt with no
    # time in it costs a few substring tests, not nineteen scans.
    held = {need for need in _NEEDS_ANY if need in lowered}
    for name, pattern in _PATTERNS:
        if held.isdisjoint(_NEEDS[name]):
            continue
        for m in pattern.finditer(text):
            found.append((m.start(), -(m.end() - m.start()), name, m))
    # A date named outright wins over a relative phrase: in "last Friday, on 23 January
    # 2022" the date is what "last Friday" counts from, not the turn's clock.
    found.sort(key=lambda f: (f[2] not in _ABSOLUTE, f[0], f[1]))
    refused: list[tuple[int, int]] = []  # a phrase not grounded hides the phrases inside it
    for start, _, name, m in found[:_MAX_TRIED]:
        if any(a <= start < b for a, b in refused):
            continue
        try:
            window = _resolve(name, m, now)
            if window is not None:
                since, until = _from_year_one(window[0]), _just_after(window[1], -1)
                until = now if _before(now, until) else until
        except (OverflowError, ValueError):  # a clock at the ends of the calendar
            window = None
        if window is None or _before(now, since):
            refused.append((start, m.end()))
            continue
        begin, kind = m.start(), name
        before = _SINCE.search(text, max(0, begin - 16), begin)
        if before is not None:  # "since last week": on to now
            until, begin, kind = now, before.start(), "since_" + name
        elif name.startswith("since_"):
            until = now
        return TimeWindow(since, until, text[begin : m.end()], begin, m.end(), kind)
    return None


def without_phrase(text: str, window: TimeWindow) -> str:
    """``text`` with the window's phrase cut out (what the prompt asks about, apart from when)."""
    return (text[: window.start] + " " + text[window.end :]).strip()
