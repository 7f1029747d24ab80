"""The grammar pass (services/world/field_grammar.py) off the event loop.

PocketSphinx holds the GIL while it decodes, so the grammar decoders live in one
spawned worker process, started on first use (or by `warm_up`) and shared by every
call; each worker builds one decoder per field kind, once. A timeout or a broken
worker is no reading: the call goes on with the transcript as heard.
"""

from __future__ import annotations

import asyncio
import threading
from typing import ClassVar

from loguru import logger

from services.worker_processes import LazyProcessPool
from services.world.field_grammar import FieldKind, FieldReading, recognize_field

WORKERS = 1


class FieldRecognizer:
    _shared: ClassVar[FieldRecognizer | None] = None
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, workers: int = WORKERS) -> None:
        self._pool = LazyProcessPool(workers, "grammar pass")

    @classmethod
    def shared(cls) -> FieldRecognizer:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    @classmethod
    def started(cls) -> list[FieldRecognizer]:
        with cls._shared_lock:
            return [cls._shared] if cls._shared is not None else []

    async def recognize(self, pcm: bytes, sample_rate: int, kind: FieldKind, *,
                        timeout_s: float) -> FieldReading | None:
        """The field as the grammar hears it, or None (timeout, lost worker, error)."""
        try:
            await asyncio.to_thread(self._pool.start)  # spawning takes a second: not here
            return await asyncio.wait_for(
                self._pool.run(recognize_field, pcm, sample_rate, kind), timeout_s)
        except TimeoutError:
            logger.warning(f"grammar pass ({kind}): no answer in {timeout_s} s")
        except Exception as error:  # noqa: BLE001 - no reading; the transcript stands
            logger.warning(f"grammar pass ({kind}) failed ({type(error).__name__})")
        return None

    def shutdown(self) -> None:
        self._pool.shutdown()
