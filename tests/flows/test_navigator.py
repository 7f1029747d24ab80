"""The deterministic navigator walks the booking graph the way booking calls go.

Each test plays caller turns against a session prepared as the call's prefetch would
leave it; where the engine would run a tool (a search, a write) the test does what the
tool does to the session, so these tests pin down the navigation alone.
"""

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import yaml

from call.identity import CallIdentity
from db.scheduling import Appointment, AppointmentType, Patient
from db.slots import Slot
from flows.graph import GRAPHS_DIR, bundled_graph, parse_graph
from flows.graph_session import GraphSession
from flows.guards import check
from flows.navigator import NavigationError, condition_problems, navigate, settle, walk

GRAPH = bundled_graph("clinic_booking")
TODAY = date(2026, 11, 24)
ZONE = ZoneInfo("America/Chicago")
PHYSIO = AppointmentType("t-physio", "Physiotherapy session", "", 45, 11000, "USD", ("physio",))
FLU = AppointmentType("t-flu", "Flu shot", "", 15, 3000, "USD", ("flu",))
PRIYA = Patient("p-priya", "Priya", "Nair", date(1985, 9, 30), "+15550100204")
FAMILY = [
    Patient("p-elena", "Elena", "Alvarez", date(1978, 11, 20), "+15550100202"),
    Patient("p-lucas", "Lucas", "Alvarez", date(2010, 5, 9), "+15550100202"),
    Patient("p-robert", "Robert", "Alvarez", date(1975, 7, 2), "+15550100202"),
]


def slot(day: int, hour: int) -> Slot:
    start = datetime(2026, 11, 24, hour, tzinfo=ZONE) + timedelta(days=day)
    end = start + timedelta(minutes=45)
    return Slot("dr", "Aisha Rahman", "loc", "Downtown", PHYSIO.id, start, end)


def booking(appointment_id: str, day: int) -> Appointment:
    start = datetime(2026, 11, 24, 10, tzinfo=ZONE) + timedelta(days=day)
    return Appointment(appointment_id, PRIYA.id, "Dr. Maya Patel", "Downtown", "America/Chicago",
                       "Follow-up visit", start, start + timedelta(minutes=20), "booked")


class Call:
    """A call in progress: its session and the state the last turn landed in."""

    def __init__(self, **session) -> None:
        self.session = GraphSession(identity=CallIdentity("c", "w", "s"), services=[PHYSIO, FLU],
            services_read=True, **session,
        )
        self.state = "greeting"
        self.session.last_action = "greet"

    def says(self, text: str):
        decision = navigate(GRAPH, self.session, self.state, text, TODAY)
        while decision.pending_tool:  # the engine runs the tool (bookings are loaded already)
            decision = walk(GRAPH, self.session, decision.state, decision.turn, tool_done=True)
        self.state = decision.state
        return decision

    def engine_does(self, outcome: str):
        self.session.outcome = outcome
        decision = settle(GRAPH, self.session, self.state)
        if decision is not None:
            self.state = decision.state
        return decision


def test_the_bundled_graphs_only_use_conditions_the_navigator_can_evaluate():
    for graph_id in ("clinic_booking", "companion_checkin"):
        assert condition_problems(bundled_graph(graph_id)) == []


def test_an_unquoted_yaml_no_is_caught_when_the_graph_loads():
    data = yaml.safe_load((GRAPHS_DIR / "clinic_booking.yaml").read_text())
    exits = data["states"]["awaiting_final_confirmation"]["exits"]
    next(e for e in exits if e["name"] == "declined")["when"]["answer"] = False
    data["states"]["hours"]["exits"][0]["when"] = {"mood": "happy"}
    problems = condition_problems(parse_graph(data))
    assert any("exit 'declined': answer can never be [False]" in p for p in problems)
    assert any("state 'hours' exit 'answered': unknown predicate 'mood'" in p for p in problems)


def test_an_existing_patient_books_only_after_confirming_the_slot_read_back():
    call = Call(patient=PRIYA, phone_matches=[PRIYA], upcoming=[])
    first = call.says("Hi, I'd like to book a physio appointment")
    # appointment_setting is a super-state: entering it lands in its initial child
    assert [h.next for h in first.hops] == [
        "booking_discovery", "resolving_service", "resolving_location",
    ]
    assert (first.state, first.action) == ("resolving_location", "ask_preferred_time")
    assert first.route.label == "booking_request/medium"

    second = call.says("next tuesday morning if you can")
    assert second.action == "propose_initial_slot"
    assert call.session.days == (date(2026, 12, 1), date(2026, 12, 1))
    call.session.offer([slot(7, 9), slot(7, 11)])  # what CheckAvailability reads out
    assert call.engine_does("slots_offered").state == "offering_slots"

    third = call.says("the eleven o'clock one")
    assert (third.state, third.action) == ("awaiting_final_confirmation", "final_slot_confirmation")
    assert call.session.picked_slot == "S2"
    assert "not explicitly confirmed" in check(
        GRAPH, call.state, "CreateAppointment", call.session, {"slot_ref": "S2"})

    fourth = call.says("yes please")
    assert fourth.action == "book_confirmed_selected_slot"
    assert call.session.confirmation.caller_words == "yes please"
    assert check(GRAPH, call.state, "CreateAppointment", call.session, {"slot_ref": "S2"}) is None
    wrap_up = call.engine_does("booked")
    assert (wrap_up.state, wrap_up.action) == ("post_booking_closing", "ask_how_can_help")


def test_a_yes_before_anything_was_read_back_confirms_nothing():
    call = Call(patient=PRIYA, phone_matches=[PRIYA], upcoming=[])
    call.says("I want to book physio")
    call.says("yes yes")
    assert call.session.confirmation is None


def test_a_caller_who_changes_their_mind_at_the_final_confirmation_books_nothing():
    call = Call(patient=PRIYA, phone_matches=[PRIYA], upcoming=[])
    call.says("book physio for tomorrow")
    call.session.offer([slot(1, 9), slot(1, 11)])
    call.engine_does("slots_offered")
    call.says("the first one")
    back = call.says("no actually, not that one")
    assert back.state == "offering_slots" and call.session.picked_slot is None
    assert call.session.confirmation is None


def test_a_price_question_mid_booking_is_answered_then_the_booking_resumes():
    call = Call(patient=PRIYA, phone_matches=[PRIYA], upcoming=[])
    call.says("book physio on friday")
    call.session.offer([slot(3, 9), slot(3, 11)])
    call.engine_does("slots_offered")
    aside = call.says("how much does that cost?")
    assert (aside.state, aside.action) == ("pricing", "answer_pricing")
    assert call.session.return_to == ["offering_slots"]
    resumed = call.says("okay, the second one then")
    assert [h.reason for h in resumed.hops] == ["answered", "slot_picked"]
    assert resumed.state == "awaiting_final_confirmation" and call.session.picked_slot == "S2"
    assert call.session.return_to == []


def test_a_shared_phone_needs_name_and_birth_date_before_anything_is_touched():
    call = Call(phone_matches=FAMILY)
    asked = call.says("I need a flu shot")
    assert (asked.state, asked.action) == ("verifying_identity", "ask_shared_phone_full_name")
    call.says("It's Elena Alvarez")
    assert call.session.patient is None  # a name alone is not enough on a shared phone
    identified = call.says("November twentieth nineteen seventy eight")
    assert call.session.patient.id == "p-elena"
    assert (identified.state, identified.action) == ("resolving_location", "ask_preferred_time")


def test_a_wrong_birth_date_on_a_shared_phone_is_asked_once_more_then_goes_to_a_person():
    call = Call(phone_matches=FAMILY)
    call.says("I want to cancel my appointment")
    call.says("Elena Alvarez")
    again = call.says("January first two thousand")
    assert call.session.patient is None and again.action == "reask_shared_phone_dob"
    unsafe = call.says("the first of January, two thousand")
    assert call.session.patient is None and unsafe.state == "handoff_prep"


def test_a_birth_date_in_bare_numbers_on_a_shared_phone_identifies_the_caller():
    call = Call(phone_matches=FAMILY)
    call.says("hi I need to move my appointment")
    call.says("Elena Alvarez")
    call.says("eleven twenty seventy eight")
    assert call.session.patient.id == "p-elena"


def test_a_new_caller_gives_name_and_birth_date_then_books():
    call = Call(phone_matches=[])
    assert call.says("Hi, can I make an appointment for physio").action == "ask_first_name"
    assert call.says("Sam").action == "ask_last_name"
    assert call.says("Nair").action == "ask_date_of_birth"
    read_back = call.says("February 3rd 1990")
    assert read_back.action == "confirm_new_patient_details"
    done = call.says("yes that's right")
    assert done.action == "register_new_patient"
    call.session.patient = Patient("p-sam", "Sam", "Nair", date(1990, 2, 3), None)  # CreatePatient
    after = call.engine_does("patient_created")
    assert (after.state, after.action) == ("resolving_location", "ask_preferred_time")


def test_cancelling_the_only_booking_needs_an_explicit_yes_to_exactly_it():
    call = Call(patient=PRIYA, phone_matches=[PRIYA], upcoming=[booking("a-1", 3)])
    asked = call.says("I need to cancel my appointment")
    assert asked.state == "confirming_cancel"
    assert asked.action == "confirm_current_booking_cancellation"
    args = {"appointment_id": "a-1", "user_quote": "I need to cancel my appointment"}
    assert check(GRAPH, call.state, "CancelAppt", call.session, args) is not None
    assert call.says("yes cancel it").action == "cancel_confirmed_current_booking"
    assert check(GRAPH, call.state, "CancelAppt", call.session, args) is None
    assert call.session.task_quote == "I need to cancel my appointment"


def test_cancel_everything_confirms_all_bookings_at_once():
    two = [booking("a-1", 3), booking("a-2", 9)]
    call = Call(patient=PRIYA, phone_matches=[PRIYA], upcoming=two)
    asked = call.says("please cancel all my appointments")
    assert asked.action == "confirm_all_current_bookings_cancellation"
    call.says("yes")
    args = {"appointment_ids": ["a-1", "a-2"], "user_quote": "cancel all my appointments"}
    assert check(GRAPH, call.state, "CancelAppointments", call.session, args) is None


def test_which_booking_to_cancel_when_there_are_several():
    two = [booking("a-1", 3), booking("a-2", 9)]
    call = Call(patient=PRIYA, phone_matches=[PRIYA], upcoming=two)
    first = navigate(GRAPH, call.session, call.state, "I want to cancel an appointment", TODAY)
    assert (first.state, first.pending_tool) == ("loading_bookings", "GetCurrentlyBookedAppts")
    asked = walk(GRAPH, call.session, first.state, first.turn, tool_done=True)
    assert (asked.state, asked.action) == ("picking_target", "clarify_cancellation_target")
    call.state = asked.state
    picked = call.says("the second one")
    assert picked.state == "confirming_cancel"
    assert picked.action == "confirm_current_booking_cancellation"
    assert call.session.targets == ["a-2"]


def test_an_emergency_is_redirected_from_anywhere():
    call = Call(patient=PRIYA, phone_matches=[PRIYA], upcoming=[])
    call.says("book physio")
    urgent = call.says("actually my chest pain is getting worse and I can't breathe")
    assert (urgent.state, urgent.action) == ("handoff_prep", "red_flag_emergency_redirect")


def test_what_do_i_have_coming_up_is_answered_from_the_prefetched_bookings():
    call = Call(patient=PRIYA, phone_matches=[PRIYA], upcoming=[booking("a-1", 3)])
    decision = call.says("what do I have coming up?")
    assert (decision.state, decision.action) == ("answering_query", "answer_current_booking_status")


def test_goodbye_reaches_the_terminal_state():
    call = Call(patient=PRIYA, phone_matches=[PRIYA], upcoming=[])
    decision = call.says("no that's all, goodbye")
    assert decision.terminal and (decision.state, decision.action) == ("closing", "close_call")


def test_a_graph_that_cannot_reach_an_action_is_a_navigation_error():
    data = {
        "id": "loop", "version": 1, "description": "x", "initial_state": "a",
        "phases": {}, "actions": {"bye": {"description": "bye"}}, "tools": {},
        "states": {
            "a": {"type": "decision", "description": "a",
                  "exits": [{"name": "go", "to": "b", "description": "x"}]},
            "b": {"type": "decision", "description": "b",
                  "exits": [{"name": "back", "to": "a", "description": "x"},
                            {"name": "end", "to": "z", "description": "x"}]},
            "z": {"type": "action", "description": "z", "actions": ["bye"]},
        },
    }
    graph = parse_graph(data)
    session = GraphSession(identity=CallIdentity("c", "w", "s"))
    with pytest.raises(NavigationError):
        navigate(graph, session, "a", "hello", TODAY)


def test_a_clinic_with_one_kind_of_visit_never_asks_which():
    call = Call(patient=PRIYA, phone_matches=[PRIYA], upcoming=[])
    call.session.services = [FLU]
    asked = call.says("can I get an appointment please")
    assert asked.action == "ask_preferred_time" and call.session.appointment_type == FLU


def test_a_vague_booking_with_several_kinds_asks_what_the_visit_is_for():
    call = Call(patient=PRIYA, phone_matches=[PRIYA], upcoming=[])
    assert call.says("can I get an appointment please").action == "ask_visit_reason"
