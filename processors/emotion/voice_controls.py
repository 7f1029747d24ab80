"""A voice tone → the TTS settings that render it, per provider (data/voice_tones.yaml).

Per turn the tone controller sends these as a settings update before the text: only
the voice's character changes; speed and volume stay the workspace's.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pipecat.services.settings import TTSSettings
from pydantic import BaseModel, ConfigDict, Field, model_validator

from call.voice_settings import TONES

TONES_FILE = Path(__file__).resolve().parent / "data" / "voice_tones.yaml"


class _ElevenLabs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stability: float = Field(ge=0, le=1)
    style: float = Field(ge=0, le=1)


class _Espeak(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pitch: int = Field(ge=0, le=100)
    range: int = Field(ge=0, le=100)


class _Tone(BaseModel):
    model_config = ConfigDict(extra="forbid")

    elevenlabs: _ElevenLabs
    espeak: _Espeak


class VoiceTones(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tones: dict[str, _Tone]

    @model_validator(mode="after")
    def _every_tone(self) -> VoiceTones:
        if set(self.tones) != TONES:
            raise ValueError(f"voice tones must be exactly {sorted(TONES)}")
        return self


@lru_cache(maxsize=1)
def voice_tones(path: Path = TONES_FILE) -> VoiceTones:
    return VoiceTones.model_validate(yaml.safe_load(path.read_text()))


def tts_settings_for(tone: str, settings_class: type[TTSSettings], provider: str) -> TTSSettings:
    """The settings delta that gives `provider`'s voice this tone (nothing else changed)."""
    shape = voice_tones().tones.get(tone) or voice_tones().tones["neutral"]
    if provider == "elevenlabs":
        return settings_class(stability=shape.elevenlabs.stability, style=shape.elevenlabs.style)
    return settings_class(pitch=shape.espeak.pitch, pitch_range=shape.espeak.range)
