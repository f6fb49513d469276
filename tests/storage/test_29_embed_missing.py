"""``SQLiteStore.embed_missing()`` never undoes a write that returned while it embedded.

It read the rows without a vector, embedded them outside any transaction and then
upserted the rows *as it had read them*: a ``store()`` that returned meanwhile lost its
new content, and a ``forget()`` its forgetting (found by a helper using the store with
a slow embedder over a backlog). Now only the vector is written, and only to a row
still as it was read.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from memory_inject.embedders import HashingEmbedder
from memory_inject.storage import SQLiteStore

_HASH = HashingEmbedder(64)


class _Paused:
    """An embedder that, on its first batch, lets another writer run before it answers."""

    name = "paused"
    dim = 64

    def __init__(self) -> None:
        self.embedding = threading.Event()
        self.written = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not self.embedding.is_set():
            self.embedding.set()
            assert self.written.wait(10)
        return _HASH.embed(list(texts))


def test_a_write_made_while_a_backlog_is_embedded_stands(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with SQLiteStore(path) as before:  # rows written before an embedder was configured
        before.store("pet", "Our cat is named Miso.", "core")
        before.store("dog", "Our dog is named Rex.", "core")
        before.store("car", "The car is a blue Corolla.", "core")
    paused = _Paused()
    with SQLiteStore(path, embedder=paused) as backfill, SQLiteStore(path) as writer:
        result: list[int] = []
        worker = threading.Thread(target=lambda: result.append(backfill.embed_missing()))
        worker.start()
        assert paused.embedding.wait(10)
        writer.store("pet", "Our cat is named Pixel now.", "core")
        assert writer.forget("dog")
        paused.written.set()
        worker.join(10)
        assert result == [1]  # only "car" was still as it had been read
    with SQLiteStore(path) as after:
        pet = after.get("pet")
        assert pet is not None
        assert pet.content == "Our cat is named Pixel now."
        assert pet.embedding is None  # written without an embedder; the next call embeds it
        assert after.get("dog") is None
        car = after.get("car")
        assert car is not None
        assert car.embedding is not None
    with SQLiteStore(path, embedder=HashingEmbedder(64)) as again:
        assert again.embed_missing() == 1
        assert again.embed_missing() == 0
        assert again.get("dog") is None


def test_every_row_of_a_backlog_longer_than_a_batch_is_embedded_once(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with SQLiteStore(path) as before:
        for i in range(25):
            before.store(f"k{i}", f"fact number {i} about the garden")
        before.forget("k3")
    calls: list[int] = []

    class Counting:
        name = "counting"
        dim = 64

        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            calls.append(len(texts))
            return _HASH.embed(list(texts))

    with SQLiteStore(path, embedder=Counting()) as store:
        assert store.embed_missing(batch_size=10) == 24
        assert calls == [10, 10, 4]
        assert all(r.embedding is not None for r in store.list())


def test_rows_of_an_embedder_of_another_dimension_are_embedded_again(tmp_path: Path) -> None:
    """A store reopened with a 128-dimension embedder over 64-dimension rows: those rows
    were never searched by vector, and ``embed_missing`` (which filled only rows with no
    vector) left them so."""
    path = tmp_path / "m.db"
    with SQLiteStore(path, embedder=HashingEmbedder(64)) as before:
        before.store("pet", "Our cat is named Miso.")
        before.store("car", "The car is a blue Corolla.")
    with SQLiteStore(path, embedder=HashingEmbedder(128)) as after:
        assert after.embed_missing() == 2
        assert after.embed_missing() == 0
        pet = after.get("pet")
        assert pet is not None
        assert pet.embedding is not None
        assert len(pet.embedding) == 128
