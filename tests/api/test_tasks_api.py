"""Outbound tasks over the API: an operator makes one for a patient and its dial job is
queued; a task is listed, filtered and paged, read with its attempts (each linked to its
call record) and where it came from; cancelled, claimed by a person instead of the
dialer, tried again; a state that does not allow an action is 409 with the reason;
another workspace sees and changes nothing; counts by status and outcome."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from db import jobs, outbound
from db import repositories as repo
from tests.api.app_client import bearer
from tests.api.outbound_world import World, add_clinic, add_patient, later, make_task, new_world


def as_role(world: World, role: str) -> dict[str, str]:
    return bearer(world.keys[role])


def new_task(world: World, **changes) -> dict:
    return {"patient_id": world.patient_id, "kind": "callback",
            "reason": "asked about their invoice", "goal": "explain the invoice",
            "priority": 7, "not_before": later().isoformat(), **changes}


async def count_tasks(db, workspace_id: str) -> int:
    return await db.pool.fetchval("SELECT count(*) FROM outbound_tasks WHERE workspace_id = $1",
                                  uuid.UUID(workspace_id))


# --- Creating ---------------------------------------------------------------------------


async def test_an_operator_makes_a_task_and_its_dial_job_waits_for_its_time(client, db, world):
    when = later(30)
    prefix = (await repo.get_api_key(db.pool, world.keys["operator"]))["prefix"]
    made = await client.post("/api/tasks", headers=as_role(world, "operator"), json=new_task(
        world, not_before=when.isoformat(),
        window={"start": "10:00", "end": "12:30", "days": [2, 0, 0]}))
    listed = await client.get("/api/tasks", headers=as_role(world, "read_only"))

    assert made.status_code == 201, made.text
    task = made.json()
    job = await jobs.job_for(db.pool, outbound.dial_key(task["id"]))
    assert job is not None and job.status == "queued"
    assert abs((job.execute_after - when).total_seconds()) < 5
    patient = await db.pool.fetchrow("SELECT first_name, phone FROM patients WHERE id = $1",
                                     uuid.UUID(world.patient_id))
    assert {k: task[k] for k in ("kind", "status", "priority", "clinic_id", "clinic_timezone",
                                 "timezone", "attempts_made", "max_attempts", "written_by",
                                 "phone", "attempts")} == {
        "kind": "callback", "status": "pending", "priority": 7, "clinic_id": world.clinic_id,
        "clinic_timezone": "Europe/London", "timezone": "Europe/London", "attempts_made": 0,
        "max_attempts": 3, "written_by": f"key vk_{prefix}", "phone": patient["phone"],
        "attempts": []}
    assert task["window"] == {"start": "10:00:00", "end": "12:30:00", "days": [0, 2]}
    assert task["patient_name"] == f"{patient['first_name']} Byron"
    assert [t["id"] for t in listed.json()["tasks"]] == [task["id"]]


async def test_a_task_is_dialled_in_the_patients_own_timezone_when_known(client, db, world):
    patient = await add_patient(db.pool, world.workspace_id, timezone="America/Denver")
    made = await client.post("/api/tasks", headers=as_role(world, "operator"),
                             json=new_task(world, patient_id=patient, kind="checkin"))
    assert made.status_code == 201
    assert (made.json()["timezone"], made.json()["clinic_timezone"]) == (
        "America/Denver", "Europe/London")


async def test_a_patient_of_another_workspace_is_not_found_and_nothing_is_made(client, db, world):
    theirs = await new_world(db)
    foreign = await client.post("/api/tasks", headers=as_role(world, "operator"),
                                json=new_task(world, patient_id=theirs.patient_id))
    unknown = await client.post("/api/tasks", headers=as_role(world, "operator"),
                                json=new_task(world, patient_id=str(uuid.uuid4())))
    their_clinic = await client.post("/api/tasks", headers=as_role(world, "operator"),
                                     json=new_task(world, clinic_id=theirs.clinic_id))

    assert (foreign.status_code, foreign.json()["detail"]) == (404, "patient not found")
    assert unknown.status_code == 404
    assert (their_clinic.status_code, their_clinic.json()["detail"]) == (404, "clinic not found")
    assert await count_tasks(db, world.workspace_id) == 0
    assert await count_tasks(db, theirs.workspace_id) == 0


@pytest.mark.parametrize("change", [
    {"priority": 11}, {"priority": 0}, {"kind": "waitlist_offer"}, {"kind": "robocall"},
    {"reason": "  "}, {"goal": "x" * 501}, {"window": {"start": "17:00", "end": "09:00"}},
    {"window": {"days": [7]}}, {"window": {"days": []}}, {"kind": "reminder"},
    {"window": {"start": "09:00+01:00", "end": "17:00"}},
    {"not_before": "2031-01-01T09:00:00"}, {"patient_id": "nobody"}, {"colour": "red"},
    {"max_attempts": 11},
])
async def test_invalid_input_is_422_and_nothing_is_made(client, db, world, change):
    answer = await client.post("/api/tasks", headers=as_role(world, "operator"),
                               json=new_task(world, **change))
    assert answer.status_code == 422, answer.text
    assert await count_tasks(db, world.workspace_id) == 0


async def test_the_workspace_with_several_clinics_names_the_one_that_calls(client, db, world):
    second = await add_clinic(db.pool, world.workspace_id)
    unnamed = await client.post("/api/tasks", headers=as_role(world, "operator"),
                                json=new_task(world))
    named = await client.post("/api/tasks", headers=as_role(world, "operator"),
                              json=new_task(world, clinic_id=second))
    assert unnamed.status_code == 422
    assert unnamed.json()["detail"] == ("this workspace has 2 clinics: name the one that calls "
                                        "(clinic_id)")
    assert named.status_code == 201 and named.json()["clinic_id"] == second


async def test_a_patient_who_asked_not_to_be_called_gets_no_task(client, db, world):
    await outbound.set_do_not_call(db.pool, world.workspace_id, patient_id=world.patient_id,
                                   phone=None, call_id=None)
    refused = await client.post("/api/tasks", headers=as_role(world, "operator"),
                                json=new_task(world))
    assert (refused.status_code, refused.json()["detail"]) == (
        409, "the patient asked not to be called")
    assert await count_tasks(db, world.workspace_id) == 0


async def test_a_patient_with_no_number_gets_no_task(client, db, world):
    await db.pool.execute("UPDATE patients SET phone = NULL WHERE id = $1",
                          uuid.UUID(world.patient_id))
    refused = await client.post("/api/tasks", headers=as_role(world, "operator"),
                                json=new_task(world))
    assert (refused.status_code, refused.json()["detail"]) == (
        422, "the patient has no phone number on record to call")
    assert await count_tasks(db, world.workspace_id) == 0


async def book(db, world: World, patient_id: str, day: int = 3) -> str:
    """An appointment of `patient_id` at the world's clinic."""
    service = uuid.UUID(world.clinic_id)
    ids = await db.pool.fetchrow(
        """SELECT (SELECT id FROM practitioners WHERE service_id = $1 ORDER BY name LIMIT 1) AS p,
                  (SELECT id FROM locations WHERE service_id = $1 ORDER BY name LIMIT 1) AS l,
                  (SELECT id FROM appointment_types WHERE service_id = $1 AND name = 'Vaccination')
                      AS t""", service)
    starts = datetime(2031, 3, day, 10, tzinfo=UTC)
    return str(await db.pool.fetchval(
        """INSERT INTO appointments (patient_id, practitioner_id, location_id,
               appointment_type_id, starts_at, ends_at)
           VALUES ($1, $2, $3, $4, $5, $6) RETURNING id""",
        uuid.UUID(patient_id), ids["p"], ids["l"], ids["t"], starts,
        starts + timedelta(minutes=10)))


async def test_a_reminder_is_about_one_appointment_of_the_patient(client, db, world):
    mine = await book(db, world, world.patient_id)
    someone_else = await book(db, world, await add_patient(db.pool, world.workspace_id), day=4)
    made = await client.post("/api/tasks", headers=as_role(world, "operator"),
                             json=new_task(world, kind="reminder", appointment_id=mine))
    again = await client.post("/api/tasks", headers=as_role(world, "operator"),
                              json=new_task(world, kind="reminder", appointment_id=mine))
    not_theirs = await client.post(
        "/api/tasks", headers=as_role(world, "operator"),
        json=new_task(world, kind="reminder", appointment_id=someone_else))

    assert made.status_code == 201, made.text
    appointment = made.json()["appointment"]
    assert {k: appointment[k] for k in ("id", "appointment_type", "practitioner", "location",
                                        "status", "timezone")} == {
        "id": mine, "appointment_type": "Vaccination", "practitioner": "Cara Lind",
        "location": "Harbour", "status": "booked", "timezone": "Europe/London"}
    assert (again.status_code, again.json()["detail"]) == (
        409, "this appointment already has a reminder task")
    assert (not_theirs.status_code, not_theirs.json()["detail"]) == (404, "appointment not found")


# --- Reading ----------------------------------------------------------------------------


async def test_a_tasks_detail_links_its_attempts_call_records_and_its_origin(
        client, db, world, call_id):
    await db.pool.execute("UPDATE calls SET workspace_id = $1 WHERE id = $2",
                          uuid.UUID(world.workspace_id), uuid.UUID(call_id))
    request_id = await db.pool.fetchval(
        "INSERT INTO callback_requests (service_id, call_id, patient_id, reason, message, "
        "urgent) VALUES ($1, $2, $3, 'billing question', 'about the March invoice', true) "
        "RETURNING id", uuid.UUID(world.clinic_id), uuid.UUID(call_id),
        uuid.UUID(world.patient_id))
    task_id = await make_task(db, world, source_call=call_id,
                              callback_request_id=str(request_id))
    started = datetime.now(UTC) - timedelta(minutes=5)
    for number, outcome, call in ((1, "no_answer", None), (2, "answered", call_id)):
        await db.pool.execute(
            "INSERT INTO outbound_attempts (task_id, number, call_id, to_number, status, "
            "outcome, detail, started_at, ended_at) VALUES ($1, $2, $3, '+15550001', 'ended', "
            "$4, $5, $6::timestamptz, $6::timestamptz + interval '1 minute')",
            uuid.UUID(task_id), number, repo.as_uuid(call), outcome, f"try {number}",
            started + timedelta(minutes=number))
    detail = (await client.get(f"/api/tasks/{task_id}",
                               headers=as_role(world, "read_only"))).json()
    record = await client.get(detail["attempts"][1]["call_url"],
                              headers=as_role(world, "read_only"))

    assert [(a["number"], a["outcome"], a["detail"], a["call_id"], a["call_url"])
            for a in detail["attempts"]] == [
        (1, "no_answer", "try 1", None, None),
        (2, "answered", "try 2", call_id, f"/api/calls/{call_id}")]
    assert detail["attempts"][0]["ended_at"] is not None
    assert record.status_code == 200 and record.json()["id"] == call_id
    assert (detail["source_call"], detail["source_call_url"]) == (call_id,
                                                                  f"/api/calls/{call_id}")
    request = detail["callback_request"]
    assert (request["reason"], request["message"], request["urgent"]) == (
        "billing question", "about the March invoice", True)


async def test_a_waitlist_offer_shows_the_slot_it_offers(client, db, world):
    ids = await db.pool.fetchrow(
        """SELECT (SELECT id FROM practitioners WHERE service_id = $1 AND name = 'Dr. Ben Osei')
                      AS p,
                  (SELECT id FROM locations WHERE service_id = $1 AND name = 'Harbour') AS l,
                  (SELECT id FROM appointment_types WHERE service_id = $1
                      AND name = 'Consultation') AS t""", uuid.UUID(world.clinic_id))
    offer = {"practitioner_id": str(ids["p"]), "location_id": str(ids["l"]),
             "appointment_type_id": str(ids["t"]), "starts_at": "2031-03-05T08:00:00+00:00",
             "ends_at": "2031-03-05T08:20:00+00:00"}
    task_id = await make_task(db, world, kind="waitlist_offer", offer=offer)
    detail = (await client.get(f"/api/tasks/{task_id}",
                               headers=as_role(world, "read_only"))).json()
    assert detail["offer"] == {
        "starts_at": "2031-03-05T08:00:00+00:00", "ends_at": "2031-03-05T08:20:00+00:00",
        "practitioner": "Dr. Ben Osei", "location": "Harbour",
        "appointment_type": "Consultation", "timezone": "Europe/London"}
    assert detail["callback_request"] is None and detail["appointment"] is None


async def test_tasks_are_filtered_and_paged_newest_first(client, db, world):
    other_patient = await add_patient(db.pool, world.workspace_id)
    ids = [await make_task(db, world, kind=kind, patient_id=patient)
           for kind, patient in (("callback", world.patient_id), ("checkin", world.patient_id),
                                 ("callback", other_patient), ("callback", world.patient_id))]
    await outbound.cancel_task(db.pool, world.workspace_id, ids[0])
    headers = as_role(world, "read_only")
    async def listed(query: str) -> dict:
        answer = await client.get(f"/api/tasks?{query}", headers=headers)
        assert answer.status_code == 200, answer.text
        return answer.json()

    first = await listed("limit=3")
    rest = await listed(f"limit=3&before={first['next_before'].replace('+', '%2B')}")
    callbacks = await listed("kind=callback")
    pending = await listed("status=pending")
    theirs = await listed(f"patient_id={other_patient}")
    bad_status = await client.get("/api/tasks?status=sleeping", headers=headers)
    before_time = await client.get("/api/tasks", params={"before": "0001-01-01T00:00+01:00"},
                                   headers=headers)

    assert [t["id"] for t in first["tasks"]] == ids[:0:-1]
    assert [t["id"] for t in rest["tasks"]] == [ids[0]] and rest["next_before"] is None
    assert [t["id"] for t in callbacks["tasks"]] == [ids[3], ids[2], ids[0]]
    assert [t["id"] for t in pending["tasks"]] == ids[:0:-1]
    assert [t["id"] for t in theirs["tasks"]] == [ids[2]]
    assert bad_status.status_code == 422
    assert (before_time.status_code, before_time.json()["detail"]) == (
        422, "before: that time has no UTC equivalent")


async def test_tasks_made_at_one_moment_stay_on_one_page(client, db, world):
    async with db.pool.acquire() as conn, conn.transaction():  # one now() for all three
        ids = [await outbound.create_task(conn, outbound.TaskSpec(
            workspace_id=world.workspace_id, service_id=world.clinic_id, kind="reminder",
            reason="reminder", goal="confirm", timezone="UTC", not_before=later(),
            patient_id=world.patient_id)) for _ in range(3)]
    page = (await client.get("/api/tasks?limit=2",
                             headers=as_role(world, "read_only"))).json()
    assert sorted(t["id"] for t in page["tasks"]) == sorted(ids)
    assert page["next_before"] is None


async def test_the_summary_counts_tasks_by_status_and_outcome_and_attempts_by_outcome(
        client, db, world):
    done, failed, _pending, claimed = [await make_task(db, world) for _ in range(4)]
    await outbound.finish_task(db.pool, done, outcome="answered")
    await outbound.finish_task(db.pool, failed, outcome="no_answer", status="failed")
    await outbound.claim_task(db.pool, world.workspace_id, claimed, actor="key vk_desk")
    for number, outcome in enumerate(("voicemail", "busy", "no_answer"), start=1):
        await db.pool.execute(
            "INSERT INTO outbound_attempts (task_id, number, to_number, status, outcome) "
            "VALUES ($1, $2, '+15550001', 'ended', $3)", uuid.UUID(failed), number, outcome)
    await make_task(db, await new_world(db))  # another workspace's
    summary = (await client.get("/api/tasks/summary",
                                headers=as_role(world, "read_only"))).json()
    checkins = (await client.get("/api/tasks/summary?kind=checkin",
                                 headers=as_role(world, "read_only"))).json()

    assert summary["total"] == 4
    assert summary["by_status"] == {"pending": 1, "in_progress": 0, "claimed": 1, "done": 1,
                                    "failed": 1, "cancelled": 0}
    assert {k: v for k, v in summary["by_outcome"].items() if v} == {
        "answered": 1, "no_answer": 1, "claimed": 1}
    assert summary["attempts_by_outcome"] == {"answered": 0, "voicemail": 1, "no_answer": 1,
                                              "busy": 1, "failed": 0, "opted_out": 0}
    assert checkins["total"] == 0


# --- Acting on a task -------------------------------------------------------------------


async def test_a_person_claims_a_callback_and_the_dialer_lets_it_go(client, db, world):
    task_id = await make_task(db, world)
    prefix = (await repo.get_api_key(db.pool, world.keys["operator"]))["prefix"]
    claimed = await client.post(f"/api/tasks/{task_id}/claim",
                                headers=as_role(world, "operator"))
    again = await client.post(f"/api/tasks/{task_id}/claim",
                              headers=as_role(world, "admin"))
    cancel = await client.post(f"/api/tasks/{task_id}/cancel",
                               headers=as_role(world, "operator"))

    assert claimed.status_code == 200, claimed.text
    task = claimed.json()
    assert (task["status"], task["outcome"], task["claimed_by"], task["next_attempt_at"]) == (
        "claimed", "claimed", f"key vk_{prefix}", None)
    assert task["claimed_at"] is not None
    assert await jobs.job_for(db.pool, outbound.dial_key(task_id)) is None
    assert (again.status_code, again.json()["detail"]) == (
        409, "the task is claimed: only a pending or in-progress task can be claimed")
    assert (cancel.status_code, cancel.json()["detail"]) == (
        409, "the task is claimed: only a pending or in-progress task can be cancelled")


async def test_a_cancelled_task_is_tried_again_from_now(client, db, world):
    task_id = await make_task(db, world)
    cancelled = await client.post(f"/api/tasks/{task_id}/cancel",
                                  headers=as_role(world, "operator"))
    job_after_cancel = await jobs.job_for(db.pool, outbound.dial_key(task_id))
    retried = await client.post(f"/api/tasks/{task_id}/retry",
                                headers=as_role(world, "operator"))
    again = await client.post(f"/api/tasks/{task_id}/retry",
                              headers=as_role(world, "operator"))

    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert job_after_cancel is None
    assert retried.status_code == 200 and retried.json()["status"] == "pending"
    # Dialled from now: the dialer itself may then hold the job until the clinic opens.
    task = await outbound.get_task(db.pool, world.workspace_id, task_id)
    assert task.not_before <= datetime.now(UTC) + timedelta(seconds=5)
    assert await jobs.job_for(db.pool, outbound.dial_key(task_id)) is not None
    assert (again.status_code, again.json()["detail"]) == (
        409, "the task is pending: only a failed or cancelled task can be retried")
    await outbound.cancel_task(db.pool, world.workspace_id, task_id)  # no dial after the test


async def test_a_callee_who_opted_out_is_not_tried_again(client, db, world):
    task_id = await make_task(db, world)
    await outbound.set_do_not_call(db.pool, world.workspace_id, patient_id=world.patient_id,
                                   phone=None, call_id=None)
    retried = await client.post(f"/api/tasks/{task_id}/retry",
                                headers=as_role(world, "operator"))
    assert (retried.status_code, retried.json()["detail"]) == (
        409, "the callee asked not to be called: the task is not tried again")
    assert (await outbound.get_task(db.pool, world.workspace_id, task_id)).status == "cancelled"


async def test_another_workspace_sees_and_changes_none_of_the_tasks(client, db, world):
    task_id = await make_task(db, world)
    theirs = await new_world(db)
    seen = await client.get(f"/api/tasks/{task_id}", headers=as_role(theirs, "admin"))
    listed = await client.get("/api/tasks", headers=as_role(theirs, "admin"))
    acts = [await client.post(f"/api/tasks/{task_id}/{action}",
                              headers=as_role(theirs, "admin"))
            for action in ("cancel", "claim", "retry")]
    summary = await client.get("/api/tasks/summary", headers=as_role(theirs, "admin"))
    malformed = await client.get("/api/tasks/not-a-task", headers=as_role(world, "admin"))

    assert seen.status_code == 404 and listed.json()["tasks"] == []
    assert [(a.status_code, a.json()["detail"]) for a in acts] == [(404, "task not found")] * 3
    assert summary.json()["total"] == 0
    assert malformed.status_code == 404
    assert (await outbound.get_task(db.pool, world.workspace_id, task_id)).status == "pending"


async def test_a_read_only_key_reads_tasks_but_cannot_act_on_them(client, db, world):
    task_id = await make_task(db, world)
    headers = as_role(world, "read_only")
    read = await client.get(f"/api/tasks/{task_id}", headers=headers)
    made = await client.post("/api/tasks", headers=headers, json=new_task(world))
    claim = await client.post(f"/api/tasks/{task_id}/claim", headers=headers)

    assert read.status_code == 200
    assert (made.status_code, claim.status_code) == (403, 403)
    assert claim.json()["detail"] == "this key's role (read_only) cannot do this; it needs operator"
    assert await count_tasks(db, world.workspace_id) == 1


async def test_an_operator_finds_a_patient_to_call_by_name_or_number(client, db, world):
    found = await add_patient(db.pool, world.workspace_id, "Grace", "Hopper%",
                              phone="+1 (555) 010-4477")
    theirs = await new_world(db)
    await add_patient(db.pool, theirs.workspace_id, "Grace", "Hopper%", phone="+15550104477")
    operator = as_role(world, "operator")

    by_name = await client.get("/api/patients", params={"q": "hopper%"}, headers=operator)
    by_digits = await client.get("/api/patients", params={"q": "0104477"}, headers=operator)
    wildcard = await client.get("/api/patients", params={"q": "r%"}, headers=operator)
    viewer = await client.get("/api/patients", params={"q": "hopper"},
                              headers=as_role(world, "read_only"))

    assert [p["id"] for p in by_name.json()] == [found]
    assert by_name.json()[0]["name"].endswith(" Hopper%")
    assert by_name.json()[0]["date_of_birth"] == "1970-01-02"
    assert [p["id"] for p in by_digits.json()] == [found]
    assert [p["id"] for p in wildcard.json()] == [found]  # "%" is a character, not a wildcard
    assert viewer.status_code == 403
