"""A PCM16 WAV written while the call goes on, and repaired if its process dies first.

The file grows as `<name>.wav.partial` with a header whose sizes say 0; finishing it
writes the true sizes and renames it to `<name>.wav`. A process killed mid-call leaves
the partial file with every chunk that reached the disk: `salvage` gives it the sizes
its data has and the final name, so the call keeps its recording. Blocking calls: run
them in a worker thread.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from lib.private_files import open_private, private_dir

HEADER_BYTES = 44
SAMPLE_BYTES = 2


def partial_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.partial")


def _header(sample_rate: int, channels: int, data_bytes: int) -> bytes:
    block = channels * SAMPLE_BYTES
    return (b"RIFF" + struct.pack("<I", 36 + data_bytes) + b"WAVE"
            + b"fmt " + struct.pack("<IHHIIHH", 16, 1, channels, sample_rate,
                                    sample_rate * block, block, SAMPLE_BYTES * 8)
            + b"data" + struct.pack("<I", data_bytes))


class GrowingWav:
    """One WAV being written: `append` as audio comes, `finish` once at the end."""

    def __init__(self, path: Path, sample_rate: int, channels: int) -> None:
        self.path = path
        self.sample_rate = sample_rate
        self.channels = channels
        self.data_bytes = 0
        self._file: BinaryIO | None = None

    def _open(self) -> BinaryIO:
        private_dir(self.path.parent)
        file = open_private(partial_path(self.path))
        file.write(_header(self.sample_rate, self.channels, 0))
        return file

    def append(self, pcm: bytes) -> None:
        """Interleaved PCM16 frames, written through to the disk."""
        if self._file is None:
            self._file = self._open()
        self._file.write(pcm)
        self._file.flush()
        self.data_bytes += len(pcm)

    def finish(self) -> Path:
        """The true sizes in the header, then the final name (atomic: a reader sees the
        finished file or none)."""
        if self._file is None:
            self._file = self._open()
        file, self._file = self._file, None
        with file:
            file.seek(0)
            file.write(_header(self.sample_rate, self.channels, self.data_bytes))
            file.flush()
            os.fsync(file.fileno())
        partial_path(self.path).replace(self.path)
        return self.path

    def abandon(self) -> None:
        """Stop writing (the data so far stays on disk, salvageable)."""
        if self._file is not None:
            file, self._file = self._file, None
            file.close()


@dataclass(frozen=True)
class Salvaged:
    path: Path
    seconds: float
    repaired: bool  # its header was rewritten from its data size


def repair(path: Path) -> tuple[float, bool] | None:
    """Make the header of the WAV at `path` state the data it holds (a trailing partial
    frame is cut off): its seconds, and whether it was rewritten. None when it is not a
    PCM16 WAV with the plain 44-byte header both writers here produce."""
    with path.open("r+b") as file:
        header = file.read(HEADER_BYTES)
        if (len(header) < HEADER_BYTES or header[:4] != b"RIFF" or header[8:16] != b"WAVEfmt "
                or header[36:40] != b"data"):
            return None
        _size, fmt, channels, rate, _byte_rate, block, bits = struct.unpack(
            "<IHHIIHH", header[16:36])
        if fmt != 1 or bits != 16 or channels < 1 or rate < 1 or block != channels * 2:
            return None
        size = file.seek(0, os.SEEK_END)
        data = (size - HEADER_BYTES) // block * block
        stated = struct.unpack("<I", header[40:44])[0]
        rewritten = stated != data or struct.unpack("<I", header[4:8])[0] != 36 + data
        if rewritten:
            file.truncate(HEADER_BYTES + data)
            file.seek(0)
            file.write(_header(rate, channels, data))
            file.flush()
            os.fsync(file.fileno())
    return data / block / rate, rewritten


def salvage(path: Path) -> Salvaged | None:
    """The recording meant for `path` as its process left it: a finished file as it is, a
    partial one repaired and given the final name. None when nothing with audio is there."""
    for candidate in (path, partial_path(path)):
        if not candidate.is_file():
            continue
        repaired = repair(candidate)
        if repaired is None or repaired[0] <= 0:
            continue
        if candidate != path:
            candidate.replace(path)
        seconds, rewritten = repaired
        return Salvaged(path, round(seconds, 2), rewritten)
    return None
