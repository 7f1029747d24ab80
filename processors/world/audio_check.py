"""Audio verification of structured data.

When the caller's turn answers a question for a name, a date, a phone number or a
member id, their raw audio for that turn is heard again beside the real-time
transcript, and each field comes back as a pair — what STT heard, the corrected value
— with a confidence from 1 to 9 that decides what the agent does:

| confidence | band    | the agent                                              |
|------------|---------|--------------------------------------------------------|
| 8–9        | use     | uses the corrected value                               |
| 5–7        | confirm | reads it back: "I have …, is that right?"              |
| 1–4        | repeat  | asks the caller to say it again, slowly                |
| both wrong | spell   | asks for it letter by letter (the audio is poor)       |

- `GeminiAudioVerifier`: the audio (WAV) and transcript to Gemini, with the workspace's
  `correction_categories` as hints; JSON held to a schema and validated.
- `LocalAudioVerifier`: a second PocketSphinx pass held to the field's grammar
  (processors/world/field_grammar.py) — dates, phone numbers, member ids; names have no
  grammar offline, so they are not checked.
A timeout or an error means no corrections: the call goes on with the transcript.
"""

from __future__ import annotations

import asyncio
import io
import wave
from dataclasses import dataclass
from datetime import date
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from language.fields import (
    normalize_member_id,
    normalize_name,
    normalize_phone,
    parse_date,
)
from lib.model_answers import parse_answer
from lib.prompts import render_prompt

FieldKind = Literal["name", "date", "phone", "member_id"]
Band = Literal["use", "confirm", "repeat", "spell"]
MIN_AUDIO_S = 0.25


@dataclass(frozen=True)
class Correction:
    field: str
    heard: str  # what the real-time transcript held ("" when it held nothing usable)
    corrected: str
    confidence: int  # 1..9


@dataclass(frozen=True)
class AudioCheck:
    kind: FieldKind
    corrections: tuple[Correction, ...]
    both_wrong: bool
    provider: str

    @property
    def band(self) -> Band:
        if self.both_wrong or not self.corrections:
            return "spell"
        lowest = min(c.confidence for c in self.corrections)
        return "use" if lowest >= 8 else "confirm" if lowest >= 5 else "repeat"

    @property
    def said(self) -> str | None:
        """The corrected value as it is read back to the caller (None: there is none)."""
        return spoken(self.kind, self.corrections[0].corrected) if self.corrections else None


class AudioVerifier(Protocol):
    name: str

    def supports(self, kind: FieldKind) -> bool: ...

    async def check(self, pcm: bytes, sample_rate: int, transcript: str, kind: FieldKind,
                    hints: list[str]) -> AudioCheck: ...


def canonical(kind: FieldKind, text: str, today: date, *, country_code: str = "1"
              ) -> str | None:
    """The field's canonical value in `text` (None: the text holds none)."""
    if kind == "phone":
        return normalize_phone(text, country_code=country_code)
    if kind == "member_id":
        return normalize_member_id(text)
    if kind == "date":
        found = parse_date(text, today)
        return found.isoformat() if found is not None else None
    return normalize_name(text)


def wav_bytes(pcm: bytes, sample_rate: int) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(pcm)
    return buffer.getvalue()


# --- offline: the field's grammar ------------------------------------------------------


class LocalAudioVerifier:
    """PocketSphinx again, held to the field's grammar, against the transcript's value.

    The two agree → certain (9). The transcript held nothing usable and the grammar
    pass did → that value at the pass's own confidence (at most 7: one engine's word).
    They disagree → the grammar's value, to confirm (at most 6). Only the transcript
    has a value → it, to confirm (5). Neither → both wrong: spell it.
    """

    name = "local"

    def __init__(self, recognizer, *, today=date.today, timeout_s: float = 2.5,
                 country_code: str = "1") -> None:
        self._recognizer, self._today, self._timeout_s = recognizer, today, timeout_s
        self._country_code = country_code

    def supports(self, kind: FieldKind) -> bool:
        return kind in ("date", "phone", "member_id")

    async def check(self, pcm: bytes, sample_rate: int, transcript: str, kind: FieldKind,
                    hints: list[str]) -> AudioCheck:
        reading = await self._recognizer.recognize(pcm, sample_rate, kind,
                                                   timeout_s=self._timeout_s)
        if reading is None:
            raise TimeoutError("grammar pass unavailable")
        heard = canonical(kind, transcript, self._today(),
                          country_code=self._country_code) or ""
        again = reading.value
        if heard and again == heard:
            corrections = (Correction(kind, heard, heard, 9),)
        elif again and not heard:
            corrections = (Correction(kind, "", again, min(reading.score, 7)),)
        elif again:
            corrections = (Correction(kind, heard, again, min(reading.score, 6)),)
        elif heard:
            corrections = (Correction(kind, heard, heard, 5),)
        else:
            return AudioCheck(kind, (), True, self.name)
        return AudioCheck(kind, corrections, False, self.name)


# --- Gemini: audio in ----------------------------------------------------------------------


class _Pair(BaseModel):
    model_config = ConfigDict(extra="ignore")
    field: str = Field(min_length=1, max_length=40)
    heard: str = Field(default="", max_length=120)
    corrected: str = Field(min_length=1, max_length=120)
    confidence: int = Field(ge=1, le=9)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    corrections: list[_Pair] = Field(default_factory=list, max_length=6)
    both_wrong: bool = False


CORRECTION_SCHEMA = {
    "type": "object",
    "properties": {
        "corrections": {"type": "array", "items": {"type": "object", "properties": {
            "field": {"type": "string"}, "heard": {"type": "string"},
            "corrected": {"type": "string"},
            "confidence": {"type": "integer", "minimum": 1, "maximum": 9}},
            "required": ["field", "heard", "corrected", "confidence"]}},
        "both_wrong": {"type": "boolean"},
    },
    "required": ["corrections", "both_wrong"],
}


def parse_check(raw: str, kind: FieldKind, today: date, *, country_code: str = "1"
                ) -> AudioCheck:
    """The model's answer as a check: each corrected value must be a valid field of
    `kind` (a value that is not is dropped); ValueError on junk."""
    answer = parse_answer(raw, _Answer, "correction answer does not fit")
    corrections = []
    for pair in answer.corrections:
        value = canonical(kind, pair.corrected, today, country_code=country_code)
        if value is not None:
            corrections.append(Correction(pair.field, pair.heard, value, pair.confidence))
    return AudioCheck(kind, tuple(corrections), answer.both_wrong, "google")


class GeminiAudioVerifier:
    name = "google"

    def __init__(self, api_key: str, *, model: str, base_url: str | None = None,
                 timeout_s: float = 2.5, today=date.today, country_code: str = "1") -> None:
        from google import genai
        from google.genai.types import HttpOptions

        self._client = genai.Client(
            api_key=api_key, http_options=HttpOptions(base_url=base_url) if base_url else None)
        self._model, self._timeout_s, self._today = model, timeout_s, today
        self._country_code = country_code

    def supports(self, kind: FieldKind) -> bool:
        return True

    async def check(self, pcm: bytes, sample_rate: int, transcript: str, kind: FieldKind,
                    hints: list[str]) -> AudioCheck:
        from google.genai import types

        prompt = render_prompt("world/audio_check.md", kind=kind.replace("_", " "),
                               transcript=transcript.replace('"', "'"),
                               hints=", ".join(hints) or "none")
        response = await asyncio.wait_for(self._client.aio.models.generate_content(
            model=self._model,
            contents=[types.Part.from_bytes(data=wav_bytes(pcm, sample_rate),
                                            mime_type="audio/wav"), prompt],
            config=types.GenerateContentConfig(
                response_mime_type="application/json", response_schema=CORRECTION_SCHEMA,
                temperature=0.0, max_output_tokens=300),
        ), self._timeout_s)
        return parse_check(response.text or "", kind, self._today(),
                           country_code=self._country_code)


# --- what the agent does -----------------------------------------------------------------


def spoken(kind: FieldKind, value: str) -> str:
    """How a value is read back to the caller."""
    if kind == "date":
        day = date.fromisoformat(value)
        return f"{day:%B} {day.day}, {day.year}"
    if kind == "phone":
        digits = value.removeprefix("+1") if value.startswith("+1") else value
        return " ".join(digits)
    if kind == "member_id":
        return " ".join(value)
    return value


def guidance(check: AudioCheck) -> str:
    """The note the engage LLM gets for this band (never read out)."""
    label = check.kind.replace("_", " ")
    best = check.corrections[0] if check.corrections else None
    if check.band == "use" and best is not None:
        return (f"[VERIFY] The caller's {label} is {best.corrected} (checked against their "
                "audio). Use it.")
    if check.band == "confirm" and best is not None:
        heard = f"heard '{best.heard}', " if best.heard else ""
        return (f"[VERIFY] The {label}: {heard}it is probably {best.corrected}. Read it back "
                "and ask the caller to confirm before using it.")
    if check.band == "repeat":
        return (f"[VERIFY] The {label} was unclear. Ask the caller to say it again, slowly.")
    return f"[VERIFY] The {label} could not be made out. Ask the caller to spell it, letter by " \
           "letter or digit by digit."
