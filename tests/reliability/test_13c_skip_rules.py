"""Issue 13 item 10: the skip rules no longer lower-case a whole memory.

``skip_reason`` used to build an ASCII-lowered copy of every recalled content
(about a second per 10 MB of non-ASCII text, before any budget); it now
lowers the few characters the prefixes need and searches the signature in
place. The answer must be the spec's, for every input.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_inject._skip_keys import ascii_lower
from memory_inject._skip_keys import rust_trim as _rust_trim
from memory_inject.stages.filters import _AUTOSAVE_PREFIXES, skip_reason


def spec_skip_reason(key: str, content: str) -> str | None:
    """The rule as the spec writes it (a lowered copy of the whole content)."""
    k = ascii_lower(_rust_trim(key))
    if k == "assistant_resp" or k.startswith("assistant_resp_"):
        return "skip:assistant_autosave"
    if k == "user_msg" or k.startswith("user_msg_"):
        return "skip:user_autosave"
    c = _rust_trim(content)
    if not c:
        return "skip:empty"
    low = ascii_lower(c)
    if low.startswith(_AUTOSAVE_PREFIXES) or "distilled_index_sig:" in low:
        return "skip:autosave_content"
    if k.endswith("_history"):
        return "skip:history"
    if "[IMAGE:" in content:
        return "skip:image"
    if "<tool_result" in content:
        return "skip:tool_result"
    return None


_pieces = st.sampled_from(
    [
        "distilled_index_sig:",
        "DISTILLED_INDEX_SIG:",
        "Dıstilled_index_sig:",  # dotless i: not an ASCII letter, must not fold
        "diſtilled_index_sig:",  # long s: Unicode folds it to s, ASCII lowering does not
        "[CRON:",
        "[Heartbeat Task",
        "[Memory Context]",
        "[distilled_",
        " ",
        "\u3000",
        "é",
        "K",  # Kelvin sign
        "x",
    ]
)
_content = st.lists(_pieces | st.text(max_size=3), max_size=6).map("".join)


@settings(max_examples=1500, deadline=None)
@given(key=st.sampled_from(["k", "user_msg_1", "notes_history", " K "]), content=_content)
def test_skip_reason_is_the_specs(key: str, content: str) -> None:
    assert spec_skip_reason(key, content) == skip_reason(key, content)
