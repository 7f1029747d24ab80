"""Guidance the LLM must never speak, taken out of its streamed text (seed 003,
"Guidance Stripper").

What is taken out: `<guidance>…</guidance>` blocks (any case, nested, even unterminated
at the end of a reply) and a stray `</guidance>`; the known directive tags of
`data/guidance_tags.yaml` in brackets (`[HEALTH]`, `[VOICE: Anger, valence=-0.62]`), at
most 120 characters on one line; and the conversation director's line, whether it comes
after `[Director guidance]` or starts a line on its own (`main/medium/warm | …`), to the
end of that line. Any other bracket (`press [1] for yes`, `[sic]`, `[Tuesday]`) is
speech and kept. The text arrives in chunks cut anywhere, so a possible start of a tag
is held back until the next chunk shows what it is; everything else is passed on at once.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import product
from pathlib import Path
from typing import Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.observers.director import EngagementLevel, GuidanceTone, Phase

DATA_FILE = Path(__file__).resolve().parent / "data" / "guidance_tags.yaml"
OPEN_TAG = "<guidance>"
CLOSE_TAG = "</guidance>"
MAX_DIRECTIVE_CHARS = 120

TagKind = Literal["tag", "line"]
Headline = Literal["yes", "maybe", "no"]


class TagFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    tags: list[str] = Field(min_length=1)
    labelled: list[str]
    line: list[str]

    @model_validator(mode="after")
    def _names(self) -> TagFile:
        names = [name.lower() for name in self.tags + self.labelled + self.line]
        for name in names:
            if not re.fullmatch(r"[a-z][a-z_ ]*[a-z]", name):
                raise ValueError(f"a tag is letters, spaces and underscores: {name!r}")
        if len(set(names)) != len(names):
            raise ValueError("a tag is listed twice")
        return self


class DirectiveTags:
    """The known directive tags and the director's headlines, as the filter asks them."""

    def __init__(self, spec: TagFile) -> None:
        self._kinds: dict[str, TagKind] = {t.lower(): "tag" for t in spec.tags}
        self._kinds.update({t.lower(): "line" for t in spec.line})
        self._labels = tuple(f"{t.lower()}:" for t in spec.labelled)
        self._headlines = tuple(
            f"{p}/{e}/{t} |" for p, e, t in product(
                get_args(Phase), get_args(EngagementLevel), get_args(GuidanceTone)))
        self._headline = re.compile("|".join(
            re.escape(h[:-2]) + r"[ \t]*\|" for h in self._headlines))

    def kind(self, inner: str) -> TagKind | None:
        """What `[inner]` is: a tag, a tag followed by a guidance line, or speech (None)."""
        name = inner.strip().lower()
        if name.startswith(self._labels):
            return "tag"
        return self._kinds.get(name)

    def could_open(self, partial: str) -> bool:
        """Whether `[partial` (not yet closed) may still become a known tag."""
        name = partial.lower()
        return name.startswith(self._labels) or any(
            known.startswith(name) for known in (*self._kinds, *self._labels))

    def headline(self, line: str) -> Headline:
        """Whether a line starts with the director's `phase/engagement/tone |`."""
        text = line.lstrip(" \t").lower()
        if self._headline.match(text):
            return "yes"
        if any(h.startswith(text) for h in self._headlines):
            return "maybe"
        return "no"


@lru_cache(maxsize=1)
def directive_tags(path: Path = DATA_FILE) -> DirectiveTags:
    with path.open(encoding="utf-8") as handle:
        return DirectiveTags(TagFile.model_validate(yaml.safe_load(handle)))


class GuidanceFilter:
    """Streaming filter for one reply (`reset()` between replies)."""

    def __init__(self, tags: DirectiveTags | None = None) -> None:
        self._tags = tags or directive_tags()
        self.reset()

    def reset(self) -> None:
        self._pending = ""
        self._depth = 0  # how many <guidance> blocks are open
        self._skip_line = False  # inside a director line
        self._line_start = True
        self._removed = False  # something was taken out since the last emitted text
        self._last_char = ""
        self.removed_count = 0

    def feed(self, chunk: str) -> str:
        """The part of the text so far that is certainly speech, not yet returned."""
        self._pending += chunk
        out: list[str] = []
        while self._pending and self._step(out):
            pass
        return "".join(out)

    def _step(self, out: list[str]) -> bool:
        """One move through the pending text; False when it must wait for more."""
        if self._depth:
            return self._in_guidance()
        if self._skip_line:
            end = self._pending.find("\n")
            self._pending = "" if end == -1 else self._pending[end + 1:]
            self._skip_line = end == -1
            self._line_start = True
            return end != -1
        if self._line_start:
            headline = self._tags.headline(self._pending)
            if headline == "maybe":
                return False
            self._line_start = False
            if headline == "yes":
                self._skip_line = True
                self._note_removal()
                return True
        start = _next_candidate(self._pending)
        if start == -1:
            out.append(self._emit(self._pending))
            self._pending = ""
            return False
        if start:
            out.append(self._emit(self._pending[:start]))
            self._pending = self._pending[start:]
        verdict = self._classify()
        if verdict is None:
            return False
        kind, length = verdict
        if kind == "speech":
            out.append(self._emit(self._pending[:length]))
            self._line_start = self._pending[0] == "\n"
        else:
            self._depth = 1 if kind == "open" else 0
            self._skip_line = kind == "line"
            self._note_removal()
        self._pending = self._pending[length:]
        return True

    def _in_guidance(self) -> bool:
        text = self._pending.lower()
        opens, closes = text.find(OPEN_TAG), text.find(CLOSE_TAG)
        if closes == -1 and opens == -1:
            # Keep only what could be the start of a tag.
            self._pending = self._pending[-(len(CLOSE_TAG) - 1):]
            return False
        if opens != -1 and (closes == -1 or opens < closes):
            self._depth += 1
            self._pending = self._pending[opens + len(OPEN_TAG):]
        else:
            self._depth -= 1
            self._pending = self._pending[closes + len(CLOSE_TAG):]
        return True

    def _classify(self) -> tuple[str, int] | None:
        """What the pending text starting with `<`, `[` or a newline is: ("speech", n),
        ("open", n), ("directive", n), ("line", n), or None when more text is needed."""
        text = self._pending
        if text[0] == "\n":
            return "speech", 1
        if text[0] == "<":
            low = text.lower()
            if low.startswith(OPEN_TAG):
                return "open", len(OPEN_TAG)
            if low.startswith(CLOSE_TAG):
                return "directive", len(CLOSE_TAG)  # a closing tag with nothing open
            if OPEN_TAG.startswith(low) or CLOSE_TAG.startswith(low):
                return None
            return "speech", 1
        end = text.find("]", 1, MAX_DIRECTIVE_CHARS + 2)
        newline = text.find("\n", 1, MAX_DIRECTIVE_CHARS + 2)
        if end != -1 and (newline == -1 or end < newline):
            kind = self._tags.kind(text[1:end])
            if kind is None:
                return "speech", 1
            return ("line" if kind == "line" else "directive"), end + 1
        if newline == -1 and len(text) <= MAX_DIRECTIVE_CHARS + 1 and (
                self._tags.could_open(text[1:])):
            return None
        return "speech", 1  # not a known tag, or never closed on its line: speech

    def flush(self) -> str:
        """The end of the reply: what is left, unless it is (part of) guidance."""
        pending, self._pending = self._pending, ""
        cut_tag = (pending[:1] == "[" and self._tags.could_open(pending[1:])) or (
            pending[:1] == "<" and (OPEN_TAG.startswith(pending.lower())
                                    or CLOSE_TAG.startswith(pending.lower())))
        if self._depth or self._skip_line or cut_tag:
            if cut_tag:
                self._note_removal()
            self._depth, self._skip_line = 0, False
            return ""
        return self._emit(pending)

    def _note_removal(self) -> None:
        self._removed = True
        self.removed_count += 1

    def _emit(self, text: str) -> str:
        if self._removed and (not self._last_char or self._last_char.isspace()):
            text = text.lstrip()  # no double space where a tag was
        if text:
            self._removed = False
            self._last_char = text[-1]
        return text


def _next_candidate(text: str) -> int:
    positions = [i for i in (text.find("<"), text.find("["), text.find("\n")) if i != -1]
    return min(positions) if positions else -1


def is_guidance_message(text: str) -> bool:
    """True for the observers' guidance lines in the LLM context ("[HEALTH] …")."""
    text = text.lstrip()
    end = text.find("]", 1, MAX_DIRECTIVE_CHARS + 2)
    return text[:1] == "[" and end != -1 and directive_tags().kind(text[1:end]) is not None


def strip_guidance(text: str) -> str:
    """The whole text without guidance (the same rules as the streamed filter)."""
    spoken = GuidanceFilter()
    return (spoken.feed(text) + spoken.flush()).strip()
