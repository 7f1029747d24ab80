"""The demo workspace: a clinic you can call right after `make run`.

Its number is in the 555-01xx range, reserved for fiction; nothing here is a real
phone number. Re-running is safe: what exists is found and left as it is, so
edits made since (greeting, keyterms, voice settings) survive a re-seed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg
import yaml
from pydantic import BaseModel, ConfigDict, model_validator

from db import audit, world
from db import repositories as repo
from db.clinic.file import ClinicFile, parse_clinic_text
from db.clinic.model import WEEKDAYS
from db.clinic.store import apply_clinic, apply_sections
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
    """Create (or find) the demo workspace, its clinic and default voice settings.

    The clinic is imported from its clinic file like any other, only when it does not
    exist yet: a re-seed keeps what operators changed since."""
    workspace = await repo.ensure_workspace(pool, DEMO_WORKSPACE)
    service = await repo.get_service_by_name(pool, workspace["id"], DEMO_CLINIC)
    if service is None:
        service_id = await _import_demo_clinic(pool, workspace["id"], date.today())
    else:
        service_id = service["id"]
        await seed_clinic(pool, workspace["id"], service_id, date.today())
    if await repo.get_voice_settings_raw(pool, workspace["id"]) is None:
        await repo.set_voice_settings(pool, workspace["id"], {})
    await seed_check_in_line(pool, workspace["id"])
    await seed_world(pool, workspace["id"])
    return SeedResult(workspace_id=workspace["id"], service_id=service_id)


async def _import_demo_clinic(pool: asyncpg.Pool, workspace_id: str, today: date) -> str:
    """The demo clinic file imported, and its patients and bookings, in one transaction."""
    clinic, people = load_demo_clinic(), load_demo_people()
    async with pool.acquire() as connection, connection.transaction():
        result = await apply_clinic(connection, workspace_id, clinic, actor=audit.CLI_ACTOR,
                                    now=datetime.now(UTC))
        await _seed_people(connection, workspace_id, result.service_id, today, clinic, people)
    return result.service_id


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
    pool: asyncpg.Pool, workspace_id: str, people: DemoPeople | None = None
) -> bool:
    """The check-in line service and its people's memories and reminders, once (False:
    already there). The clinic's patients must exist first (seed_clinic)."""
    people = people or load_demo_people()
    if await repo.get_service_by_name(pool, workspace_id, CHECK_IN_LINE) is not None:
        return False
    workspace = uuid.UUID(workspace_id)
    async with pool.acquire() as connection, connection.transaction():
        for check_in in people.check_ins:
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


# --- The demo clinic (data/demo_clinic.yaml) and its people (data/demo_people.yaml) ------

CLINIC_FILE = Path(__file__).resolve().parent / "data" / "demo_clinic.yaml"
PEOPLE_FILE = Path(__file__).resolve().parent / "data" / "demo_people.yaml"


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


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


class DemoPeople(_Data):
    """The demo clinic's patients, their charts, bookings and check-in memories."""

    patients: list[PatientData]
    appointments: list[AppointmentData]
    check_ins: list[CheckInData] = []
    charts: list[ChartData] = []

    @model_validator(mode="after")
    def _patients_resolve(self) -> DemoPeople:
        names = {f"{p.first_name} {p.last_name}" for p in self.patients}
        wanted = [a.patient for a in self.appointments]
        wanted += [c.patient for c in (*self.check_ins, *self.charts)]
        missing = sorted({name for name in wanted if name not in names})
        if missing:
            raise ValueError(f"unknown patients {missing}")
        return self


def load_demo_clinic(path: Path = CLINIC_FILE) -> ClinicFile:
    return parse_clinic_text(path.read_text(), str(path))


def load_demo_people(path: Path = PEOPLE_FILE) -> DemoPeople:
    return DemoPeople.model_validate(yaml.safe_load(path.read_text()))


async def seed_clinic(
    pool: asyncpg.Pool, workspace_id: str, service_id: str, today: date,
    clinic: ClinicFile | None = None, people: DemoPeople | None = None,
) -> bool:
    """Fill an existing clinic (service) with the demo clinic file's locations, people,
    schedules and closures, and its patients and bookings, once (False: it has
    locations already). Its name, numbers and greeting stay its own."""
    clinic, people = clinic or load_demo_clinic(), people or load_demo_people()
    async with pool.acquire() as connection, connection.transaction():
        seeded = await connection.fetchval(
            "SELECT EXISTS (SELECT 1 FROM locations WHERE service_id = $1)",
            uuid.UUID(service_id),
        )
        if seeded:
            return False
        await apply_sections(connection, service_id, clinic, now=datetime.now(UTC))
        await _seed_people(connection, workspace_id, service_id, today, clinic, people)
    return True


async def _seed_people(
    connection: asyncpg.Connection, workspace_id: str, service_id: str, today: date,
    clinic: ClinicFile, people: DemoPeople,
) -> None:
    """The patients, and their bookings placed from `today` on the clinic's hours."""
    service = uuid.UUID(service_id)
    ids: dict[tuple[str, str], uuid.UUID] = {}
    for kind in ("locations", "practitioners", "appointment_types"):
        for row in await connection.fetch(
                f"SELECT id, name FROM {kind} WHERE service_id = $1 AND retired_at IS NULL",
                service):
            ids[kind, row["name"]] = row["id"]
    zones = {location.name: location.timezone for location in clinic.locations}
    works: dict[str, list[tuple[int, time, time, str]]] = {}
    for schedule in clinic.schedules:
        for day in schedule.days:
            for starts, ends in schedule.blocks:
                works.setdefault(schedule.practitioner, []).append(
                    (WEEKDAYS.index(day), starts, ends, schedule.location))
    patients = await _upsert_patients(connection, workspace_id, people)
    durations = {kind.name: kind.duration_min for kind in clinic.appointment_types}
    for booking in people.appointments:
        day, location = _first_working_day(works[booking.practitioner], today, booking)
        starts = datetime.combine(day, booking.at, ZoneInfo(zones[location]))
        await connection.execute(
            """INSERT INTO appointments (patient_id, practitioner_id, location_id,
                   appointment_type_id, starts_at, ends_at) VALUES ($1, $2, $3, $4, $5, $6)""",
            patients[booking.patient], ids["practitioners", booking.practitioner],
            ids["locations", location], ids["appointment_types", booking.type], starts,
            starts + timedelta(minutes=durations[booking.type]),
        )


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
    connection: asyncpg.Connection, workspace_id: str, people: DemoPeople
) -> dict[str, uuid.UUID]:
    """The demo patients by full name (added if missing; MRN, email, address filled in)."""
    ids = {}
    for patient in people.patients:
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
                     people: DemoPeople | None = None) -> bool:
    """The demo's insurance carriers, patients' details and charts (True if any added).

    Idempotent: a chart is only written for a patient whose chart is empty, so it also
    fills a demo database created before the world model existed.
    """
    people = people or load_demo_people()
    workspace = uuid.UUID(workspace_id)
    added = False
    async with pool.acquire() as connection, connection.transaction():
        carriers = {}
        await world.add_carriers(connection, workspace_id, default_carriers())
        for row in await connection.fetch(
                "SELECT id, name FROM insurance_carriers WHERE workspace_id = $1", workspace):
            carriers[row["name"]] = row["id"]
        ids = await _upsert_patients(connection, workspace_id, people)
        for chart in people.charts:
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
