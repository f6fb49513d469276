"""The substring (``LIKE``) fallback's query, shared by the SQLite and PostgreSQL stores.

When the word index finds nothing (scripts the tokenizer cannot split, such
as CJK), both stores look for the query's words inside the rows. Which words
are looked for and how a row scores must be the same on both engines, so the
floor means the same thing: that lives here, the SQL in each store.

A run of Chinese or Japanese is one "word" to the tokenizer ("我的牙医预约是什么时候"
is a whole question), which no row holds as written. Such a run is searched as its
pieces, as a CJK search engine indexes it: split at function characters (particles,
pronouns, question words: 的, 是, 什么, の, は, ...), each longer piece as its
overlapping pairs (牙医, 医预, 预约) and a lone character as itself (犬). The run
counts as one word of the share, by the weighted fraction of its pieces a row holds
(:meth:`SubstringQuery.scores`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from attrs import frozen

from memory_inject.storage.calibration import (
    MAX_SUBSTRING_CHARS,
    MIN_SUBSTRING_CHARS,
    MIN_WORD_SUBSTRING_CHARS,
    substring_score,
)
from memory_inject.storage.fusion import content_words

_T = TypeVar("_T")

__all__ = [
    "ABSENT_PIECE_WEIGHT",
    "MAX_LIKE_PIECES",
    "MAX_LIKE_WORDS",
    "SubstringQuery",
    "pieces",
]

#: At most this many words are searched (zeroclaw's limit).
MAX_LIKE_WORDS = 8
#: At most this many patterns in all (a CJK run is searched as several pieces).
MAX_LIKE_PIECES = 16
#: Letters of scripts written without spaces between words (Thai, Lao, Myanmar, Khmer,
#: kana, CJK ideographs; Hangul syllables kept as before): the tokenizer cannot find a
#: word inside a run of them, so a short word is still searched as a substring there.
_SPACELESS = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)
#: What a piece of a CJK run that no candidate row holds weighs in the run's share
#: (a held piece weighs 1). Chosen on ``benchmarks/facts_zh.json``: the most answers with
#: near misses at most a third of the time (the English facts sets run at about half);
#: checked on ``facts_ja.json`` (docs/performance.md).
ABSENT_PIECE_WEIGHT = 0.2
#: CJK ideographs and katakana: the letters a Chinese or Japanese run is split into
#: pieces of. Hiragana is Japanese grammar (particles, endings) between them.
_IDEOGRAPHS = "\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_IDEOGRAPHIC = re.compile(f"[{_IDEOGRAPHS}]")
_HIRAGANA = re.compile("[\u3040-\u309f]")
#: Chinese and Japanese characters that are grammar, not topic: particles, pronouns,
#: question words, measure words, "is", "have", "not", "help (me)". A piece never spans
#: one ("我的" is "my").
_FUNCTION_CHARS = (
    "的了吗呢吧啊呀么什哪谁怎我你他她它们这那是在有没不很和也就把被给几咋啥个帮私僕俺何誰"
)
#: Words that ask rather than name: "when", "how much", "how old", "which day", "what
#: date", "know", "remember", "tell", "by the way", "was it" (their second character
#: would otherwise be searched alone: 天 of 哪天 is in every "每天").
_FUNCTION_WORDS = (
    "什么 时候 时间 多少 多大 多久 多长 怎么 怎样 为什么 为何 如何 来着 对了 一下 知道 "
    "记得 告诉 请问 可以 是不是 有没有 哪天 哪家 哪年 哪里 哪儿 哪些 几号 几点 几月 几年 "
    "几岁 几天 几次"
).split(" ")
_FUNCTION = re.compile(
    "(?:"
    + "|".join(sorted(_FUNCTION_WORDS, key=len, reverse=True))
    + "|["
    + _FUNCTION_CHARS
    + "])+"
)


def _shortest(word: str) -> int:
    """The fewest characters ``word`` may have to be searched as a substring."""
    return MIN_SUBSTRING_CHARS if _SPACELESS.search(word) else MIN_WORD_SUBSTRING_CHARS


def _cjk_pieces(word: str) -> list[str]:
    """A run holding CJK ideographs or katakana, as the pieces searched for it."""
    out: list[str] = []
    for part in re.split(f"([{_IDEOGRAPHS}]+)", word):
        if not part:
            continue
        if not _IDEOGRAPHIC.match(part):
            # Latin letters or digits typed into the run ("wifi密码"): one word of their
            # own; kana and other letters between ideographs are grammar.
            if not _HIRAGANA.search(part) and _shortest(part) <= len(part):
                out.append(part[:MAX_SUBSTRING_CHARS])
            continue
        for piece in _FUNCTION.split(part):
            if len(piece) == 1:
                out.append(piece)
            out += [piece[i : i + 2] for i in range(len(piece) - 1)]
    return list(dict.fromkeys(out))


def pieces(word: str) -> tuple[str, ...]:
    """What is searched for one content word: itself (within the length bounds), or a
    CJK run's pieces (see the module docstring); nothing for a word out of bounds."""
    if _IDEOGRAPHIC.search(word):
        return tuple(_cjk_pieces(word))
    return (word,) if _shortest(word) <= len(word) <= MAX_SUBSTRING_CHARS else ()


@frozen(slots=True)
class SubstringQuery:
    """``words`` to search (4 to 64 characters, 3 in a spaceless script, a CJK run as its
    pieces; at most 8 words and 16 patterns) and ``every`` content word's count.

    Every content word counts in the share, so a hit on one word of four
    scores low; words outside the length range are never searched ("hi" is
    inside "hiking", and a pasted blob would cost O(n * m)). ``groups`` holds each
    searched word's pieces, as indexes into ``words`` (-1 for a piece past the cap).
    """

    words: tuple[str, ...]
    every: int
    groups: tuple[tuple[int, ...], ...] = ()

    @classmethod
    def of(cls, query: str) -> SubstringQuery:
        """The substring query of a prompt: the word index's query words
        (:func:`~memory_inject.storage.fusion.content_words`), so "do you remember ..."
        is searched without "remember" here too."""
        every = list(dict.fromkeys(w for w, _ in content_words(query)))
        words: list[str] = []
        groups: list[tuple[int, ...]] = []
        for w in every:
            found = [p for p in pieces(w) if p not in words]
            if not found or len(groups) >= MAX_LIKE_WORDS:
                continue
            room = MAX_LIKE_PIECES - len(words)
            if room <= 0:
                break
            groups.append(tuple(range(len(words), len(words) + min(room, len(found)))))
            # A run cut short still counts every piece, a cut one as held by no row.
            groups[-1] += (-1,) * max(0, len(found) - room)
            words += found[:room]
        return cls(tuple(words), len(every), tuple(groups))

    @property
    def split(self) -> bool:
        """Whether a CJK run is searched as pieces. Then the stores fetch the rows holding
        the most patterns first, :meth:`window` of them (a row holding one common pair
        must not crowd out the row holding all); otherwise the newest ``limit``, as
        zeroclaw, which a store can stop reading early."""
        return any(len(g) > 1 for g in self.groups)

    @property
    def cjk(self) -> bool:
        """Whether a searched word is a CJK run (its pieces, one or more): a question the
        word index cannot read, whose rows holding its pieces stand for keyword hits."""
        return any(_IDEOGRAPHIC.search(w) for w in self.words)

    @staticmethod
    def window(limit: int) -> int:
        """How many rows a split query fetches to score and keep ``limit`` of (rows
        holding as many pieces can still score apart: a run counts fractions)."""
        return max(4 * limit, 20)

    def patterns(self) -> list[str]:
        """``%word%`` LIKE patterns, ``\\``, ``%`` and ``_`` escaped (``ESCAPE '\\'``)."""
        return [
            "%" + w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            for w in self.words
        ]

    def scores(self, rows: Sequence[tuple[str, str]]) -> list[float]:
        """:func:`substring_score` of each ``(key, content)`` row: the share of the query's
        words inside it, a CJK run counting the fraction of its pieces the row holds.

        A piece no row of ``rows`` holds (nor a piece past the cap) weighs
        :data:`ABSENT_PIECE_WEIGHT` in its run's fraction. A pair across two words
        ("医预" of "牙医预约") is held by no memory, and a question's word is often not
        the memory's (老婆 asked, 妻子 stored): weighed fully, either counts against
        every row. The price: a piece the memories never mention (猫 asked of a store
        about a dog) lowers the share less than an absent English word does.
        """
        texts = [f"{key}\n{content}".lower() for key, content in rows]
        held = [[w in t for w in self.words] for t in texts]
        present = [any(h[i] for h in held) for i in range(len(self.words))]
        weights = [
            tuple(1.0 if i >= 0 and present[i] else ABSENT_PIECE_WEIGHT for i in g)
            for g in self.groups
        ]
        out = []
        for h in held:
            found = sum(
                sum(w for i, w in zip(g, ws, strict=True) if i >= 0 and h[i]) / sum(ws)
                for g, ws in zip(self.groups, weights, strict=True)
            )
            out.append(substring_score(found, self.every))
        return out

    def best(
        self, rows: Sequence[_T], text: Callable[[_T], tuple[str, str]], limit: int
    ) -> list[tuple[_T, float]]:
        """The ``limit`` best of ``rows`` with their :meth:`scores` (``text`` gives a row's
        key and content), best first; rows scoring alike keep their order (newest first,
        or most pieces held first, as the stores read them)."""
        scored = zip(rows, self.scores([text(r) for r in rows]), strict=True)
        return sorted(scored, key=lambda p: -p[1])[:limit]
