"""Cliniko's public REST API as the practice system (`PMS_PROVIDER=cliniko`).

Cliniko keeps its own practitioners, businesses (locations) and appointment types; they
are matched to the world model's by name (case, punctuation and a leading "Dr." aside),
so the slots offered carry our ids and a booking names Cliniko's. Patients and
appointments written there are remembered in `external_refs` (system 'cliniko'): a
second push of the same event finds them and changes nothing.

A booking is written when the caller says yes: the slot is re-checked among Cliniko's
available times, held in the world model (its `practice_push` job queued in the same
transaction), then created there with our appointment's key in its notes. Cliniko has
no idempotency header, so a retry looks for an appointment carrying the key before it
creates one. Cliniko not answering within `booking_wait_s` at a step leaves the write
to the job, which re-checks the slot first.

The API as documented (github.com/redguava/cliniko-api, docs.api.cliniko.com): HTTP
Basic with the key as user name and no password; `User-Agent: NAME (EMAIL)` and
`Accept: application/json` on every request; the key's shard suffix picks
`https://api.<shard>.cliniko.com/v1`; lists come in pages (`per_page` up to 100,
`links.next`); available times cover at most 7 days per request and never a day before
today; 200 requests a minute, then 429 with `X-RateLimit-Reset`. Every failure is a
`PMSError` with a short message: no key, no query string (names, birth dates), no PHI
in logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time as clock
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
import httpx
from loguru import logger

from db import practice_writes, scheduling, world
from db.repositories import as_uuid
from db.scheduling import AppointmentType
from db.slots import PART_OF_DAY, Slot
from db.world import CONTACT_FIELDS, ClinicalEvent
from services.practice.base import (
    BookingMade,
    BookingOutcome,
    PMSError,
    PMSRefused,
    SlotConflict,
    SyncOutcome,
    TakenThere,
)

SYSTEM = "cliniko"
TIMEOUT_S = 5.0
PER_PAGE = 100  # the documented maximum page size
MAX_PAGES = 50  # a `next` chain longer than this is a fault, not data
RANGE_DAYS = 7  # available_times: `from`..`to` inclusive, at most 7 days apart
CONCURRENT_REQUESTS = 4  # stays well under 200 requests a minute in one lookup
DIRECTORY_TTL_S = 300.0  # practitioners, businesses and types change rarely
CANCELLED_OTHER = 50  # Cliniko's cancellation reason code "Other"
DEFAULT_SHARD = "au1"  # keys issued before sharding carry no suffix
SHARD = re.compile(r"^[a-z]{2}\d{1,2}$")
HONORIFICS = frozenset({"dr", "mr", "mrs", "ms", "miss", "mx", "prof"})
PHONE_TYPE = "Mobile"
# How long a booking waits for Cliniko at each step (the re-check, the write) before the
# slot is held here and the write left to the job queue; two steps fit a tool's budget.
BOOKING_WAIT_S = 1.2
PUSH_DELAY = timedelta(seconds=20)  # the queued push waits this long for the first write
KEY_PREFIX = "voice-agent-"  # an appointment's key in its Cliniko notes: prefix + our id


class ClinikoRateLimited(PMSError):
    """Over Cliniko's request rate; `reset_at` is when its window reopens (if it said)."""

    def __init__(self, reset_at: datetime | None) -> None:
        when = f"; resets at {reset_at:%H:%M:%S} UTC" if reset_at else ""
        super().__init__(f"Cliniko rate limit reached (429){when}")
        self.reset_at = reset_at


def base_url_for(api_key: str) -> str:
    """The API base the key's shard suffix names (`…-uk1` → api.uk1); au1 without one."""
    body, dash, suffix = api_key.strip().rpartition("-")
    if not dash:
        return f"https://api.{DEFAULT_SHARD}.cliniko.com/v1"
    if not body or not SHARD.match(suffix.lower()):
        raise ValueError("the Cliniko API key's suffix is not a shard like au1 or uk1")
    return f"https://api.{suffix.lower()}.cliniko.com/v1"


# --- Names: how Cliniko's records are matched to ours ---------------------------------


def _norm(name: str | None) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", (name or "").casefold()).split())


def _person_keys(names: Iterable[str | None]) -> frozenset[str]:
    """Each name normalised, and again without a leading title ("Dr. Maya Patel")."""
    keys: set[str] = set()
    for name in names:
        key = _norm(name)
        if not key:
            continue
        keys.add(key)
        first, _, rest = key.partition(" ")
        if first in HONORIFICS and rest:
            keys.add(rest)
    return frozenset(keys)


@dataclass(frozen=True)
class _Kind:
    id: str
    name: str
    duration_min: int | None


@dataclass(frozen=True)
class _Named:
    id: str
    keys: frozenset[str]


@dataclass
class _Directory:
    """Cliniko's appointment types, businesses and practitioners, fetched together."""

    kinds: list[_Kind]
    businesses: list[_Named]
    practitioners: dict[str, _Named]
    fetched_at: float

    def kind_named(self, name: str) -> _Kind | None:
        return next((k for k in self.kinds if _norm(k.name) == _norm(name)), None)

    def business_named(self, name: str) -> _Named | None:
        return next((b for b in self.businesses if _norm(name) in b.keys), None)

    def practitioner_named(self, name: str) -> _Named | None:
        keys = _person_keys([name])
        return next((p for p in self.practitioners.values() if p.keys & keys), None)


@dataclass(frozen=True)
class _Place:
    id: str
    name: str
    timezone: str


@dataclass(frozen=True)
class _Person:
    id: str
    name: str
    keys: frozenset[str]


@dataclass(frozen=True)
class _Pair:
    """One Cliniko business and practitioner that offer the type, as our rows."""

    business_id: str
    practitioner_id: str
    place: _Place
    person: _Person


@dataclass(frozen=True)
class _Booking:
    """An appointment row of ours with the names Cliniko's records are matched by."""

    id: str
    patient_id: str
    workspace_id: str
    practitioner_name: str
    location_name: str
    type_name: str
    starts_at: datetime
    rescheduled_from: str | None
    status: str = "booked"
    practice_status: str = "local"
    slot: Slot | None = None

    @property
    def key(self) -> str:
        """The idempotency key a booking-time write leaves in the Cliniko notes."""
        return f"{KEY_PREFIX}{self.id}"


class ClinikoPractice:
    name = "cliniko"

    def __init__(
        self, pool: asyncpg.Pool, *, api_key: str, user_agent: str,
        base_url: str | None = None, timeout_s: float = TIMEOUT_S,
        booking_wait_s: float = BOOKING_WAIT_S, push_delay: timedelta = PUSH_DELAY,
    ) -> None:
        self._pool = pool
        self._booking_wait_s = booking_wait_s
        self._push_delay = push_delay
        self._base = httpx.URL((base_url or base_url_for(api_key)).rstrip("/") + "/")
        self._http = httpx.AsyncClient(
            auth=httpx.BasicAuth(api_key, ""), timeout=timeout_s, follow_redirects=False,
            headers={"User-Agent": user_agent, "Accept": "application/json"},
        )
        self._gate = asyncio.Semaphore(CONCURRENT_REQUESTS)
        self._directory_cache: _Directory | None = None
        self._staff: dict[str, frozenset[str]] = {}  # "business:<id>" / "type:<id>" → ids
        self._handlers: dict[str, Callable[[ClinicalEvent], Awaitable[SyncOutcome]]] = {
            "patient_created": self._push_patient,
            "contact_updated": self._push_contact,
            "contact_reported": self._push_contact,
            "registration_corrected": self._push_correction,
            "appointment_booked": self._push_booking,
            "appointment_rescheduled": self._push_booking,
            "appointment_cancelled": self._push_cancellation,
        }

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- Open times -------------------------------------------------------------------

    async def available_slots(
        self, service_id: str, *, appointment_type: AppointmentType, first_day: date,
        last_day: date, now: datetime, part_of_day: str | None = None,
    ) -> list[Slot]:
        directory = await self._directory()
        kind = directory.kind_named(appointment_type.name)
        if kind is None:
            logger.info("Cliniko has no appointment type named like {!r}", appointment_type.name)
            return []
        pairs = await self._pairs(service_id, directory, kind)
        duration = timedelta(minutes=kind.duration_min or appointment_type.duration_min)
        window = PART_OF_DAY.get(part_of_day or "")
        fetches = [
            self._open_times(pair, kind, start, end)
            for pair in pairs
            for start, end in _ranges(first_day, last_day, now, pair.place.timezone)
        ]
        slots: dict[tuple[str, str, datetime], Slot] = {}
        for pair, starts in await asyncio.gather(*fetches):
            zone = ZoneInfo(pair.place.timezone)
            for utc_start in starts:
                start = utc_start.astimezone(zone)
                if (start < now or not first_day <= start.date() <= last_day
                        or (window and not window[0] <= start.time() < window[1])):
                    continue
                slot = Slot(pair.person.id, pair.person.name, pair.place.id, pair.place.name,
                            appointment_type.id, start, start + duration)
                slots.setdefault(slot.key, slot)
        return sorted(slots.values(), key=lambda s: (s.starts_at, s.practitioner_name))

    async def _pairs(self, service_id: str, directory: _Directory, kind: _Kind) -> list[_Pair]:
        """Cliniko's (business, practitioner) pairs offering the type that map to our rows."""
        places, people = await self._our_places_and_people(service_id)
        offering = await self._staff_of(f"type:{kind.id}",
                                        f"appointment_types/{kind.id}/practitioners")
        pairs: list[_Pair] = []
        for business in directory.businesses:
            place = next((p for p in places if _norm(p.name) in business.keys), None)
            if place is None:
                continue
            staff = await self._staff_of(f"business:{business.id}",
                                         f"businesses/{business.id}/practitioners")
            for practitioner_id in sorted(staff & offering):
                known = directory.practitioners.get(practitioner_id)  # None: inactive
                keys = known.keys if known else frozenset()
                person = next((p for p in people if p.keys & keys), None)
                if person:
                    pairs.append(_Pair(business.id, practitioner_id, place, person))
        return pairs

    async def _open_times(
        self, pair: _Pair, kind: _Kind, start: date, end: date
    ) -> tuple[_Pair, list[datetime]]:
        path = (f"businesses/{pair.business_id}/practitioners/{pair.practitioner_id}"
                f"/appointment_types/{kind.id}/available_times")
        rows = await self._list(path, "available_times",
                                {"from": start.isoformat(), "to": end.isoformat()})
        return pair, [_when(row.get("appointment_start")) for row in rows]

    async def _our_places_and_people(
        self, service_id: str
    ) -> tuple[list[_Place], list[_Person]]:
        service = as_uuid(service_id)  # a retired place or person is never offered
        places = await self._pool.fetch(
            "SELECT id, name, timezone FROM locations WHERE service_id = $1 "
            "AND retired_at IS NULL", service)
        people = await self._pool.fetch(
            "SELECT id, name FROM practitioners WHERE service_id = $1 AND retired_at IS NULL",
            service)
        return ([_Place(str(r["id"]), r["name"], r["timezone"]) for r in places],
                [_Person(str(r["id"]), r["name"], _person_keys([r["name"]])) for r in people])

    # --- Cliniko's directory ------------------------------------------------------------

    async def _directory(self) -> _Directory:
        cached = self._directory_cache
        if cached and clock.monotonic() - cached.fetched_at < DIRECTORY_TTL_S:
            return cached
        kinds, businesses, practitioners = await asyncio.gather(
            self._list("appointment_types", "appointment_types"),
            self._list("businesses", "businesses"),
            self._list("practitioners", "practitioners"),
        )
        directory = _Directory(
            [_Kind(_id(k), _text(k, "name"), _minutes(k)) for k in kinds],
            [_Named(_id(b), frozenset({_norm(b.get("business_name")), _norm(b.get("label"))})
                    - {""}) for b in businesses],
            {_id(p): _Named(_id(p), _practitioner_keys(p)) for p in practitioners},
            clock.monotonic(),
        )
        self._directory_cache, self._staff = directory, {}
        return directory

    async def _staff_of(self, key: str, path: str) -> frozenset[str]:
        if key not in self._staff:
            self._staff[key] = frozenset(_id(p) for p in await self._list(path, "practitioners"))
        return self._staff[key]

    # --- Holding a slot on the call -------------------------------------------------------

    async def book(
        self, slot: Slot, *, patient_id: str, call_id: str | None, replaces: str | None = None,
    ) -> BookingOutcome:
        """Cliniko is asked again whether the slot is still open (the front desk books
        there too); the world model holds it with its push queued; then it is written to
        Cliniko (and a reschedule's old time cancelled there). Cliniko failing or slow at
        either step leaves the write to the queued job: the slot is held all the same."""
        deferred: str | None = None
        try:
            async with asyncio.timeout(self._booking_wait_s):
                still_open = await self._still_open(slot)
        except (PMSError, TimeoutError) as error:
            still_open, deferred = True, _why(error)  # the job re-checks before it writes
        if not still_open:
            logger.info("Cliniko no longer offers a slot picked on a call")
            return SlotConflict(slot, SYSTEM)
        try:
            appointment = await scheduling.book(
                self._pool, slot, patient_id=patient_id, call_id=call_id, replaces=replaces,
                push_after=self._push_delay)
        except scheduling.SlotTaken:
            return SlotConflict(slot, "world model")
        if deferred is None:
            try:
                async with asyncio.timeout(self._booking_wait_s):
                    await self._write(appointment.id, rechecked=True)
            except (PMSError, TimeoutError) as error:
                deferred = _why(error)
            else:
                await self._settled(appointment.id)
                return BookingMade(appointment, "pushed")
        logger.warning("Cliniko write of a booking left to the job queue: {}", deferred)
        with contextlib.suppress(Exception):  # the job's own tries record theirs
            await practice_writes.note_error(self._pool, appointment.id, deferred)
        return BookingMade(appointment, "pending", deferred)

    async def _settled(self, appointment_id: str) -> None:
        """Written at booking time: the queued push is not needed (if this cannot be
        recorded, the push runs, finds the booking by its key and records it)."""
        try:
            await practice_writes.mark_pushed(self._pool, appointment_id, cancel_queued=True)
        except (asyncpg.PostgresError, OSError) as error:
            logger.warning("booking written to Cliniko but not marked ({})",
                           type(error).__name__)

    async def write_booking(self, appointment_id: str) -> SyncOutcome:
        """The `practice_push` job's write: the booking found by its key if an earlier try
        got there, else the slot re-checked and the booking created; `TakenThere` when
        the time went in Cliniko first. A booking cancelled before it got there is not
        written (and an earlier try's appointment is cancelled)."""
        return await self._write(appointment_id, rechecked=False)

    async def _write(self, appointment_id: str, *, rechecked: bool) -> SyncOutcome:
        booking = await self._booking_row(appointment_id)
        if booking is None:
            return SyncOutcome("unsupported", detail="no such appointment")
        external_id = await self._ref("appointments", booking.id)
        if external_id is None and not rechecked:
            external_id = await self._keyed(booking)
        wrote = False
        if booking.status not in scheduling.LIVE:
            if external_id:
                wrote = await self._cancel(external_id, "Cancelled by phone")
            return SyncOutcome("pushed" if wrote else "already_there", external_id)
        if external_id is None:
            external_id, wrote = await self._book(booking, keyed=True,
                                                  recheck=not rechecked)
        else:
            await self._remember("appointments", booking.id, external_id)
        wrote = await self._cancel_replaced(booking) or wrote
        return SyncOutcome("pushed" if wrote else "already_there", external_id)

    async def _keyed(self, booking: _Booking) -> str | None:
        """The Cliniko appointment an earlier try of this booking created: at its start,
        with its practitioner, carrying its key in the notes."""
        practitioner = (await self._directory()).practitioner_named(booking.practitioner_name)
        if practitioner is None:
            return None
        at = _utc(booking.starts_at)
        rows = await self._list("individual_appointments", "individual_appointments", {
            "q[]": [f"practitioner_id:={practitioner.id}", f"starts_at:>={at}",
                    f"starts_at:<={at}"]})
        found = next((row for row in rows if booking.key in str(row.get("notes") or "")), None)
        return _id(found) if found else None

    async def _still_open(self, slot: Slot) -> bool:
        """Whether Cliniko still lists the slot's start among the pair's available times
        (never for a retired type: it is offered no more)."""
        row = await self._pool.fetchrow(
            """SELECT t.name, p.service_id FROM appointment_types t
               JOIN practitioners p ON p.id = $2 WHERE t.id = $1 AND t.retired_at IS NULL""",
            as_uuid(slot.appointment_type_id), as_uuid(slot.practitioner_id))
        directory = await self._directory()
        kind = row and directory.kind_named(row["name"])
        if not kind:
            return False
        pairs = await self._pairs(str(row["service_id"]), directory, kind)
        pair = next((p for p in pairs if p.person.id == slot.practitioner_id
                     and p.place.id == slot.location_id), None)
        if pair is None:
            return False
        day = slot.starts_at.astimezone(ZoneInfo(pair.place.timezone)).date()
        _, starts = await self._open_times(pair, kind, day, day)
        return slot.starts_at in starts

    # --- Writes -----------------------------------------------------------------------

    async def push(self, event: ClinicalEvent) -> SyncOutcome:
        handler = self._handlers.get(event.type)
        if handler is None:
            return SyncOutcome("unsupported", detail=f"{event.type} is not written to Cliniko")
        return await handler(event)

    async def _push_patient(self, event: ClinicalEvent) -> SyncOutcome:
        patient_id = event.patient_id or event.entity_id
        known = patient_id and await self._ref("patients", patient_id)
        if known:
            return SyncOutcome("already_there", known)
        record = patient_id and await world.patient_record(self._pool, patient_id)
        if not record or record.workspace_id != event.workspace_id:
            return SyncOutcome("unsupported", detail="no such patient in this workspace")
        said = {k: v for k, v in event.payload.items()  # the record keeps later corrections
                if v and k not in world.IDENTITY_FIELDS}
        return await self._ensure_patient(record.id, _patient_details(record, said))

    async def _push_correction(self, event: ClinicalEvent) -> SyncOutcome:
        """A name or birth date corrected on the call that registered the patient."""
        known = event.patient_id and await self._ref("patients", event.patient_id)
        if not known:  # not pushed yet: the patient goes across with the corrected record
            return await self._push_patient(event)
        changes = {k: v for k, v in dict(event.payload.get("changes") or {}).items()
                   if k in world.IDENTITY_FIELDS and isinstance(v, str) and v}
        current = await self._object(f"patients/{known}")
        update = {k: v for k, v in changes.items() if current.get(k) != v}
        if not update:
            return SyncOutcome("already_there", known)
        await self._request("PUT", f"patients/{known}", json=update)
        return SyncOutcome("pushed", known)

    async def _push_contact(self, event: ClinicalEvent) -> SyncOutcome:
        changes = {name: value for name, value in dict(event.payload.get("changes") or {}).items()
                   if name in CONTACT_FIELDS and isinstance(value, str) and value}
        record = event.patient_id and await world.patient_record(self._pool, event.patient_id)
        if not changes or not record or record.workspace_id != event.workspace_id:
            return SyncOutcome("unsupported", detail="no contact change for a known patient")
        external_id = await self._ref("patients", record.id)
        if external_id is None:
            outcome = await self._ensure_patient(record.id, _patient_details(record, changes))
            if outcome.external_id is None or outcome.status == "pushed":  # created with them
                return outcome
            external_id = outcome.external_id
        current = await self._object(f"patients/{external_id}")
        update = _contact_update(current, changes)
        if not update:
            return SyncOutcome("already_there", external_id)
        await self._request("PUT", f"patients/{external_id}", json=update)
        return SyncOutcome("pushed", external_id)

    async def _ensure_patient(self, patient_id: str, details: dict[str, Any]) -> SyncOutcome:
        """The Cliniko patient for ours: one the clinic already has (same name and date of
        birth), else a new one; remembered either way."""
        same = await self._list("patients", "patients", {"q[]": [
            f"first_name:={details['first_name']}", f"last_name:={details['last_name']}",
            f"date_of_birth:={details['date_of_birth']}"]})
        if len(same) > 1:
            return SyncOutcome("unsupported", detail=f"{len(same)} Cliniko patients share "
                                                     "this name and date of birth")
        if same:
            external_id = _id(same[0])
            await self._remember("patients", patient_id, external_id)
            return SyncOutcome("already_there", external_id, "matched an existing Cliniko patient")
        created = await self._object("patients", method="POST", json=details)
        external_id = _id(created)
        await self._remember("patients", patient_id, external_id)
        logger.info("Cliniko patient created for patient {}", patient_id)
        return SyncOutcome("pushed", external_id)

    async def _push_booking(self, event: ClinicalEvent) -> SyncOutcome:
        booking = await self._booking(event)
        if booking is None:
            return SyncOutcome("unsupported", detail="no such appointment of this patient")
        if booking.practice_status == "pending":  # its own job writes it
            return SyncOutcome("queued", detail="written by its practice_push job")
        if booking.practice_status == "failed":
            return SyncOutcome("unsupported", detail="its write failed at booking time; "
                                                     "the clinic was told")
        external_id = await self._ref("appointments", booking.id)
        wrote = False
        if external_id is None:
            external_id, wrote = await self._book(booking)
        wrote = await self._cancel_replaced(booking) or wrote
        return SyncOutcome("pushed" if wrote else "already_there", external_id)

    async def _cancel_replaced(self, booking: _Booking) -> bool:
        """The time a reschedule replaces is freed in Cliniko too (False: nothing to do)."""
        replaced = booking.rescheduled_from and await self._booking_row(booking.rescheduled_from)
        old = replaced and await self._twin(replaced)
        return bool(old) and await self._cancel(old, "Rescheduled")

    async def _book(self, booking: _Booking, *, keyed: bool = False,
                    recheck: bool = False) -> tuple[str, bool]:
        """The Cliniko appointment for ours (found, else created); whether it was created.
        `keyed`: its notes carry the booking's key; `recheck`: the slot must still be
        open there before it is created (`TakenThere`)."""
        patient = await self._ref("patients", booking.patient_id)
        if patient is None:
            record = await world.patient_record(self._pool, booking.patient_id)
            patient = (await self._ensure_patient(booking.patient_id,
                                                  _patient_details(record, {}))).external_id
            if patient is None:
                raise PMSRefused("the patient could not be matched in Cliniko (several "
                                 "share the name and date of birth)")
        directory = await self._directory()
        kind = directory.kind_named(booking.type_name)
        practitioner = directory.practitioner_named(booking.practitioner_name)
        business = directory.business_named(booking.location_name)
        if not (kind and practitioner and business):
            raise PMSRefused("Cliniko has no appointment type, practitioner or business named "
                             "like this appointment's")
        existing = await self._appointment_at(patient, booking.starts_at, practitioner.id)
        created = existing is None
        if existing is None:
            if recheck and booking.slot and not await self._still_open(booking.slot):
                raise TakenThere("the time is no longer open in Cliniko")
            body = {"starts_at": _utc(booking.starts_at), "patient_id": patient,
                    "practitioner_id": practitioner.id, "appointment_type_id": kind.id,
                    "business_id": business.id}
            if keyed:
                body["notes"] = f"Booked by phone with the clinic's voice agent ({booking.key})."
            existing = _id(await self._object("individual_appointments", method="POST",
                                              json=body))
        await self._remember("appointments", booking.id, existing)
        return existing, created

    async def _push_cancellation(self, event: ClinicalEvent) -> SyncOutcome:
        booking = await self._booking(event)
        if booking is None:
            return SyncOutcome("unsupported", detail="no such appointment of this patient")
        external_id = await self._twin(booking)
        if external_id is None:
            return SyncOutcome("already_there", detail="never booked in Cliniko")
        cancelled = await self._cancel(external_id, "Cancelled by phone")
        return SyncOutcome("pushed" if cancelled else "already_there", external_id)

    async def _twin(self, booking: _Booking) -> str | None:
        """The Cliniko appointment of ours: remembered, else one the clinic already had
        for the patient at that time (then remembered)."""
        external_id = await self._ref("appointments", booking.id)
        if external_id is None:
            patient = await self._ref("patients", booking.patient_id)
            external_id = patient and await self._appointment_at(
                patient, booking.starts_at, None)
            if external_id:
                await self._remember("appointments", booking.id, external_id)
        return external_id

    async def _cancel(self, external_id: str, note: str) -> bool:
        """Cancel the Cliniko appointment unless it is already (False: nothing done)."""
        current = await self._object(f"individual_appointments/{external_id}")
        if current.get("cancelled_at") or current.get("deleted_at"):
            return False
        await self._request("PATCH", f"individual_appointments/{external_id}/cancel", json={
            "cancellation_reason": CANCELLED_OTHER,
            "cancellation_note": f"{note} with the clinic's voice agent.",
        })
        return True

    async def _appointment_at(
        self, patient: str, starts_at: datetime, practitioner: str | None
    ) -> str | None:
        """A live Cliniko appointment of the patient at that start (a booking made before,
        whose answer was lost), so a retry never books twice."""
        at = _utc(starts_at)
        rows = await self._list("individual_appointments", "individual_appointments", {
            "q[]": [f"patient_id:={patient}", f"starts_at:>={at}", f"starts_at:<={at}"]})
        for row in rows:
            if row.get("cancelled_at") or row.get("deleted_at"):
                continue
            if practitioner and _link_id(row.get("practitioner")) not in (None, practitioner):
                continue
            return _id(row)
        return None

    async def _booking(self, event: ClinicalEvent) -> _Booking | None:
        """The event's appointment, when it is the event's patient's in its workspace."""
        appointment_id = event.payload.get("appointment_id") or (
            event.entity_id if event.entity_table == "appointments" else None)
        booking = appointment_id and await self._booking_row(str(appointment_id))
        if not booking or booking.workspace_id != event.workspace_id or (
                event.patient_id and booking.patient_id != event.patient_id):
            return None
        return booking

    async def _booking_row(self, appointment_id: str) -> _Booking | None:
        row = await self._pool.fetchrow(
            """SELECT a.id, a.patient_id, a.starts_at, a.ends_at, a.rescheduled_from,
                      a.status, a.practice_status, a.practitioner_id, a.location_id,
                      a.appointment_type_id, pt.workspace_id, l.timezone,
                      p.name AS practitioner_name, l.name AS location_name,
                      t.name AS type_name
               FROM appointments a
               JOIN patients pt ON pt.id = a.patient_id
               JOIN practitioners p ON p.id = a.practitioner_id
               JOIN locations l ON l.id = a.location_id
               JOIN appointment_types t ON t.id = a.appointment_type_id
               WHERE a.id = $1""", as_uuid(appointment_id))
        if row is None:
            return None
        zone = ZoneInfo(row["timezone"])
        slot = Slot(str(row["practitioner_id"]), row["practitioner_name"],
                    str(row["location_id"]), row["location_name"],
                    str(row["appointment_type_id"]), row["starts_at"].astimezone(zone),
                    row["ends_at"].astimezone(zone))
        return _Booking(str(row["id"]), str(row["patient_id"]), str(row["workspace_id"]),
                        row["practitioner_name"], row["location_name"], row["type_name"],
                        row["starts_at"],
                        str(row["rescheduled_from"]) if row["rescheduled_from"] else None,
                        row["status"], row["practice_status"], slot)

    # --- external_refs ----------------------------------------------------------------

    async def _ref(self, table: str, entity_id: str) -> str | None:
        return await self._pool.fetchval(
            """SELECT external_id FROM external_refs
               WHERE system = $1 AND entity_table = $2 AND entity_id = $3""",
            SYSTEM, table, as_uuid(entity_id))

    async def _remember(self, table: str, entity_id: str, external_id: str) -> None:
        await self._pool.execute(
            """INSERT INTO external_refs (system, entity_table, entity_id, external_id)
               VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING""",
            SYSTEM, table, as_uuid(entity_id), external_id)

    # --- HTTP -------------------------------------------------------------------------

    async def _list(
        self, path: str, key: str, params: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Every item of a paginated list, following `links.next` (on Cliniko's host only)."""
        url: str | httpx.URL = path
        query: dict[str, Any] | None = {**(params or {}), "per_page": PER_PAGE}
        items: list[dict[str, Any]] = []
        for _ in range(MAX_PAGES):
            body = await self._request("GET", url, params=query)
            page = body.get(key) if isinstance(body, dict) else None
            if not isinstance(page, list) or not all(isinstance(i, dict) for i in page):
                raise PMSError(f"unexpected Cliniko answer listing {key}")
            items.extend(page)
            links = body.get("links")
            following = links.get("next") if isinstance(links, dict) else None
            if not following:
                return items
            url, query = self._on_our_host(str(following)), None
        raise PMSError(f"Cliniko kept paginating {key}")

    async def _object(self, path: str, *, method: str = "GET",
                      json: dict[str, Any] | None = None) -> dict[str, Any]:
        body = await self._request(method, path, json=json)
        if not isinstance(body, dict) or "id" not in body:
            raise PMSError(f"unexpected Cliniko answer to {method} {path.split('/')[0]}")
        return body

    async def _request(
        self, method: str, url: str | httpx.URL, *, params: dict[str, Any] | None = None,
        json: dict[str, Any] | None = None,
    ) -> Any:
        target = url if isinstance(url, httpx.URL) else self._base.join(url)
        async with self._gate:
            try:
                response = await self._http.request(method, target, params=params, json=json)
            except httpx.TimeoutException:
                raise self._failed(method, target, "Cliniko did not answer in time") from None
            except httpx.HTTPError as error:
                raise self._failed(method, target,
                                   f"Cliniko unreachable ({type(error).__name__})") from None
        if not response.is_success:
            raise self._failed(method, target, _refusal(response))
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise self._failed(method, target, "Cliniko answered with something other than "
                                               "JSON") from None

    def _on_our_host(self, link: str) -> httpx.URL:
        """A pagination link, refused when it points anywhere but Cliniko's API (the key
        goes with every request)."""
        url = httpx.URL(link)
        if not url.is_absolute_url:
            path = link.lstrip("/")
            base_path = self._base.path.strip("/")
            if base_path and path.startswith(base_path + "/"):
                path = path[len(base_path) + 1:]
            return self._base.join(path)
        if (url.scheme, url.host, url.port) != (self._base.scheme, self._base.host,
                                                self._base.port):
            raise PMSError("Cliniko's pagination link points to another host")
        return url

    @staticmethod
    def _failed(method: str, url: httpx.URL, message: str | PMSError) -> PMSError:
        error = message if isinstance(message, PMSError) else PMSError(message)
        logger.warning("Cliniko {} {} failed: {}", method, url.path, error)  # path: no query
        return error


# --- Shapes ---------------------------------------------------------------------------


def _refusal(response: httpx.Response) -> PMSError:
    status = response.status_code
    if status == 401:
        return PMSError("Cliniko refused the API key (401)")
    if status == 403:
        return PMSError("Cliniko forbade the request (403: permissions or User-Agent)")
    if status == 404:
        return PMSError("Cliniko has no such record (404)")
    if status == 422:
        try:
            errors = response.json().get("errors")
        except (ValueError, AttributeError):
            errors = None
        fields = ", ".join(sorted(errors)[:5]) if isinstance(errors, dict) else "no detail"
        return PMSRefused(f"Cliniko rejected the data (422: {fields})")
    if status == 429:
        reset = response.headers.get("X-RateLimit-Reset", "")
        return ClinikoRateLimited(
            datetime.fromtimestamp(int(reset), UTC) if reset.isdigit() else None)
    if status >= 500:
        return PMSError(f"Cliniko server error ({status})")
    return PMSError(f"Cliniko refused the request ({status})")


def _why(error: Exception) -> str:
    """A failure as the record says it: no PHI (PMSError messages carry none)."""
    if isinstance(error, TimeoutError):
        return "Cliniko did not answer within the booking's wait"
    return str(error)[:200]


def _id(item: dict[str, Any]) -> str:
    """A record's id: Cliniko's are 64-bit numbers (sent as strings); anything else is
    refused, as ids go into request paths."""
    value = item.get("id")
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit():
        raise PMSError("unexpected Cliniko record without a numeric id")
    return str(value)


def _text(item: dict[str, Any], key: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise PMSError(f"unexpected Cliniko record without {key}")
    return value


def _minutes(kind: dict[str, Any]) -> int | None:
    value = kind.get("duration_in_minutes")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _practitioner_keys(person: dict[str, Any]) -> frozenset[str]:
    first, last = person.get("first_name") or "", person.get("last_name") or ""
    return _person_keys([person.get("label"), f"{first} {last}",
                         f"{person.get('title') or ''} {first} {last}"])


def _link_id(reference: Any) -> str | None:
    """The id at the end of a `{"links": {"self": ".../practitioners/123"}}` reference."""
    if isinstance(reference, dict) and isinstance(reference.get("links"), dict):
        link = reference["links"].get("self")
        if isinstance(link, str):
            return link.rstrip("/").rsplit("/", 1)[-1]
    return None


def _when(value: Any) -> datetime:
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise PMSError("unexpected Cliniko available time")
    return when


def _utc(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ranges(first: date, last: date, now: datetime, timezone: str) -> list[tuple[date, date]]:
    """The request ranges covering the days: none before today (Cliniko refuses a past
    `from`), each at most RANGE_DAYS long."""
    start = max(first, now.astimezone(ZoneInfo(timezone)).date())
    ranges: list[tuple[date, date]] = []
    while start <= last:
        end = min(last, start + timedelta(days=RANGE_DAYS - 1))
        ranges.append((start, end))
        start = end + timedelta(days=1)
    return ranges


def _patient_details(record: world.PatientRecord | None, overrides: dict[str, Any]
                     ) -> dict[str, Any]:
    """A Cliniko patient body from our record, with verified values from the event."""
    if record is None:
        raise PMSError("the patient is missing from the world model")
    values = {"first_name": record.first_name, "last_name": record.last_name,
              "date_of_birth": record.date_of_birth.isoformat(), "phone": record.phone,
              "email": record.email, "address": record.address,
              **{k: v for k, v in overrides.items() if isinstance(v, str) and v}}
    body: dict[str, Any] = {k: values[k] for k in ("first_name", "last_name", "date_of_birth")}
    if values.get("email"):
        body["email"] = values["email"]
    if values.get("address"):
        body["address_1"] = values["address"]
    if values.get("phone"):
        body["patient_phone_numbers"] = [{"phone_type": PHONE_TYPE, "number": values["phone"]}]
    return body


def _contact_update(current: dict[str, Any], changes: dict[str, str]) -> dict[str, Any]:
    """The fields of a PUT that bring Cliniko's patient to the changes (empty: it has them)."""
    update: dict[str, Any] = {}
    if "email" in changes and current.get("email") != changes["email"]:
        update["email"] = changes["email"]
    if "address" in changes and current.get("address_1") != changes["address"]:
        update["address_1"] = changes["address"]
    numbers = [n for n in current.get("patient_phone_numbers") or [] if isinstance(n, dict)]
    if "phone" in changes and not any(n.get("number") == changes["phone"] for n in numbers):
        others = [n for n in numbers if n.get("phone_type") != PHONE_TYPE]
        update["patient_phone_numbers"] = [
            {"phone_type": PHONE_TYPE, "number": changes["phone"]},
            *({"phone_type": n.get("phone_type"), "number": n.get("number")} for n in others)]
    return update
