"""Word timings of a turn on the pipeline clock (ms from the pipeline start).

Each provider reports word times against its own origin; these functions move them onto
the clock `observers.call_record_observer` uses for every other turn time
(`user_speech_start_ms`, `agent_speech_start_ms`...). The recorder then shifts them by
the call's recording offset, so stored word times point into the stereo recording
(observers/README.md, "Word timings"):

- PocketSphinx: seconds from the start of the VAD segment; the segment's end is
  the VAD stop the recorder saw (`SegmentWords`).
- Deepgram live: seconds from the first audio sent on the stream, which is the
  call's first caller audio frame.
- TTS (eSpeak, ElevenLabs): each `TTSTextFrame` carries its playback time as a
  pipeline-clock `pts`; a word ends where the next begins, the last where the
  agent stopped speaking.

A provider that gives no times yields None: no time is ever made up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.pocketsphinx.stt import SegmentWords

WordDict = dict[str, Any]


def _word(word: str, start_ms: int, end_ms: int) -> WordDict:
    return {"word": word, "start_ms": int(start_ms), "end_ms": int(max(start_ms, end_ms))}


def segment_words(segment: SegmentWords, vad_stop_ms: int | None) -> list[WordDict] | None:
    """A segment's words, placed so the segment's audio ends at `vad_stop_ms`."""
    if vad_stop_ms is None or not segment.words:
        return None
    return [
        _word(w.word,
              vad_stop_ms - round(1000 * (segment.audio_end_s - w.start_s)),
              vad_stop_ms - round(1000 * (segment.audio_end_s - w.end_s)))
        for w in segment.words
    ]


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def deepgram_words(result: Any, stream_start_ms: int | None) -> list[WordDict] | None:
    """A Deepgram `Results` message's words (pydantic model or plain dict)."""
    if stream_start_ms is None:
        return None
    channel = _field(result, "channel")
    alternatives = _field(channel, "alternatives") if channel is not None else None
    if not alternatives:
        return None
    words = _field(alternatives[0], "words") or []
    timed = []
    for item in words:
        start, end = _field(item, "start"), _field(item, "end")
        text = _field(item, "punctuated_word") or _field(item, "word")
        if start is None or end is None or not text:
            return None
        timed.append(_word(str(text), stream_start_ms + round(1000 * float(start)),
                           stream_start_ms + round(1000 * float(end))))
    return timed or None


def caller_words(result: Any, vad_stop_ms: int | None,
                 stream_start_ms: int | None) -> list[WordDict] | None:
    """The words of one final transcription, whichever STT produced it."""
    if isinstance(result, SegmentWords):
        return segment_words(result, vad_stop_ms)
    if result is not None:
        return deepgram_words(result, stream_start_ms)
    return None


def spoken_words(starts: Sequence[tuple[str, int]], end_ms: int | None) -> list[WordDict] | None:
    """TTS words from their start times: each ends where the next starts, the last at
    `end_ms` (when the agent stopped speaking). Words after `end_ms` were never played
    (barge-in) and are left out."""
    if not starts or end_ms is None:
        return None
    played = [(word, start) for word, start in starts if start < end_ms]
    return [
        _word(word, start, played[i + 1][1] if i + 1 < len(played) else end_ms)
        for i, (word, start) in enumerate(played)
    ] or None
