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


def reply_frames(text: str, *, skip_tts: bool = False) -> list[Frame]:
    """The frames of a whole reply saying `text`."""
    words = LLMTextFrame(text)
    words.skip_tts = skip_tts
    return [LLMFullResponseStartFrame(), words, LLMFullResponseEndFrame()]
