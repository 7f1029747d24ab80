"""No booking write the caller did not confirm, for a slot this call offered, in the right state."""

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from call.identity import CallIdentity
from db.scheduling import Appointment, Patient
from db.slots import Slot
from flows.catalog import engine_problems
from flows.graph import bundled_graph, parse_graph
from flows.graph_session import Confirmation, GraphSession, NewPatientDetails, cancel_subject
from flows.guards import check, unknown_guards
from flows.navigator import read_turn, walk

GRAPH = bundled_graph("clinic_booking")
START = datetime(2026, 11, 24, 9, 0, tzinfo=ZoneInfo("America/Chicago"))
PRIYA = Patient("p-1", "Priya", "Nair", date(1985, 9, 30), "+15550100204")


def slot(minutes: int = 0) -> Slot:
    starts = START + timedelta(minutes=minutes)
    ends = starts + timedelta(minutes=30)
    return Slot("dr", "Dr. Maya Patel", "loc", "Downtown", "type", starts, ends)


def appointment(appointment_id: str) -> Appointment:
    return Appointment(appointment_id, PRIYA.id, "Dr. Maya Patel", "Downtown", "America/Chicago",
                       "Follow-up visit", START, START + timedelta(minutes=20), "booked")


def session_with_offer() -> tuple[GraphSession, str]:
    session = GraphSession(identity=CallIdentity("c", "w", "s"),  patient=PRIYA)
    (ref, _), _ = session.offer([slot(), slot(30)])
    return session, ref


def book(session: GraphSession, ref: str, state: str = "awaiting_final_confirmation"):
    return check(GRAPH, state, "CreateAppointment", session, {"slot_ref": ref})


def test_the_bundled_graph_names_only_guards_the_engine_has():
    assert unknown_guards(GRAPH) == []


def test_booking_is_blocked_until_the_caller_confirms_that_exact_slot():
    session, ref = session_with_offer()
    assert "not explicitly confirmed" in book(session, ref)
    session.confirmation = Confirmation(subject="S2", caller_words="yes the later one")
    assert "not explicitly confirmed" in book(session, ref)  # they confirmed another time
    session.confirmation = Confirmation(subject=ref, caller_words="yes please")
    assert book(session, ref) is None


def test_a_slot_the_call_never_offered_cannot_be_booked():
    session, _ = session_with_offer()
    session.confirmation = Confirmation(subject="S9", caller_words="yes")
    assert "did not come from an availability search" in book(session, "S9")


def test_booking_is_only_possible_while_awaiting_final_confirmation():
    session, ref = session_with_offer()
    session.confirmation = Confirmation(subject=ref, caller_words="yes")
    for state in GRAPH.states:
        allowed = book(session, ref, state) is None
        assert allowed == (state == "awaiting_final_confirmation"), state


def test_an_unidentified_caller_cannot_book():
    session, ref = session_with_offer()
    session.patient = None
    session.confirmation = Confirmation(subject=ref, caller_words="yes")
    assert "not identified" in book(session, ref)


def test_cancel_needs_a_loaded_id_and_a_confirmation_of_exactly_it():
    session = GraphSession(identity=CallIdentity("c", "w", "s"),  patient=PRIYA,
                             heard=["I'd like to cancel my physio on Tuesday"])

    def cancel(state: str = "confirming_cancel") -> str | None:
        return check(GRAPH, state, "CancelAppt", session,
                     {"appointment_id": "a-1", "user_quote": "cancel my physio on Tuesday"})

    assert "not returned by the booked-appointments lookup" in cancel()
    session.upcoming = [appointment("a-1"), appointment("a-2")]
    assert "not explicitly confirmed" in cancel()
    session.confirmation = Confirmation(subject=cancel_subject(["a-1", "a-2"]), caller_words="yes")
    assert "not explicitly confirmed" in cancel()  # they confirmed cancelling both, not one
    session.confirmation = Confirmation(subject=cancel_subject(["a-1"]), caller_words="yes")
    assert cancel() is None
    assert "not available while cancelling" in cancel("cancelling")


def test_a_new_patient_needs_name_and_birth_date_and_transfers_never_take_a_spoken_number():
    session = GraphSession(identity=CallIdentity("c", "w", "s"))

    def allowed(state: str, tool: str, args: dict) -> str | None:
        return check(GRAPH, state, tool, session, args)

    partial = {"first_name": "Sam", "last_name": "Nair"}
    assert "date of birth" in allowed("collecting_new_patient", "CreatePatient", partial)
    full = {**partial, "date_of_birth": "1990-02-03"}
    assert "not confirmed" in allowed("collecting_new_patient", "CreatePatient", full)
    session.new_patient = NewPatientDetails("Sam", "Nair", date(1990, 2, 3))
    session.confirmation = Confirmation(session.new_patient.subject, "yes that's me")
    assert allowed("collecting_new_patient", "CreatePatient", full) is None
    other = {**full, "last_name": "Nayar"}  # not what they said yes to
    assert "not confirmed" in allowed("collecting_new_patient", "CreatePatient", other)
    invented = {"phone_number": "+15555550123"}
    assert "never from the conversation" in allowed("handoff_prep", "TransferCall", invented)
    assert allowed("handoff_prep", "TransferCall", {}) is None


def test_offering_the_same_time_again_keeps_its_reference():
    session, ref = session_with_offer()
    again = session.offer([slot()])
    assert again[0][0] == ref and len(session.offered) == 2


def guarded_tiny(requires: list[str]):
    from tests.flows.test_graph import tiny

    data = tiny()
    data["states"]["hello"]["exits"][0]["when"] = {}
    data["states"]["goodbye"]["requires"] = requires
    return parse_graph(data)


def test_no_walk_enters_a_state_whose_required_guard_refuses():
    graph = guarded_tiny(["identified_patient"])
    stranger = GraphSession(identity=CallIdentity("c", "w", "s"))
    turn = read_turn(stranger, "hello there")

    assert walk(graph, stranger, "hello", turn).state == "hello"
    known = GraphSession(identity=CallIdentity("c", "w", "s"), patient=PRIYA)
    assert walk(graph, known, "hello", read_turn(known, "hello there")).state == "goodbye"


def test_a_state_requiring_a_guard_the_engine_lacks_does_not_load():
    assert "unknown guard 'vibes_check'" in engine_problems(guarded_tiny(["vibes_check"]))
