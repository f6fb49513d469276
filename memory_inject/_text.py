"""Small text helpers with exact, spec-pinned semantics."""

from __future__ import annotations

import re

__all__ = [
    "SUMMARY_WINDOW",
    "sanitize_session_key",
    "scrub_credentials",
    "scrubbed_summary",
    "truncate_with_ellipsis",
]


def truncate_with_ellipsis(text: str, max_chars: int) -> str:
    """Keep the first ``max_chars`` characters, strip trailing whitespace, append ``...``.

    Applied only when the text is longer than ``max_chars`` (so a truncated text
    has at most ``max_chars + 3`` characters).
    """
    if len(text) <= max_chars:
        return text
    return text[:max_chars].rstrip() + "..."


def sanitize_session_key(raw: str) -> str:
    """Every character that is not a Unicode letter/digit, ``_`` or ``-`` becomes ``_``."""
    return "".join(ch if (ch.isalnum() or ch in "_-") else "_" for ch in raw)


_KV_KEYS = (
    r"""(?i)(authorization|token|api[_-]?key|password|secret|user[_-]?key|bearer|credential"""
    r"""|set[_-]?cookie|cookie)(["']?)\s*([:=])\s*"""
)
_KV = re.compile(_KV_KEYS + r"""(?:"([^"]{8,})"|'([^']{8,})'|([A-Za-z0-9_\-./+=]{8,}))""")
# The same rule for a text cut short (a summary's window): a quoted value that
# runs to the cut is a value too, so a cut never uncovers what the whole text hides.
_KV_CUT = re.compile(
    _KV_KEYS + r"""(?:"([^"]{8,})(?:"|\Z)|'([^']{8,})(?:'|\Z)|([A-Za-z0-9_\-./+=]{8,}))"""
)
# Shapes that are secrets wherever they appear, with or without a key in front.
_BARE = re.compile(
    r"(?i)\b(bearer|basic|token)\s+([A-Za-z0-9_\-./+=]{12,})"
    r"|\b(sk-(?:proj-|ant-)?|sk_live_|sk_test_|rk_live_|pk_live_|ghp_|gho_|ghs_|ghu_|github_pat_"
    r"|xox[abpors]-|AKIA|ASIA|glpat-|hf_|npm_|AIza)([A-Za-z0-9_\-]{12,})"
)
# Secrets as people say them to a chat, with no "key: value" in sight: "my wifi password
# is hunter2-Rivoli", "the door code is 4711", "mein Passwort ist ...", and IBANs.
_SAID = re.compile(
    r"(?i)\b(password|passwort|pwd?|passcode|passphrase|pin(?:\s+(?:code|number))?"
    r"|(?:door|alarm|gate|safe)\s+code|wi-?fi\s+key|mot\s+de\s+passe|contrase[ñn]a|senha)"
    # "the password for my bank is ...", "is: ...", "code: ...", "Passwort lautet ..."
    r"((?:\s+(?:for|of|to|für|de|del|do|da)(?:\s+[\w'-]+){1,3})?"
    r"(?:\s*:|(?:\s+(?:is|was|ist|war|est|es|é|era|lautet|heißt|heisst|will\s+be|now|still"
    r"|also))+\s*:?)\s*[\"'“”‘’]?)"
    r"(?!(?:changed|reset|wrong|expired|incorrect|updated|stolen|leaked|compromised|weak"
    r"|strong|correct|right|very|really|case|same|different|missing|lost|saved|stored"
    r"|written|broken|locked|required|needed|somewhere|there|here)(?![\w-]))"
    r"((?:(?:zero|oh|one|two|three|four|five|six|seven|eight|nine)(?:[\s-]+|$)){2,}"
    r"|[^\s\"'`,;“”‘’]{4,})"
)
_IBAN = re.compile(r"(?i)\b([a-z]{2}\d{2})((?:[ -]?[a-z0-9]){11,30})\b")


def _said_sub(m: re.Match[str]) -> str:
    # The spec's first 4 characters of a long value; none of a short one or of digits said
    # as words ("four seven one one"), where they would be a digit of the code.
    value = m.group(3)
    shown = value[:4] if len(value) > 8 and not value[4:5].isspace() else ""
    return f"{m.group(1)}{m.group(2)}{shown}*[REDACTED]"


# JWTs and URL passwords are found in two steps so that each run of characters is
# read a bounded number of times. A one-pattern search (``\beyJ[...]{8,}\.``) starts
# again at every ``eyJ`` or dot inside one long run and reads the rest of the run
# each time: quadratic on ``eyJ-eyJ-...`` or ``a.a.a...``. Here the candidate
# pattern only starts where a run starts (a lookbehind), its quantifiers are
# possessive (each class excludes the character that must follow, so nothing is
# lost), and the leftmost place the spec's pattern could start inside the run is
# then searched once.
_JWT_RUNS = re.compile(
    r"(?<![A-Za-z0-9_-])([A-Za-z0-9_-]++)\.[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{4,}+"
)
_JWT_START = re.compile(r"\beyJ")
_URL_RUNS = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z0-9+.-]++)(://[^\s:/@]++):[^\s@/]++@")
_URL_START = re.compile(r"(?i)\b[a-z]")
_WS = re.compile(r"\s")


def _kv_sub(m: re.Match[str]) -> str:
    key, quote, sep = m.group(1), m.group(2), m.group(3)
    value = m.group(4) or m.group(5) or m.group(6) or ""
    prefix = value[:4] if len(value) > 4 else ""
    quoted = bool(quote) or m.group(4) is not None or m.group(5) is not None
    if sep == ":":
        return f'"{key}": "{prefix}*[REDACTED]"' if quoted else f"{key}: {prefix}*[REDACTED]"
    return f'{key}="{prefix}*[REDACTED]"' if quoted else f"{key}={prefix}*[REDACTED]"


def _bare_sub(m: re.Match[str]) -> str:
    if m.group(1) is not None:
        return f"{m.group(1)} {m.group(2)[:4]}*[REDACTED]"
    return f"{m.group(3)}*[REDACTED]"


def _redact_jwts(text: str) -> str:
    """``\\beyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{4,}`` -> first 4 + mark."""
    if "eyJ" not in text:
        return text
    out: list[str] = []
    last = pos = 0
    while (m := _JWT_RUNS.search(text, pos)) is not None:
        # The spec's pattern needs 8 characters of the first run after ``eyJ``.
        start = _JWT_START.search(text, m.start(), m.end(1) - 8)
        if start is None:
            pos = m.end(1) + 1  # the next run (after the dot) may start a token
            continue
        s = start.start()
        out.append(text[last:s])
        out.append(text[s : s + 4] + "*[REDACTED]")
        last = pos = m.end()
    out.append(text[last:])
    return "".join(out)


def _url_sub(m: re.Match[str]) -> str:
    # Every place a scheme could start inside the run needs the same "://" after
    # the run and keeps the text before it, so the output only depends on whether
    # one exists.
    if _URL_START.search(m.string, m.start(), m.end(1)) is None:
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}:*[REDACTED]@"


def _scrub(text: str, kv: re.Pattern[str]) -> str:
    text = _BARE.sub(_bare_sub, kv.sub(_kv_sub, text))
    text = _IBAN.sub(r"\1*[REDACTED]", _SAID.sub(_said_sub, text))
    text = _redact_jwts(text)
    return _URL_RUNS.sub(_url_sub, text) if "://" in text else text


def scrub_credentials(text: str) -> str:
    """Redact credential values: ``key: value`` pairs as the spec says, then bare tokens.

    The spec's rule (key, optional quote, ``:`` or ``=``, a value of 8+ chars,
    replaced by its first 4 chars + ``*[REDACTED]``) runs first; later passes
    catch ``Bearer <token>``, well-known token shapes (``sk-``, ``sk_live_``,
    ``ghp_``, ``xoxb-``, ``AKIA``, ``hf_``, ``npm_``, ``AIza``...), JWTs and
    passwords in URLs, which carry no key in front of them, and secrets said in
    words ("my wifi password is hunter2-Rivoli": its first 4 characters when it
    has more than 8, else nothing; "the door code is 4711") and IBANs. Linear in the
    length of ``text``: no pattern reads a run of characters again for every
    place a match could start in it.
    """
    return _scrub(text, _KV)


#: How much of a long text :func:`scrubbed_summary` reads at first.
SUMMARY_WINDOW = 4096


def scrubbed_summary(text: str, max_chars: int) -> str:
    """``truncate_with_ellipsis(scrub_credentials(text), max_chars)``, reading a bounded prefix.

    A text of at most :data:`SUMMARY_WINDOW` characters gives exactly the spec's
    summary. A longer one is cut before scrubbing, at the last whitespace in the
    second half of the window (doubling the window until there is one), so no
    token, JWT or URL is cut in half; a quoted value that runs to the cut is
    redacted as a value. The cut never shows what scrubbing the whole text hides;
    it may show less (a summary of a text cut short always ends with ``...``).
    """
    window = SUMMARY_WINDOW
    while len(text) > window:
        ws = _WS.search(text, window // 2, window)
        if ws is not None:
            # The last whitespace before the window's end.
            cut = ws.start()
            while (nxt := _WS.search(text, cut + 1, window)) is not None:
                cut = nxt.start()
            shown = _scrub(text[:cut], _KV_CUT)
            if len(shown) > max_chars:
                return truncate_with_ellipsis(shown, max_chars)
            return shown.rstrip() + "..."
        window *= 2
    return truncate_with_ellipsis(scrub_credentials(text), max_chars)
