"""Workspace voice settings, parsed with safe defaults.

The stored JSON is edited by people and APIs, so parsing never fails a call: an
unparseable blob gives the defaults, an invalid field gives that field's default
and keeps the rest. Problems are returned so the caller can record an event.

What the control plane stores goes through `VoiceSettingsInput` instead: strict, so a
typo or a bad value is refused with the field named rather than silently defaulted on
the next call. `voice_settings_policy()` is the policy table
(data/voice_settings_policy.yaml): how emotion adaptation may touch each field.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from services.keyterms import MAX_KEYTERMS, merge_keyterms

# The tones the agent's voice can take (a workspace default, or chosen per turn).
TONES = frozenset({"neutral", "calm", "sympathetic", "enthusiastic", "content", "curious"})
POLICY_FILE = Path(__file__).resolve().parent / "data" / "voice_settings_policy.yaml"
MAX_TERM_CHARS = 60
MAX_TOPICS = 50


def printable(text: str) -> str:
    """Text an operator typed: no control characters or lone surrogates (PostgreSQL
    refuses NUL, and a surrogate cannot be encoded: either would be a server error)."""
    if any(unicodedata.category(ch) in ("Cc", "Cs") and ch not in "\t\n\r" for ch in text):
        raise ValueError("must not contain control characters")
    return text


_PRINTABLE = r"[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
# Words from an operator, checked before they reach the database: not blank, no control
# characters (the pattern puts the rule in the OpenAPI spec; `printable` adds surrogates).
PlainText = Annotated[
    str, Field(pattern=rf"^{_PRINTABLE}*[^\s\x00-\x1f\x7f-\x9f]{_PRINTABLE}*$"),
    AfterValidator(printable),
]
Term = Annotated[PlainText, Field(max_length=MAX_TERM_CHARS)]
ToneName = Literal[tuple(sorted(TONES))]  # type: ignore[valid-type]

# Healthcare topics treated as sensitive when a workspace configures none.
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
    # Each finished call summarised and scored, its memories kept (runner/call_analysis.py).
    post_call_analysis_enabled: bool = True
    # Each recorded call re-transcribed after it ends (runner/call_runner.finish_call).
    transcript_correction_enabled: bool = False
    fillers_enabled: bool = True
    emotion_enabled: bool = True

    @field_validator("tone")
    @classmethod
    def _known_tone(cls, tone: str) -> str:
        if tone not in TONES:
            raise ValueError(f"unknown tone; one of {sorted(TONES)}")
        return tone


class VoiceSettingsInput(VoiceSettings):
    """What an operator may store: unknown fields, loose types ("yes" for true, "1.0"
    for a number) and malformed term lists are refused, each error naming its field.
    Only the fields given are stored, so the others keep following the defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tone: ToneName = "neutral"
    voice_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$")
    keyterms: tuple[Term, ...] = Field(default=(), max_length=MAX_KEYTERMS)
    correction_categories: tuple[Term, ...] = Field(default=(), max_length=MAX_TOPICS)
    sensitive_topics: tuple[Term, ...] = Field(default=DEFAULT_SENSITIVE_TOPICS,
                                               max_length=MAX_TOPICS)

    @field_validator("*", mode="before")
    @classmethod
    def _exact_type(cls, value: Any, info: ValidationInfo) -> Any:
        annotation = cls.model_fields[info.field_name].annotation
        if annotation is bool and not isinstance(value, bool):
            raise ValueError("must be true or false")
        if annotation is float and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError("must be a number")
        if annotation is str and not isinstance(value, str):
            raise ValueError("must be a string")
        if get_origin(annotation) is tuple and not (
                isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)):
            raise ValueError("must be a list of strings")
        return value

    @field_validator("keyterms", "correction_categories", "sensitive_topics")
    @classmethod
    def _terms(cls, terms: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        limit = MAX_KEYTERMS if info.field_name == "keyterms" else MAX_TOPICS
        return tuple(clean_terms(terms, limit=limit))


def clean_terms(terms: Iterable[str], *, limit: int = MAX_KEYTERMS) -> list[str]:
    """Terms as the keyterm merge normalises them (whitespace collapsed, case-insensitive
    duplicates dropped), each 1-60 characters and at most `limit`; ValueError otherwise."""
    terms = list(terms)
    if len(terms) > limit:
        raise ValueError(f"at most {limit} terms")
    for position, term in enumerate(terms):
        length = len(" ".join(term.split()))
        if not 1 <= length <= MAX_TERM_CHARS:
            raise ValueError(f"term {position} must be 1-{MAX_TERM_CHARS} characters")
        try:
            printable(term)
        except ValueError as error:
            raise ValueError(f"term {position} {error}") from None
    return merge_keyterms(terms, limit=limit)


def call_keyterms(service_keyterms: Iterable[str], voice: VoiceSettings,
                  system_keyterms: Iterable[str]) -> list[str]:
    """The keyterms a call's STT is given: service, then workspace,
    then system — additive, the first spelling wins."""
    return merge_keyterms(service_keyterms, voice.keyterms, system_keyterms)


def stored_fields(raw: Any) -> dict[str, Any]:
    """The valid, known fields of stored settings (what a partial update builds on)."""
    parsed, _problems = parse_voice_settings(raw)
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    if not isinstance(raw, dict):
        return {}
    dumped = parsed.model_dump(mode="json")
    return {name: dumped[name] for name in raw
            if name in VoiceSettings.model_fields and raw[name] == dumped[name]}


Adaptation = Literal["replaced", "never", "merged", "fallback", "none"]


class FieldPolicy(BaseModel):
    """One row of the policy table: how emotion adaptation may touch one voice setting."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: str
    purpose: str = Field(min_length=1)
    adaptation: Adaptation
    rule: str = Field(min_length=1)
    note: str = Field(min_length=1)


class _PolicyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    fields: list[FieldPolicy]


def load_voice_settings_policy(path: Path = POLICY_FILE) -> tuple[FieldPolicy, ...]:
    """The policy table, checked: exactly one row per voice setting, in any order."""
    with path.open(encoding="utf-8") as handle:
        rows = _PolicyFile.model_validate(yaml.safe_load(handle)).fields
    names = [row.field for row in rows]
    expected = set(VoiceSettings.model_fields)
    missing, unknown = sorted(expected - set(names)), sorted(set(names) - expected)
    if len(set(names)) != len(names) or missing or unknown:
        raise ValueError(f"{path.name}: one row per voice setting; missing {missing}, "
                         f"unknown {unknown}, rows {len(names)}")
    return tuple(rows)


@lru_cache(maxsize=1)
def voice_settings_policy() -> tuple[FieldPolicy, ...]:
    return load_voice_settings_policy()


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
