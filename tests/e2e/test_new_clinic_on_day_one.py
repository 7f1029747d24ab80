"""A new clinic on day one, as a new user sets it up: with the service running, a
workspace is created, the clinic's file imported and a Twilio number connected (against a
stand-in for Twilio's REST API), all from the command line; then a call to that number
books against the new clinic's schedule, in its timezone, never on its holiday."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from datetime import datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml

from runner.dev_credentials import twilio_auth_token
from simulator.simulator import CallScript, simulate_call
from simulator.twilio_rest import FakeTwilioRest, serve_twilio_rest
from tests.api.clinics import new_number

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "clinic.yaml"
ZONE = ZoneInfo("America/Denver")  # the example clinic's; the demo's is Chicago
PUBLIC_URL = "https://agent.example.com"


def clinic_file(number: str, closed_from, closed_to) -> dict:
    """The README's example clinic, with a number of this test's own and a holiday over
    the next few days (so the earliest opening must come after it)."""
    clinic = yaml.safe_load(EXAMPLE.read_text())
    clinic["clinic"]["name"] = f"Lakeview {uuid.uuid4().hex[:6]}"
    clinic["clinic"]["phone_numbers"] = [number]
    for location in clinic["locations"]:
        location["phone_number"] = new_number()
    clinic["closures"] = [{"from": closed_from.isoformat(), "to": closed_to.isoformat(),
                           "reason": "the clinic's move"}]
    return clinic


def cli(env: dict[str, str], cwd: Path, *args: str) -> str:
    """`python main.py ARGS` as an operator runs it; its stdout (the test fails on a
    non-zero exit, showing what it said)."""
    done = subprocess.run([sys.executable, str(ROOT / "main.py"), *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"main.py {' '.join(args)}: {done.stderr[-2000:]}"
    return done.stdout


async def test_a_clinic_set_up_from_the_command_line_takes_its_first_booking(
        server, db, tmp_path):
    import os

    today = datetime.now(ZONE).date()
    closed_from, closed_to = today, today + timedelta(days=3)
    number = new_number()
    path = tmp_path / "lakeview.yaml"
    path.write_text(yaml.safe_dump(clinic_file(number, closed_from, closed_to)))
    workspace = f"lakeview-{uuid.uuid4().hex[:8]}"
    twilio = FakeTwilioRest()
    twilio.add_number(number)

    async with serve_twilio_rest(twilio) as twilio_url:
        env = {**os.environ, "DATABASE_URL": db._dsn, "DATA_DIR": str(tmp_path),  # noqa: SLF001
               **twilio.service_env(twilio_url), "PUBLIC_URL": PUBLIC_URL}
        run = lambda *args: asyncio.to_thread(cli, env, tmp_path, *args)  # noqa: E731
        await run("workspace", "create", workspace)
        await run("clinic", "import", str(path), "--workspace", workspace)
        await run("twilio", "connect", number, "--workspace", workspace)
        key = (await run("api-key", "create", "--workspace", workspace,
                         "--role", "read_only")).strip()

    # Twilio's number now sends its calls here.
    update = next(r for r in twilio.requests if r.method == "POST")
    assert update.form["VoiceUrl"] == f"{PUBLIC_URL}/voice/answer"
    assert update.form["StatusCallback"] == f"{PUBLIC_URL}/voice/status"

    script = CallScript.model_validate({
        "name": "first_booking", "from": new_number(), "to": number,
        "turns": [{"say": line} for line in (
            "Hello, I'd like to see a doctor please.", "Jordan", "Lee",
            "My date of birth is July 4th 1988.", "Yes, that's right.",
            "Whenever is soonest.", "The first one.", "Yes please.",
            "No, that's all. Goodbye.")],
    })
    result = await simulate_call(script, base_url=server.url, api_key=key,
                                 twilio_token=twilio_auth_token(server.settings),
                                 text_mode=True, log=lambda *_: None)
    said = " | ".join(t["text"] for t in result.record["turns"])

    booked = await db.pool.fetch(
        """SELECT a.starts_at, a.ends_at, l.timezone, l.name AS location, p.name AS practitioner,
                  c.workspace_id, w.name AS workspace
           FROM appointments a JOIN locations l ON l.id = a.location_id
           JOIN practitioners p ON p.id = a.practitioner_id
           JOIN calls c ON c.id = a.created_by_call JOIN workspaces w ON w.id = c.workspace_id
           WHERE a.created_by_call = $1""", uuid.UUID(result.call_id))
    assert len(booked) == 1, said
    booking = booked[0]
    local = booking["starts_at"].astimezone(ZONE)
    # The new clinic's, in its workspace, with its practitioner at its location.
    assert booking["workspace"] == workspace
    assert (booking["location"], booking["practitioner"]) == ("Lakeview", "Dr. Ana Sousa")
    assert booking["timezone"] == "America/Denver"
    # On its schedule in its own timezone: Mondays, Tuesdays and Thursdays, 8:30-12, 13-17.
    assert local.weekday() in (0, 1, 3)
    assert time(8, 30) <= local.time() < time(12) or time(13) <= local.time() < time(17)
    # Never on its holiday.
    assert local.date() > closed_to, said
    # The caller heard that time, said in the clinic's timezone.
    assert f"{local:%-I}" in said
