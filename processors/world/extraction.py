"""The world model's extracted facts: what a caller mentions — new insurance, a new
phone number, email or address, how to contact them — captured from each turn and
written without a tool call, at moderate confidence.

- `RulesExtractor` (offline): the patterns of `data/extraction_rules.yaml`; every span
  must pass the field normaliser (language/fields.py) or it is not a fact.
- `ModelExtractor`: the fast model answers the same fact shapes as JSON (the provider
  holds it to a schema); each value is normalised and checked the same way, and a
  timeout, an error or junk falls back to the rules.

`CallExtraction` keeps one call's facts: written as `*_reported` clinical events for
the identified caller (source `extraction`, the caller's turn), each distinct value
once; facts heard before the caller is identified wait for the identification, and
are written unattached at the end of the call rather than lost.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal, Protocol

import asyncpg
import yaml
from loguru import logger
from pydantic import BaseModel, ConfigDict, Field, field_validator

from db import world
from db.world import Carrier, EventDraft, Provenance
from language.carriers import match_carrier
from language.fields import (
    normalize_email,
    normalize_member_id,
    normalize_phone,
)
from language.patterns import valid_regex
from language.understanding import spoken_numbers_to_digits
from lib.model_answers import parse_answer

RULES_FILE = Path(__file__).resolve().parent / "data" / "extraction_rules.yaml"
FactKind = Literal["insurance", "contact", "preference"]
MODEL_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Fact:
    """One structured fact from one caller turn (values already normalised)."""

    kind: FactKind
    values: tuple[tuple[str, str], ...]  # ("phone", "+13125550199"), ...
    heard: str  # the caller's words it came from

    @property
    def as_dict(self) -> dict[str, str]:
        return dict(self.values)

    def event(self, patient_id: str | None) -> EventDraft:
        values = self.as_dict
        if self.kind == "contact":
            said = ", ".join(f"{k} {v}" for k, v in values.items())
            return EventDraft("contact_reported", f"Caller reported new contact details: {said}.",
                              {"changes": values, "heard": self.heard}, patient_id)
        if self.kind == "insurance":
            said = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in values.items()
                             if k != "carrier_id")
            return EventDraft("insurance_reported", f"Caller reported insurance: {said}.",
                              {**values, "heard": self.heard}, patient_id)
        said = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in values.items())
        return EventDraft("preference_reported", f"Caller asked: {said}.",
                          {**values, "user_quote": self.heard}, patient_id)


class Extractor(Protocol):
    name: str

    async def extract(self, text: str, carriers: list[Carrier]) -> list[Fact]: ...


# --- rules ---------------------------------------------------------------------------


class _Rules(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: int
    phone: list[str]
    email: list[str]
    address: list[str]
    member_id: list[str]
    group_number: list[str]
    insurance_context: str
    carrier_span: str
    preferences: dict[str, dict[str, str]] = Field(default_factory=dict)

    @field_validator("phone", "email", "address", "member_id", "group_number")
    @classmethod
    def _compile_all(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            if "(?P<value>" not in valid_regex(pattern):
                raise ValueError(f"extraction pattern needs a `value` group: {pattern!r}")
        return patterns


@dataclass(frozen=True)
class CompiledRules:
    fields: dict[str, list[re.Pattern[str]]]
    insurance_context: re.Pattern[str]
    carrier_span: re.Pattern[str]
    preferences: dict[str, dict[str, re.Pattern[str]]]


@lru_cache(maxsize=1)
def extraction_rules(path: Path = RULES_FILE) -> CompiledRules:
    rules = _Rules.model_validate(yaml.safe_load(path.read_text()))
    return CompiledRules(
        fields={name: [re.compile(p) for p in getattr(rules, name)]
                for name in ("phone", "email", "address", "member_id", "group_number")},
        insurance_context=re.compile(rf"\b{rules.insurance_context}\b"),
        carrier_span=re.compile(valid_regex(rules.carrier_span)),
        preferences={kind: {value: re.compile(rf"\b(?:{valid_regex(p)})\b")
                            for value, p in values.items()}
                     for kind, values in rules.preferences.items()},
    )


def digits_by_clause(text: str) -> str:
    """Spoken numbers as digits, clause by clause: the punctuation between clauses stays,
    so a value ends where the caller's sentence did."""
    parts = re.split(r"([,;!?]|\.(?!\d)(?=\s|$))", text)
    return "".join(part if re.fullmatch(r"[,;!?.]", part) else
                   (" " + spoken_numbers_to_digits(part) + " " if part.strip() else part)
                   for part in parts if part)


def _spans(patterns: list[re.Pattern[str]], text: str) -> list[str]:
    return [m.group("value").strip() for p in patterns for m in p.finditer(text)]


def _first(spans: list[str], normalise) -> str | None:
    for span in spans:
        value = normalise(span)
        if value is not None:
            return value
    return None


def extract_by_rules(text: str, carriers: list[Carrier], *, country_code: str = "1"
                     ) -> list[Fact]:
    """The facts in one caller turn, by the data file's patterns (pure; µs)."""
    rules = extraction_rules()
    plain = " ".join(text.lower().split())
    digits = digits_by_clause(plain)
    facts: list[Fact] = []
    contact: dict[str, str] = {}
    phone = _first(_spans(rules.fields["phone"], digits),
                   lambda s: normalize_phone(s, country_code=country_code))
    if phone:
        contact["phone"] = phone
    email = _first(_spans(rules.fields["email"], plain), normalize_email)
    if email:
        contact["email"] = email
    address = _first(_spans(rules.fields["address"], digits),
                     lambda s: " ".join(w.capitalize() for w in s.split()) if len(s) > 5 else None)
    if address:
        contact["address"] = address
    if contact:
        facts.append(Fact("contact", tuple(contact.items()), text))
    if rules.insurance_context.search(plain):
        insurance: dict[str, str] = {}
        carrier = None
        for span in _spans([rules.carrier_span], plain) + [plain]:
            match = match_carrier(span, carriers)
            if match is not None:
                carrier = match.carrier
                break
        if carrier is None:  # a listed name said anywhere in the turn
            carrier = next((c for c in carriers for name in (c.name, *c.aliases)
                            if re.search(rf"\b{re.escape(name.lower())}\b", plain)), None)
        if carrier is not None:
            insurance["carrier_name"] = carrier.name
            insurance["carrier_id"] = carrier.id
        member = _first(_spans(rules.fields["member_id"], digits), normalize_member_id)
        if member:
            insurance["member_id"] = member
        group = _first(_spans(rules.fields["group_number"], digits), normalize_member_id)
        if group:
            insurance["group_number"] = group
        if "carrier_name" in insurance or "member_id" in insurance:
            facts.append(Fact("insurance", tuple(insurance.items()), text))
    preferences = {kind: value for kind, values in rules.preferences.items()
                   for value, pattern in values.items() if pattern.search(plain)}
    for kind, value in preferences.items():
        facts.append(Fact("preference", ((kind, value),), text))
    return facts


class RulesExtractor:
    name = "rules"

    def __init__(self, *, country_code: str = "1") -> None:
        self._country_code = country_code

    async def extract(self, text: str, carriers: list[Carrier]) -> list[Fact]:
        return extract_by_rules(text, carriers, country_code=self._country_code)


# --- the fast model ------------------------------------------------------------------


class _ModelFacts(BaseModel):
    model_config = ConfigDict(extra="ignore")
    phone: str | None = None
    email: str | None = None
    address: str | None = Field(default=None, max_length=120)
    insurance_carrier: str | None = Field(default=None, max_length=60)
    member_id: str | None = Field(default=None, max_length=40)
    group_number: str | None = Field(default=None, max_length=40)
    contact_method: Literal["phone", "text", "email"] | None = None
    contact_time: Literal["morning", "afternoon", "evening"] | None = None


def extraction_schema() -> dict:
    """The JSON the model must answer: every field optional, null when not said."""
    text = {"type": "string", "nullable": True}
    return {
        "type": "object",
        "properties": {
            "phone": text, "email": text, "address": text, "insurance_carrier": text,
            "member_id": text, "group_number": text,
            "contact_method": {"type": "string", "enum": ["phone", "text", "email"],
                               "nullable": True},
            "contact_time": {"type": "string", "enum": ["morning", "afternoon", "evening"],
                             "nullable": True},
        },
    }


def facts_from_model(raw: str, text: str, carriers: list[Carrier], *, country_code: str = "1"
                     ) -> list[Fact]:
    """The model's answer as facts; every value checked like the rules' (ValueError: junk)."""
    answer = parse_answer(raw, _ModelFacts, "extraction answer does not fit")
    facts: list[Fact] = []
    contact = {k: v for k, v in (
        ("phone", normalize_phone(answer.phone, country_code=country_code)),
        ("email", normalize_email(answer.email)),
        ("address", " ".join(answer.address.split()) if answer.address else None)) if v}
    if contact:
        facts.append(Fact("contact", tuple(contact.items()), text))
    insurance: dict[str, str] = {}
    if answer.insurance_carrier:
        match = match_carrier(answer.insurance_carrier, carriers)
        if match is not None:  # a carrier the clinic does not list is not recorded
            insurance.update(carrier_name=match.carrier.name, carrier_id=match.carrier.id)
    for key in ("member_id", "group_number"):
        value = normalize_member_id(getattr(answer, key))
        if value:
            insurance[key] = value
    if "carrier_name" in insurance or "member_id" in insurance:
        facts.append(Fact("insurance", tuple(insurance.items()), text))
    for kind in ("contact_method", "contact_time"):
        if getattr(answer, kind):
            facts.append(Fact("preference", ((kind, getattr(answer, kind)),), text))
    return facts


class ModelExtractor:
    name = "model"

    def __init__(self, ask, *, timeout_s: float = MODEL_TIMEOUT_S, country_code: str = "1",
                 fallback: Extractor | None = None) -> None:
        """`ask`: pipeline.providers.structured_model(...) with `extraction_schema()`."""
        self._ask, self._timeout_s, self._country_code = ask, timeout_s, country_code
        self._fallback = fallback or RulesExtractor(country_code=country_code)

    async def extract(self, text: str, carriers: list[Carrier]) -> list[Fact]:
        from lib.prompts import render_prompt

        prompt = render_prompt("world/extract.md", text=text.replace('"', "'"))
        try:
            raw = await asyncio.wait_for(self._ask(prompt), self._timeout_s)
            return facts_from_model(raw, text, carriers, country_code=self._country_code)
        except Exception as error:  # noqa: BLE001 - the rules answer instead
            logger.warning(f"extraction model failed ({type(error).__name__}); rules instead")
            return await self._fallback.extract(text, carriers)


# --- one call's extraction -------------------------------------------------------------


@dataclass
class CallExtraction:
    """What one call has captured, and what is still waiting for an identified caller."""

    pool: asyncpg.Pool
    workspace_id: str
    call_id: str
    extractor: Extractor
    _carriers: list[Carrier] | None = None
    _written: set[tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=set)
    pending: list[tuple[Fact, int]] = field(default_factory=list)

    async def carriers(self) -> list[Carrier]:
        if self._carriers is None:
            self._carriers = await world.carriers(self.pool, self.workspace_id)
        return self._carriers

    async def capture(self, text: str, turn_seq: int, patient_id: str | None) -> list[str]:
        """Extract one caller turn and write what is new (ids of the events written)."""
        facts = await self.extractor.extract(text, await self.carriers())
        self.pending += [(fact, turn_seq) for fact in facts]
        if patient_id is None:
            return []
        return await self.flush(patient_id)

    async def flush(self, patient_id: str | None) -> list[str]:
        """Write the pending facts for `patient_id` (None: unattached, at call end)."""
        written = []
        waiting, self.pending = self.pending, []
        for fact, turn_seq in waiting:
            key = (fact.kind, tuple(sorted((k, v) for k, v in fact.values if k != "carrier_id")))
            if key in self._written:
                continue
            provenance = Provenance("extraction", f"extraction:{self.extractor.name}",
                                    "moderate", self.call_id, turn_seq)
            event_id = await world.write_event(self.pool, self.workspace_id,
                                               fact.event(patient_id), provenance)
            self._written.add(key)
            written.append(event_id)
        return written
