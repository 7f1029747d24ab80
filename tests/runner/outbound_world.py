"""A clinic, a patient and their outbound task for the dispatcher's tests, with a clock
the test moves, the process's lines, and a Twilio Calls stand-in with the client's
methods (`create`, `since`, `hang_up`) that remembers every call it placed."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any

from config import Settings
from db import outbound
from db import repositories as repo
from db.pool import Database
from runner.outbound.dispatcher import Dispatcher
from runner.outbound.twilio_calls import PlacedCall, TwilioCallError
from tests.api.clinics import new_number

# Every weekday 08:00-18:00 in New York: the clinic's opening hours.
WEEKDAYS_8_TO_6 = {day: ["08:00", "18:00"] for day in ("mon", "tue", "wed", "thu", "fri")}
ALL_DAY = {day: ["00:00", "24:00"]
           for day in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")}
NEW_YORK = "America/New_York"
PUBLIC_URL = "https://agent.example.com"


def at(local: str, zone: str = NEW_YORK) -> datetime:
    """'2030-01-08 10:00' where `zone` is, as an aware UTC datetime."""
    from zoneinfo import ZoneInfo

    return datetime.fromisoformat(local).replace(tzinfo=ZoneInfo(zone)).astimezone(UTC)


class Clock:
    """The dispatcher's now, moved by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@dataclass
class Lines:
    """The process's lines as the dispatcher sees them."""

    room: bool = True
    ringing: set[str] = field(default_factory=set)

    def outbound_has_room(self) -> bool:
        return self.room

    def hold_ringing(self, key: str) -> None:
        self.ringing.add(key)

    def release_ringing(self, key: str) -> None:
        self.ringing.discard(key)


class ProcessKilled(BaseException):
    """The process died here (nothing after it runs)."""


@dataclass
class FakeCalls:
    """Twilio's Calls resource for one account, in memory."""

    clock: Clock
    placed: list[PlacedCall] = field(default_factory=list)
    creates: list[dict[str, Any]] = field(default_factory=list)  # every create asked for
    refuse_with: TwilioCallError | None = None
    killed_after_placing: bool = False  # the process dies before Twilio's answer arrives
    killed_before_placing: bool = False  # ... before the request reaches Twilio

    async def create(self, *, to: str, from_: str, url: str, status_callback: str,
                     machine_detection: bool = True) -> PlacedCall:
        self.creates.append({"to": to, "from_": from_, "url": url,
                             "status_callback": status_callback,
                             "machine_detection": machine_detection})
        if self.killed_before_placing:
            self.killed_before_placing = False
            raise ProcessKilled
        if self.refuse_with is not None:
            raise self.refuse_with
        call = PlacedCall(sid="CA" + uuid.uuid4().hex, status="queued", to=to,
                          from_=from_, start_time=self.clock())
        self.placed.append(call)
        if self.killed_after_placing:
            self.killed_after_placing = False
            raise ProcessKilled
        return call

    async def since(self, *, to: str, from_: str, after: datetime) -> list[PlacedCall]:
        return [c for c in reversed(self.placed)
                if c.to == to and c.from_ == from_ and c.start_time >= after]

    async def hang_up(self, sid: str) -> None:
        self.set_status(sid, "completed")

    def set_status(self, sid: str, status: str) -> None:
        self.placed = [PlacedCall(c.sid, status, c.to, c.from_, c.start_time)
                       if c.sid == sid else c for c in self.placed]


@dataclass
class World:
    """One clinic in its own workspace, one patient, the dispatcher and its fakes."""

    db: Database
    settings: Settings
    workspace_id: str
    clinic: dict[str, Any]
    clinic_number: str
    patient_id: str
    patient_phone: str
    clock: Clock
    lines: Lines
    twilio: FakeCalls
    dispatcher: Dispatcher

    async def task(self, **changes: Any) -> str:
        """An outbound task for the patient (a callback, any time of any day unless
        told), due now."""
        values: dict[str, Any] = {
            "workspace_id": self.workspace_id, "service_id": self.clinic["id"],
            "kind": "callback", "reason": "asked for a call back",
            "goal": "answer their question", "timezone": NEW_YORK,
            "not_before": self.clock.now - timedelta(minutes=1), "patient_id": self.patient_id,
            "window_start": time(0), "window_end": time(23, 59, 59),
            "window_days": outbound.EVERY_DAY, "max_attempts": 3, "retry_backoff_minutes": 60,
            **changes}
        async with self.db.pool.acquire() as conn, conn.transaction():
            return await outbound.create_task(conn, outbound.TaskSpec(**values))

    async def get(self, task_id: str) -> outbound.OutboundTask:
        found = await outbound.get_task(self.db.pool, self.workspace_id, task_id)
        assert found is not None
        return found

    async def attempts(self, task_id: str) -> list[outbound.Attempt]:
        return await outbound.attempts(self.db.pool, task_id)


async def make_world(db: Database, *, now: datetime, opening_hours: dict | None = None,
                     patient_timezone: str | None = NEW_YORK, **settings: Any) -> World:
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    number = new_number()
    clinic = await repo.create_service(db.pool, workspace["id"], "Riverside Clinic",
                                       phone_number=number)
    await db.pool.execute(
        "INSERT INTO locations (service_id, name, timezone, opening_hours) "
        "VALUES ($1, 'Main', $2, $3)",
        uuid.UUID(clinic["id"]), NEW_YORK, ALL_DAY if opening_hours is None else opening_hours)
    phone = new_number()
    patient_id = str(await db.pool.fetchval(
        "INSERT INTO patients (workspace_id, first_name, last_name, date_of_birth, phone, "
        "timezone) VALUES ($1, 'Ada', 'Byron', '1970-01-02', $2, $3) RETURNING id",
        uuid.UUID(workspace["id"]), phone, patient_timezone))
    config = Settings(_env_file=None, database_url=db.dsn, public_url=PUBLIC_URL,
                      twilio_account_sid="AC" + "0" * 32, twilio_auth_token="t" * 32,
                      **settings)
    clock, lines = Clock(now), Lines()
    twilio = FakeCalls(clock)
    dispatcher = Dispatcher(db.pool, config, lines, twilio, None, clock)
    return World(db, config, workspace["id"], clinic, number, patient_id, phone, clock,
                 lines, twilio, dispatcher)
