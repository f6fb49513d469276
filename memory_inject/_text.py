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
    r"|\b(sk-(?:proj-|ant-)?|ghp_|gho_|ghs_|github_pat_|xox[abpors]-|AKIA|glpat-)([A-Za-z0-9_\-]{12,})"
)


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
    replaced by its first 4 chars + ``*[REDACTED]``) runs first; a second pass
    catches ``Bearer <token>`` and well-known token shapes (``sk-``, ``ghp_``,
    ``xoxb-``, ``AKIA``...) that carry no key in front of them.
    """
    return _BARE.sub(_bare_sub, _KV.sub(_kv_sub, text))
