"""Small text helpers with exact, spec-pinned semantics."""

from __future__ import annotations

import re

__all__ = [
    "sanitize_session_key",
    "scrub_credentials",
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


_KV = re.compile(
    r"""(?i)(authorization|token|api[_-]?key|password|secret|user[_-]?key|bearer|credential"""
    r"""|set[_-]?cookie|cookie)(["']?)\s*([:=])\s*"""
    r"""(?:"([^"]{8,})"|'([^']{8,})'|([A-Za-z0-9_\-./+=]{8,}))"""
)
# Shapes that are secrets wherever they appear, with or without a key in front.
_BARE = re.compile(
    r"(?i)\b(bearer|basic|token)\s+([A-Za-z0-9_\-./+=]{12,})"
    r"|\b(sk-(?:proj-|ant-)?|sk_live_|sk_test_|rk_live_|pk_live_|ghp_|gho_|ghs_|ghu_|github_pat_"
    r"|xox[abpors]-|AKIA|ASIA|glpat-|hf_|npm_|AIza)([A-Za-z0-9_\-]{12,})"
)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+):([^\s@/]+)@")


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


def scrub_credentials(text: str) -> str:
    """Redact credential values: ``key: value`` pairs as the spec says, then bare tokens.

    The spec's rule (key, optional quote, ``:`` or ``=``, a value of 8+ chars,
    replaced by its first 4 chars + ``*[REDACTED]``) runs first; later passes
    catch ``Bearer <token>``, well-known token shapes (``sk-``, ``sk_live_``,
    ``ghp_``, ``xoxb-``, ``AKIA``, ``hf_``, ``npm_``, ``AIza``...), JWTs and
    passwords in URLs, which carry no key in front of them.
    """
    text = _BARE.sub(_bare_sub, _KV.sub(_kv_sub, text))
    text = _JWT.sub(lambda m: m.group(0)[:4] + "*[REDACTED]", text)
    return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:*[REDACTED]@", text)
