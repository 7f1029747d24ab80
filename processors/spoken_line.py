"""A line the agent says on its own, framed as an LLM reply would be.

The TTS speaks it (or, in a text session, `skip_tts` keeps it words only), the call
recorder records it as an agent turn, and the assistant aggregator adds it to the
context: every processor downstream treats it like any other reply.
"""

from __future__ import annotations

from pipecat.frames.frames import (
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
)

# Metadata key on a reply's start frame: the agent says this on its own (a check-in, the
# safety holding line), not in answer to a caller turn, so newer caller words never
# make it stale (the reply guard lets it through).
OWN_LINE = "agent_own_line"


def reply_frames(text: str, *, skip_tts: bool = False, own_line: bool = False) -> list[Frame]:
    """The frames of a whole reply saying `text`."""
    start = LLMFullResponseStartFrame()
    if own_line:
        start.metadata[OWN_LINE] = True
    words = LLMTextFrame(text)
    words.skip_tts = skip_tts
    return [start, words, LLMFullResponseEndFrame()]
