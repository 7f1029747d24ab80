"""Write safety: one write per request, only on the caller's own record, only when they asked."""

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from call.call_session import CallLog
from call.identity import CallIdentity
from db.scheduling import Appointment, Patient
from flows.graph import bundled_graph, visible_tools
from flows.graph_session import Confirmation, GraphSession, cancel_subject, patient_subject
from flows.graph_tools import GraphTools
from flows.guards import check
from processors.world.write_safety import (
    DEDUP_TTL_S,
    QUOTE_RECENT_TURNS,
    WriteDeduplicator,
    quote_problem,
    target_outside_scope,
)
from tests.fakes import CollectingWriter

GRAPH = bundled_graph("clinic_booking")
PRIYA = Patient("p-1", "Priya", "Nair", date(1985, 9, 30), "+15550100204")
START = datetime(2026, 11, 24, 9, 0, tzinfo=ZoneInfo("America/Chicago"))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# --- WriteDeduplicator ------------------------------------------------------------------


def test_the_same_write_within_the_ttl_returns_the_first_result():
    clock = FakeClock()
    dedup: WriteDeduplicator[str] = WriteDeduplicator(clock=clock)
    args = {"patient_ref": "P1", "phone": "+13125550199"}
    assert dedup.cached("UpdatePatient", args) is None
    dedup.remember("UpdatePatient", args, "Updated the phone number.")

    clock.advance(DEDUP_TTL_S)  # 30 s later, still the same request
    assert dedup.cached("UpdatePatient", dict(args)) == "Updated the phone number."


def test_after_the_ttl_the_same_write_is_not_a_duplicate_any_more():
    clock = FakeClock()
    dedup: WriteDeduplicator[str] = WriteDeduplicator(clock=clock)
    args = {"patient_ref": "P1", "phone": "+13125550199"}
    dedup.remember("UpdatePatient", args, "Updated the phone number.")

    clock.advance(DEDUP_TTL_S + 0.1)
    assert dedup.cached("UpdatePatient", args) is None


def test_different_arguments_or_another_tool_are_not_a_duplicate():
    clock = FakeClock()
    dedup: WriteDeduplicator[str] = WriteDeduplicator(clock=clock)
    dedup.remember("UpdatePatient", {"patient_ref": "P1", "phone": "+13125550199"}, "done")

    assert dedup.cached("UpdatePatient", {"patient_ref": "P1", "phone": "+13125550100"}) is None
    assert dedup.cached("UpdatePatient", {"patient_ref": "P1"}) is None
    assert dedup.cached("SavePatient", {"patient_ref": "P1", "phone": "+13125550199"}) is None


def test_the_duplicate_key_ignores_the_order_of_the_arguments():
    dedup: WriteDeduplicator[str] = WriteDeduplicator(clock=FakeClock())
    dedup.remember("CreateInsurance", {"patient_ref": "P1", "carrier": "Aetna",
                                       "member_id": "W123456"}, "Saved Aetna.")

    reordered = {"member_id": "W123456", "carrier": "Aetna", "patient_ref": "P1"}
    assert dedup.cached("CreateInsurance", reordered) == "Saved Aetna."
    assert (WriteDeduplicator.key("T", {"a": 1, "b": 2})
            == WriteDeduplicator.key("T", {"b": 2, "a": 1}))


def test_only_what_was_remembered_is_cached():
    clock = FakeClock()
    dedup: WriteDeduplicator[str] = WriteDeduplicator(clock=clock)
    args = {"patient_ref": "P1", "email": "priya@example.com"}
    # The caller tried once and it failed: nothing was remembered, so a retry runs.
    assert dedup.cached("UpdatePatient", args) is None
    clock.advance(1)
    assert dedup.cached("UpdatePatient", args) is None


# --- the tool layer keeps successes only (GraphTools._write_once, no database) ---------


class FakeHandler:
    """Stands in for a tool's database handler: scripted outcomes, counted calls."""

    def __init__(self, *outcomes: str | Exception) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    async def __call__(self, args) -> str:
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def tools_for(session: GraphSession, clock: FakeClock) -> tuple[GraphTools, CollectingWriter]:
    writer = CollectingWriter()
    tools = GraphTools(GRAPH, session, None, CallLog(session.call_id, writer), clock=clock)
    return tools, writer


async def test_a_failed_write_is_retried_and_a_repeated_success_is_not_written_twice():
    clock = FakeClock()
    session = GraphSession(identity=CallIdentity("c", "w", "s"))
    tools, writer = tools_for(session, clock)
    handler = FakeHandler(OSError("connection reset"), "Registered Sam Nair.",
                          "Registered Sam Nair.")
    tools._handlers["CreatePatient"] = handler
    args = {"first_name": "Sam", "last_name": "Nair", "date_of_birth": "1990-02-03"}
    session.confirmation = Confirmation(patient_subject("Sam", "Nair", "1990-02-03"), "yes")

    failed = await tools.call("collecting_new_patient", "CreatePatient", args)
    assert failed.error_class == "pms" and "not answering" in failed.text

    retried = await tools.call("collecting_new_patient", "CreatePatient", args)
    assert retried.ok and retried.text == "Registered Sam Nair." and handler.calls == 2

    clock.advance(5)
    repeated = await tools.call("collecting_new_patient", "CreatePatient",
                                {**args, "user_quote": "I said register me"})
    assert repeated == retried and handler.calls == 2  # the quote is not part of the key
    assert len(writer.events("write_deduplicated")) == 1

    clock.advance(DEDUP_TTL_S)
    await tools.call("collecting_new_patient", "CreatePatient", args)
    assert handler.calls == 3  # long enough later it is a new request


async def test_reads_are_never_deduplicated():
    clock = FakeClock()
    session = GraphSession(identity=CallIdentity("c", "w", "s"))
    tools, _ = tools_for(session, clock)
    handler = FakeHandler("Physio, 30 minutes, $90", "Physio, 30 minutes, $90")
    tools._handlers["GetServicesAndPricing"] = handler

    await tools.call("booking_discovery", "GetServicesAndPricing", {})
    await tools.call("booking_discovery", "GetServicesAndPricing", {})
    assert handler.calls == 2


async def test_the_tool_layer_refuses_a_write_naming_another_patient_before_running_it():
    session = GraphSession(identity=CallIdentity("c", "w", "s"),  patient=PRIYA)
    tools, writer = tools_for(session, FakeClock())
    handler = FakeHandler("Updated.")
    tools._handlers["UpdatePatient"] = handler

    result = await tools.call("booking_discovery", "UpdatePatient",
                              {"patient_ref": "P2", "phone": "+13125550199"})
    assert result.error_class == "guard"
    assert result.text.startswith("blocked: writes may only change the record of the patient")
    assert handler.calls == 0
    assert len(writer.events("write_scope_refused")) == 1


# --- target_outside_scope ------------------------------------------------------------------


def test_a_write_that_names_no_patient_is_in_scope():
    assert target_outside_scope({"phone": "+13125550199"}, "p-1") is None
    assert target_outside_scope({"patient_ref": "", "patient_id": None}, "p-1") is None


@pytest.mark.parametrize("args", [{"patient_ref": "P1"}, {"patient_id": "p-1"},
                                  {"patient_ref": "P1", "patient_id": "p-1"}])
def test_a_write_naming_the_identified_caller_is_in_scope(args):
    assert target_outside_scope(args, "p-1") is None


@pytest.mark.parametrize("args", [{"patient_ref": "P2"}, {"patient_id": "p-2"},
                                  {"patient_ref": "P1", "patient_id": "p-2"}])
def test_a_write_naming_anyone_else_is_refused(args):
    reason = target_outside_scope(args, "p-1")
    assert reason == "writes may only change the record of the patient identified on this call"


@pytest.mark.parametrize("args", [{"patient_ref": "P1"}, {"patient_id": "p-1"}])
def test_no_record_can_be_named_before_anyone_is_identified(args):
    assert "no patient is identified" in target_outside_scope(args, None)


# --- quote_problem (the intent gate) ---------------------------------------------------


def session_hearing(*turns: str) -> GraphSession:
    return GraphSession(identity=CallIdentity("c", "w", "s"),  heard=list(turns))


CALL = session_hearing(
    "Hi, this is Priya calling about my appointments",  # five turns ago
    "I want to cancel my physio appointment on Tuesday",
    "yes that's the one",
    "and please stop texting me, just call instead",
    "thanks",
)


def recent(session: GraphSession = CALL) -> list[str]:
    return session.recent_caller_turns(QUOTE_RECENT_TURNS)


def test_a_quote_of_what_the_caller_said_a_few_turns_ago_passes():
    assert quote_problem("please stop texting me, just call instead", recent()) is None
    assert quote_problem("I want to cancel my physio appointment on Tuesday", recent()) is None


def test_part_of_a_longer_turn_is_a_valid_quote():
    assert quote_problem("cancel my physio appointment", recent()) is None


@pytest.mark.parametrize("heard_as", ["I wanna cancel my physio appointment on Tuesday",
                                      "I want to cancel my fizzio appointment on tuesday"])
def test_small_recognition_differences_still_pass(heard_as):
    assert quote_problem(heard_as, recent()) is None


def test_an_invented_quote_fails():
    problem = quote_problem("cancel all of my appointments", recent())
    assert problem is not None and "did not say that" in problem


@pytest.mark.parametrize("quote", ["yes please", "cancel it", "yes"])
def test_a_quote_too_short_to_show_intent_fails(quote):
    assert "too short" in quote_problem(quote, recent())


def test_a_quote_much_longer_than_anything_said_fails():
    invented = ("I want to cancel my physio appointment on Tuesday and every other "
                "appointment I have booked this month")
    assert "did not say that" in quote_problem(invented, recent())


def test_a_caller_turn_with_a_few_invented_words_added_fails():
    extended = "I want to cancel my physio appointment on Tuesday and also Friday"
    assert quote_problem(extended, recent()) is not None


def test_a_quote_from_longer_ago_than_the_recent_turns_fails():
    oldest = "Hi, this is Priya calling about my appointments"
    assert oldest not in recent()  # said QUOTE_RECENT_TURNS + 1 turns ago
    assert "did not say that" in quote_problem(oldest, recent())
    # The same words, said within the recent turns, pass.
    assert quote_problem(oldest, recent(session_hearing(oldest, "thanks"))) is None


def test_spoken_and_digit_numbers_are_the_same_words():
    turns = ["could you move me to the 22 at 3 30 please"]
    assert quote_problem("move me to the twenty second at three thirty please", turns) is None
    turns = ["my new number is two one two five five five zero one nine nine"]
    assert quote_problem("my new number is 212 555 0199", turns) is None


@pytest.mark.parametrize("quote", [None, "", "   ", 42])
def test_a_missing_quote_fails(quote):
    assert "user_quote is required" in quote_problem(quote, recent())


def test_nothing_said_yet_means_no_quote_can_pass():
    assert "did not say that" in quote_problem("please cancel my appointment", [])


# --- visible_tools over the bundled graph ----------------------------------------------


def writes_in(tools: frozenset[str]) -> set[str]:
    return {name for name in tools if GRAPH.tools[name].kind == "write"}


def test_an_unidentified_caller_in_discovery_is_offered_no_write_at_all():
    allowed = GRAPH.state_tools["booking_discovery"]
    assert {"UpdatePatient", "CreateInsurance", "AddToWaitlist"} <= allowed

    visible = visible_tools(GRAPH, "booking_discovery", identified=False)
    assert writes_in(visible) == set()
    assert {"GetPatientDetails", "CheckAvailability", "SearchPatients",
            "EscalateToHuman"} <= visible
    assert visible == {name for name in allowed if GRAPH.tools[name].kind != "write"}


def test_an_unidentified_caller_registering_is_offered_only_create_patient():
    visible = visible_tools(GRAPH, "collecting_new_patient", identified=False)
    assert writes_in(visible) == {"CreatePatient"}
    assert {"GetPatientDetails", "GetServicesAndPricing", "EscalateToHuman"} <= visible


@pytest.mark.parametrize("state", ["booking_discovery", "collecting_new_patient",
                                   "confirming_cancel"])
def test_an_identified_caller_gets_the_state_s_full_tool_set(state):
    assert visible_tools(GRAPH, state, identified=True) == GRAPH.state_tools[state]


def test_a_state_the_graph_does_not_have_offers_nothing():
    assert visible_tools(GRAPH, "no_such_state", identified=True) == frozenset()


# --- the intent gate inside flows/guards.check ----------------------------------------


def appointment(appointment_id: str) -> Appointment:
    return Appointment(appointment_id, PRIYA.id, "Dr. Maya Patel", "Downtown", "America/Chicago",
                       "Follow-up visit", START, START + timedelta(minutes=20), "booked")


def ready_to_cancel() -> GraphSession:
    """Every guard of CancelAppt holds: identified, loaded, confirmed exactly a-1."""
    session = GraphSession(identity=CallIdentity("c", "w", "s"),  patient=PRIYA,
                             heard=["I need to cancel my follow-up on Tuesday", "yes, cancel it"])
    session.upcoming = [appointment("a-1"), appointment("a-2")]
    session.confirmation = Confirmation(subject=cancel_subject(["a-1"]), caller_words="yes")
    return session


def cancel(session: GraphSession, **quote) -> str | None:
    return check(GRAPH, "confirming_cancel", "CancelAppt", session,
                 {"appointment_id": "a-1", **quote})


def test_cancelling_runs_with_a_quote_of_the_caller_s_request():
    assert cancel(ready_to_cancel(), user_quote="cancel my follow-up on Tuesday") is None


def test_cancelling_without_a_quote_is_refused_even_when_every_guard_passes():
    assert "user_quote is required" in cancel(ready_to_cancel())


def test_cancelling_with_an_invented_quote_is_refused_even_when_every_guard_passes():
    problem = cancel(ready_to_cancel(), user_quote="please cancel all my appointments")
    assert "did not say that" in problem
