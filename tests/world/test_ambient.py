"""The ambient context: what the engage LLM always knows about the caller and the clinic."""

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from call.identity import CallIdentity
from db.scheduling import Appointment, AppointmentType, Location, Patient
from db.world import Allergy, ClinicalContext, Condition, Coverage, Medication, PatientRecord
from flows.ambient import ambient_context
from flows.graph_session import GraphSession

PRIYA = Patient("p-1", "Priya", "Nair", date(1985, 9, 30), "+15550100204")
START = datetime(2026, 11, 24, 15, 0, tzinfo=ZoneInfo("UTC"))  # 9 AM in Chicago
DOWNTOWN = Location("loc-1", "Downtown Clinic", "America/Chicago", "1 Main St", "+13125550100",
                    {"mon": ["08:00", "17:00"], "tue": ["08:00", "17:00"]})
NORTHSIDE = Location("loc-2", "Northside Clinic", "America/Chicago", "9 North Ave",
                     "+13125550111", {"sat": ["09:00", "12:00"]})
PHYSIO = AppointmentType("t-1", "Physio", "Physiotherapy session", 30, 9000, "USD")


def record(patient_id: str = "p-1", first: str = "Priya", last: str = "Nair") -> PatientRecord:
    return PatientRecord(patient_id, "w", first, last, date(1985, 9, 30), "+15550100204",
                         "priya@example.com", "12 Elm St", "MRN-77", "America/Chicago", {},
                         "verified", "import")


def chart(patient: PatientRecord | None = None, **lists) -> ClinicalContext:
    return ClinicalContext(
        patient or record(),
        conditions=lists.get("conditions", [Condition("Type 2 diabetes", "active")]),
        medications=lists.get("medications", [Medication("Metformin", "500 mg", "twice daily")]),
        allergies=lists.get("allergies", [Allergy("Penicillin", "hives", "severe")]),
        coverages=lists.get("coverages", [Coverage("cov-1", "Aetna", "Gold PPO", "W123456", "G1",
                                                   "", "self", "moderate")]),
    )


def appointment(appointment_id: str, days: int = 0) -> Appointment:
    starts = START + timedelta(days=days)
    return Appointment(appointment_id, "p-1", "Dr. Maya Patel", "Downtown Clinic",
                       "America/Chicago", "Follow-up visit", starts,
                       starts + timedelta(minutes=20), "booked")


def call(**fields) -> GraphSession:
    """An identified caller with their chart and one upcoming booking, unless told otherwise."""
    defaults = {"patient": PRIYA, "chart": chart(), "upcoming": [appointment("a-1")],
                "locations": [DOWNTOWN, NORTHSIDE], "services": [PHYSIO]}
    return GraphSession(identity=CallIdentity("c", "w", "s"),
                          **{**defaults, **fields})


def lines(text: str) -> list[str]:
    return text.splitlines()[1:]  # under the header


def test_an_identified_caller_s_chart_and_bookings_are_in_the_context():
    text = ambient_context(call(), now=START)
    assert text.startswith("Patient and clinic context")
    assert lines(text) == [
        "The caller: Priya Nair (P1), born 1985-09-30, MRN MRN-77, phone +15550100204, "
        "email priya@example.com, address 12 Elm St.",
        "Allergies: Penicillin (hives, severe).",
        "Upcoming appointments: A1: Follow-up visit with Dr. Maya Patel at Downtown Clinic, "
        "Tuesday, November 24 at 9 AM.",
        "Medications: Metformin 500 mg twice daily.",
        "Active conditions: Type 2 diabetes.",
        "Insurance: Aetna Gold PPO, member id W123456 (not yet verified).",
        "Locations: Downtown Clinic, 1 Main St, open Monday to Tuesday 8 AM to 5 PM; "
        "Northside Clinic, 9 North Ave, open Saturday 9 AM to 12 PM.",
        "Now (Tuesday 9 AM at the clinic): open: Downtown Clinic until 5 PM.",
        "Appointment types: Physio (30 min).",
    ]


def test_bookings_are_numbered_earliest_first_and_an_empty_lookup_says_none():
    text = ambient_context(call(upcoming=[appointment("a-1"), appointment("a-2", days=7)]))
    assert ("A1: Follow-up visit with Dr. Maya Patel at Downtown Clinic, Tuesday, November 24 "
            "at 9 AM; A2: Follow-up visit with Dr. Maya Patel at Downtown Clinic, Tuesday, "
            "December 1 at 9 AM.") in text
    assert "Upcoming appointments: none." in ambient_context(call(upcoming=[]))
    assert "Upcoming appointments" not in ambient_context(call(upcoming=None))  # not loaded


def test_verified_insurance_with_a_holder_is_said_as_such():
    spouse = Coverage("cov-2", "Cigna", "", "C998877", "", "Arjun Nair", "spouse", "verified")
    text = ambient_context(call(chart=chart(coverages=[spouse])))
    assert "Insurance: Cigna, member id C998877, holder Arjun Nair (spouse)." in text


def test_an_unknown_caller_gets_the_clinic_only_and_nobody_s_record():
    someone = chart(record("p-9", "Walter", "Ng"))
    text = ambient_context(call(patient=None, chart=someone, upcoming=[appointment("a-1")]),
                           now=START)
    assert lines(text) == [
        "Locations: Downtown Clinic, 1 Main St, open Monday to Tuesday 8 AM to 5 PM; "
        "Northside Clinic, 9 North Ave, open Saturday 9 AM to 12 PM.",
        "Now (Tuesday 9 AM at the clinic): open: Downtown Clinic until 5 PM.",
        "Appointment types: Physio (30 min).",
    ]
    assert "Walter" not in text and "Penicillin" not in text and "A1" not in text


def test_a_chart_of_a_different_patient_than_the_caller_is_not_shown():
    walter = chart(record("p-9", "Walter", "Ng"))
    text = ambient_context(call(chart=walter))
    assert "Walter" not in text and "Penicillin" not in text and "MRN-77" not in text
    assert "The caller:" not in text and "Locations:" in text


def test_nothing_known_gives_no_context_at_all():
    assert ambient_context(GraphSession(identity=CallIdentity("c", "w", "s"))) == ""


def test_the_dialled_number_names_the_called_location_only():
    text = ambient_context(call(), dialled="+13125550111")
    assert "Called location: Northside Clinic, 9 North Ave, open Saturday 9 AM to 12 PM." in text
    assert "Downtown Clinic, 1 Main St" not in text
    # A number no location has: every location, as before.
    assert "Locations: Downtown Clinic" in ambient_context(call(), dialled="+19999999999")


def test_over_budget_the_least_needed_sections_go_first():
    full = lines(ambient_context(call()))
    without_services = [line for line in full if not line.startswith("Appointment types")]
    budget = sum(len(line) + 1 for line in without_services)

    text = ambient_context(call(), budget=budget)
    assert lines(text) == without_services  # services went, the locations stayed

    text = ambient_context(call(), budget=budget - 1)
    assert "Locations:" not in text and "Active conditions:" in text


def test_over_a_small_budget_the_caller_allergies_and_bookings_stay():
    text = ambient_context(call(), budget=300)
    assert [line.split(":")[0] for line in lines(text)] == [
        "The caller", "Allergies", "Upcoming appointments"]
    assert "Penicillin (hives, severe)" in text


def test_long_lists_show_five_and_say_how_many_more():
    allergies = [Allergy(f"Substance {i}", "", "") for i in range(1, 8)]
    medications = [Medication(f"Drug {i}", "", "") for i in range(1, 7)]
    text = ambient_context(call(chart=chart(allergies=allergies, medications=medications)))
    assert ("Allergies: Substance 1; Substance 2; Substance 3; Substance 4; Substance 5; "
            "2 more.") in text
    assert "Substance 6" not in text
    assert "Medications: Drug 1; Drug 2; Drug 3; Drug 4; Drug 5; 1 more." in text
