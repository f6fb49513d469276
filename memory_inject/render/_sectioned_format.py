"""The ``sectioned`` block's format: its title, section titles and line prefixes.

Owns the constants a sectioned block is written with (the title, the contested
warning, the section titles and default caps, the hard rules' prefixes), which
``memory_inject.testing.parse_sectioned`` also reads a block back with. The
writer is ``render/sectioned.py``, which re-exports the public ones.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "CONTESTED_WARNING",
    "DEFAULT_SECTION_CAPS",
    "RULE_PREFIXES",
    "SECTIONED_TITLE",
    "SECTION_TITLES",
    "TITLE_BLOCK",
]

SECTIONED_TITLE = "# Persistent Intelligence Context"
CONTESTED_WARNING = (
    "<!-- Contested memories conflict with other memories. Review before relying on them. -->"
)
#: Section slug (used in ``section_caps`` and drop reasons) -> title, in block order.
SECTION_TITLES: Mapping[str, str] = {
    "hard_rules": "Hard Rules",
    "selected_memory": "Selected Memory",
    "scratchpad": "Scratchpad",
    "contested_memory": "Contested Memory",
    "daily_log": "Daily Log",
    "todays_sessions": "Today's Sessions",
    "open_questions": "Open Questions",
}
DEFAULT_SECTION_CAPS: Mapping[str, int] = {
    "hard_rules": 2000,
    "selected_memory": 6000,
    "scratchpad": 800,
    "contested_memory": 800,
    "daily_log": 3000,
    "todays_sessions": 800,
    "open_questions": 800,
}

TITLE_BLOCK = SECTIONED_TITLE + "\n\n"


RULE_PREFIXES: Mapping[str, str] = {
    "avoid_pattern": "⚠️ AVOID:",
    "avoid": "⚠️ AVOID:",
    "prefer_pattern": "✓ PREFER:",
    "prefer": "✓ PREFER:",
    "convention": "📌 CONVENTION:",
    "correction": "📌 RULE:",
}
