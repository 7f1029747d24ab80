"""The world-model tools: lookups, semantic search,
and the writes that change a patient's record, cover or follow-up.

Results are human-readable. Searches never read out another person's record: a
search identifies the caller only when the date of birth matches too, and otherwise
says how many records might fit. Every write names the identified caller (`P1`) and
is attributed (`tool:<name>`, this call, the caller's turn) with a clinical event the
verification pipeline judges after the call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
import dateparser

from call.call_session import CallLog
from db import outbound, world
from db.world import CoverageSpec, OutboundTaskSpec, PatientRecord, Provenance
from flows.graph_session import GraphSession
from flows.promised_calls import plan_call
from language.carriers import default_carriers, match_carrier
from language.fields import (
    normalize_email,
    normalize_member_id,
    normalize_name,
    normalize_phone,
    parse_date,
    plausible_birth_date,
)
from language.spoken import say_date
from processors.world.index import PatientQuery, WorldIndex

# Natural field names a model (or a caller's phrasing) may use, per canonical field.
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "first_name": ("first_name", "firstname", "firstName", "first", "given_name", "givenName"),
    "last_name": ("last_name", "lastname", "lastName", "last", "surname", "family_name",
                  "familyName"),
    "date_of_birth": ("date_of_birth", "dob", "DOB", "birthday", "birth_date", "birthDate",
                      "dateOfBirth", "born"),
    "phone": ("phone", "phone_number", "phoneNumber", "mobile", "cell", "telephone"),
    "email": ("email", "email_address", "emailAddress", "e_mail"),
    "address": ("address", "street_address", "home_address", "streetAddress"),
}
BUSINESS_HOURS = (time(9), time(17))
BUSINESS_DAYS = (0, 1, 2, 3, 4)
PART_OF_DAY_WINDOWS = {"morning": (time(9), time(12)), "afternoon": (time(12), time(17))}
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_BACKOFF_MIN = 120
PREFERENCE_VALUES: dict[str, tuple[str, ...]] = {
    "contact_method": ("phone", "text", "email"),
    "contact_time": ("morning", "afternoon", "evening"),
    "language": ("english", "spanish", "french", "mandarin", "cantonese", "vietnamese",
                 "tagalog", "arabic", "russian", "polish", "korean", "portuguese"),
}


class WorldRefused(Exception):
    """The write or lookup cannot go ahead as asked (classified `guard` by the caller)."""


def natural_fields(args: Mapping[str, Any]) -> dict[str, Any]:
    """Canonical field names from whatever names were used (first one given wins)."""
    found: dict[str, Any] = {}
    for canonical, aliases in FIELD_ALIASES.items():
        for alias in aliases:
            value = args.get(alias)
            if value not in (None, ""):
                found[canonical] = value
                break
    return found


@dataclass
class WorldTools:
    """One call's world-model tools (handlers take the resolved arguments)."""

    session: GraphSession
    pool: asyncpg.Pool
    log: CallLog
    index: WorldIndex
    today: Callable[[], date]
    country_code: str = "1"
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    dialled_number: str | None = None

    # --- provenance --------------------------------------------------------------

    def provenance(self, tool: str, confidence: world.Confidence = "moderate") -> Provenance:
        return Provenance("tool", f"tool:{tool}", confidence, self.session.call_id,
                          len(self.session.heard) or None)

    def wrote(self, *, event_id: str | None, patient_id: str | None = None) -> None:
        """After a write: index it (background), and the ambient chart is out of date."""
        self.session.chart_stale = True
        self.index.index_soon(self.pool, patient_ids=[patient_id] if patient_id else [],
                              event_ids=[event_id] if event_id else [])

    def _caller(self) -> PatientRecord | None:
        chart = self.session.chart
        return chart.patient if chart is not None else None

    def _identified_id(self) -> str:
        if self.session.patient is None:
            raise WorldRefused("the caller is not identified")
        return self.session.patient.id

    # --- lookups -------------------------------------------------------------------

    async def search_patients(self, args: Mapping[str, Any]) -> str:
        given = natural_fields(args)
        name = " ".join(str(given[k]) for k in ("first_name", "last_name") if k in given)
        query = PatientQuery(
            name=str(args.get("name") or name or "") or None,
            date_of_birth=parse_date(given.get("date_of_birth"), self.today()),
            phone=normalize_phone(str(given.get("phone") or ""), country_code=self.country_code),
            mrn=str(args["mrn"]).strip() if args.get("mrn") else None,
        )
        if query.empty:
            raise WorldRefused("give a name, date of birth, phone number or MRN to search")
        matches = await self.index.search_patients(self.pool, self.session.workspace_id, query)
        if not matches:
            return "No patient record fits those details."
        best = matches[0]
        named = best.name_score is not None and (best.name_score >= 0.85
                                                 or "mrn" in best.matched)
        alone = len(matches) == 1 or matches[1].score < best.score - 0.15
        if "date_of_birth" in best.matched and named and alone:
            self.identify(best.patient)
            return f"Identified the caller: {best.patient.full_name}."
        if query.date_of_birth is None:
            return (f"{len(matches)} record(s) might fit; ask for the date of birth to know "
                    "which (never read out other people's details).")
        return ("No single record fits that name and date of birth; ask them to spell the "
                "last name, or offer to register them.")

    def identify(self, record: PatientRecord) -> None:
        """This call's caller is `record` (their chart is loaded again)."""
        self.session.patient = record.as_patient()
        self.session.chart_stale = True

    async def search_events(self, args: Mapping[str, Any]) -> str:
        patient_id = self._identified_id()
        text = str(args.get("query") or "").strip()
        if not text:
            raise WorldRefused("say what to look for")
        found = await self.index.search_events(
            self.pool, self.session.workspace_id, text, patient_id=patient_id, limit=3)
        if not found:
            return "Nothing in this patient's record about that."
        return " ".join(
            f"On {say_date(m.event.occurred_at.date())}: {m.event.summary}"
            f"{'' if m.event.confidence == 'verified' else ' (not yet verified)'}"
            for m in found)

    # --- writes --------------------------------------------------------------------

    async def update_patient(self, args: Mapping[str, Any]) -> str:
        patient_id = self._identified_id()
        given = natural_fields(args)
        if any(given.get(k) for k in world.IDENTITY_FIELDS):
            return await self._correct_registration(patient_id, given)
        changes = self._contact_changes(given)
        if not changes:
            raise WorldRefused("give a new phone number, email or address, in a valid form")
        record, event_id = await world.update_contact(
            self.pool, self.session.workspace_id, patient_id, changes,
            self.provenance("UpdatePatient"))
        self.wrote(event_id=event_id, patient_id=patient_id)
        return f"Updated {record.first_name}'s {', '.join(changes)}."

    async def _correct_registration(self, patient_id: str, given: Mapping[str, Any]) -> str:
        """A name or birth date said wrongly at registration on this call, put right."""
        if patient_id not in self.session.registered:
            raise WorldRefused("only a record registered on this call can have its name or "
                               "date of birth corrected; offer a callback for the rest")
        changes: dict[str, Any] = {}
        for part in ("first_name", "last_name"):
            if given.get(part):
                name = normalize_name(str(given[part]))
                if name is None:
                    raise WorldRefused(f"that {part.replace('_', ' ')} is not a name")
                changes[part] = name
        if given.get("date_of_birth"):
            born = parse_date(given["date_of_birth"], self.today())
            if not plausible_birth_date(born, self.today()):
                raise WorldRefused("that date of birth is not a real past date")
            changes["date_of_birth"] = born
        current = self.session.patient
        changes = {k: v for k, v in changes.items() if current is None or v != {
            "first_name": current.first_name, "last_name": current.last_name,
            "date_of_birth": current.date_of_birth}[k]}
        if not changes:
            raise WorldRefused("those are the details already registered")
        try:
            record, event_id = await world.correct_registration(
                self.pool, self.session.workspace_id, patient_id, changes,
                self.provenance("UpdatePatient"))
        except LookupError as error:
            raise WorldRefused(str(error)) from None
        self.identify(record)
        self.session.confirmation = None  # the yes to the corrected details is used up
        self.session.outcome = "corrected"
        self.wrote(event_id=event_id, patient_id=patient_id)
        return f"Corrected the registration to {record.full_name}."

    def _contact_changes(self, given: Mapping[str, Any]) -> dict[str, str]:
        changes: dict[str, str] = {}
        if "phone" in given:
            phone = normalize_phone(str(given["phone"]), country_code=self.country_code)
            if phone is None:
                raise WorldRefused("that phone number is not complete; ask for all ten digits")
            changes["phone"] = phone
        if "email" in given:
            email = normalize_email(str(given["email"]))
            if email is None:
                raise WorldRefused("that email address is not valid; ask them to spell it")
            changes["email"] = email
        if "address" in given:
            address = " ".join(str(given["address"]).split())
            if len(address) < 6:
                raise WorldRefused("that address is too short; ask for the street and number")
            changes["address"] = address
        return changes

    async def save_patient(self, args: Mapping[str, Any]) -> str:
        """Create-or-update with natural field names and flexible dates: a new caller is
        registered (as CreatePatient checks it); an identified one may only change their
        own contact details."""
        given = natural_fields(args)
        identified = self.session.patient
        if identified is None:
            return await self.create_patient(given, tool="SavePatient")
        today = self.today()
        first, last = (normalize_name(str(given.get(k) or "")) for k in ("first_name",
                                                                        "last_name"))
        born = parse_date(given.get("date_of_birth"), today)
        if given.get("date_of_birth") is not None and not plausible_birth_date(born, today):
            raise WorldRefused("that date of birth is not a real past date")
        if (first and first.lower() != identified.first_name.lower()) or (
                last and last.lower() != identified.last_name.lower()) or (
                born and born != identified.date_of_birth):
            raise WorldRefused("those details are a different person's: only the caller's "
                               "own contact details can be changed")
        return await self.update_patient(given)

    async def create_patient(self, args: Mapping[str, Any], *, tool: str = "CreatePatient"
                             ) -> str:
        given = natural_fields(args)
        today = self.today()
        born = parse_date(given.get("date_of_birth"), today)
        if not plausible_birth_date(born, today):
            raise WorldRefused("that date of birth is not a valid past date")
        first = normalize_name(str(given.get("first_name") or ""))
        last = normalize_name(str(given.get("last_name") or ""))
        if not (first and last):
            raise WorldRefused("a first and last name are needed")
        spoken_phone = given.get("phone")
        phone = (normalize_phone(str(spoken_phone), country_code=self.country_code)
                 if spoken_phone else self.session.caller_number)
        email = normalize_email(str(given["email"])) if given.get("email") else None
        record, created, event_id = await world.create_patient(
            self.pool, self.session.workspace_id, first_name=first, last_name=last,
            date_of_birth=born, phone=phone, email=email, address=None,
            provenance=self.provenance(tool),
            phone_source="said" if spoken_phone else "caller_id")
        self.identify(record)
        self.session.confirmation = None  # the yes to these details is used up
        self.session.outcome = "patient_created"
        if created:
            self.session.registered.append(record.id)
        if created:
            self.wrote(event_id=event_id, patient_id=record.id)
        return f"{'Registered' if created else 'Found the existing record for'} " \
               f"{record.full_name}."

    async def create_insurance(self, args: Mapping[str, Any]) -> str:
        patient_id = self._identified_id()
        said = str(args.get("carrier") or "").strip()
        carriers = await world.carriers(self.pool, self.session.workspace_id)
        if not carriers:  # a workspace with no list yet starts from the usual carriers
            await world.add_carriers(self.pool, self.session.workspace_id, default_carriers())
            carriers = await world.carriers(self.pool, self.session.workspace_id)
        match = match_carrier(said, carriers)
        if match is None:
            raise WorldRefused("that carrier is not one the clinic lists; ask them to repeat "
                               "the insurance company's name")
        member_id = normalize_member_id(str(args.get("member_id") or ""))
        if member_id is None:
            raise WorldRefused("the member id should be 5 to 20 letters and digits; ask them to "
                               "read it from the card")
        holder_born = None
        if args.get("subscriber_dob"):
            holder_born = parse_date(args["subscriber_dob"], self.today())
            if not plausible_birth_date(holder_born, self.today()):
                raise WorldRefused("the policy holder's date of birth is not a valid past date")
        relationship = str(args.get("relationship") or "self").lower()
        if relationship not in ("self", "spouse", "child", "other"):
            relationship = "other"
        spec = CoverageSpec(
            carrier_id=match.carrier.id, carrier_name=match.carrier.name, member_id=member_id,
            plan_name=str(args.get("plan_name") or ""),
            group_number=normalize_member_id(str(args.get("group_number") or "")) or "",
            subscriber_name=str(args.get("subscriber_name") or ""), subscriber_dob=holder_born,
            relationship=relationship,
        )
        coverage, event_id = await world.create_coverage(
            self.pool, self.session.workspace_id, patient_id, spec,
            self.provenance("CreateInsurance"))
        self.wrote(event_id=event_id)
        return f"Saved {coverage.carrier_name} insurance, member id {coverage.member_id}."

    async def set_preference(self, args: Mapping[str, Any]) -> str:
        patient_id = self._identified_id()
        kind = str(args.get("preference") or "")
        value = str(args.get("value") or "").strip().lower()
        if kind not in PREFERENCE_VALUES or value not in PREFERENCE_VALUES[kind]:
            raise WorldRefused(f"preferences are {sorted(PREFERENCE_VALUES)} with values "
                               f"{ {k: list(v) for k, v in PREFERENCE_VALUES.items()} }")
        event_id = await world.set_preference(
            self.pool, self.session.workspace_id, patient_id, kind, value,
            self.provenance("SetContactPreference"), quote=str(args.get("user_quote") or ""))
        self.wrote(event_id=event_id)
        return f"Noted: {kind.replace('_', ' ')} is {value}."

    async def schedule_outbound(self, args: Mapping[str, Any]) -> str:
        """The outbound task, dialled from the first calling time on the day asked for
        (today) in the caller's timezone; the caller is told when the call will come."""
        patient_id = self._identified_id()
        reason = " ".join(str(args.get("reason") or "").split())
        goal = " ".join(str(args.get("goal") or "").split())
        if len(reason) < 3 or len(goal) < 3:
            raise WorldRefused("say why the clinic will call and what the call should achieve")
        try:
            priority = int(args.get("priority", 5))
        except (TypeError, ValueError):
            priority = 0
        if not 1 <= priority <= 10:
            raise WorldRefused("priority is 1 (lowest) to 10 (most urgent)")
        if not await outbound.may_call(self.pool, self.session.workspace_id,
                                       patient_id=patient_id, phone=None):
            raise WorldRefused("they asked not to be called, so no call can be scheduled")
        window = PART_OF_DAY_WINDOWS.get(str(args.get("part_of_day") or ""), BUSINESS_HOURS)
        now = self.now()
        plan = await plan_call(self.session, self.pool, now, dialled_number=self.dialled_number,
                               hours=(window[0], window[1], BUSINESS_DAYS))
        zone = ZoneInfo(plan.timezone)
        not_before = now
        if args.get("on_date"):
            day = _future_date(str(args["on_date"]), now.astimezone(zone).date())
            if day is None:
                raise WorldRefused("that day is not a date from today on")
            not_before = max(now, datetime.combine(day, window[0], zone))
            plan = plan.from_(not_before)
        attempts = max(1, min(10, int(args.get("max_attempts") or DEFAULT_MAX_ATTEMPTS)))
        spec = OutboundTaskSpec(
            reason=reason, goal=goal, priority=priority, timezone=plan.timezone,
            window_start=window[0], window_end=window[1], window_days=BUSINESS_DAYS,
            not_before=plan.not_before(not_before), max_attempts=attempts,
            retry_backoff_minutes=DEFAULT_BACKOFF_MIN,
        )
        _task_id, event_id = await world.schedule_outbound(
            self.pool, self.session.workspace_id, patient_id, spec,
            self.provenance("ScheduleOutboundCall"), service_id=self.session.service_id or None)
        self.wrote(event_id=event_id)
        self.session.call_time = plan.when(now)
        return (f"Call back scheduled: the clinic will call them {self.session.call_time} "
                f"their time, up to {attempts} attempts if unanswered.")


def _future_date(text: str, today: date) -> date | None:
    """A day from today to a year ahead, in ISO or words ("tomorrow", "next Tuesday")."""
    try:
        day = date.fromisoformat(text)
    except ValueError:
        parsed = dateparser.parse(text, languages=["en"], settings={
            "PREFER_DATES_FROM": "future", "RELATIVE_BASE": datetime.combine(today, time())})
        day = parsed.date() if parsed is not None else None
    if day is None or not today <= day <= today + timedelta(days=365):
        return None
    return day
