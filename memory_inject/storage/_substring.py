"""The substring (``LIKE``) fallback's query, shared by the SQLite and PostgreSQL stores.

When the word index finds nothing (scripts the tokenizer cannot split, such
as CJK), both stores look for the query's words inside the rows. Which words
are looked for and how a row scores must be the same on both engines, so the
floor means the same thing: that lives here, the SQL in each store.
"""

from __future__ import annotations

import re

from attrs import frozen

from memory_inject.storage.calibration import (
    MAX_SUBSTRING_CHARS,
    MIN_SUBSTRING_CHARS,
    MIN_WORD_SUBSTRING_CHARS,
    substring_score,
)
from memory_inject.storage.fusion import content_words

__all__ = ["MAX_LIKE_WORDS", "SubstringQuery"]

#: At most this many words are searched (zeroclaw's limit).
MAX_LIKE_WORDS = 8
#: Letters of scripts written without spaces between words (Thai, Lao, Myanmar, Khmer,
#: kana, CJK ideographs; Hangul syllables kept as before): the tokenizer cannot find a
#: word inside a run of them, so a short word is still searched as a substring there.
_SPACELESS = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)


def _shortest(word: str) -> int:
    """The fewest characters ``word`` may have to be searched as a substring."""
    return MIN_SUBSTRING_CHARS if _SPACELESS.search(word) else MIN_WORD_SUBSTRING_CHARS


@frozen(slots=True)
class SubstringQuery:
    """``words`` to search (4 to 64 characters, 3 in a spaceless script, at most 8) and
    ``every`` content word's count.

    Every content word counts in the share, so a hit on one word of four
    scores low; words outside the length range are never searched ("hi" is
    inside "hiking", and a pasted blob would cost O(n * m)).
    """

    words: tuple[str, ...]
    every: int

    @classmethod
    def of(cls, query: str) -> SubstringQuery:
        """The substring query of a prompt: the word index's query words
        (:func:`~memory_inject.storage.fusion.content_words`), so "do you remember ..."
        is searched without "remember" here too."""
        every = list(dict.fromkeys(w for w, _ in content_words(query)))
        words = [w for w in every if _shortest(w) <= len(w) <= MAX_SUBSTRING_CHARS]
        return cls(tuple(words[:MAX_LIKE_WORDS]), len(every))

    def patterns(self) -> list[str]:
        """``%word%`` LIKE patterns, ``\\``, ``%`` and ``_`` escaped (``ESCAPE '\\'``)."""
        return [
            "%" + w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            for w in self.words
        ]

    def score(self, key: str, content: str) -> float:
        """:func:`substring_score` of a row: the share of the query's words inside it."""
        text = f"{key}\n{content}".lower()
        return substring_score(sum(1 for w in self.words if w in text), self.every)
