"""The phrase matcher: PI's documented matches, PI's false positives as non-matches, properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_inject._phrases import context_text, normalize, phrase_matches, slug


class TestPiDocumentedMatches:
    @pytest.mark.parametrize(
        ("phrase", "text"),
        [
            ("publishing", "publish to npm registry"),
            ("deployment", "deploy the app"),
            ("deploy", "deployment pipeline"),
            ("internationalization", "internationally"),
            ("GitHub Packages", "GitHub Packages publish workflow"),
            ("pi package", "pi package test command"),
        ],
    )
    def test_pi_positive_cases_match(self, phrase: str, text: str) -> None:
        """Every match PI documents or tests still matches."""
        assert True is phrase_matches(phrase, text)


class TestPiFalsePositives:
    @pytest.mark.parametrize(
        ("phrase", "text"),
        [
            ("tokens", "explain how to run tests"),
            ("Windows", "run it in a window"),
            ("apply", "fix it /home/a/src/app"),
            ("api", "a rapid prototype"),
            ("LMS frontend", "build frontend"),
            ("publishing to npm registry", "update the docker registry"),
        ],
    )
    def test_pi_false_positives_do_not_match(self, phrase: str, text: str) -> None:
        """The over-matches listed in spec 1.5 are non-matches here."""
        assert False is phrase_matches(phrase, text)


class TestWords:
    def test_short_words_match_only_whole_words(self) -> None:
        """A word under min_token_length matches the same word, never a part of one."""
        assert True is phrase_matches("api", "the api is down")
        assert False is phrase_matches("api", "capital")

    def test_short_text_words_never_complete_a_prefix(self) -> None:
        """'to' in the text is not a prefix match for 'tokens' (length applies on both sides)."""
        assert False is phrase_matches("tokens", "to")

    def test_case_and_punctuation_do_not_matter_in_text(self) -> None:
        """The text is compared as lowercase words whatever its punctuation."""
        assert True is phrase_matches("publishing", "PUBLISH, please!")

    def test_empty_phrase_never_matches(self) -> None:
        """A blank or punctuation-only phrase matches nothing."""
        assert False is phrase_matches("", "anything")
        assert False is phrase_matches("  -- ", "anything --")

    def test_bad_min_token_length_is_rejected(self) -> None:
        """min_token_length below 1 is an error with the house message."""
        with pytest.raises(ValueError, match="'min_token_length' must be >= 1 \\(got 0\\)"):
            phrase_matches("x", "x", min_token_length=0)


class TestMorphology:
    @pytest.mark.parametrize(
        ("phrase", "text"),
        [
            ("tests", "testing the parser"),
            ("commit", "I committed it"),
            ("planning", "our plans"),
            ("library", "two libraries"),
            ("create", "creating"),
            ("migration", "migrate the db"),
            ("performance", "perform better"),
        ],
    )
    def test_variants_with_a_known_ending_match(self, phrase: str, text: str) -> None:
        """Stem + ending pairs from the ending list match in both directions."""
        assert True is phrase_matches(phrase, text)

    @pytest.mark.parametrize(
        ("phrase", "text"),
        [
            ("apple", "apply the patch"),
            ("form", "format the code"),
            ("port", "the portal"),
            ("authentication", "authorization"),
            ("internals", "internationally"),
        ],
    )
    def test_shared_letters_without_an_ending_do_not_match(self, phrase: str, text: str) -> None:
        """A common prefix alone, or two one-letter endings, is not a variant."""
        assert False is phrase_matches(phrase, text)

    def test_min_token_length_sets_the_stem(self) -> None:
        """With min_token_length=8, 'publishing' no longer reaches 'publish' (7 letters)."""
        assert False is phrase_matches("publishing", "publish it", min_token_length=8)


class TestNames:
    def test_lowercase_word_matches_its_plural(self) -> None:
        """'windows' written lowercase is an ordinary word and matches 'window'."""
        assert True is phrase_matches("windows", "run it in a window")

    def test_name_matches_only_itself(self) -> None:
        """'Windows' matches the word windows in any case, never 'window'."""
        assert True is phrase_matches("Windows", "works on windows 11")
        assert False is phrase_matches("Windows", "a window manager")

    def test_sentence_case_first_word_is_not_a_name(self) -> None:
        """'Publishing to npm' is sentence case: its first word still matches 'publish'."""
        assert True is phrase_matches("Publishing to npm", "publish to npm")

    def test_capitalised_later_word_is_a_name(self) -> None:
        """In 'GitHub Packages', 'Packages' is a name and does not match 'package'."""
        assert False is phrase_matches("GitHub Packages", "github package publish")


class TestMultiWord:
    def test_every_content_word_is_needed(self) -> None:
        """'publishing to npm registry' needs publish, npm and registry, in any order."""
        assert True is phrase_matches("publishing to npm registry", "npm registry: publish now")
        assert False is phrase_matches("publishing to npm registry", "publish to pypi registry")

    def test_function_word_phrase_matches_as_a_sequence(self) -> None:
        """A phrase of function words only matches as a whole-word sequence."""
        assert True is phrase_matches("in the", "put it in the box")
        assert False is phrase_matches("in the", "the box is in")


class TestContextText:
    def test_cwd_is_opt_in(self) -> None:
        """The working directory joins the prompt only with include_cwd=True."""
        assert "fix it" == context_text("fix it", "/home/me/publisher")
        assert "fix it /home/me/publisher" == context_text(
            "fix it", "/home/me/publisher", include_cwd=True
        )
        assert "/home/x" == context_text("", "/home/x", include_cwd=True)

    def test_cwd_in_text_can_trigger_a_phrase(self) -> None:
        """With the cwd included, a 'publisher' directory fires a 'publishing' phrase."""
        text = context_text("fix it", "/home/me/publisher", include_cwd=True)
        assert True is phrase_matches("publishing", text)
        assert False is phrase_matches("publishing", context_text("fix it", "/home/me/publisher"))


class TestNormalize:
    def test_normalize_and_slug(self) -> None:
        """Runs of non-alphanumerics become one dash; slug falls back to 'default'."""
        assert "pi-persistent-intelligence" == normalize(" Pi Persistent_Intelligence!! ")
        assert "org-foo" == normalize("@org/foo")
        assert "" == normalize("--")
        assert "default" == slug("--")


# -- properties ----------------------------------------------------------------------

word = st.text(alphabet="abdeginst", min_size=1, max_size=9)
words = st.lists(word, min_size=1, max_size=5)


def _prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


class TestProperties:
    @given(words, words, st.integers(1, 6))
    def test_no_shared_stem_means_no_match(
        self, phrase_words: list[str], text_words: list[str], n: int
    ) -> None:
        """If no phrase word equals or shares n leading letters with a text word, no match."""
        related = any(p == t or _prefix(p, t) >= n for p in phrase_words for t in text_words)
        if not related:
            assert False is phrase_matches(
                " ".join(phrase_words), " ".join(text_words), min_token_length=n
            )

    @given(words, words, words)
    def test_more_text_never_loses_a_match(
        self, phrase_words: list[str], text_words: list[str], extra: list[str]
    ) -> None:
        """Adding words before or after the text keeps a match a match."""
        phrase, text, more = " ".join(phrase_words), " ".join(text_words), " ".join(extra)
        if phrase_matches(phrase, text):
            assert True is phrase_matches(phrase, f"{text} {more}")
            assert True is phrase_matches(phrase, f"{more}, {text}")

    @given(words)
    def test_a_phrase_matches_itself(self, phrase_words: list[str]) -> None:
        """Any phrase with a word matches its own text."""
        phrase = " ".join(phrase_words)
        assert True is phrase_matches(phrase, phrase)

    @given(word)
    def test_never_a_raw_substring(self, w: str) -> None:
        """A word buried inside a longer text word does not match."""
        assert False is phrase_matches(w, f"q{w}q")
