"""The webhooks of the calls the clinic places: signed like every Twilio webhook; a machine
hears only the clinic's name and its own number; a person gets the call streamed with the
task attached; the status callback ends the attempt and decides the task's next step."""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from twilio.request_validator import RequestValidator

from config import Settings
from db import jobs, outbound
from db import outbound_dial as dials
from db import repositories as repo
from flows.outbound_greeting import greeting_line
from tests.api.app_client import app_in_testclient
from tests.runner.outbound_world import World, make_world

TOKEN = "0123456789abcdef0123456789abcdef"
BASE = "https://agent.example.com"
# Words that would say why the clinic called, or anything about the callee's care.
ABOUT_CARE = ("appointment", "reason", "results", "question", "call back request",
              "billing", "waitlist", "reminder", "doctor", "Ada")


@pytest.fixture(scope="module")
def client(tmp_path_factory, pg_dsn):
    settings = Settings(_env_file=None, data_dir=tmp_path_factory.mktemp("outbound"),
                        database_url=pg_dsn, twilio_auth_token=TOKEN, public_url=BASE,
                        max_concurrent_calls=5)
    with app_in_testclient(settings, base_url=BASE) as client:
        yield client


@pytest.fixture
async def world(db) -> World:
    return await make_world(db, now=datetime.now(UTC))


async def dialled(world: World, **task) -> tuple[str, outbound.Attempt]:
    """A task the dispatcher has just dialled: its attempt, placed as `CA…`."""
    # Not due for a day: the service's own dispatcher leaves it to the test.
    task_id = await world.task(**{"not_before": datetime.now(UTC) + timedelta(days=1), **task})
    await jobs.cancel_key(world.db.pool, outbound.dial_key(task_id))
    attempt = await dials.begin_attempt(
        world.db.pool, await world.get(task_id), to_number=world.patient_phone,
        from_number=world.clinic_number, at=datetime.now(UTC))
    sid = "CA" + uuid.uuid4().hex
    await dials.progress(world.db.pool, attempt.id, status="ringing", sid=sid)
    return task_id, await dials.get_attempt(world.db.pool, attempt.id)


def form(attempt: outbound.Attempt, **fields: str) -> dict[str, str]:
    return {"CallSid": attempt.call_sid, "AccountSid": "AC" + "0" * 32,
            "From": attempt.from_number, "To": attempt.to_number, "Direction": "outbound-api",
            **fields}


def post(client: TestClient, path: str, attempt: outbound.Attempt, fields: dict[str, str],
         *, token: str = TOKEN, signed: bool = True):
    url = f"{path}?attempt={attempt.id}"
    headers = ({"X-Twilio-Signature": RequestValidator(token).compute_signature(
        f"{BASE}{url}", fields)} if signed else {})
    return client.post(url, data=fields, headers=headers)


def answer(client: TestClient, attempt: outbound.Attempt, **fields: str) -> ET.Element:
    response = post(client, "/voice/outbound/answer", attempt,
                    form(attempt, CallStatus="in-progress", **fields))
    assert response.status_code == 200
    return ET.fromstring(response.text)


def status(client: TestClient, attempt: outbound.Attempt, call_status: str, **fields: str):
    response = post(client, "/voice/outbound/status", attempt,
                    form(attempt, CallStatus=call_status, **fields))
    assert response.status_code == 204


async def events_of(world: World, call_id: str) -> list[str]:
    rows = await world.db.pool.fetch(
        "SELECT type FROM call_events WHERE call_id = $1 ORDER BY seq", uuid.UUID(call_id))
    return [row["type"] for row in rows]


async def test_unsigned_or_forged_webhooks_are_refused(client, world):
    _, attempt = await dialled(world)
    fields = form(attempt, CallStatus="in-progress", AnsweredBy="human")
    for path in ("/voice/outbound/answer", "/voice/outbound/status"):
        assert post(client, path, attempt, fields, signed=False).status_code == 403
        assert post(client, path, attempt, fields, token="f" * 32).status_code == 403
    # Nothing was done on their word.
    assert (await dials.get_attempt(world.db.pool, attempt.id)).status == "ringing"


async def test_a_machine_hears_only_the_clinics_name_and_its_own_number(client, world):
    task_id, attempt = await dialled(world, reason="lab results to discuss",
                                     goal="book a follow-up appointment")

    twiml = answer(client, attempt, AnsweredBy="machine_end_beep")

    said = twiml.find("Say").text
    digits = world.clinic_number[2:]  # +1 and the ten digits, said one by one
    assert "Riverside Clinic" in said
    assert f"{' '.join(digits[:3])}, {' '.join(digits[3:6])}, {' '.join(digits[6:])}" in said
    assert not any(word.lower() in said.lower() for word in ABOUT_CARE)
    assert twiml.find("Hangup") is not None and twiml.find("Connect") is None
    left = await dials.get_attempt(world.db.pool, attempt.id)
    assert left.outcome == "voicemail" and left.call_id is not None
    record = await repo.get_call(world.db.pool, left.call_id)
    assert (record["direction"], record["completion_reason"]) == ("outbound", "voicemail_left")
    assert (record["from_number"], record["to_number"]) == (world.clinic_number,
                                                            world.patient_phone)

    status(client, attempt, "completed", AnsweredBy="machine_end_beep", CallDuration="21")

    task = await world.get(task_id)
    assert task.status == "pending" and task.next_attempt_at is not None  # tried again later
    assert await events_of(world, left.call_id) == ["voicemail_left", "outbound_outcome"]
    assert (await repo.get_call(world.db.pool, left.call_id))["twilio_duration_s"] == 21


async def test_a_person_is_put_through_with_the_task_and_greeted_by_first_name(client, world):
    task_id, attempt = await dialled(world, kind="checkin")

    twiml = answer(client, attempt, AnsweredBy="human")

    call_id = twiml.find("./Connect/Stream/Parameter").get("value")
    record = await repo.get_call(world.db.pool, call_id)
    assert (record["direction"], record["status"]) == ("outbound", "ringing")
    assert (record["from_number"], record["to_number"]) == (world.clinic_number,
                                                            world.patient_phone)
    assert record["config_snapshot"]["outbound"]["task_id"] == task_id
    profile = client.app.state.runtime.take_profile(call_id)
    assert profile.greeting == greeting_line("Riverside Clinic", "Ada")  # the first name only
    assert profile.outbound.task_id == task_id and profile.outbound.attempt_id == attempt.id
    assert profile.graph.id == "companion_checkin"  # the task kind's graph
    answered = await dials.get_attempt(world.db.pool, attempt.id)
    assert (answered.outcome, answered.call_id) == ("answered", call_id)

    # The call streams; Twilio reports it over while its conversation is still finishing:
    # the task is left for the call's own end to close, with what the call found.
    assert await repo.claim_call_for_stream(world.db.pool, call_id) is not None
    status(client, attempt, "completed", AnsweredBy="human", CallDuration="95")
    assert (await world.get(task_id)).status == "in_progress"
    assert (await dials.get_attempt(world.db.pool, attempt.id)).outcome == "answered"

    # That end closed the record but not the task: the dispatcher's next look closes it.
    await repo.update_call(world.db.pool, call_id, status="completed",
                           ended_at=datetime.now(UTC), completion_reason="caller_hangup")
    await world.dispatcher.run(task_id)

    task = await world.get(task_id)
    assert (task.status, task.outcome) == ("done", "answered")


async def test_a_person_whose_call_never_streamed_is_tried_again(client, world):
    task_id, attempt = await dialled(world)

    answer(client, attempt, AnsweredBy="human")
    status(client, attempt, "completed", AnsweredBy="human")

    ended = await dials.get_attempt(world.db.pool, attempt.id)
    assert ended.outcome == "failed" and "never streamed" in ended.detail
    assert (await world.get(task_id)).status == "pending"


async def test_a_fax_is_hung_up_on_and_the_task_fails(client, world):
    task_id, attempt = await dialled(world)

    twiml = answer(client, attempt, AnsweredBy="fax")
    status(client, attempt, "completed", AnsweredBy="fax")

    assert twiml.find("Say") is None and twiml.find("Hangup") is not None
    task = await world.get(task_id)
    assert task.status == "failed" and "fax" in task.last_error


async def test_no_answer_puts_the_task_back_with_its_next_try_queued(client, world):
    task_id, attempt = await dialled(world)

    status(client, attempt, "ringing")
    status(client, attempt, "no-answer")
    status(client, attempt, "no-answer")  # Twilio repeating itself changes nothing

    ended = await dials.get_attempt(world.db.pool, attempt.id)
    assert (ended.status, ended.outcome) == ("ended", "no_answer")
    task = await world.get(task_id)
    assert task.status == "pending" and task.next_attempt_at >= datetime.now(UTC) + timedelta(
        minutes=59)
    job = await jobs.job_for(world.db.pool, outbound.dial_key(task_id))
    assert job.status == "queued" and job.execute_after >= datetime.now(UTC) + timedelta(
        minutes=59)
    assert "no answer" in task.last_error


async def test_the_last_attempt_unanswered_fails_the_task_with_its_outcome(client, world):
    task_id, attempt = await dialled(world, max_attempts=1)

    status(client, attempt, "busy")

    task = await world.get(task_id)
    assert (task.status, task.outcome) == ("failed", "busy")
    assert "busy" in task.last_error


async def test_a_callee_answering_after_the_task_was_closed_hears_an_apology(client, world):
    task_id, attempt = await dialled(world)
    await outbound.finish_task(world.db.pool, task_id, outcome="claimed", status="done")

    twiml = answer(client, attempt, AnsweredBy="human")

    assert "Riverside Clinic" in twiml.find("Say").text and twiml.find("Connect") is None


async def test_a_webhook_for_an_unknown_attempt_is_hung_up(client, world):
    _, attempt = await dialled(world)
    stranger = outbound.Attempt(**{**attempt.__dict__, "id": str(uuid.uuid4())})

    twiml = answer(client, stranger, AnsweredBy="human")

    assert twiml.find("Hangup") is not None and twiml.find("Connect") is None


async def test_an_answer_the_database_cannot_serve_is_told_then_tried_again(
        client, world, monkeypatch):
    import api.outbound_voice
    from db.deadline import DatabaseUnavailable

    async def frozen(*args, **kwargs):
        raise DatabaseUnavailable("outbound answer", "timeout", timed_out=True)

    task_id, attempt = await dialled(world)
    monkeypatch.setattr(api.outbound_voice, "answer_call", frozen)

    twiml = answer(client, attempt, AnsweredBy="human")
    monkeypatch.undo()
    status(client, attempt, "completed", AnsweredBy="human")

    assert "technical problem" in twiml.find("Say").text and twiml.find("Hangup") is not None
    ended = await dials.get_attempt(world.db.pool, attempt.id)
    assert ended.outcome == "failed"  # the callee never reached the clinic
    assert (await world.get(task_id)).status == "pending"


async def test_a_stored_graph_without_the_right_person_check_gives_way_to_the_bundled_one(
        client, world):
    from db.graph_store import save_graph
    from flows.graph import bundled_graph

    # The clinic's own check-in graph, from before the right-person check.
    old = {**bundled_graph("clinic_booking").model_dump(mode="json"),
           "id": "companion_checkin", "version": 90}
    await save_graph(world.db.pool, world.workspace_id, old, world.clinic["id"])
    _, attempt = await dialled(world, kind="checkin")

    twiml = answer(client, attempt, AnsweredBy="human")

    call_id = twiml.find("./Connect/Stream/Parameter").get("value")
    profile = client.app.state.runtime.take_profile(call_id)
    assert profile.graph.id == "companion_checkin" and profile.graph.version != 90
    assert any("right_person_confirmed" in problem or "checking_person" in problem
               for problem in profile.graph_problems)
