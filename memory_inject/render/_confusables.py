"""Letters of other scripts that a reader takes for Latin ones (homoglyphs).

NFKC leaves ``[/Меmоry соntехt]`` alone when its ``е``, ``о``, ``с`` and ``х`` are
Cyrillic, yet a model reads it as the closing marker. :data:`CONFUSABLES` maps each
letter that looks like a Latin one in common fonts (Unicode's confusables for the
Latin alphabet, the ones of Cyrillic, Greek, Armenian and Cherokee, Latin small
capitals and a few Latin look-alikes) to that Latin letter, and each blank, slash,
bracket and sign that reads as one of a marker's (a Hangul filler, a division slash) to
it, for the marker view
(:mod:`._view`) only: stored text is never rewritten, only a marker found through
the view is defused.
"""

from __future__ import annotations

import unicodedata

__all__ = ["CONFUSABLES"]

# Latin letter -> Unicode names of the letters read as it.
_LOOKALIKES: dict[str, tuple[str, ...]] = {
    "a": (
        "CYRILLIC SMALL LETTER A",
        "GREEK SMALL LETTER ALPHA",
        "LATIN SMALL LETTER ALPHA",
        "LATIN LETTER SMALL CAPITAL A",
    ),
    "A": ("CYRILLIC CAPITAL LETTER A", "GREEK CAPITAL LETTER ALPHA", "CHEROKEE LETTER GO"),
    "B": ("CYRILLIC CAPITAL LETTER VE", "GREEK CAPITAL LETTER BETA", "CHEROKEE LETTER YV"),
    "b": ("LATIN LETTER SMALL CAPITAL B",),
    "c": ("CYRILLIC SMALL LETTER ES", "LATIN LETTER SMALL CAPITAL C"),
    "C": ("CYRILLIC CAPITAL LETTER ES", "CHEROKEE LETTER TLI"),
    "d": ("CYRILLIC SMALL LETTER KOMI DE", "LATIN LETTER SMALL CAPITAL D"),
    "e": ("CYRILLIC SMALL LETTER IE", "LATIN LETTER SMALL CAPITAL E"),
    "E": ("CYRILLIC CAPITAL LETTER IE", "GREEK CAPITAL LETTER EPSILON", "CHEROKEE LETTER GV"),
    "g": ("LATIN SMALL LETTER SCRIPT G", "LATIN LETTER SMALL CAPITAL G"),
    "h": ("CYRILLIC SMALL LETTER SHHA", "ARMENIAN SMALL LETTER HO", "LATIN LETTER SMALL CAPITAL H"),
    "H": ("CYRILLIC CAPITAL LETTER EN", "GREEK CAPITAL LETTER ETA", "CHEROKEE LETTER MI"),
    "i": (
        "CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I",
        "GREEK SMALL LETTER IOTA",
        "LATIN SMALL LETTER DOTLESS I",
        "LATIN LETTER SMALL CAPITAL I",
    ),
    "I": (
        "CYRILLIC CAPITAL LETTER BYELORUSSIAN-UKRAINIAN I",
        "GREEK CAPITAL LETTER IOTA",
        "CYRILLIC LETTER PALOCHKA",
    ),
    "j": ("CYRILLIC SMALL LETTER JE", "LATIN SMALL LETTER DOTLESS J"),
    "J": ("CYRILLIC CAPITAL LETTER JE", "CHEROKEE LETTER GU"),
    "k": ("LATIN LETTER SMALL CAPITAL K",),
    "K": ("CYRILLIC CAPITAL LETTER KA", "GREEK CAPITAL LETTER KAPPA", "CHEROKEE LETTER TSO"),
    "l": ("CYRILLIC SMALL LETTER PALOCHKA", "LATIN LETTER SMALL CAPITAL L"),
    "L": ("CHEROKEE LETTER TLE",),
    "m": ("LATIN LETTER SMALL CAPITAL M",),
    "M": ("CYRILLIC CAPITAL LETTER EM", "GREEK CAPITAL LETTER MU", "CHEROKEE LETTER LU"),
    "n": ("ARMENIAN SMALL LETTER VO", "LATIN LETTER SMALL CAPITAL N"),
    "N": ("GREEK CAPITAL LETTER NU",),
    "o": (
        "CYRILLIC SMALL LETTER O",
        "GREEK SMALL LETTER OMICRON",
        "ARMENIAN SMALL LETTER OH",
        "LATIN LETTER SMALL CAPITAL O",
    ),
    "O": (
        "CYRILLIC CAPITAL LETTER O",
        "GREEK CAPITAL LETTER OMICRON",
        "ARMENIAN CAPITAL LETTER OH",
    ),
    "p": ("CYRILLIC SMALL LETTER ER", "GREEK SMALL LETTER RHO", "LATIN LETTER SMALL CAPITAL P"),
    "P": ("CYRILLIC CAPITAL LETTER ER", "GREEK CAPITAL LETTER RHO", "CHEROKEE LETTER TLV"),
    "q": ("CYRILLIC SMALL LETTER QA",),
    "Q": ("CYRILLIC CAPITAL LETTER QA",),
    "r": ("LATIN LETTER SMALL CAPITAL R", "CYRILLIC SMALL LETTER GHE"),
    "R": ("CHEROKEE LETTER SV",),
    "s": ("CYRILLIC SMALL LETTER DZE", "LATIN LETTER SMALL CAPITAL S"),
    "S": ("CYRILLIC CAPITAL LETTER DZE", "CHEROKEE LETTER DU"),
    "t": ("LATIN LETTER SMALL CAPITAL T",),
    "T": ("CYRILLIC CAPITAL LETTER TE", "GREEK CAPITAL LETTER TAU", "CHEROKEE LETTER I"),
    "u": (
        "ARMENIAN SMALL LETTER SEH",
        "GREEK SMALL LETTER UPSILON",
        "LATIN LETTER SMALL CAPITAL U",
    ),
    "v": ("GREEK SMALL LETTER NU", "LATIN LETTER SMALL CAPITAL V"),
    "V": ("CHEROKEE LETTER DO",),
    "w": ("CYRILLIC SMALL LETTER WE", "LATIN LETTER SMALL CAPITAL W"),
    "W": ("CYRILLIC CAPITAL LETTER WE", "CHEROKEE LETTER LA"),
    "x": ("CYRILLIC SMALL LETTER HA", "GREEK SMALL LETTER CHI"),
    "X": ("CYRILLIC CAPITAL LETTER HA", "GREEK CAPITAL LETTER CHI"),
    "y": ("CYRILLIC SMALL LETTER U", "LATIN LETTER SMALL CAPITAL Y"),
    "Y": (
        "CYRILLIC CAPITAL LETTER STRAIGHT U",
        "CYRILLIC CAPITAL LETTER U",
        "GREEK CAPITAL LETTER UPSILON",
        "CHEROKEE LETTER GI",
    ),
    "z": ("LATIN LETTER SMALL CAPITAL Z",),
    "Z": ("GREEK CAPITAL LETTER ZETA", "CHEROKEE LETTER NO"),
}

# Characters a marker is made of -> Unicode names of what reads as them: blanks that are
# letters or symbols (no space separator, so not folded as one) and slashes, brackets and
# signs of other blocks.
_MARKS: dict[str, tuple[str, ...]] = {
    " ": (
        "HANGUL FILLER",
        "HANGUL CHOSEONG FILLER",
        "HANGUL JUNGSEONG FILLER",
        "HALFWIDTH HANGUL FILLER",
        "BRAILLE PATTERN BLANK",
    ),
    "/": (
        "DIVISION SLASH",
        "FRACTION SLASH",
        "BIG SOLIDUS",
        "BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT",
        "MATHEMATICAL RISING DIAGONAL",
    ),
    "[": ("LIGHT LEFT TORTOISE SHELL BRACKET ORNAMENT", "MATHEMATICAL LEFT WHITE SQUARE BRACKET"),
    "]": ("LIGHT RIGHT TORTOISE SHELL BRACKET ORNAMENT", "MATHEMATICAL RIGHT WHITE SQUARE BRACKET"),
    "#": ("MUSIC SHARP SIGN",),
}

#: Each look-alike (a letter, a blank, a slash, a bracket or a sign) and what it reads as.
CONFUSABLES: dict[str, str] = {
    unicodedata.lookup(name): plain
    for table in (_LOOKALIKES, _MARKS)
    for plain, names in table.items()
    for name in names
}
