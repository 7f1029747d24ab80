"""Facts a caller mentions in passing: captured from their words, validated, never invented."""

import json

import pytest

from db.world import Carrier
from language.carriers import default_carriers
from processors.world.extraction import Fact, extract_by_rules, facts_from_model

CARRIERS = [Carrier(f"carrier-{i}", spec.name, tuple(spec.aliases), None)
            for i, spec in enumerate(default_carriers(), 1)]
CARRIER_ID = {c.name: c.id for c in CARRIERS}


def facts(text: str) -> dict[str, dict[str, str]]:
    """The turn's facts by kind (preferences merged), for readable assertions."""
    found: dict[str, dict[str, str]] = {}
    for fact in extract_by_rules(text, CARRIERS):
        assert fact.heard == text  # every fact keeps the caller's own words
        found.setdefault(fact.kind, {}).update(fact.as_dict)
    return found


# --- extract_by_rules ---------------------------------------------------------------------


def test_new_insurance_with_its_carrier_and_a_spoken_member_id():
    said = "I switched to Blue Cross, my member id is w one two three four five six seven"
    bcbs = "Blue Cross Blue Shield"
    assert facts(said) == {"insurance": {
        "carrier_name": bcbs, "carrier_id": CARRIER_ID[bcbs], "member_id": "W1234567"}}


def test_a_misheard_carrier_and_a_group_number():
    said = ("I have signa now, member number is a b c one two three four five, "
            "group number is nine eight seven six five")
    assert facts(said) == {"insurance": {
        "carrier_name": "Cigna", "carrier_id": CARRIER_ID["Cigna"], "member_id": "ABC12345",
        "group_number": "98765"}}


@pytest.mark.parametrize("said", [
    "My new phone number is three one two five five five zero one nine nine",
    "you can reach me at 312-555-0199",
    "my cell number is 312.555.0199",
    "my number is +1 312 555 0199",
])
def test_a_new_phone_number(said):
    assert facts(said) == {"contact": {"phone": "+13125550199"}}


def test_a_new_phone_number_with_the_area_code_in_parentheses():
    assert facts("my cell number is (312) 555-0199") == {"contact": {"phone": "+13125550199"}}


def test_a_spoken_email_address():
    assert facts("my email is jane dot doe at example dot com") == {
        "contact": {"email": "jane.doe@example.com"}}


def test_a_new_address():
    assert facts("I now live at 1200 North Lake Shore Drive.") == {
        "contact": {"address": "1200 North Lake Shore Drive"}}


def test_a_phone_and_an_email_in_one_turn_are_one_contact_fact():
    found = extract_by_rules(
        "my phone number is 312 555 0199 and my email is bob at mail dot com", CARRIERS)
    assert [f.kind for f in found] == ["contact"]
    assert found[0].as_dict == {"phone": "+13125550199", "email": "bob@mail.com"}


@pytest.mark.parametrize(("said", "preference"), [
    ("Please text me rather than calling", {"contact_method": "text"}),
    ("I prefer emails", {"contact_method": "email"}),
    ("I'd rather you call me", {"contact_method": "phone"}),
    ("Mornings are best for me", {"contact_time": "morning"}),
    ("please text me, evenings work better", {"contact_method": "text",
                                               "contact_time": "evening"}),
])
def test_how_and_when_to_contact_the_caller(said, preference):
    assert facts(said) == {"preference": preference}


@pytest.mark.parametrize("said", [
    "I'd like to book a checkup next Tuesday morning at 9",
    "Can I move my physio appointment to the 22nd at 3 pm?",
    "Hi, it's Priya, born March fourteenth nineteen forty eight",
])
def test_a_scheduling_sentence_holds_no_facts(said):
    assert extract_by_rules(said, CARRIERS) == []


@pytest.mark.parametrize("said", ["I have geico insurance", "My new insurance is Geico."])
def test_a_carrier_the_clinic_does_not_list_is_not_recorded(said):
    assert extract_by_rules(said, CARRIERS) == []


def test_a_listed_carrier_is_not_recorded_unless_the_turn_is_about_insurance():
    assert extract_by_rules("I'm calling from Kaiser Road", CARRIERS) == []
    assert facts("my insurance is with kaiser")["insurance"]["carrier_name"] == "Kaiser Permanente"


@pytest.mark.parametrize("said", ["I'm on a payment plan with you",
                                  "what's the plan for my knee",
                                  "Is my card on file?"])
def test_a_plan_or_card_without_a_carrier_or_an_id_is_nothing(said):
    assert extract_by_rules(said, CARRIERS) == []


@pytest.mark.parametrize(("said", "member_id"), [
    ("I have Aetna insurance, member id ab12345", "AB12345"),  # → MEMBERIDAB12345
    ("my policy number is h 1 2 3 4 5 6 and the group is 9 9 8 8", "H123456"),  # → H123456ANDTHE
])
def test_the_member_id_is_only_the_id_the_caller_gave(said, member_id):
    assert facts(said)["insurance"]["member_id"] == member_id


# --- facts_from_model -----------------------------------------------------------------------


def from_model(answer: dict | str, heard: str = "what the caller said") -> list[Fact]:
    raw = answer if isinstance(answer, str) else json.dumps(answer)
    return facts_from_model(raw, heard, CARRIERS)


def test_the_model_s_values_are_normalised_like_the_rules():
    found = from_model({
        "phone": "(312) 555-0199", "email": "Jane.Doe@Example.com", "address": "  42   Oak St ",
        "insurance_carrier": "signa", "member_id": "w-123-456", "group_number": "g 9988 77",
        "contact_method": "text", "contact_time": "morning"}, heard="my details are ...")
    assert [(f.kind, f.as_dict) for f in found] == [
        ("contact", {"phone": "+13125550199", "email": "jane.doe@example.com",
                     "address": "42 Oak St"}),
        ("insurance", {"carrier_name": "Cigna", "carrier_id": CARRIER_ID["Cigna"],
                       "member_id": "W123456", "group_number": "G998877"}),
        ("preference", {"contact_method": "text"}),
        ("preference", {"contact_time": "morning"}),
    ]
    assert {f.heard for f in found} == {"my details are ..."}


def test_invalid_values_from_the_model_are_dropped():
    assert from_model({"phone": "555-0199", "email": "jane at", "member_id": "12"}) == []


def test_a_carrier_the_clinic_does_not_list_is_dropped_but_the_member_id_kept():
    assert from_model({"insurance_carrier": "geico"}) == []
    (fact,) = from_model({"insurance_carrier": "geico", "member_id": "ab12345"})
    assert fact.kind == "insurance" and fact.as_dict == {"member_id": "AB12345"}


def test_a_fenced_json_answer_and_unknown_keys_are_accepted():
    (fact,) = from_model('```json\n{"email": "a@b.co", "mood": "calm"}\n```')
    assert fact.as_dict == {"email": "a@b.co"}
    assert from_model({"phone": None, "email": None}) == []


@pytest.mark.parametrize("raw", ["not json", "", "[1, 2]", '{"contact_method": "fax"}',
                                 '{"phone": 5}', json.dumps({"address": "x" * 200})])
def test_an_answer_that_does_not_fit_the_schema_is_a_value_error(raw):
    with pytest.raises(ValueError, match="does not fit"):
        facts_from_model(raw, "what the caller said", CARRIERS)


# --- Fact.event ---------------------------------------------------------------------------


def test_a_contact_fact_becomes_a_contact_reported_event_with_the_caller_s_words():
    fact = Fact("contact", (("phone", "+13125550199"), ("email", "a@b.co")), "my new number is")
    draft = fact.event("p-1")
    assert draft.type == "contact_reported" and draft.patient_id == "p-1"
    assert draft.payload == {"changes": {"phone": "+13125550199", "email": "a@b.co"},
                             "heard": "my new number is"}
    assert draft.summary == "Caller reported new contact details: phone +13125550199, email a@b.co."


def test_an_insurance_fact_becomes_an_insurance_reported_event_without_the_internal_id():
    fact = Fact("insurance", (("carrier_name", "Cigna"), ("carrier_id", "carrier-4"),
                              ("member_id", "W123456")), "I'm with Cigna now")
    draft = fact.event(None)  # heard before anyone was identified
    assert draft.type == "insurance_reported" and draft.patient_id is None
    assert draft.payload == {"carrier_name": "Cigna", "carrier_id": "carrier-4",
                             "member_id": "W123456", "heard": "I'm with Cigna now"}
    assert draft.summary == "Caller reported insurance: carrier name Cigna, member id W123456."


def test_a_preference_fact_becomes_a_preference_reported_event_quoting_the_caller():
    draft = Fact("preference", (("contact_method", "text"),), "please text me").event("p-1")
    assert draft.type == "preference_reported"
    assert draft.payload == {"contact_method": "text", "user_quote": "please text me"}
    assert draft.summary == "Caller asked: contact method text."


def test_extracted_facts_turn_into_events_end_to_end():
    said = "Please text me, my email is jane dot doe at example dot com"
    drafts = [fact.event("p-1") for fact in extract_by_rules(said, CARRIERS)]
    assert [d.type for d in drafts] == ["contact_reported", "preference_reported"]
    assert drafts[0].payload["heard"] == said and drafts[1].payload["user_quote"] == said
