"""Multi-stage verification of what a call wrote.

After each call (and again whenever asked) the call's clinical events go through:

1. **Call classifier** — a real clinical call, or junk (silence, a recorded message, an
   ad, a prank)? Junk rejects every event of the call.
2. **Per-event judge** — each event against the transcript and the records it touches:
   approve, auto-correct formatting (a phone number into E.164, a member id upper-cased),
   or flag for a person (an impossible date of birth, a number never said on the call,
   a name that is not in the transcript, a booking the record does not show).
3. **Session coherence** — do the events tell one story? Contradictions (two new phone
   numbers, a date of birth said that differs from the record) flag the events
   involved; something discussed but never recorded adds a flagged `missing_data`
   item; otherwise the approved and corrected events are upgraded to `verified`.

The rules below are the offline judges, and always run: formats and impossibilities
are decided deterministically. With a fast model configured (`ModelJudges`) the model
classifies the call, judges each event and reviews coherence too; the stricter of the
two verdicts stands, and a model failure leaves the rules' verdict (recorded).
Only verified events may sync to a practice system; flagged ones form the review queue
(with the practice system's own items: a booking it never took).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Protocol

import asyncpg
import yaml
from loguru import logger
from pydantic import BaseModel, ConfigDict, Field
from rapidfuzz import fuzz

from db import scheduling, world
from db.world import ClinicalEvent, EventDraft, PatientRecord, Provenance
from language.caller_identity import spelled_words
from language.carriers import default_carriers
from language.fields import (
    digits_in,
    is_e164,
    normalize_email,
    normalize_member_id,
    normalize_phone,
    plausible_birth_date,
)
from language.patterns import valid_regex
from language.understanding import date_of_birth, spoken_numbers_to_digits
from lib.model_answers import parse_answer
from lib.prompts import render_prompt
from processors.world.extraction import extraction_rules
from processors.world.write_safety import quote_problem

JUNK_FILE = Path(__file__).resolve().parent / "data" / "junk_calls.yaml"
Outcome = Literal["approve", "correct", "flag"]
SEVERITY = {"approve": 0, "correct": 1, "flag": 2}
NAME_IN_TRANSCRIPT = 80.0


@dataclass(frozen=True)
class CallFacts:
    """What the judges see: the call's words, its events and the records they touch."""

    call_id: str
    workspace_id: str
    transcript: list[tuple[str, str]]
    events: list[ClinicalEvent]
    patients: dict[str, PatientRecord]
    appointment_status: dict[str, str]
    today: date
    country_code: str = "1"  # for numbers said without one

    @property
    def caller_turns(self) -> list[str]:
        return [text for role, text in self.transcript if role == "caller"]

    @property
    def caller_text(self) -> str:
        return " ".join(self.caller_turns).lower()


@dataclass(frozen=True)
class Classification:
    label: Literal["clinical", "junk"]
    reason: str


@dataclass(frozen=True)
class EventVerdict:
    outcome: Outcome
    reason: str
    payload: dict[str, Any] | None = None  # the corrected payload (outcome "correct")
    summary: str | None = None


@dataclass(frozen=True)
class Coherence:
    flags: dict[str, str] = field(default_factory=dict)  # event id → why
    missing: list[tuple[str, str]] = field(default_factory=list)  # (topic, why)


class Judges(Protocol):
    name: str

    async def classify(self, facts: CallFacts) -> Classification: ...

    async def judge(self, event: ClinicalEvent, facts: CallFacts) -> EventVerdict: ...

    async def cohere(self, facts: CallFacts, approved: list[ClinicalEvent]) -> Coherence: ...


# --- stage 1: the call classifier, by rules -------------------------------------------


class _JunkRules(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: int
    min_caller_words: int = Field(ge=0)
    robocall: list[str]
    prank: list[str]
    clinical: list[str]


@lru_cache(maxsize=1)
def junk_rules(path: Path = JUNK_FILE) -> dict[str, Any]:
    rules = _JunkRules.model_validate(yaml.safe_load(path.read_text()))
    return {
        "min_words": rules.min_caller_words,
        **{name: re.compile("|".join(f"(?:{valid_regex(p)})" for p in getattr(rules, name)))
           for name in ("robocall", "prank", "clinical")},
    }


def classify_by_rules(facts: CallFacts) -> Classification:
    rules = junk_rules()
    text = facts.caller_text
    if len(text.split()) < rules["min_words"]:
        return Classification("junk", "the caller said (almost) nothing")
    if rules["robocall"].search(text) and not rules["clinical"].search(text):
        return Classification("junk", "a recorded message or advertisement")
    if rules["prank"].search(text):
        return Classification("junk", "the caller said it was not a real request")
    return Classification("clinical", "a caller with a clinical or scheduling request")


# --- stage 2: each event, by rules ------------------------------------------------------


def _heard_digits(facts: CallFacts, phone: str) -> bool:
    national = re.sub(r"\D", "", phone)[-10:]
    return national in digits_in(facts.caller_text)


def _heard_name(facts: CallFacts, name: str) -> bool:
    """The name was said, or spelled out letter by letter."""
    return fuzz.partial_ratio(name.lower(), facts.caller_text) >= NAME_IN_TRANSCRIPT or any(
        name.lower() == word.lower() for turn in facts.caller_turns
        for word in spelled_words(turn))


def _heard_code(facts: CallFacts, code: str) -> bool:
    """An id was said: its letters and digits in order in the caller's words (spoken
    numbers as digits, spaces and punctuation aside)."""
    spoken = re.sub(r"[^a-z0-9]", "", spoken_numbers_to_digits(facts.caller_text))
    return code.lower() in spoken


def _phone_verdict(phone: str | None, facts: CallFacts, where: str) -> EventVerdict | None:
    if not phone:
        return None
    fixed = phone if is_e164(phone) else normalize_phone(phone,
                                                          country_code=facts.country_code)
    if fixed is None:
        return EventVerdict("flag", f"{where}: the phone number is incomplete")
    if not _heard_digits(facts, fixed):
        return EventVerdict("flag", f"{where}: that phone number was never said on the call")
    if fixed != phone:
        return EventVerdict("correct", f"{where}: phone number formatted as E.164")
    return None


def judge_by_rules(event: ClinicalEvent, facts: CallFacts) -> EventVerdict:
    """The deterministic verdict on one event (formats, impossibilities, the transcript,
    the records)."""
    payload = dict(event.payload)
    if event.patient_id is None:
        return EventVerdict("flag", "no identified patient to attach this to")
    patient = facts.patients.get(event.patient_id)
    kind = event.type
    verdicts: list[EventVerdict] = []
    if kind in ("contact_reported", "contact_updated"):
        changes = dict(payload.get("changes") or {})
        verdict = _phone_verdict(changes.get("phone"), facts, "contact")
        if verdict is not None:
            if verdict.outcome == "correct":
                changes["phone"] = normalize_phone(changes["phone"],
                                                   country_code=facts.country_code)
            verdicts.append(verdict)
        if changes.get("email"):
            email = normalize_email(changes["email"])
            if email is None:
                verdicts.append(EventVerdict("flag", "the email address is not valid"))
            elif not _heard_name(facts, email.split("@")[0].split(".")[0]):
                verdicts.append(EventVerdict("flag", "that email was never said on the call"))
            elif email != changes["email"]:
                changes["email"] = email
                verdicts.append(EventVerdict("correct", "email address lower-cased"))
        payload["changes"] = changes
    elif kind == "registration_corrected":
        changes = dict(payload.get("changes") or {})
        if changes.get("date_of_birth") and not any(
                date_of_birth(turn, facts.today, bare=True) is not None for turn in
                facts.caller_turns):
            verdicts.append(EventVerdict("flag", "no date of birth was said on the call"))
        for part in ("first_name", "last_name"):
            if changes.get(part) and not _heard_name(facts, changes[part]):
                verdicts.append(EventVerdict("flag", f"the corrected {part.replace('_', ' ')} "
                                                     "is not in the transcript"))
    elif kind == "patient_created":
        born = date.fromisoformat(payload["date_of_birth"]) if payload.get(
            "date_of_birth") else None
        if not plausible_birth_date(born, facts.today):
            verdicts.append(EventVerdict("flag", "impossible date of birth"))
        elif not any(date_of_birth(turn, facts.today) == born for turn in facts.caller_turns):
            verdicts.append(EventVerdict("flag", "that date of birth was never said on the call"))
        for part in ("first_name", "last_name"):
            if payload.get(part) and not _heard_name(facts, payload[part]):
                verdicts.append(EventVerdict("flag", f"the {part.replace('_', ' ')} is not in "
                                                     "the transcript"))
        if payload.get("phone") and payload.get("phone_source") != "caller_id":
            verdict = _phone_verdict(payload["phone"], facts, "new patient")
            if verdict is not None:
                verdicts.append(verdict)
    elif kind in ("insurance_reported", "insurance_added"):
        member = payload.get("member_id")
        if member:
            fixed = normalize_member_id(member)
            if fixed is None:
                verdicts.append(EventVerdict("flag", "the member id is not a valid id"))
            elif not _heard_code(facts, fixed):
                verdicts.append(EventVerdict("flag", "that member id was never said on the call"))
            elif fixed != member:
                payload["member_id"] = fixed
                verdicts.append(EventVerdict("correct", "member id normalised"))
        if payload.get("carrier_name") and kind == "insurance_added" and not _carrier_heard(
                payload["carrier_name"], facts):
            verdicts.append(EventVerdict("flag", "the carrier was never named on the call"))
        holder_born = payload.get("subscriber_dob")
        if holder_born and payload.get("relationship", "self") == "self" and patient and (
                date.fromisoformat(holder_born) != patient.date_of_birth):
            verdicts.append(EventVerdict("flag", "the policy holder's date of birth contradicts "
                                                 "the patient's"))
    elif kind.startswith("appointment_"):
        status = facts.appointment_status.get(str(payload.get("appointment_id")))
        expected = {"appointment_cancelled": ("cancelled",),
                    "appointment_confirmed": ("confirmed", "cancelled", "completed")}.get(
            kind, ("booked", "confirmed", "cancelled", "completed"))
        if status is None or status not in expected:
            verdicts.append(EventVerdict("flag", "the appointment record does not show this"))
    elif kind in ("preference_set", "preference_reported"):
        if quote_problem(payload.get("user_quote"), facts.caller_turns) is not None:
            verdicts.append(EventVerdict("flag", "the caller's words asking for this are not "
                                                 "in the transcript"))
    elif kind == "outbound_call_scheduled":
        if not 1 <= int(payload.get("priority", 0)) <= 10:
            verdicts.append(EventVerdict("flag", "priority out of range"))
    if not verdicts:
        return EventVerdict("approve", "consistent with the transcript and the records")
    worst = max(verdicts, key=lambda v: SEVERITY[v.outcome])
    reason = "; ".join(v.reason for v in verdicts if v.outcome == worst.outcome)
    if worst.outcome == "correct":
        return EventVerdict("correct", reason, payload, _corrected_summary(event, payload))
    return EventVerdict(worst.outcome, reason)


def _carrier_heard(carrier: str, facts: CallFacts) -> bool:
    names = [carrier] + [alias for spec in default_carriers() if spec.name == carrier
                         for alias in spec.aliases]
    return any(_heard_name(facts, name) for name in names)


def _corrected_summary(event: ClinicalEvent, payload: dict[str, Any]) -> str:
    if "changes" in payload:
        said = ", ".join(f"{k} {v}" for k, v in payload["changes"].items())
        return re.sub(r":.*$", f": {said}.", event.summary)
    if "member_id" in payload:
        return re.sub(r"member id \S+?([,.])", f"member id {payload['member_id']}\\1",
                      event.summary)
    return event.summary


# --- stage 3: coherence, by rules -----------------------------------------------------------


def cohere_by_rules(facts: CallFacts, approved: list[ClinicalEvent]) -> Coherence:
    flags: dict[str, str] = {}
    by_patient: dict[str, list[ClinicalEvent]] = {}
    for event in facts.events:
        if event.patient_id:
            by_patient.setdefault(event.patient_id, []).append(event)
    for patient_id, events in by_patient.items():
        phones = {e.id: (e.payload.get("changes") or {}).get("phone") for e in events}
        phones = {i: normalize_phone(p, country_code=facts.country_code) or p
                  for i, p in phones.items() if p}
        if len(set(phones.values())) > 1:
            for event_id in phones:
                flags[event_id] = "two different phone numbers were given on one call"
        members: dict[str, dict[str, str]] = {}
        for e in events:
            if e.type.startswith("insurance_") and e.payload.get("member_id"):
                carrier = e.payload.get("carrier_name") or "?"
                members.setdefault(carrier, {})[e.id] = normalize_member_id(
                    e.payload["member_id"]) or e.payload["member_id"]
        for ids in members.values():
            if len(set(ids.values())) > 1:
                for event_id in ids:
                    flags[event_id] = "two different member ids for one carrier"
        record = facts.patients.get(patient_id)
        if record is not None:
            said = {d for turn in facts.caller_turns
                    if (d := date_of_birth(turn, facts.today)) is not None
                    and d.year < facts.today.year - 1}
            if said and record.date_of_birth not in said:
                for e in events:
                    flags[e.id] = (f"the caller gave a date of birth ({min(said).isoformat()}) "
                                   "that differs from the record's")
    missing = []
    rules = extraction_rules()
    text = facts.caller_text
    types = {e.type for e in facts.events}
    if rules.insurance_context.search(text) and not types & {"insurance_added",
                                                             "insurance_reported"}:
        missing.append(("insurance", "insurance was discussed but no coverage was recorded"))
    if re.search(r"\bnew (?:phone|number|address|email)\b|\bmoved\b", text) and not types & {
            "contact_updated", "contact_reported"}:
        missing.append(("contact", "new contact details were discussed but none recorded"))
    return Coherence(flags, missing)


class RulesJudges:
    name = "rules"

    async def classify(self, facts: CallFacts) -> Classification:
        return classify_by_rules(facts)

    async def judge(self, event: ClinicalEvent, facts: CallFacts) -> EventVerdict:
        return judge_by_rules(event, facts)

    async def cohere(self, facts: CallFacts, approved: list[ClinicalEvent]) -> Coherence:
        return cohere_by_rules(facts, approved)


# --- the fast model's judges -------------------------------------------------------------

StructuredAsk = Callable[[str], Awaitable[str]]


class _ClassifyAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    label: Literal["clinical", "junk"]
    reason: str = Field(default="", max_length=300)


class _EventAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    outcome: Literal["approve", "flag"]
    reason: str = Field(default="", max_length=300)


class _CoherenceAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    contradictions: list[str] = Field(default_factory=list)  # event numbers as text
    missing: list[str] = Field(default_factory=list)
    reason: str = Field(default="", max_length=400)


SCHEMAS = {
    "classify": {"type": "object", "properties": {
        "label": {"type": "string", "enum": ["clinical", "junk"]},
        "reason": {"type": "string"}}, "required": ["label", "reason"]},
    "event": {"type": "object", "properties": {
        "outcome": {"type": "string", "enum": ["approve", "flag"]},
        "reason": {"type": "string"}}, "required": ["outcome", "reason"]},
    "coherence": {"type": "object", "properties": {
        "contradictions": {"type": "array", "items": {"type": "string"}},
        "missing": {"type": "array", "items": {"type": "string"}},
        "reason": {"type": "string"}}, "required": ["contradictions", "missing", "reason"]},
}


def _transcript_text(facts: CallFacts) -> str:
    return "\n".join(f"{role}: {text}" for role, text in facts.transcript)[-6000:]


class ModelJudges:
    """The fast model at every stage, never looser than the rules."""

    name = "model"

    def __init__(self, asks: dict[str, StructuredAsk], *, timeout_s: float) -> None:
        """`asks`: one structured ask per stage ("classify", "event", "coherence")."""
        self._asks, self._timeout_s = asks, timeout_s
        self._rules = RulesJudges()
        self.fallbacks = 0

    async def _ask(self, stage: str, prompt: str, answer: type[BaseModel]) -> Any:
        raw = await asyncio.wait_for(self._asks[stage](prompt), self._timeout_s)
        return parse_answer(raw, answer, f"{stage} answer does not fit")

    async def classify(self, facts: CallFacts) -> Classification:
        rules = classify_by_rules(facts)
        try:
            answer = await self._ask("classify", render_prompt(
                "verification/classify.md", transcript=_transcript_text(facts)), _ClassifyAnswer)
        except Exception as error:  # noqa: BLE001 - the rules' verdict stands
            self._failed("classify", error)
            return rules
        if rules.label == "junk":  # silence and recorded messages are junk whatever it says
            return rules
        return Classification(answer.label, f"model: {answer.reason}")

    async def judge(self, event: ClinicalEvent, facts: CallFacts) -> EventVerdict:
        rules = judge_by_rules(event, facts)
        if rules.outcome == "flag":
            return rules
        try:
            answer = await self._ask("event", render_prompt(
                "verification/event.md", transcript=_transcript_text(facts),
                event=event.summary, type=event.type,
                values=json.dumps(rules.payload or event.payload, default=str)), _EventAnswer)
        except Exception as error:  # noqa: BLE001
            self._failed("event", error)
            return rules
        if answer.outcome == "flag":
            return EventVerdict("flag", f"model: {answer.reason}")
        return rules

    async def cohere(self, facts: CallFacts, approved: list[ClinicalEvent]) -> Coherence:
        rules = cohere_by_rules(facts, approved)
        numbered = "\n".join(f"{i}. {e.summary}" for i, e in enumerate(facts.events, 1))
        try:
            answer = await self._ask("coherence", render_prompt(
                "verification/coherence.md", transcript=_transcript_text(facts),
                events=numbered or "(none)"), _CoherenceAnswer)
        except Exception as error:  # noqa: BLE001
            self._failed("coherence", error)
            return rules
        flags = dict(rules.flags)
        for number in answer.contradictions:
            index = int(re.sub(r"\D", "", number) or 0) - 1
            if 0 <= index < len(facts.events):
                flags.setdefault(facts.events[index].id, f"model: {answer.reason}"[:300])
        missing = list(rules.missing) + [(topic, f"model: {answer.reason}"[:300])
                                         for topic in answer.missing
                                         if topic not in {t for t, _ in rules.missing}]
        return Coherence(flags, missing)

    def _failed(self, stage: str, error: Exception) -> None:
        self.fallbacks += 1
        logger.warning(f"verification {stage}: model failed ({type(error).__name__}); rules")


# --- the pipeline ---------------------------------------------------------------------------


@dataclass(frozen=True)
class VerificationReport:
    call_id: str
    classification: Classification
    judge: str
    counts: dict[str, int]
    flagged: dict[str, str]  # event id → why


async def gather_facts(pool: asyncpg.Pool, call_id: str, today: date, *,
                       country_code: str = "1") -> CallFacts | None:
    workspace_id = await world.call_workspace(pool, call_id)
    if workspace_id is None:
        return None
    events = [e for e in await world.call_events(pool, call_id)  # the call's own writes
              if not (e.type == "missing_data" and e.source == "verification")
              and e.source != "practice"]
    patient_ids = sorted({e.patient_id for e in events if e.patient_id})
    patients = {p.id: p for p in await world.patients_by_ids(pool, patient_ids)}
    appointment_ids = [str(e.payload["appointment_id"]) for e in events
                       if e.type.startswith("appointment_") and e.payload.get("appointment_id")]
    statuses: dict[str, str] = {}
    for appointment_id in appointment_ids:
        found = await scheduling.get_appointment(pool, appointment_id)
        if found is not None:
            statuses[appointment_id] = found.status
    return CallFacts(call_id, workspace_id, await world.call_transcript(pool, call_id), events,
                     patients, statuses, today, country_code)


async def verify_call(pool: asyncpg.Pool, call_id: str, judges: Judges, *,
                      today: date | None = None, country_code: str = "1"
                      ) -> VerificationReport | None:
    """Run the three stages over one call's events and record every verdict (None: no
    such call). Re-runnable: the last run's gaps are replaced, notes accumulate."""
    facts = await gather_facts(pool, call_id, today or date.today(),
                               country_code=country_code)
    if facts is None:
        return None
    await pool.execute("DELETE FROM clinical_events WHERE call_id = $1 AND type = 'missing_data' "
                       "AND source = 'verification'", world.as_uuid(call_id))
    counts = {"events": len(facts.events), "approved": 0, "corrected": 0, "flagged": 0,
              "rejected": 0, "verified": 0, "missing": 0}
    flagged: dict[str, str] = {}
    classification = await judges.classify(facts)
    if classification.label == "junk":
        for event in facts.events:
            await world.judge_event(pool, event.id, verification="rejected",
                                    confidence=event.confidence, note=_note(
                                        "classifier", "reject", classification.reason, judges))
        counts["rejected"] = len(facts.events)
        return await _recorded(pool, facts, classification, judges, counts, flagged)
    verdicts: dict[str, EventVerdict] = {}
    for event in facts.events:
        verdicts[event.id] = verdict = await judges.judge(event, facts)
        status = {"approve": "approved", "correct": "corrected", "flag": "flagged"}[
            verdict.outcome]
        await world.judge_event(pool, event.id, verification=status,
                                confidence=event.confidence,
                                note=_note("event_judge", verdict.outcome, verdict.reason, judges),
                                payload=verdict.payload, summary=verdict.summary)
        if verdict.outcome == "flag":
            flagged[event.id] = verdict.reason
    approved = [e for e in facts.events if verdicts[e.id].outcome != "flag"]
    coherence = await judges.cohere(facts, approved)
    for event in facts.events:
        if event.id in coherence.flags:
            flagged[event.id] = coherence.flags[event.id]
            await world.judge_event(pool, event.id, verification="flagged",
                                    confidence=event.confidence, note=_note(
                                        "coherence", "flag", coherence.flags[event.id], judges))
        elif verdicts[event.id].outcome != "flag":
            status = "corrected" if verdicts[event.id].outcome == "correct" else "approved"
            counts[status] += 1
            await world.judge_event(pool, event.id, verification=status, confidence="verified",
                                    note={**_note("coherence", "upgrade", "coherent", judges),
                                          "from": event.confidence})
            counts["verified"] += 1
    counts["flagged"] = len(flagged)
    patient = next((e.patient_id for e in facts.events if e.patient_id), None)
    for topic, why in coherence.missing:
        event_id = await world.write_event(pool, facts.workspace_id, EventDraft(
            "missing_data", f"Discussed {topic} on the call, but nothing was recorded.",
            {"topic": topic, "reason": why}, patient), Provenance(
            "verification", "verification:coherence", "low", call_id))
        await world.judge_event(pool, event_id, verification="flagged", confidence="low",
                                note=_note("coherence", "flag", why, judges))
        flagged[event_id] = why
        counts["missing"] += 1
    return await _recorded(pool, facts, classification, judges, counts, flagged)


def _note(stage: str, verdict: str, reason: str, judges: Judges) -> dict[str, str]:
    return {"stage": stage, "verdict": verdict, "reason": reason[:300], "judge": judges.name}


async def _recorded(pool: asyncpg.Pool, facts: CallFacts, classification: Classification,
                    judges: Judges, counts: dict[str, int], flagged: dict[str, str]
                    ) -> VerificationReport:
    await world.record_verification_run(
        pool, facts.call_id, classification=classification.label,
        reason=classification.reason, judge=judges.name, counts=counts)
    return VerificationReport(facts.call_id, classification, judges.name, counts, flagged)
