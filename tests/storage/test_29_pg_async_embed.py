"""An async PostgreSQL render embeds the prompt off the event loop (twenty-eighth round).

Found by a helper: ``PostgresEngine.aranked`` called the embedder on the loop, so a 3 s
model stalled every task of the server 3 s and the render returned after its 2 s
deadline (SQLite's recall thread returned at 2.0 s, the loop free). The prompt is now
embedded on a worker thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

from memory_inject import arender_memory_context
from memory_inject.embedders import HashingEmbedder
from tests.storage import _pg_backend as pgb


class Recording:
    """A hashing embedder that notes the thread of every call."""

    name = "recording"
    dim = 64

    def __init__(self) -> None:
        self.inner = HashingEmbedder(64)
        self.threads: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.append(threading.get_ident())
        return [list(v) for v in self.inner.embed(texts)]


def test_the_prompt_is_embedded_off_the_loop(pg_dsn: str) -> None:
    embedder = Recording()
    store = pgb.make_postgres_store(pg_dsn, embedder=embedder)
    try:
        store.store("dog", "My dog is called Biscuit.")
        writes = len(embedder.threads)

        async def turn() -> tuple[int, list[str]]:
            result = await arender_memory_context(store, "what is my dog called?")
            return threading.get_ident(), [e.key for e in result.entries]

        loop_thread, keys = asyncio.run(turn())
        assert ["dog"] == keys
        asked = embedder.threads[writes:]
        assert asked  # the prompt was embedded (hybrid recall)
        assert loop_thread not in asked
    finally:
        store.close()
