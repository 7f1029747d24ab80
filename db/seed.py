"""The demo workspace: a clinic you can call right after `make run`.

Its number is in the 555-01xx range, reserved for fiction; nothing here is a real
phone number. Re-running is safe: what exists is found and left as it is, so
edits made since (greeting, keyterms, voice settings) survive a re-seed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg
import yaml
from pydantic import BaseModel, ConfigDict, model_validator

from db import repositories as repo
from db import world
from language.carriers import default_carriers

DEMO_WORKSPACE = "demo"
DEMO_CLINIC = "Demo Family Clinic"
DEMO_NUMBER = "+15550100100"
CHECK_IN_LINE = "Demo Check-in Line"
CHECK_IN_NUMBER = "+15550100300"
CHECK_IN_GRAPH = "companion_checkin"
CHECK_IN_GREETING = (
    "Hello, this is your check-in call from Demo Family Clinic. How are you doing today?"
)
DEMO_KEYTERMS = (
    "Demo Family Clinic", "checkup", "physical", "physiotherapy", "blood test",
    "vaccination", "flu shot", "follow-up", "new patient",
)


@dataclass(frozen=True)
class SeedResult:
    workspace_id: str
    service_id: str

    def __str__(self) -> str:
        return f"workspace {DEMO_WORKSPACE} ({self.workspace_id}), service {DEMO_CLINIC}"


async def is_empty(pool: asyncpg.Pool) -> bool:
    """No workspace yet: a first start, which may seed the demo."""
    return not await pool.fetchval("SELECT EXISTS (SELECT 1 FROM workspaces)")


async def seed_demo(pool: asyncpg.Pool) -> SeedResult:
    """Create (or find) the demo workspace, its clinic service and default voice settings."""
    workspace = await repo.ensure_workspace(pool, DEMO_WORKSPACE)
    service = await repo.get_service_by_name(pool, workspace["id"], DEMO_CLINIC)
    if service is None:
        service = await repo.create_service(
            pool, workspace["id"], DEMO_CLINIC, phone_number=DEMO_NUMBER,
            keyterms=list(DEMO_KEYTERMS),
        )
    if await repo.get_voice_settings_raw(pool, workspace["id"]) is None:
        await repo.set_voice_settings(pool, workspace["id"], {})
    await seed_clinic(pool, workspace["id"], service["id"], date.today())
    await seed_check_in_line(pool, workspace["id"])
    await seed_world(pool, workspace["id"])
    return SeedResult(workspace_id=workspace["id"], service_id=service["id"])


async def fill_demo_clinic(pool: asyncpg.Pool) -> bool:
    """A demo workspace created before the clinic data existed gets it now (True if added)."""
    workspace = await repo.get_workspace_by_name(pool, DEMO_WORKSPACE)
    if workspace is None:
        return False
    service = await repo.get_service_by_name(pool, workspace["id"], DEMO_CLINIC)
    if service is None:
        return False
    added = await seed_clinic(pool, workspace["id"], service["id"], date.today())
    added = await seed_check_in_line(pool, workspace["id"]) or added
    return await seed_world(pool, workspace["id"]) or added


async def seed_check_in_line(
    pool: asyncpg.Pool, workspace_id: str, clinic: DemoClinic | None = None
) -> bool:
    """The check-in line service and its people's memories and reminders, once (False:
    already there). The clinic's patients must exist first (seed_clinic)."""
    clinic = clinic or load_demo_clinic()
    if await repo.get_service_by_name(pool, workspace_id, CHECK_IN_LINE) is not None:
        return False
    workspace = uuid.UUID(workspace_id)
    async with pool.acquire() as connection, connection.transaction():
        for check_in in clinic.check_ins:
            first, last = check_in.patient.split(" ", 1)
            patient = await connection.fetchval(
                """SELECT id FROM patients WHERE workspace_id = $1 AND first_name = $2
                   AND last_name = $3""", workspace, first, last,
            )
            for text in check_in.memories:
                await connection.execute(
                    "INSERT INTO memories (patient_id, text) VALUES ($1, $2)", patient, text
                )
            for text in check_in.reminders:
                await connection.execute(
                    "INSERT INTO reminders (patient_id, text) VALUES ($1, $2)", patient, text
                )
    service = await repo.create_service(
        pool, workspace_id, CHECK_IN_LINE, phone_number=CHECK_IN_NUMBER,
        greeting=CHECK_IN_GREETING,
    )
    await repo.set_service_graph(pool, service["id"], CHECK_IN_GRAPH)
    return True


# --- The demo clinic's world model (db/data/demo_clinic.yaml) ---------------------------

CLINIC_FILE = Path(__file__).resolve().parent / "data" / "demo_clinic.yaml"
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LocationData(_Data):
    name: str
    timezone: str
    address: str
    phone_number: str | None = None
    opening_hours: dict[str, list[str]]


class TypeData(_Data):
    name: str
    duration_min: int
    price_cents: int
    description: str
    keywords: list[str] = []


class PractitionerData(_Data):
    name: str
    title: str
    years_experience: int


class ScheduleData(_Data):
    practitioner: str
    location: str
    days: list[str]
    blocks: list[tuple[time, time]]
    offers: list[str]


class PatientData(_Data):
    first_name: str
    last_name: str
    date_of_birth: date
    phone: str
    mrn: str | None = None
    email: str | None = None
    address: str | None = None


class MedicationData(_Data):
    name: str
    dose: str = ""
    frequency: str = ""


class AllergyData(_Data):
    substance: str
    reaction: str = ""
    severity: str = "unknown"


class CoverageData(_Data):
    carrier: str
    member_id: str
    plan_name: str = ""
    group_number: str = ""


class ChartData(_Data):
    patient: str
    conditions: list[str] = []
    medications: list[MedicationData] = []
    allergies: list[AllergyData] = []
    coverage: CoverageData | None = None


class AppointmentData(_Data):
    patient: str
    practitioner: str
    type: str
    in_days: int
    at: time


class CheckInData(_Data):
    patient: str
    memories: list[str] = []
    reminders: list[str] = []


class DemoClinic(_Data):
    locations: list[LocationData]
    appointment_types: list[TypeData]
    practitioners: list[PractitionerData]
    schedules: list[ScheduleData]
    patients: list[PatientData]
    appointments: list[AppointmentData]
    check_ins: list[CheckInData] = []
    charts: list[ChartData] = []

    @model_validator(mode="after")
    def _references_resolve(self) -> DemoClinic:
        names = {
            "location": {x.name for x in self.locations},
            "practitioner": {x.name for x in self.practitioners},
            "type": {x.name for x in self.appointment_types},
            "patient": {f"{p.first_name} {p.last_name}" for p in self.patients},
        }
        wanted = [("location", s.location) for s in self.schedules]
        wanted += [("practitioner", s.practitioner) for s in self.schedules]
        wanted += [("type", offer) for s in self.schedules for offer in s.offers]
        wanted += [(kind, getattr(a, kind)) for a in self.appointments
                   for kind in ("patient", "practitioner", "type")]
        wanted += [("patient", c.patient) for c in self.check_ins]
        wanted += [("patient", c.patient) for c in self.charts]
        missing = sorted({f"{kind} {name!r}" for kind, name in wanted if name not in names[kind]})
        bad_days = sorted({d for s in self.schedules for d in s.days if d not in WEEKDAYS})
        for location in self.locations:
            ZoneInfo(location.timezone)  # an unknown timezone raises here, at load
        if missing or bad_days:
            raise ValueError(f"unknown {missing}; bad days {bad_days}")
        return self


def load_demo_clinic(path: Path = CLINIC_FILE) -> DemoClinic:
    return DemoClinic.model_validate(yaml.safe_load(path.read_text()))


async def seed_clinic(
    pool: asyncpg.Pool, workspace_id: str, service_id: str, today: date,
    clinic: DemoClinic | None = None,
) -> bool:
    """Fill the clinic's locations, people, schedules and bookings once (False: already there)."""
    clinic = clinic or load_demo_clinic()
    service = uuid.UUID(service_id)
    async with pool.acquire() as connection, connection.transaction():
        seeded = await connection.fetchval(
            "SELECT EXISTS (SELECT 1 FROM locations WHERE service_id = $1)", service
        )
        if seeded:
            return False
        ids: dict[tuple[str, str], uuid.UUID] = {}
        zones: dict[str, str] = {}
        for loc in clinic.locations:
            ids["location", loc.name] = await connection.fetchval(
                """INSERT INTO locations (service_id, name, timezone, address, phone_number,
                       opening_hours) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id""",
                service, loc.name, loc.timezone, loc.address, loc.phone_number, loc.opening_hours,
            )
            zones[loc.name] = loc.timezone
        for kind in clinic.appointment_types:
            ids["type", kind.name] = await connection.fetchval(
                """INSERT INTO appointment_types (service_id, name, description, duration_min,
                       price_cents, keywords) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id""",
                service, kind.name, kind.description, kind.duration_min, kind.price_cents,
                kind.keywords,
            )
        for person in clinic.practitioners:
            ids["practitioner", person.name] = await connection.fetchval(
                """INSERT INTO practitioners (service_id, name, title, years_experience)
                   VALUES ($1, $2, $3, $4) RETURNING id""",
                service, person.name, person.title, person.years_experience,
            )
        works: dict[str, list[tuple[int, time, time, str]]] = {}
        for schedule in clinic.schedules:
            offers = [ids["type", name] for name in schedule.offers]
            for day in schedule.days:
                for starts, ends in schedule.blocks:
                    await connection.execute(
                        """INSERT INTO schedules (practitioner_id, location_id, weekday, starts,
                               ends, appointment_type_ids) VALUES ($1, $2, $3, $4, $5, $6)""",
                        ids["practitioner", schedule.practitioner],
                        ids["location", schedule.location], WEEKDAYS.index(day), starts, ends,
                        offers,
                    )
                    works.setdefault(schedule.practitioner, []).append(
                        (WEEKDAYS.index(day), starts, ends, schedule.location)
                    )
        for name, patient_id in (await _upsert_patients(connection, workspace_id, clinic)).items():
            ids["patient", name] = patient_id
        durations = {kind.name: kind.duration_min for kind in clinic.appointment_types}
        for booking in clinic.appointments:
            day, location = _first_working_day(works[booking.practitioner], today, booking)
            starts = datetime.combine(day, booking.at, ZoneInfo(zones[location]))
            await connection.execute(
                """INSERT INTO appointments (patient_id, practitioner_id, location_id,
                       appointment_type_id, starts_at, ends_at) VALUES ($1, $2, $3, $4, $5, $6)""",
                ids["patient", booking.patient], ids["practitioner", booking.practitioner],
                ids["location", location], ids["type", booking.type], starts,
                starts + timedelta(minutes=durations[booking.type]),
            )
    return True


def _first_working_day(
    hours: list[tuple[int, time, time, str]], today: date, booking: AppointmentData
) -> tuple[date, str]:
    """The first day from `in_days` on which the practitioner works at the booking's time."""
    for offset in range(booking.in_days, booking.in_days + 14):
        day = today + timedelta(days=offset)
        for weekday, starts, ends, location in hours:
            if weekday == day.weekday() and starts <= booking.at < ends:
                return day, location
    raise ValueError(f"{booking.practitioner} never works at {booking.at}")


async def _upsert_patients(
    connection: asyncpg.Connection, workspace_id: str, clinic: DemoClinic
) -> dict[str, uuid.UUID]:
    """The demo patients by full name (added if missing; MRN, email, address filled in)."""
    ids = {}
    for patient in clinic.patients:
        ids[f"{patient.first_name} {patient.last_name}"] = await connection.fetchval(
            """INSERT INTO patients (workspace_id, first_name, last_name, date_of_birth, phone,
                                     mrn, email, address)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
               ON CONFLICT (workspace_id, lower(first_name), lower(last_name), date_of_birth)
               DO UPDATE SET mrn = coalesce(patients.mrn, EXCLUDED.mrn),
                             email = coalesce(patients.email, EXCLUDED.email),
                             address = coalesce(patients.address, EXCLUDED.address)
               RETURNING id""",
            uuid.UUID(workspace_id), patient.first_name, patient.last_name,
            patient.date_of_birth, patient.phone, patient.mrn, patient.email, patient.address,
        )
    return ids


async def seed_world(pool: asyncpg.Pool, workspace_id: str,
                     clinic: DemoClinic | None = None) -> bool:
    """The demo's insurance carriers, patients' details and charts (True if any added).

    Idempotent: a chart is only written for a patient whose chart is empty, so it also
    fills a demo database created before the world model existed.
    """
    clinic = clinic or load_demo_clinic()
    workspace = uuid.UUID(workspace_id)
    added = False
    async with pool.acquire() as connection, connection.transaction():
        carriers = {}
        await world.add_carriers(connection, workspace_id, default_carriers())
        for row in await connection.fetch(
                "SELECT id, name FROM insurance_carriers WHERE workspace_id = $1", workspace):
            carriers[row["name"]] = row["id"]
        ids = await _upsert_patients(connection, workspace_id, clinic)
        for chart in clinic.charts:
            patient_id = ids[chart.patient]
            charted = await connection.fetchval(
                """SELECT EXISTS (SELECT 1 FROM conditions WHERE patient_id = $1)
                       OR EXISTS (SELECT 1 FROM medications WHERE patient_id = $1)
                       OR EXISTS (SELECT 1 FROM allergies WHERE patient_id = $1)
                       OR EXISTS (SELECT 1 FROM insurance_coverages WHERE patient_id = $1)""",
                patient_id)
            if charted:
                continue
            added = True
            for name in chart.conditions:
                await connection.execute(
                    "INSERT INTO conditions (patient_id, name) VALUES ($1, $2)", patient_id, name)
            for drug in chart.medications:
                await connection.execute(
                    """INSERT INTO medications (patient_id, name, dose, frequency)
                       VALUES ($1, $2, $3, $4)""", patient_id, drug.name, drug.dose,
                    drug.frequency)
            for allergy in chart.allergies:
                await connection.execute(
                    """INSERT INTO allergies (patient_id, substance, reaction, severity)
                       VALUES ($1, $2, $3, $4)""", patient_id, allergy.substance,
                    allergy.reaction, allergy.severity)
            if chart.coverage is not None:
                cover = chart.coverage
                await connection.execute(
                    """INSERT INTO insurance_coverages (patient_id, carrier_id, carrier_name,
                           member_id, plan_name, group_number)
                       VALUES ($1, $2, $3, $4, $5, $6)""",
                    patient_id, carriers.get(cover.carrier), cover.carrier, cover.member_id,
                    cover.plan_name, cover.group_number)
    return added
