"""Text helpers: truncation, session keys and credential scrubbing."""

from __future__ import annotations

from memory_inject._text import sanitize_session_key, scrub_credentials, truncate_with_ellipsis


class TestTruncate:
    def test_only_longer_texts_are_cut(self) -> None:
        """A text at the limit is unchanged; a longer one keeps n chars, rstripped, + '...'."""
        assert "abcde" == truncate_with_ellipsis("abcde", 5)
        assert "abc..." == truncate_with_ellipsis("abc   def", 5)


class TestSessionKeys:
    def test_matrix_sender_is_sanitised(self) -> None:
        """'@alice:server' becomes '_alice_server'; unicode letters, '_' and '-' stay."""
        assert "_alice_server" == sanitize_session_key("@alice:server")
        assert "café-1_x" == sanitize_session_key("café-1_x")


class TestScrub:
    def test_key_value_pairs_keep_four_chars(self) -> None:
        """api_key=..., password: ... and quoted tokens keep their first four chars."""
        assert "api_key=abcd*[REDACTED]" == scrub_credentials("api_key=abcdefgh12345")
        assert "password: hunt*[REDACTED]" == scrub_credentials("password: hunter2hunter2")
        assert 'token="zzzz*[REDACTED]"' == scrub_credentials('token="zzzzyyyyxxxx"')

    def test_real_looking_tokens_never_survive(self) -> None:
        """Bearer headers and well-known token shapes are redacted wherever they appear."""
        secrets = [
            "sk-proj-Xq7bT2mN9vK4sR8wL1yZ3cF6hJ0pA5dE",
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "AKIAIOSFODNN7EXAMPLE1234",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig",
        ]
        text = (
            f"use {secrets[0]} and {secrets[1]} then {secrets[2]} / {secrets[3]} "
            f"Authorization: Bearer {secrets[4]}"
        )
        out = scrub_credentials(text)
        for s in secrets:
            assert s not in out
        assert "[REDACTED]" in out

    def test_plain_text_is_untouched(self) -> None:
        """Ordinary prose with the word token is left alone."""
        text = "how many tokens does the password policy allow?"
        assert text == scrub_credentials(text)
