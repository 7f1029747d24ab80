"""A whole call against the real server, driven by the simulator exactly as Twilio would."""

import struct
import uuid
import wave
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from language.spoken import say_time
from runner.dev_credentials import twilio_auth_token
from simulator.simulator import load_script, simulate_call

pytestmark = pytest.mark.e2e
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
DEMO_CLINIC_ZONE = ZoneInfo("America/Chicago")


def channel_rms(path: str) -> tuple[float, float]:
    with wave.open(path) as wav:
        assert wav.getnchannels() == 2 and wav.getsampwidth() == 2
        samples = struct.unpack(f"<{wav.getnframes() * 2}h", wav.readframes(wav.getnframes()))
    left, right = samples[0::2], samples[1::2]
    return tuple((sum(s * s for s in ch) / max(1, len(ch))) ** 0.5 for ch in (left, right))


async def run(server, name: str, text_mode: bool):
    return await simulate_call(
        load_script(SCENARIOS / name), base_url=server.url, api_key=server.api_key,
        twilio_token=twilio_auth_token(server.settings), text_mode=text_mode, log=lambda *_: None,
    )


@pytest.mark.timeout(240)
async def test_a_booking_by_voice_is_recognised_booked_recorded_and_ended_by_the_agent(server, db):
    script = load_script(SCENARIOS / "voice_booking.yaml")
    tomorrow = clinic_tomorrow()  # "tomorrow morning", at whatever hour the test runs
    result = await run(server, "voice_booking.yaml", text_mode=False)
    tomorrow = min(tomorrow, clinic_tomorrow())  # the call may have crossed midnight
    record = result.record

    assert script.expect.failures(result.to_json_dict()) == [], " || ".join(
        t["text"] for t in result.to_json_dict()["turns"]
    )
    greeting, first_caller, first_answer = record["turns"][:3]
    assert "Demo Family Clinic" in greeting["text"]
    assert "checkup" in first_caller["text"]  # real speech, recognised by PocketSphinx
    # Five-layer timing: caller speech boundaries, agent latency and playback.
    assert first_caller["user_speech_start_ms"] < first_caller["user_speech_end_ms"]
    assert first_answer["audio_ttfb_ms"] is not None and first_answer["engine_ms"] is not None
    assert first_answer["nav_ms"] is not None
    assert first_answer["agent_speech_start_ms"] > first_caller["user_speech_end_ms"]
    assert first_answer["agent_speech_end_ms"] > first_answer["agent_speech_start_ms"]
    assert await written_by(db, result.call_id) == {"created": 1, "changed": 0, "callbacks": 0}
    # Booked for the clinic's tomorrow morning, or (nothing open then) the nearest after it,
    # never for today: the day is read on the clinic's clock, not the server's.
    booked = await booked_by(db, result.call_id)
    assert booked.date() >= tomorrow, (booked, tomorrow)
    assert booked.date() > tomorrow or booked.hour < 12, (booked, tomorrow)
    # Stereo recording: caller on the left, agent on the right, speech in both.
    left, right = channel_rms(str(server.data_dir / "recordings" / f"{result.call_id}.wav"))
    assert left > 100 and right > 100


# What each text scenario may leave in the database: bookings created, bookings changed
# (cancelled or moved away from), callback requests. Nothing else may be written.
WRITES = {
    "new_patient_books": {"created": 1, "changed": 0, "callbacks": 0},
    "existing_patient_books": {"created": 1, "changed": 0, "callbacks": 0},
    "reschedule": {"created": 1, "changed": 1, "callbacks": 0},
    "cancel_one": {"created": 0, "changed": 1, "callbacks": 0},
    "cancel_all": {"created": 0, "changed": 2, "callbacks": 0},
    "whats_coming_up": {"created": 0, "changed": 0, "callbacks": 0},
    "questions_mid_booking": {"created": 1, "changed": 0, "callbacks": 0},
    "emergency_redirect": {"created": 0, "changed": 0, "callbacks": 1},
    "callback_request": {"created": 0, "changed": 0, "callbacks": 1},
    "asks_for_a_human": {"created": 0, "changed": 0, "callbacks": 1},
    "changes_mind": {"created": 0, "changed": 0, "callbacks": 0},
}


async def test_a_check_in_call_runs_the_companion_graph_and_writes_only_what_was_said(
    server, db
):
    script = load_script(SCENARIOS / "companion_checkin.yaml")
    result = await run(server, "companion_checkin.yaml", text_mode=True)

    summary = result.to_json_dict()
    assert script.expect.failures(summary) == [], summary
    assert result.record["config_snapshot"]["context_graph"]["id"] == "companion_checkin"
    call = uuid.UUID(result.call_id)
    saved = await db.pool.fetch("SELECT text FROM memories WHERE source_call = $1", call)
    assert [r["text"] for r in saved] == ["I'm thinking of visiting my sister next week."]
    done = await db.pool.fetch(
        "SELECT text FROM reminders WHERE acknowledged_by_call = $1", call
    )
    assert [r["text"] for r in done] == ["Take your blood pressure reading each morning"]
    assert await written_by(db, result.call_id) == {"created": 0, "changed": 0, "callbacks": 0}


def clinic_tomorrow() -> date:
    """The demo clinic's tomorrow (it is in Chicago), at this moment."""
    return datetime.now(DEMO_CLINIC_ZONE).date() + timedelta(days=1)


async def booked_by(db, call_id: str) -> datetime:
    """When the booking a call made starts, in its location's time."""
    row = await db.pool.fetchrow(
        """SELECT a.starts_at, l.timezone FROM appointments a
           JOIN locations l ON l.id = a.location_id WHERE a.created_by_call = $1""",
        uuid.UUID(call_id))
    return row["starts_at"].astimezone(ZoneInfo(row["timezone"]))


async def written_by(db, call_id: str) -> dict[str, int]:
    row = await db.pool.fetchrow(
        """SELECT (SELECT count(*) FROM appointments WHERE created_by_call = $1) AS created,
                  (SELECT count(*) FROM appointments WHERE changed_by_call = $1) AS changed,
                  (SELECT count(*) FROM callback_requests WHERE call_id = $1) AS callbacks""",
        uuid.UUID(call_id),
    )
    return dict(row)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(WRITES))
async def test_text_scenarios_do_what_the_caller_asked_and_write_only_that(server, db, name):
    script = load_script(SCENARIOS / f"{name}.yaml")
    result = await run(server, f"{name}.yaml", text_mode=True)

    summary = result.to_json_dict()
    assert script.expect.failures(summary) == [], summary
    # Each call ends with its summary and its five scores, offline.
    assert summary["analysis"]["analyst"] == "rules"
    analysis = summary["analysis"]
    assert len(analysis["scores"]) == 5 and 1 <= analysis["quality_score"] <= 5
    assert result.record["has_recording"] is False and result.record["recording_url"] is None
    assert await written_by(db, result.call_id) == WRITES[name]
    writes = [t for t in summary["tool_calls"] if t["name"] in WRITE_TOOLS and t["succeeded"]]
    assert all(t["error_class"] is None for t in writes)


WRITE_TOOLS = {"CreateAppointment", "RescheduleAppointment", "CancelAppt", "CancelAppointments"}


async def test_a_booking_the_caller_confirmed_is_at_the_slot_they_confirmed(server, db):
    result = await run(server, "existing_patient_books.yaml", text_mode=True)
    confirm = next(t["text"] for t in result.record["turns"]
                   if t["speaker_role"] == "agent" and t["text"].startswith("Just to confirm"))
    booked = await db.pool.fetchrow(
        """SELECT a.starts_at, p.name AS practitioner, l.timezone FROM appointments a
           JOIN practitioners p ON p.id = a.practitioner_id JOIN locations l ON l.id = a.location_id
           WHERE a.created_by_call = $1""",
        uuid.UUID(result.call_id),
    )


    local = booked["starts_at"].astimezone(ZoneInfo(booked["timezone"]))
    assert f"{say_time(local)} with {booked['practitioner']}" in confirm
