"""Rendered greetings on disk, shared by the worker processes of one machine.

The answer webhook starts a call's greeting rendering while the phone rings, in
whichever worker process took the webhook; the media stream may reach another one (the
kernel hands each connection to any worker). The rendering is written here, atomically
(a reader finds a whole file or none), so the process that runs the call plays it at
once instead of synthesizing it again. Files are private (0600 in a 0700 folder: an
outbound greeting says the callee's first name), named by a hash of voice and text, and
only the newest `MAX_FILES`, none older than `MAX_AGE_S`, are kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from loguru import logger

from lib.private_files import private_dir, write_private
from processors.voice.greeting_player_processor import PrerenderedSpeech

# voice identity, text, sample rate
GreetingKey = tuple[str, str, int]

MAX_FILES = 256
MAX_AGE_S = 24 * 3600.0
SUFFIX = ".greeting"


class GreetingStore:
    """One folder of rendered greetings; every method is blocking (small files)."""

    def __init__(self, directory: Path, *, max_files: int = MAX_FILES,
                 max_age_s: float = MAX_AGE_S) -> None:
        self.directory = directory
        self.max_files = max_files
        self.max_age_s = max_age_s

    def path(self, key: GreetingKey) -> Path:
        digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:32]
        return self.directory / f"{digest}{SUFFIX}"

    def load(self, key: GreetingKey) -> PrerenderedSpeech | None:
        """The rendering of `key` if one is stored (None: none, or unreadable)."""
        try:
            raw = self.path(key).read_bytes()
        except OSError:
            return None
        header, _, audio = raw.partition(b"\n")
        try:
            meta = json.loads(header)
            speech = PrerenderedSpeech(
                text=meta["text"], sample_rate=int(meta["sample_rate"]), audio=audio,
                words=tuple((str(word), float(start)) for word, start in meta["words"]))
        except (ValueError, KeyError, TypeError):
            return None
        return speech if (speech.text, speech.sample_rate) == (key[1], key[2]) else None

    def save(self, key: GreetingKey, speech: PrerenderedSpeech) -> None:
        """Store a rendering (replacing any), then drop the oldest beyond the bounds.
        Never raises: a greeting that is not stored is only rendered again."""
        try:
            private_dir(self.directory)
            target = self.path(key)
            partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
            header = json.dumps({"text": speech.text, "sample_rate": speech.sample_rate,
                                 "words": [list(word) for word in speech.words]})
            write_private(partial, header.encode() + b"\n" + speech.audio)
            os.replace(partial, target)
            self.prune()
        except OSError as error:
            logger.warning(f"greeting rendering not stored ({type(error).__name__})")

    def prune(self) -> int:
        """Delete renderings past the age bound and the oldest past the count; how many."""
        now = time.time()
        entries: list[tuple[float, Path]] = []
        for path in self.directory.glob(f"*{SUFFIX}"):
            try:
                entries.append((path.stat().st_mtime, path))
            except OSError:
                continue
        entries.sort(reverse=True)
        stale = [path for number, (mtime, path) in enumerate(entries)
                 if number >= self.max_files or now - mtime > self.max_age_s]
        for path in stale:
            path.unlink(missing_ok=True)
        return len(stale)
