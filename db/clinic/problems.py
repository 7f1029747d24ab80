"""What is wrong with a clinic file, where, in plain words.

Every problem is reported at once so one round of edits fixes them all; the list is
bounded (a file of garbage must not produce a million lines) and values are echoed
short.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MAX_PROBLEMS = 200

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    path: str  # e.g. "schedules[2].blocks[0]"; "" for the file as a whole
    line: int | None  # 1-based line in the text read; None when read from data
    message: str

    def format(self, source: str = "") -> str:
        """`FILE:LINE: reason`, the shape editors and terminals link to."""
        where = source or "<clinic file>"
        if self.line is not None:
            return f"{where}:{self.line}: {self.message}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class ClinicFileInvalid(Exception):
    """The file (or the change it asks for) cannot be applied; nothing was changed."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        first = problems[0].format() if problems else "invalid clinic file"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(first + more)


def short(value: Any, limit: int = 40) -> str:
    """A value echoed back in a message: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_path(path: Path) -> str:
    """("schedules", 2, "blocks", 0) → "schedules[2].blocks[0]"."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def bounded(problems: Iterable[Problem]) -> list[Problem]:
    """In file order (lines first, then the rest), at most MAX_PROBLEMS, saying how many
    more there were."""
    ordered = sorted(problems, key=lambda p: (p.line is None, p.line or 0))
    if len(ordered) <= MAX_PROBLEMS:
        return ordered
    kept = ordered[:MAX_PROBLEMS]
    kept.append(Problem("", None, f"and {len(ordered) - MAX_PROBLEMS} more problems "
                                  "(fix these first)"))
    return kept
