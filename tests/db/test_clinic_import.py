"""A clinic file applied to the database: all or nothing, changed entries updated by
name, bookings never lost or changed, the current state written back as a file that
imports as no change."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta

import pytest

from config import Settings
from db import audit
from db import repositories as repo
from db import scheduling as sched
from db.clinic.file import ClinicFile, ClinicFileInvalid, dump_clinic_yaml, parse_clinic_text
from db.clinic.store import ImportResult, export_clinic, import_clinic, list_clinics
from db.migrations import apply_migrations
from db.pool import Database
from db.seed import DEMO_CLINIC, load_demo_clinic, seed_demo
from tests.db.clinic_files import ROOT, SMALL_CLINIC, edited, line_with, with_numbers

pytestmark = pytest.mark.timeout(60)

ADA_MORNINGS = '[["09:00", "12:00"], ["13:00", "17:00"]]'


def normalized(clinic: ClinicFile) -> dict:
    """A clinic regardless of the order its entries are listed in."""
    data = clinic.as_data()
    for section in ("locations", "practitioners", "appointment_types", "schedules",
                    "closures"):
        data[section] = sorted(data[section], key=repr)
    return data


def a_clinic(name: str = "") -> str:
    """The small clinic under a name of its own, with numbers no other clinic has."""
    return with_numbers(SMALL_CLINIC, name or f"Clinic {uuid.uuid4().hex[:6]}")


async def imported(db, workspace_id: str, text: str, **options) -> ImportResult:
    return await import_clinic(db.pool, workspace_id, parse_clinic_text(text, "clinic.yaml"),
                               **options)


async def exported(db, workspace_id: str, service_id: str) -> dict:
    return normalized(await export_clinic(db.pool, workspace_id, service_id))


async def a_patient(db, workspace_id: str) -> str:
    return str(await db.pool.fetchval(
        """INSERT INTO patients (workspace_id, first_name, last_name, date_of_birth, phone)
           VALUES ($1, 'Iris', $2, '1980-02-03', '+15550100199') RETURNING id""",
        uuid.UUID(workspace_id), uuid.uuid4().hex[:8]))


async def first_slot(db, service_id: str, type_name: str):
    kind = next(t for t in await sched.appointment_types(db.pool, service_id)
                if t.name == type_name)
    today = date.today()
    slots = await sched.available_slots(
        db.pool, service_id, appointment_type=kind, first_day=today + timedelta(days=1),
        last_day=today + timedelta(days=14), now=datetime.now(UTC))
    return slots[0] if slots else None


async def book_first(db, workspace_id: str, service_id: str, type_name: str) -> sched.Appointment:
    slot = await first_slot(db, service_id, type_name)
    return await sched.book(db.pool, slot, patient_id=await a_patient(db, workspace_id),
                            call_id=None)


async def a_past_booking(db, workspace_id: str, service_id: str, practitioner: str,
                         location: str, type_name: str) -> uuid.UUID:
    sid = uuid.UUID(service_id)
    ids = [await db.pool.fetchval(f"SELECT id FROM {table} WHERE service_id = $1 AND name = $2 "
                                  "AND retired_at IS NULL", sid, name)
           for table, name in (("practitioners", practitioner), ("locations", location),
                               ("appointment_types", type_name))]
    starts = datetime.now(UTC) - timedelta(days=30)
    return await db.pool.fetchval(
        """INSERT INTO appointments (patient_id, practitioner_id, location_id,
               appointment_type_id, starts_at, ends_at, status)
           VALUES ($1, $2, $3, $4, $5, $6, 'completed') RETURNING id""",
        uuid.UUID(await a_patient(db, workspace_id)), *ids, starts,
        starts + timedelta(minutes=15))


# --- Created, unchanged, written back ------------------------------------------------------


async def test_a_new_clinic_is_created_and_the_same_file_again_changes_nothing(db, workspace_id):
    text = a_clinic("Riverbend Clinic")
    first = await imported(db, workspace_id, text)
    again = await imported(db, workspace_id, text)
    written = await export_clinic(db.pool, workspace_id, first.service_id)
    round_trip = await imported(db, workspace_id, dump_clinic_yaml(written))
    history = await audit.list_changes(db.pool, workspace_id)

    assert first.created and first.warnings == []
    assert first.changes[:3] == ["clinic 'Riverbend Clinic' created",
                                 f"number {parse_clinic_text(text).clinic.phone_numbers[0]} added",
                                 "location 'Main' added"]
    assert "hours of 'Dr. Ada Stone' added (mon, tue)" in first.changes
    assert "closure 2026-12-25 (Christmas Day) added" in first.changes
    assert (again.created, again.changes, again.warnings) == (False, [], [])
    assert round_trip.changes == [] and round_trip.service_id == first.service_id
    assert normalized(written) == normalized(parse_clinic_text(text))
    # one audit row: the first import, by the command line, from nothing to the clinic
    assert [(c["actor"], c["action"], c["target"]) for c in history] == [
        ("cli", "clinic.import", "Riverbend Clinic")]
    assert history[0]["before"] is None and history[0]["after"] == written.as_data()


async def test_video_visits_and_deposits_are_kept_and_a_change_to_them_is_said(
        db, workspace_id):
    plain = a_clinic("Video Clinic")
    video = edited(plain, ('  phone_numbers: [', '  video_visits: {provider: daily}\n  phone_numbers: ['),
                   ("description: A yearly checkup.}",
                    "description: A yearly checkup., video: true, deposit_cents: 2000}"))
    first = await imported(db, workspace_id, plain)

    changed = await imported(db, workspace_id, video)
    again = await imported(db, workspace_id, video)
    written = await export_clinic(db.pool, workspace_id, first.service_id)
    off = await imported(db, workspace_id, plain)

    assert "video visits through daily" in changed.changes
    assert "appointment type 'Checkup' updated (video, deposit_cents)" in changed.changes
    assert again.changes == []
    assert written.clinic.video_visits.provider == "daily"
    assert [(t.name, t.video, t.deposit_cents) for t in written.appointment_types][0] == (
        "Checkup", True, 2000)
    assert "video visits off" in off.changes


async def test_the_readme_example_imports_with_its_closure(db, workspace_id):
    text = (ROOT / "docs" / "examples" / "clinic.yaml").read_text()
    result = await imported(db, workspace_id, text)
    closures = await db.pool.fetch(
        "SELECT starts_on, ends_on, reason, location_id FROM closures WHERE service_id = $1",
        uuid.UUID(result.service_id))
    zones = [location.timezone for location in
             await sched.locations(db.pool, result.service_id)]
    assert [tuple(row) for row in closures] == [
        (date(2026, 12, 24), date(2026, 12, 26), "the winter holidays", None)]
    assert zones == ["America/Denver"]
    assert await first_slot(db, result.service_id, "Physiotherapy session") is not None


async def test_a_changed_file_updates_what_changed_by_name(db, workspace_id):
    text = a_clinic()
    created = await imported(db, workspace_id, text)
    ids = {r["name"]: r["id"] for r in await db.pool.fetch(
        "SELECT id, name FROM practitioners WHERE service_id = $1",
        uuid.UUID(created.service_id))}
    changed = edited(text, ("price_cents: 9000", "price_cents: 9900"),
                     ("title: Registered nurse}", "title: Nurse practitioner}"),
                     ("days: [mon, wed]", "days: [mon]"),
                     ("{from: 2026-12-25, reason: Christmas Day}",
                      "{from: 2026-12-24, to: 2026-12-26, reason: the holidays}"),
                     ("clinic:\n", "clinic:\n  greeting: Hello from the clinic.\n"))
    result = await imported(db, workspace_id, changed)
    after = {r["name"]: r["id"] for r in await db.pool.fetch(
        "SELECT id, name FROM practitioners WHERE service_id = $1",
        uuid.UUID(created.service_id))}
    service = await repo.get_service_by_name(db.pool, workspace_id,
                                             parse_clinic_text(text).clinic.name)

    assert result.changes == [
        "greeting set",
        "practitioner 'Cy Bell' updated (title)",
        "appointment type 'Checkup' updated (price_cents)",
        "hours of 'Cy Bell' changed (mon)",
        "closure 2026-12-24 to 2026-12-26 (the holidays) added",
        "closure 2026-12-25 (Christmas Day) removed",
    ]
    assert after == ids  # the same rows, updated in place
    assert service["greeting"] == "Hello from the clinic."
    assert normalized(parse_clinic_text(changed)) == await exported(
        db, workspace_id, created.service_id)


async def test_a_dry_run_says_what_would_change_and_changes_nothing(db, workspace_id):
    text = a_clinic()
    name = parse_clinic_text(text).clinic.name
    new = await imported(db, workspace_id, text, dry_run=True)
    assert new.created and new.changes[0] == f"clinic '{name}' created"
    assert [c["name"] for c in await list_clinics(db.pool, workspace_id)] == []

    created = await imported(db, workspace_id, text)
    before = await exported(db, workspace_id, created.service_id)
    rehearsal = await imported(db, workspace_id, edited(text, ("price_cents: 9000",
                                                               "price_cents: 100")), dry_run=True)
    assert rehearsal.changes == ["appointment type 'Checkup' updated (price_cents)"]
    assert await exported(db, workspace_id, created.service_id) == before
    assert len(await audit.list_changes(db.pool, workspace_id)) == 1


# --- Bookings ---------------------------------------------------------------------------


async def test_bookings_survive_moved_hours_and_a_retired_practitioner(db, workspace_id):
    text = a_clinic()
    created = await imported(db, workspace_id, text)
    booking = await book_first(db, workspace_id, created.service_id, "Checkup")
    past = await a_past_booking(db, workspace_id, created.service_id, "Cy Bell", "Annex",
                                "Flu shot")
    # Ada now works afternoons only, Cy Bell (and his hours) leave the clinic
    changed = edited(text, (ADA_MORNINGS, '[["13:00", "17:00"]]'),
                     ("  - {name: Cy Bell, title: Registered nurse}\n", ""),
                     ("""  - practitioner: Cy Bell
    location: Annex
    days: [mon, wed]
    blocks: [["08:00", "12:00"]]
    offers: [Flu shot]
""", ""))
    result = await imported(db, workspace_id, changed)
    kept = await sched.get_appointment(db.pool, booking.id)
    past_row = await db.pool.fetchrow("SELECT status, starts_at FROM appointments WHERE id = $1",
                                      past)
    cy = await db.pool.fetchrow("SELECT retired_at FROM practitioners WHERE service_id = $1 "
                                "AND name = 'Cy Bell'", uuid.UUID(created.service_id))

    assert kept == booking  # same id, time, practitioner, place and status
    assert past_row["status"] == "completed"
    assert "practitioner 'Cy Bell' retired (past bookings name it)" in result.changes
    assert "hours of 'Dr. Ada Stone' changed (mon, tue)" in result.changes
    assert result.warnings == [("1 upcoming booking falls now outside the practitioner's hours: "
                               "kept as booked; move them with the patients if needed")]
    assert cy["retired_at"] is not None
    # a retired practitioner is never offered
    assert await sched.practitioner_names(db.pool, created.service_id) == ["Dr. Ada Stone"]
    assert await first_slot(db, created.service_id, "Flu shot") is None
    assert "Cy Bell" not in str(await export_clinic(db.pool, workspace_id, created.service_id))


async def test_removing_what_upcoming_bookings_need_is_refused_and_changes_nothing(
        db, workspace_id):
    text = a_clinic()
    created = await imported(db, workspace_id, text)
    await book_first(db, workspace_id, created.service_id, "Checkup")
    await book_first(db, workspace_id, created.service_id, "Checkup")
    before = await exported(db, workspace_id, created.service_id)
    without_ada = edited(
        text, ("  - {name: Dr. Ada Stone, title: Family physician, years_experience: 9}\n", ""),
        ("""  - practitioner: Dr. Ada Stone
    location: Main
    days: [mon, tue]
    blocks: [["09:00", "12:00"], ["13:00", "17:00"]]
    offers: [Checkup]
""", ""), ("price_cents: 2500", "price_cents: 2600"))

    with pytest.raises(ClinicFileInvalid) as refused:
        await imported(db, workspace_id, without_ada)

    [problem] = refused.value.problems
    assert problem.line == line_with(without_ada, "practitioners:")
    assert problem.message == ("practitioner 'Dr. Ada Stone' is not in the file but has 2 "
                               "upcoming bookings: keep it until they are moved or cancelled")
    assert await exported(db, workspace_id, created.service_id) == before


async def test_bookings_on_a_new_closure_are_kept_and_counted(db, workspace_id):
    text = a_clinic()
    created = await imported(db, workspace_id, text)
    booking = await book_first(db, workspace_id, created.service_id, "Checkup")
    day = booking.local_start.date()
    closed = edited(text, ("{from: 2026-12-25, reason: Christmas Day}",
                           f"{{from: {day}, reason: a staff day, location: Main}}"))
    result = await imported(db, workspace_id, closed)
    assert result.warnings == [("1 upcoming booking falls now on a closure: kept as booked; tell "
                               "those patients or move them")]
    assert await sched.get_appointment(db.pool, booking.id) == booking


async def test_what_nothing_names_is_deleted_and_a_retired_entry_comes_back(db, workspace_id):
    text = a_clinic()
    created = await imported(db, workspace_id, text)
    service = uuid.UUID(created.service_id)
    await a_past_booking(db, workspace_id, created.service_id, "Cy Bell", "Annex", "Flu shot")
    annex = await db.pool.fetchval(
        "SELECT id FROM locations WHERE service_id = $1 AND name = 'Annex'", service)
    await db.pool.execute(  # a waitlist entry names the checkup
        """INSERT INTO waitlist_entries (patient_id, appointment_type_id) VALUES
           ($1, (SELECT id FROM appointment_types WHERE service_id = $2 AND name = 'Checkup'))""",
        uuid.UUID(await a_patient(db, workspace_id)), service)
    smaller = edited(  # no Ada, no checkup, no Cy Bell (his past booking stays his)
        text, ("  - {name: Dr. Ada Stone, title: Family physician, years_experience: 9}\n", ""),
        ("  - {name: Cy Bell, title: Registered nurse}\n", ""),
        (("  - {name: Checkup, duration_min: 30, price_cents: 9000, description: A yearly "
         "checkup.}\n"), ""),
        ("schedules:\n", "schedules: []\n"),
        ("""  - practitioner: Dr. Ada Stone
    location: Main
    days: [mon, tue]
    blocks: [["09:00", "12:00"], ["13:00", "17:00"]]
    offers: [Checkup]
  - practitioner: Cy Bell
    location: Annex
    days: [mon, wed]
    blocks: [["08:00", "12:00"]]
    offers: [Flu shot]
""", ""))
    removed = await imported(db, workspace_id, smaller)
    offered = [t.name for t in await sched.appointment_types(db.pool, created.service_id)]
    back = await imported(db, workspace_id, text)

    assert "practitioner 'Dr. Ada Stone' removed" in removed.changes
    assert "practitioner 'Cy Bell' retired (past bookings name it)" in removed.changes
    assert "appointment type 'Checkup' retired (past bookings name it)" in removed.changes
    assert offered == ["Flu shot"]
    assert [t.name for t in await sched.appointment_types(db.pool, created.service_id)] == [
        "Checkup", "Flu shot"]
    assert "practitioner 'Cy Bell' restored" in back.changes
    assert "appointment type 'Checkup' restored" in back.changes
    assert "practitioner 'Dr. Ada Stone' added" in back.changes
    assert await db.pool.fetchval(
        "SELECT id FROM locations WHERE service_id = $1 AND name = 'Annex'", service) == annex
    assert await db.pool.fetchval(
        "SELECT count(*) FROM practitioners WHERE service_id = $1", service) == 2


async def test_a_location_nothing_names_is_deleted_with_its_hours(db, workspace_id):
    text = a_clinic()
    created = await imported(db, workspace_id, text)
    no_annex = edited(text, ("""  - name: Annex
    timezone: America/New_York
    address: 2 Side Street
    opening_hours: {mon: ["08:00", "18:00"], wed: ["08:00", "18:00"]}
""", ""), ("location: Annex", "location: Main"), ("days: [mon, wed]", "days: [mon]"),
        ('[["08:00", "12:00"]]', '[["08:00", "09:00"]]'))
    result = await imported(db, workspace_id, no_annex)
    assert "location 'Annex' removed" in result.changes
    assert [loc.name for loc in await sched.locations(db.pool, created.service_id)] == ["Main"]


async def test_retired_entries_are_never_offered(db, workspace_id):
    created = await imported(db, workspace_id, a_clinic())
    service = uuid.UUID(created.service_id)
    assert await first_slot(db, created.service_id, "Checkup") is not None
    assert await first_slot(db, created.service_id, "Flu shot") is not None
    for table, name in (("practitioners", "Dr. Ada Stone"), ("locations", "Annex")):
        await db.pool.execute(f"UPDATE {table} SET retired_at = now() WHERE service_id = $1 "
                              "AND name = $2", service, name)

    assert await first_slot(db, created.service_id, "Checkup") is None  # Ada's hours stay
    assert await first_slot(db, created.service_id, "Flu shot") is None  # Cy works at Annex
    assert [loc.name for loc in await sched.locations(db.pool, created.service_id)] == ["Main"]
    assert await sched.practitioner_names(db.pool, created.service_id) == ["Cy Bell"]


# --- Numbers ---------------------------------------------------------------------------


async def test_a_number_another_clinic_has_refuses_the_whole_import(db, workspace_id):
    other = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    taken = a_clinic()
    await imported(db, other["id"], taken)
    number = parse_clinic_text(taken).clinic.phone_numbers[0]
    text = a_clinic()
    created = await imported(db, workspace_id, text)
    before = await exported(db, workspace_id, created.service_id)
    mine = parse_clinic_text(text).clinic.phone_numbers[0]
    claiming = edited(text, (f'"{mine}"', f'"{mine}", "{number}"'),
                      ("price_cents: 9000", "price_cents: 1"))

    with pytest.raises(ClinicFileInvalid) as refused:
        await imported(db, workspace_id, claiming)

    assert [(p.line, p.message) for p in refused.value.problems] == [
        (4, f"{number} already reaches another clinic: release it there first")]
    assert await exported(db, workspace_id, created.service_id) == before
    assert (await repo.find_service_by_phone(db.pool, number))["workspace_id"] == other["id"]


async def test_numbers_taken_out_stop_reaching_the_clinic_and_kept_ones_keep_twilio(
        db, workspace_id):
    kept, dropped, added = (f"+1555{uuid.uuid4().int % 10**7:07d}" for _ in range(3))
    text = edited(a_clinic(), ('phone_numbers: ["', f'phone_numbers: ["{kept}", "{dropped}", "'))
    created = await imported(db, workspace_id, text)
    await db.pool.execute("UPDATE service_numbers SET twilio_sid = 'PN123', connected_at = now() "
                          "WHERE phone_number = $1", kept)
    first = parse_clinic_text(text).clinic.phone_numbers[2]
    result = await imported(db, workspace_id, edited(
        text, (f'"{kept}", "{dropped}", "{first}"', f'"{kept}", "{added}"')))
    rows = {r["phone_number"]: r for r in await db.pool.fetch(
        "SELECT * FROM service_numbers WHERE service_id = $1", uuid.UUID(created.service_id))}

    assert result.changes == [f"number {dropped} removed", f"number {first} removed",
                              f"number {added} added"]
    assert set(rows) == {kept, added}
    assert rows[kept]["twilio_sid"] == "PN123" and rows[kept]["connected_at"] is not None
    assert await repo.find_service_by_phone(db.pool, dropped) is None


# --- Listing and ownership -------------------------------------------------------------


async def test_clinics_are_listed_and_exported_only_in_their_workspace(db, workspace_id):
    created = await imported(db, workspace_id, a_clinic("Alpha Clinic"))
    other = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    [listed] = await list_clinics(db.pool, workspace_id)
    assert (listed["name"], listed["locations"], listed["practitioners"],
            listed["appointment_types"]) == ("Alpha Clinic", 2, 2, 2)
    assert await export_clinic(db.pool, other["id"], created.service_id) is None
    assert await export_clinic(db.pool, workspace_id, str(uuid.uuid4())) is None
    assert await list_clinics(db.pool, other["id"]) == []
    with pytest.raises(ClinicFileInvalid, match="no such workspace"):
        await imported(db, str(uuid.uuid4()), a_clinic())


# --- The demo, through the same path ---------------------------------------------------


async def test_the_demo_is_seeded_through_its_clinic_file(fresh_dsn, tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path, database_url=fresh_dsn)
    database = await Database.connect(settings)
    try:
        await apply_migrations(database.pool)
        seeded = await seed_demo(database.pool)
        written = await export_clinic(database.pool, seeded.workspace_id, seeded.service_id)
        again = await import_clinic(database.pool, seeded.workspace_id, load_demo_clinic())
        history = await audit.list_changes(database.pool, seeded.workspace_id)
        listed = await list_clinics(database.pool, seeded.workspace_id)
        bookings = await database.pool.fetchval("SELECT count(*) FROM appointments")
    finally:
        await database.close()
    assert normalized(written) == normalized(load_demo_clinic())
    assert again.changes == [] and again.service_id == seeded.service_id
    assert [(c["action"], c["target"]) for c in history] == [("clinic.import", DEMO_CLINIC)]
    assert bookings == 7
    assert [c["name"] for c in listed] == [DEMO_CLINIC]  # the check-in line is no clinic
