"""Issue 13, class 4: a prompt alone must not stall the turn in the credential scrubber.

The generators build the shapes that made the old patterns backtrack (dotted
words for the URL-password pattern, ``eyJ-eyJ-...`` for the JWT pattern) and
others of the same family (runs that almost form a URL, a JWT or a quoted
value), repeat them into prompts of 128 kB to 1 MB with a real secret in
front, and check that scrubbing and the event's summary finish and hide the
secret. A short copy of each shape is compared with the spec's one-pattern
scrubber (kept below as the reference), so the rewrite changes no output.
Every call runs under an alarm: a quadratic scrubber fails the test instead of
blocking CI (the regex engine checks for signals while it backtracks).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_inject import InMemoryStore, render_memory_context
from memory_inject._text import (
    SUMMARY_WINDOW,
    _bare_sub,
    _kv_sub,
    scrub_credentials,
    scrubbed_summary,
)
from memory_inject.signals import MemoryRecall, memory_recall

#: A hang guard, not a timing: the linear scrubber needs well under a second
#: for a megabyte; the old one did not finish 1 MB in 90 s.
GUARD_S = 30.0
T = TypeVar("T")


class Hang(Exception):
    """The scrubber outlived GUARD_S."""


@contextmanager
def guard() -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"took more than {GUARD_S} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, GUARD_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def bounded(fn: Callable[[str], T], text: str) -> T:
    with guard():
        return fn(text)


# -- the reference: the spec's patterns as one regex each (quadratic on the shapes);
# the replacements are the scrubber's own, unchanged.

_REF_KV = re.compile(
    r"""(?i)(authorization|token|api[_-]?key|password|secret|user[_-]?key|bearer|credential"""
    r"""|set[_-]?cookie|cookie)(["']?)\s*([:=])\s*"""
    r"""(?:"([^"]{8,})"|'([^']{8,})'|([A-Za-z0-9_\-./+=]{8,}))"""
)
_REF_BARE = re.compile(
    r"(?i)\b(bearer|basic|token)\s+([A-Za-z0-9_\-./+=]{12,})"
    r"|\b(sk-(?:proj-|ant-)?|sk_live_|sk_test_|rk_live_|pk_live_|ghp_|gho_|ghs_|ghu_|github_pat_"
    r"|xox[abpors]-|AKIA|ASIA|glpat-|hf_|npm_|AIza)([A-Za-z0-9_\-]{12,})"
)
_REF_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}")
_REF_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+):([^\s@/]+)@")


def reference_scrub(text: str) -> str:
    text = _REF_BARE.sub(_bare_sub, _REF_KV.sub(_kv_sub, text))
    text = _REF_JWT.sub(lambda m: m.group(0)[:4] + "*[REDACTED]", text)
    return _REF_URL.sub(lambda m: f"{m.group(1)}:*[REDACTED]@", text)


# -- generators --------------------------------------------------------------------

#: Pieces that almost make a URL with a password, a JWT, a token or a quoted value.
PIECES = [
    "a", "Z", "9", ".", "-", "_", "+", "eyJ", "eyJ-", "eyJ.", "://", "a://", "http", ":",
    "@", "/", "é", "token", "=", '"', "'", "sk-", "ghp_", "bearer ", "abcdefgh", "\u2028",
]  # fmt: skip
SECRETS = [
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXBhcnQ",
    "postgres://app:Sup3rS3cretPw@db.internal",
    "sk-proj-Xq7bT2mN9vK4sR8wL1yZ3cF6hJ0pA5dE",
]
SECRET_BODIES = ["16C7e42F292c6912E7710c838347Ae178B4a", "c2lnbmF0dXJlLXBhcnQ", "Sup3rS3cretPw"]

units = st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map("".join)
#: The families the issue names, and their neighbours.
FAMILIES = ["a.", "eyJ-", "eyJ.", "a.b-", "x://", "eyJaaaaaaaa.", "a:", 'token="', "-eyJ"]


def megaprompt(secret: str, unit: str, size: int) -> str:
    return f"my key is {secret} ok " + unit * (size // max(1, len(unit)))


def hides(secret: str, text: str) -> bool:
    return secret not in text and not any(b in text for b in SECRET_BODIES if b in secret)


class TestLinearScrub:
    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        unit=st.one_of(st.sampled_from(FAMILIES), units),
        secret=st.sampled_from(SECRETS),
        size=st.sampled_from([128_000, 256_000]),
    )
    def test_adversarial_prompts_finish_and_hide_the_secret(
        self, unit: str, secret: str, size: int
    ) -> None:
        """A repeated near-match finishes, hides the secret in front and matches the spec."""
        assert reference_scrub(unit * 3) == scrub_credentials(unit * 3)
        prompt = megaprompt(secret, unit, size)
        out = bounded(scrub_credentials, prompt)
        assert hides(secret, out)
        summary = bounded(lambda t: scrubbed_summary(t, 200), prompt)
        assert hides(secret, summary)
        assert len(summary) <= 203

    @pytest.mark.parametrize("unit", FAMILIES)
    def test_a_megabyte_prompt_renders_with_a_scrubbed_summary(self, unit: str) -> None:
        """A 1 MB prompt of each family gets one event whose summary hides the secret."""
        store = InMemoryStore()
        store.store("fact", "the deploy runs on fridays", "core")
        prompt = megaprompt(SECRETS[0], unit, 1_000_000)
        events: list[MemoryRecall] = []

        def on_recall(sender: object, event: MemoryRecall) -> None:
            events.append(event)

        with memory_recall.connected_to(on_recall), guard():
            render_memory_context(store, prompt)
        [event] = events
        assert event.query_summary is not None
        assert len(event.query_summary) <= 203
        assert hides(SECRETS[0], event.query_summary)


class TestSummaryWindow:
    @settings(max_examples=200, deadline=None)
    @given(
        head=st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
        secret=st.sampled_from(SECRETS),
        filler=st.sampled_from(["x ", "ab.cd ", "word ", "a b c "]),
        quoted=st.booleans(),
        offset=st.integers(min_value=-600, max_value=600),
    )
    def test_a_cut_never_shows_what_the_whole_scrub_hides(
        self, head: str, secret: str, filler: str, quoted: bool, offset: int
    ) -> None:
        """Whatever the window cuts, the summary never shows a secret the full scrub hides."""
        value = f'password="{secret} and more words"' if quoted else secret
        body = filler * ((SUMMARY_WINDOW + offset) // len(filler))
        prompt = head + body + value + " tail " * 50
        summary = scrubbed_summary(prompt, 200)
        full = scrub_credentials(prompt)
        assert hides(secret, full)
        assert hides(secret, summary)
        assert len(summary) <= 203

    def test_a_short_prompt_is_the_spec_summary(self) -> None:
        """Up to the window, the summary is exactly truncate(scrub(prompt), 200)."""
        prompt = "deploy with token=abcdefghijkl " + "and then some words " * 150
        assert len(prompt) <= SUMMARY_WINDOW
        expected = scrub_credentials(prompt)[:200].rstrip() + "..."
        assert expected == scrubbed_summary(prompt, 200)

    def test_a_quoted_value_cut_by_the_window_is_redacted(self) -> None:
        """A quoted password that runs past the cut is still a value, not visible text."""
        prompt = 'password="' + "correct horse battery staple " * 400 + '"'
        summary = scrubbed_summary(prompt, 200)
        assert "horse" not in summary
        assert summary.startswith('password="corr*[REDACTED]"')
