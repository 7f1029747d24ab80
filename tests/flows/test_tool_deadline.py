"""A tool the database does not answer in time: the call goes on at its bound, and a write
that may or may not have gone through is said so, recorded, and put in the operator queue."""

import asyncio
import time

from call.call_session import CallLog
from call.identity import CallIdentity
from flows.engage_local import action_lines
from flows.graph import bundled_graph
from flows.graph_session import GraphSession
from flows.graph_tools import UNCONFIRMED_WRITE_CONCEPT, GraphTools
from tests.fakes import CollectingWriter

GRAPH = bundled_graph("clinic_booking")


async def never_answers(args) -> str:
    await asyncio.sleep(60)
    return "unreachable"


def tools(writer: CollectingWriter) -> GraphTools:
    session = GraphSession(identity=CallIdentity("c", "w", "s"))
    made = GraphTools(GRAPH, session, None, CallLog(session.call_id, writer), timeout_s=0.1)
    for name in ("CreateAppointment", "CheckAvailability"):
        made._handlers[name] = never_answers
    return made


async def test_a_booking_the_database_did_not_confirm_in_time_goes_to_the_operator_queue():
    writer = CollectingWriter()
    started = time.monotonic()

    result = await tools(writer)._run("CreateAppointment", {"slot_ref": "S1"})

    assert time.monotonic() - started < 0.5
    assert result.error_class == "timeout" and "may or may not have gone through" in result.text
    assert [e.data["tool"] for e in writer.events("write_unconfirmed")] == ["CreateAppointment"]
    (escalation,) = writer.of_type("EscalationRecord")
    assert escalation.concept == UNCONFIRMED_WRITE_CONCEPT and escalation.severity == "soft"
    assert "call the caller back" in escalation.reason


async def test_a_read_that_times_out_changes_nothing_and_escalates_nothing():
    writer = CollectingWriter()

    result = await tools(writer)._run("CheckAvailability", {})

    assert result.error_class == "other" and "did not answer in time" in result.text
    assert writer.of_type("EscalationRecord") == [] and writer.events("write_unconfirmed") == []


def test_the_caller_hears_that_an_unconfirmed_booking_will_be_checked_and_no_call_promised():
    line = action_lines().outcomes["system_slow"]

    assert "slow" in line and "check whether it went through" in line
    assert "call you" not in line and "{call_us}" in line  # how to check for themselves


async def test_the_model_is_told_not_to_promise_a_call_for_an_unconfirmed_booking():
    result = await tools(CollectingWriter())._run("CreateAppointment", {"slot_ref": "S1"})

    assert "do not say the clinic will call" in result.text
