"""The world-model tools against the demo clinic: every write attributed and scoped,
repeated writes deduplicated, records found without reading out anyone else's."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from zoneinfo import ZoneInfo

import asyncpg
import pytest

from call.call_session import CallLog
from call.identity import CallIdentity
from db import outbound, scheduling, world
from db.scheduling import Patient
from flows.graph import bundled_graph
from flows.graph_session import Confirmation, GraphSession, patient_subject
from flows.graph_tools import GraphTools
from tests.fakes import CollectingWriter
from tests.world.conftest import NOW, TODAY, Clinic

GRAPH = bundled_graph("clinic_booking")
STATE = "booking_discovery"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def call(db, clinic: Clinic):
    call_id = await clinic.call(db)
    writer = CollectingWriter()
    walsh = await clinic.patient(db, "Henry", "Walsh")
    session = GraphSession(identity=CallIdentity(call_id, clinic.workspace_id, clinic.service_id))
    session.patient = Patient(walsh.id, walsh.first_name, walsh.last_name, walsh.date_of_birth,
                              walsh.phone)
    clock = Clock()
    tools = GraphTools(GRAPH, session, db.pool, CallLog(call_id, writer),
                         today=lambda: TODAY, clock=clock, now=lambda: NOW)
    return tools, writer, clock


async def events_of(db, call_id: str) -> list[world.ClinicalEvent]:
    return await world.call_events(db.pool, call_id)


async def test_a_contact_update_is_attributed_and_scoped_to_the_caller(db, call):
    tools, _, _ = call
    result = await tools.call(STATE, "UpdatePatient", {
        "patient_ref": "P1", "phone": "three one two five five five zero one nine nine"})

    assert result.ok and "phone" in result.text
    [event] = await events_of(db, tools.session.call_id)
    assert (event.type, event.source, event.written_by) == (
        "contact_updated", "tool", "tool:UpdatePatient")
    assert event.payload["changes"] == {"phone": "+13125550199"}
    assert event.confidence == "moderate" and event.verification == "pending"
    record = await world.patient_record(db.pool, tools.session.patient.id)
    assert record.phone == "+13125550199" and record.written_by == "tool:UpdatePatient"


async def test_a_write_naming_another_patient_is_refused_and_logged(db, clinic, call):
    tools, writer, _ = call
    chen = await clinic.patient(db, "Margaret", "Chen")

    result = await tools.call(STATE, "UpdatePatient", {"patient_id": chen.id,
                                                       "email": "x@example.com"})

    assert result.error_class == "guard" and "identified on this call" in result.text
    assert [e.data["tool"] for e in writer.events("write_scope_refused")] == ["UpdatePatient"]
    assert await events_of(db, tools.session.call_id) == []
    assert (await world.patient_record(db.pool, chen.id)).email == "margaret.chen@example.com"


async def test_the_same_write_within_30_seconds_is_written_once(db, call):
    tools, writer, clock = call
    args = {"patient_ref": "P1", "reason": "lab results", "goal": "explain the results",
            "priority": 6}

    first = await tools.call(STATE, "ScheduleOutboundCall", args)
    clock.now += 29
    again = await tools.call(STATE, "ScheduleOutboundCall", args)
    clock.now += 2  # 31 s after the first: a new write
    later = await tools.call(STATE, "ScheduleOutboundCall", args)

    assert first.ok and again == first and later.ok
    assert len(writer.events("write_deduplicated")) == 1
    tasks = [e for e in await events_of(db, tools.session.call_id)
             if e.type == "outbound_call_scheduled"]
    assert len(tasks) == 2


async def test_a_failed_write_is_never_cached(db, call):
    tools, writer, _ = call
    bad = {"patient_ref": "P1", "carrier": "Geico", "member_id": "AB12345"}
    first = await tools.call(STATE, "CreateInsurance", bad)
    second = await tools.call(STATE, "CreateInsurance", bad)
    assert first.error_class == second.error_class == "guard"
    assert writer.events("write_deduplicated") == []


async def test_insurance_matches_the_clinic_s_carriers_fuzzily(db, call):
    tools, _, _ = call
    result = await tools.call(STATE, "CreateInsurance", {
        "patient_ref": "P1", "carrier": "blue cross", "member_id": "xjh 448 2291"})

    assert result.ok and "Blue Cross Blue Shield" in result.text
    [event] = await events_of(db, tools.session.call_id)
    assert event.payload["member_id"] == "XJH4482291"
    context = await world.clinical_context(db.pool, tools.session.patient.id)
    assert {c.carrier_name for c in context.coverages} >= {"Aetna", "Blue Cross Blue Shield"}


async def test_an_outbound_call_lands_in_business_hours_in_the_patient_s_timezone(db, call):
    tools, _, _ = call
    tools.session.locations = await scheduling.locations(db.pool, tools.session.service_id)
    await tools.call(STATE, "ScheduleOutboundCall", {
        "patient_ref": "P1", "reason": "insurance card", "goal": "collect the group number",
        "priority": 3, "on_date": "2026-12-01", "part_of_day": "morning"})

    [event] = await events_of(db, tools.session.call_id)
    task = await world.outbound_task(db.pool, event.entity_id)
    assert task["timezone"] == "America/Chicago"  # the clinic's, the patient has none
    assert (task["window_start"].hour, task["window_end"].hour) == (9, 12)
    assert task["priority"] == 3 and task["max_attempts"] == 3
    assert task["not_before"].astimezone().date().isoformat() in ("2026-12-01", "2026-11-30")


async def test_a_scheduled_call_is_the_clinic_s_task_and_the_caller_hears_when(db, call):
    tools, _, _ = call
    result = await tools.call(STATE, "ScheduleOutboundCall", {
        "patient_ref": "P1", "reason": "insurance card", "goal": "collect the group number",
        "on_date": "2026-12-01", "part_of_day": "afternoon"})

    [event] = await events_of(db, tools.session.call_id)
    task = await world.outbound_task(db.pool, event.entity_id)
    assert str(task["service_id"]) == tools.session.service_id and task["kind"] == "scheduled"
    assert task["not_before"] == datetime(2026, 12, 1, 12, tzinfo=ZoneInfo("America/Chicago"))
    assert result.ok and "Tuesday, December 1 from 12 PM" in result.text
    assert tools.session.call_time == "on Tuesday, December 1 from 12 PM"


async def test_a_scheduled_call_that_could_not_be_written_is_never_promised(
        db, call, monkeypatch):
    tools, writer, _ = call

    async def refuse(conn, spec):
        raise asyncpg.exceptions.ReadOnlySQLTransactionError("read-only replica")

    monkeypatch.setattr(outbound, "create_task", refuse)
    result = await tools.call(STATE, "ScheduleOutboundCall", {
        "patient_ref": "P1", "reason": "insurance card", "goal": "collect the group number"})

    assert not result.ok and "do not say the clinic will call" in result.text
    assert await events_of(db, tools.session.call_id) == []
    assert tools.session.call_time is None and writer.events("call_not_arranged")


async def test_the_waitlist_promises_a_call_only_when_a_time_opens(db, call):
    tools, _, _ = call
    result = await tools.call(STATE, "AddToWaitlist", {"note": "mornings"})
    assert result.ok and "not a booking" in result.text and "only if" in result.text


async def test_a_preference_change_needs_the_caller_s_own_words(db, call):
    tools, _, _ = call
    tools.session.heard += ["could you text me instead of calling from now on", "thanks"]
    args = {"patient_ref": "P1", "preference": "contact_method", "value": "text"}

    invented = await tools.call(STATE, "SetContactPreference",
                                {**args, "user_quote": "please only ever email me"})
    quoted = await tools.call(STATE, "SetContactPreference",
                              {**args, "user_quote": "text me instead of calling"})

    assert invented.error_class == "guard" and "did not say" in invented.text
    assert quoted.ok
    record = await world.patient_record(db.pool, tools.session.patient.id)
    assert record.preferences == {"contact_method": "text"}


async def test_search_identifies_only_with_the_date_of_birth(db, clinic, index):
    call_id = await clinic.call(db)
    session = GraphSession(identity=CallIdentity(call_id, clinic.workspace_id, clinic.service_id))
    tools = GraphTools(GRAPH, session, db.pool, CallLog(call_id, CollectingWriter()),
                         today=lambda: TODAY, index=index)
    await index.backfill(db.pool)

    by_name = await tools.call("verifying_identity", "SearchPatients", {"name": "Elenor Kowalsky"})
    assert session.patient is None and "Kowalski" not in by_name.text  # nobody read out

    with_dob = await tools.call("verifying_identity", "SearchPatients", {
        "name": "Elenor Kowalsky", "date_of_birth": "June 22nd 1951"})
    assert with_dob.ok and "Eleanor Kowalski" in with_dob.text
    assert session.patient is not None and session.patient.last_name == "Kowalski"


async def test_an_unidentified_caller_can_register_but_not_update(db, clinic):
    call_id = await clinic.call(db)
    session = GraphSession(identity=CallIdentity(
        call_id, clinic.workspace_id, clinic.service_id, "+15550100999"))
    tools = GraphTools(GRAPH, session, db.pool, CallLog(call_id, CollectingWriter()),
                         today=lambda: TODAY)
    name = "Tess" + "".join(chr(97 + int(c, 16) % 26) for c in uuid.uuid4().hex[:5])

    session.confirmation = Confirmation(  # the caller said yes to these details read back
        patient_subject(name, "Moreau", date(1988, 3, 4)), "yes, that's right")

    update = await tools.call("collecting_new_patient", "UpdatePatient",
                              {"patient_ref": "P1", "email": "t@example.com"})
    created = await tools.call("collecting_new_patient", "CreatePatient", {
        "first_name": name, "last_name": "Moreau", "date_of_birth": "03/04/1988"})

    assert update.error_class == "guard"
    assert created.ok and session.patient is not None
    [event] = await events_of(db, call_id)
    assert (event.type, event.patient_id) == ("patient_created", session.patient.id)
    assert event.payload["date_of_birth"] == "1988-03-04"


async def test_the_configured_country_code_decides_what_a_number_without_one_means(db, clinic):
    call_id = await clinic.call(db)
    walsh = await clinic.patient(db, "Henry", "Walsh")
    session = GraphSession(identity=CallIdentity(call_id, clinic.workspace_id, clinic.service_id),
                             patient=walsh.as_patient())
    tools = GraphTools(GRAPH, session, db.pool, CallLog(call_id, CollectingWriter()),
                         today=lambda: TODAY, country_code="44")  # not North American

    national = await tools.call(STATE, "UpdatePatient", {"patient_ref": "P1",
                                                         "phone": "312 555 0199"})
    international = await tools.call(STATE, "UpdatePatient", {"patient_ref": "P1",
                                                              "phone": "+44 20 7946 0958"})

    assert national.error_class == "guard" and "not complete" in national.text
    assert international.ok
    assert (await world.patient_record(db.pool, walsh.id)).phone == "+442079460958"


async def test_an_established_record_s_name_is_never_changed_on_a_call(db, call):
    tools, _, _ = call
    walsh = tools.session.patient
    args = {"patient_ref": "P1", "last_name": "Welsh"}
    blocked = await tools.call(STATE, "UpdatePatient", args)
    assert blocked.error_class == "guard"  # no yes to the changed name

    tools.session.confirmation = Confirmation(
        patient_subject(walsh.first_name, "Welsh", walsh.date_of_birth), "yes")
    refused = await tools.call(STATE, "UpdatePatient", args)

    assert not refused.ok and "registered on this call" in refused.text
    assert await events_of(db, tools.session.call_id) == []
