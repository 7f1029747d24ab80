"""Workspace voice settings (seed 000, "Voice settings"), parsed with safe defaults.

The stored JSON is edited by people and APIs, so parsing never fails a call: an
unparseable blob gives the defaults, an invalid field gives that field's default
and keeps the rest. Problems are returned so the caller can record an event.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# Seed 000, "Proactive Intelligence": healthcare defaults when none are configured.
DEFAULT_SENSITIVE_TOPICS = (
    "test results", "diagnosis", "billing", "payment", "insurance", "denial",
    "emergency", "referral", "specialist", "surgery", "procedure", "medication",
)


class VoiceSettings(BaseModel):
    """Per-workspace baseline for the voice experience."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    tone: str = "neutral"
    speed: float = Field(default=1.0, ge=0.7, le=1.2)
    volume: float = Field(default=1.0, ge=0.0, le=2.0)
    voice_id: str | None = None
    keyterms: tuple[str, ...] = ()
    correction_categories: tuple[str, ...] = ()
    sensitive_topics: tuple[str, ...] = DEFAULT_SENSITIVE_TOPICS
    post_call_analysis_enabled: bool = False
    transcript_correction_enabled: bool = False
    fillers_enabled: bool = True
    emotion_enabled: bool = True


def parse_voice_settings(raw: Any) -> tuple[VoiceSettings, list[str]]:
    """Parse stored settings; returns the settings and a list of problems found."""
    if raw is None:
        return VoiceSettings(), []
    if isinstance(raw, (str, bytes)):
        try:
            raw = json.loads(raw)
        except ValueError:
            return VoiceSettings(), ["voice settings are not valid JSON; using defaults"]
    if not isinstance(raw, dict):
        return VoiceSettings(), ["voice settings are not an object; using defaults"]
    try:
        return VoiceSettings.model_validate(raw), []
    except ValidationError as error:
        bad_fields = {str(err["loc"][0]) for err in error.errors() if err["loc"]}
        kept = {key: value for key, value in raw.items() if key not in bad_fields}
        problems = [f"voice setting {name!r} is invalid; using its default" for name in sorted(bad_fields)]
        try:
            return VoiceSettings.model_validate(kept), problems
        except ValidationError:
            return VoiceSettings(), problems + ["voice settings unusable; using defaults"]
