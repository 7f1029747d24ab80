"""Guidance the LLM must never speak, taken out of its streamed text.

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
from enum import Enum
from functools import lru_cache
from itertools import product
from pathlib import Path
from typing import get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from processors.conversation.director import EngagementLevel, GuidanceTone, Phase

DATA_FILE = Path(__file__).resolve().parent / "data" / "guidance_tags.yaml"
OPEN_TAG = "<guidance>"
CLOSE_TAG = "</guidance>"
MAX_DIRECTIVE_CHARS = 120
# A bracket closed on its own line within the limit: `[inner]`.
_BRACKET = re.compile(r"\[([^\]\n]{0,%d})\]" % MAX_DIRECTIVE_CHARS)
_GUIDANCE_TAG = re.compile(r"<(/?)guidance>", re.IGNORECASE)


class Piece(Enum):
    """What the text at a `<`, `[` or line start is."""

    SPEECH = "speech"
    OPEN = "open"  # <guidance>: hidden until it closes
    DIRECTIVE = "directive"  # a tag, taken out
    LINE = "line"  # a tag whose line is guidance to its end


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
        self._kinds = {t.lower(): Piece.DIRECTIVE for t in spec.tags}
        self._kinds.update({t.lower(): Piece.LINE for t in spec.line})
        self._labels = tuple(f"{t.lower()}:" for t in spec.labelled)
        self._headlines = tuple(
            f"{p}/{e}/{t} |" for p, e, t in product(
                get_args(Phase), get_args(EngagementLevel), get_args(GuidanceTone)))
        self._headline = re.compile("|".join(
            re.escape(h[:-2]) + r"[ \t]*\|" for h in self._headlines))

    def kind(self, inner: str) -> Piece:
        """What `[inner]` is: a directive, a directive with a guidance line, or speech."""
        name = inner.strip().lower()
        if name.startswith(self._labels):
            return Piece.DIRECTIVE
        return self._kinds.get(name, Piece.SPEECH)

    def could_open(self, partial: str) -> bool:
        """Whether `[partial` (not yet closed) may still become a known tag."""
        name = partial.lower()
        return name.startswith(self._labels) or any(
            known.startswith(name) for known in (*self._kinds, *self._labels))

    def headline(self, line: str) -> bool | None:
        """Whether a line starts with the director's `phase/engagement/tone |`; None while
        the text so far could still become one."""
        text = line.lower()
        if self._headline.match(text):
            return True
        if any(h.startswith(text) for h in self._headlines):
            return None
        return False


def load_tags(path: Path = DATA_FILE) -> DirectiveTags:
    return DirectiveTags(TagFile.model_validate(yaml.safe_load(path.read_bytes())))


@lru_cache(maxsize=1)
def directive_tags() -> DirectiveTags:
    """The bundled tags, read once per process."""
    return load_tags()


class GuidanceFilter:
    """Streaming filter for one reply (`flush()` ends it; `reset()` drops it)."""

    def __init__(self, tags: DirectiveTags | None = None) -> None:
        self._tags = tags or directive_tags()
        self.reset()

    def reset(self) -> None:
        self._pending = ""
        self._depth = 0  # how many <guidance> blocks are open
        self._skip_line = False  # inside a director line
        self._line_start = True
        self._after_space = True  # nothing spoken yet, or the last of it was a space
        self._trim = False  # a tag was taken out after a space: no second space
        self.removed_count = 0

    def feed(self, chunk: str) -> str:
        """The part of the text so far that is certainly speech, not yet returned."""
        self._pending += chunk
        out: list[str] = []
        while self._step(out):
            pass
        return "".join(out)

    def _step(self, out: list[str]) -> bool:
        """One move through the pending text; False when it must wait for more."""
        if not self._pending:
            return False
        if self._depth:
            return self._in_guidance()
        if self._skip_line:
            if "\n" not in self._pending:
                return False
            self._pending = self._pending.partition("\n")[2]
            self._skip_line = False
            self._line_start = True
            return True
        if self._line_start:
            headline = self._tags.headline(self._pending)
            if headline is None:
                return False
            self._line_start = False
            if headline:
                self._removal(open_guidance=False, skip_line=True)
                return True
        start = _next_candidate(self._pending)
        if start:
            out.append(self._emit(self._pending[:start]))
            self._pending = self._pending[start:]
            return True
        piece, length = self._classify()
        if length == 0:
            return False  # wait for more text
        if piece is Piece.SPEECH:
            out.append(self._emit(self._pending[:length]))
            self._line_start = self._pending[0] == "\n"
        else:
            self._removal(open_guidance=piece is Piece.OPEN, skip_line=piece is Piece.LINE)
        self._pending = self._pending[length:]
        return True

    def _in_guidance(self) -> bool:
        tag = _GUIDANCE_TAG.search(self._pending)
        if tag is None:
            return False
        self._depth += -1 if tag.group(1) else 1
        self._pending = self._pending[tag.end():]
        return True

    def _classify(self) -> tuple[Piece, int]:
        """What the pending text starting with `<`, `[` or a newline is, and how long; a
        length of 0 when more text is needed to tell."""
        text = self._pending
        if text[0] == "<":
            low = text.lower()
            if low.startswith(OPEN_TAG):
                return Piece.OPEN, len(OPEN_TAG)
            if low.startswith(CLOSE_TAG):
                return Piece.DIRECTIVE, len(CLOSE_TAG)  # a closing tag with nothing open
            if OPEN_TAG.startswith(low) or CLOSE_TAG.startswith(low):
                return Piece.SPEECH, 0
        elif text[0] == "[":
            bracket = _BRACKET.match(text)
            kind = self._tags.kind(bracket.group(1)) if bracket else Piece.SPEECH
            if kind is not Piece.SPEECH:
                return kind, bracket.end()
            if not bracket and "\n" not in text and len(text) <= MAX_DIRECTIVE_CHARS + 1 and (
                    self._tags.could_open(text[1:])):
                return Piece.SPEECH, 0
        return Piece.SPEECH, 1  # not a tag, or a bracket never closed on its line

    def flush(self) -> str:
        """The end of the reply: what is left, unless it is (part of) guidance; the
        filter is then ready for the next reply (`removed_count` is kept until reset)."""
        pending = self._pending
        low = pending.lower()
        cut_tag = (pending[:1] == "[" and self._tags.could_open(pending[1:])) or (
            pending[:1] == "<" and (OPEN_TAG.startswith(low) or CLOSE_TAG.startswith(low)))
        hidden = self._depth or self._skip_line or cut_tag
        if cut_tag:
            self.removed_count += 1
        spoken = "" if hidden else self._emit(pending)
        removed = self.removed_count
        self.reset()
        self.removed_count = removed
        return spoken

    def _removal(self, *, open_guidance: bool, skip_line: bool) -> None:
        self._depth = int(open_guidance)
        self._skip_line = skip_line
        self._trim = self._after_space
        self.removed_count += 1

    def _emit(self, text: str) -> str:
        if self._trim:
            text = text.lstrip()
        if text:
            self._trim = False
            self._after_space = not text[-1].strip()
        return text


def _next_candidate(text: str) -> int:
    """Where the first `<`, `[` or newline is (the text's length if none)."""
    return min((i for i in map(text.find, "<[\n") if i != -1), default=len(text))


def is_guidance_message(text: str) -> bool:
    """True for the observers' guidance lines in the LLM context ("[HEALTH] …")."""
    bracket = _BRACKET.match(text.lstrip())
    return bracket is not None and directive_tags().kind(bracket.group(1)) is not Piece.SPEECH


def strip_guidance(text: str) -> str:
    """The whole text without guidance (the same rules as the streamed filter)."""
    spoken = GuidanceFilter()
    return (spoken.feed(text) + spoken.flush()).strip()
