"""Embeddings for the safety monitor and the world model: OpenAI's when configured, else
a local model that ships its weights in its PyPI wheel; and, for names, their spelling.

- `LocalEmbedder`: WordLlama (MIT; the `wordllama` wheel bundles the 256-dimension
  "l2_supercat" token embeddings, 16 MB, and its tokenizer). No torch, no download:
  loading is forced offline. An utterance embeds in ~0.1 ms, so it runs inline.
- `OpenAIEmbedder`: `text-embedding-3-small` (1536 dimensions) through the `openai` SDK,
  bounded by a timeout.

- `SpellingEmbedder`: a name's character bigrams and trigrams hashed into 512 dimensions.
  Sentence models place "Elenor Kowalsky" far from "Eleanor Kowalski" (a misspelling is
  other tokens); shared letter sequences keep them close, as trigram similarity does.

Vectors come back L2-normalised (float32), so a dot product is the cosine similarity.
The model name and dimension travel with every stored vector (`model_id`).
"""

from __future__ import annotations

import asyncio
import re
import threading
import unicodedata
import zlib
from pathlib import Path
from typing import ClassVar, Protocol

import numpy as np

LOCAL_MODEL = "wordllama-l2_supercat-256"
OPENAI_MODEL = "text-embedding-3-small"


class Embedder(Protocol):
    model: str
    dimension: int

    async def embed(self, texts: list[str]) -> np.ndarray:
        """One normalised row per text."""


def normalised(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


class LocalEmbedder:
    """WordLlama from its wheel, one instance per process."""

    model = LOCAL_MODEL
    dimension = 256
    _loaded: ClassVar[object | None] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def _wordllama(cls):
        with cls._lock:
            if cls._loaded is None:
                import wordllama
                from wordllama import WordLlama

                # The wheel keeps its tokenizer under tokenizers/, where WordLlama looks
                # only for a cache: pointing the cache at the package finds it offline.
                cls._loaded = WordLlama.load(
                    config="l2_supercat", dim=cls.dimension,
                    cache_dir=Path(wordllama.__file__).parent, disable_download=True,
                )
            return cls._loaded

    def warm_up(self) -> None:
        """Load the model now (0.15 s) rather than on a caller's words."""
        self._wordllama()

    def embed_now(self, texts: list[str]) -> np.ndarray:
        return normalised(self._wordllama().embed(texts, norm=False))

    async def embed(self, texts: list[str]) -> np.ndarray:
        return self.embed_now(texts)


class OpenAIEmbedder:
    """OpenAI's embeddings endpoint (or any compatible server at `base_url`)."""

    model = OPENAI_MODEL
    dimension = 1536

    def __init__(self, api_key: str, *, base_url: str | None = None,
                 timeout_s: float = 3.0) -> None:
        from openai import AsyncOpenAI

        self._client = AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s,
                                   max_retries=0)
        self._timeout_s = timeout_s

    async def embed(self, texts: list[str]) -> np.ndarray:
        response = await asyncio.wait_for(
            self._client.embeddings.create(model=self.model, input=texts), self._timeout_s)
        rows = sorted(response.data, key=lambda item: item.index)
        matrix = np.array([row.embedding for row in rows], dtype=np.float32)
        if matrix.shape != (len(texts), self.dimension):
            raise ValueError(f"embeddings of shape {matrix.shape}, expected "
                             f"({len(texts)}, {self.dimension})")
        return normalised(matrix)


SPELLING_MODEL = "char-ngram-hash-512"


class SpellingEmbedder:
    """How a name is spelled, as a vector: cosine similarity ≈ shared letter sequences.

    Deterministic (CRC-32 of each n-gram, no model), ~20 µs a name, so it runs inline.
    """

    model = SPELLING_MODEL
    dimension = 512

    def embed_now(self, texts: list[str]) -> np.ndarray:
        matrix = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for gram in spelling_grams(text):
                matrix[row, zlib.crc32(gram.encode()) % self.dimension] += 1.0
        return normalised(matrix)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return self.embed_now(texts)


def spelling_grams(text: str) -> list[str]:
    """Bigrams and trigrams of each word, padded so first and last letters weigh more."""
    plain = unicodedata.normalize("NFKD", text.lower()).encode("ascii", "ignore").decode()
    grams: list[str] = []
    for word in re.findall(r"[a-z]+", plain):
        padded = f"  {word} "
        for n in (2, 3):
            grams += [padded[i:i + n] for i in range(len(padded) - n + 1)]
    return grams
