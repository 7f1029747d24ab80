"""Loading what the emotion layers read before the first call."""

from __future__ import annotations

from services.vader.emotion import LocalTextAnalyzer


def load_emotion_data() -> None:
    """Load what the emotion layers read (tables, rules, the VADER lexicon) before the
    first call, so no caller's first words wait on a file read and its validation."""
    from processors.emotion.fillers import filler_set
    from processors.emotion.steering import steering_rules
    from processors.emotion.voice_controls import voice_tones
    from services.emotion.dimensions import emotion_table

    emotion_table(), steering_rules(), filler_set(), voice_tones()
    LocalTextAnalyzer().analyze("warming up, thank you", at=0.0)
