"""Guidance the LLM must never speak, taken out of its streamed text (seed 003,
"Guidance Stripper").

Two shapes: `<guidance>…</guidance>` blocks (any case, any length, even unterminated at
the end of a reply) and bracketed directives that start with a capital letter — `[HEALTH]`,
`[Director guidance]`, `[VOICE: Anger, valence=-0.62]` — at most 120 characters on one
line. A bracket followed by anything else (`[sic]`, `[1]`), or never closed, is speech
and kept. The text arrives in chunks cut anywhere, so a possible start of a tag is held
back until the next chunk shows what it is; everything else is passed on at once.
"""

from __future__ import annotations

import re

OPEN_TAG = "<guidance>"
CLOSE_TAG = "</guidance>"
MAX_DIRECTIVE_CHARS = 120
# A lone capitalised word in a bracket at the very end (a directive cut off by the end
# of the reply) is dropped too; anything longer that never closed was speech.
_CUT_DIRECTIVE = re.compile(r"^\[[A-Z][A-Za-z_]*$")


class GuidanceFilter:
    """Streaming filter for one reply (`reset()` between replies)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._pending = ""
        self._in_guidance = False
        self._removed = False  # something was taken out since the last emitted text
        self._last_char = ""
        self.removed_count = 0

    def feed(self, chunk: str) -> str:
        """The part of the text so far that is certainly speech, not yet returned."""
        self._pending += chunk
        out: list[str] = []
        while self._pending:
            if self._in_guidance:
                end = self._pending.lower().find(CLOSE_TAG)
                if end == -1:
                    # Keep only what could be the start of the closing tag.
                    self._pending = self._pending[-(len(CLOSE_TAG) - 1):]
                    break
                self._pending = self._pending[end + len(CLOSE_TAG):]
                self._in_guidance = False
                continue
            start = _next_candidate(self._pending)
            if start == -1:
                out.append(self._emit(self._pending))
                self._pending = ""
                break
            if start:
                out.append(self._emit(self._pending[:start]))
                self._pending = self._pending[start:]
            verdict = _classify(self._pending)
            if verdict is None:
                break  # wait for more text
            kind, length = verdict
            if kind == "speech":
                out.append(self._emit(self._pending[:length]))
                self._pending = self._pending[length:]
            elif kind == "open_guidance":
                self._pending = self._pending[length:]
                self._in_guidance = True
                self._note_removal()
            else:  # a directive
                self._pending = self._pending[length:]
                self._note_removal()
        return "".join(out)

    def flush(self) -> str:
        """The end of the reply: what is left, unless it is (part of) guidance."""
        pending, self._pending = self._pending, ""
        if self._in_guidance:
            self._in_guidance = False
            return ""
        if _CUT_DIRECTIVE.match(pending) or OPEN_TAG.startswith(pending.lower()):
            if pending:
                self._note_removal()
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
    positions = [i for i in (text.find("<"), text.find("[")) if i != -1]
    return min(positions) if positions else -1


def _classify(text: str) -> tuple[str, int] | None:
    """What the text starting with `<` or `[` is: ("speech", n), ("open_guidance", n),
    ("directive", n), or None when more text is needed to tell."""
    if text[0] == "<":
        head = text[: len(OPEN_TAG)].lower()
        if head == OPEN_TAG:
            return "open_guidance", len(OPEN_TAG)
        if OPEN_TAG.startswith(head) and len(head) < len(OPEN_TAG):
            return None
        return "speech", 1
    if len(text) < 2:
        return None
    if not text[1].isupper():
        return "speech", 1
    end = text.find("]", 1, MAX_DIRECTIVE_CHARS + 2)
    newline = text.find("\n", 1, MAX_DIRECTIVE_CHARS + 2)
    if end != -1 and (newline == -1 or end < newline):
        return "directive", end + 1
    if newline != -1 or len(text) > MAX_DIRECTIVE_CHARS + 1:
        return "speech", 1  # never closed on its line: a bracket in speech
    return None


# A context message written by an observer, not by the caller: it starts with a tag.
_GUIDANCE_MESSAGE = re.compile(r"^\s*\[(?:[A-Z][A-Z_]*|Director guidance)\]")


def is_guidance_message(text: str) -> bool:
    """True for the observers' guidance lines in the LLM context ("[HEALTH] …")."""
    return bool(_GUIDANCE_MESSAGE.match(text))


def strip_guidance(text: str) -> str:
    """The whole text without guidance (the same rules as the streamed filter)."""
    spoken = GuidanceFilter()
    return (spoken.feed(text) + spoken.flush()).strip()
