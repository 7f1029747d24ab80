"""Persona files: validated at load with errors a person can act on; the shipped ones vary."""

from collections import Counter
from pathlib import Path

import pytest
import yaml

from simulator.personas.model import (
    Persona,
    PersonaError,
    load_persona,
    load_personas,
    persona_files,
)

PERSONAS = Path(__file__).resolve().parents[2] / "scenarios" / "personas"
VALID = {
    "name": "flu_shot", "from": "+15550100399",
    "caller": {"first_name": "Sam", "last_name": "Lee", "date_of_birth": "1990-02-03"},
    "tasks": [{"kind": "book", "service": "a flu shot"}],
    "expect": {"outcome": "booked"},
}


def write(tmp_path: Path, data: object, name: str = "persona.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_valid_persona_loads_with_its_defaults(tmp_path):
    persona = load_persona(write(tmp_path, VALID))

    assert persona.to_number == "+15550100100"  # the demo clinic
    assert persona.own_phone == "+15550100399"
    assert persona.random_seed == load_persona(write(tmp_path, VALID, "again.yaml")).random_seed


@pytest.mark.parametrize(("change", "message"), [
    ({"habits": ["mumbles"]}, "habits[0]: Input should be 'front_loads'"),
    ({"tasks": [{"kind": "book"}]}, "tasks[0]: Value error, a book task needs `service`"),
    ({"expect": {"outcome": ["booked", "booked"]}}, "names 2 outcome(s) for 1 task(s)"),
    ({"habits": ["corrects_self"]}, "the corrects_self habit needs `corrections`"),
    ({"habits": ["hangs_up_early"]}, "needs `hang_up_after`"),
    ({"habits": ["terse", "rambling"]}, "both terse and rambling"),
    ({"from": 15550100399}, 'from: Value error, write phone numbers in quotes'),
    ({"caller": {"first_name": "Sam", "last_name": "Lee", "date_of_birth": "03/02/1990"}},
     "caller.date_of_birth: Input should be a valid date"),
    ({"tasks": [{"kind": "book", "service": "x", "prefer": {"day": "someday"}}]},
     "tasks[0].prefer.day: Input should be 'monday'"),
    ({"name": "Has Spaces"}, "name: String should match pattern"),
    ({"surprise": 1}, "surprise: Extra inputs are not permitted"),
])
def test_a_bad_persona_is_one_error_naming_the_key_and_what_is_wrong(tmp_path, change, message):
    path = write(tmp_path, {**VALID, **change})

    with pytest.raises(PersonaError) as error:
        load_persona(path)

    assert str(error.value).startswith(f"persona {path}: ")
    assert message in str(error.value)


def test_files_that_are_not_personas_say_so(tmp_path):
    with pytest.raises(PersonaError, match="is not valid YAML"):
        load_persona(write(tmp_path, "name: [unclosed"))
    with pytest.raises(PersonaError, match="must be a mapping"):
        load_persona(write(tmp_path, "- a list"))
    with pytest.raises(PersonaError, match="no such file or folder"):
        persona_files(tmp_path / "missing.yaml")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PersonaError, match="no persona files"):
        persona_files(empty)


def test_two_personas_with_one_name_in_a_folder_are_refused(tmp_path):
    write(tmp_path, VALID, "a.yaml")
    write(tmp_path, VALID, "b.yaml")

    with pytest.raises(PersonaError, match="two personas are named 'flu_shot'"):
        load_personas(tmp_path)


def test_the_shipped_personas_are_many_and_varied():
    personas = load_personas(PERSONAS)

    kinds = Counter(task.kind for persona in personas for task in persona.tasks)
    habits = Counter(habit for persona in personas for habit in persona.habits)
    outcomes = Counter(o for persona in personas for o in persona.expect.outcome)
    assert len(personas) >= 40
    assert set(kinds) == {"book", "reschedule", "cancel", "cancel_all", "upcoming", "price",
                          "hours", "emergency", "crisis", "callback", "person"}
    assert set(habits) == {"front_loads", "corrects_self", "vague", "interrupts",
                           "changes_mind", "spells_name", "dob_as_numbers", "rambling", "terse",
                           "over_answers", "hangs_up_early"}
    assert "nothing_written" in outcomes and "crisis_escalation" in outcomes
    assert sum(1 for p in personas if len(p.tasks) > 1) >= 4  # several things in one call
    assert sum(1 for p in personas if p.from_number == "+15550100202") >= 3  # shared phone
    assert sum(1 for p in personas if p.caller.new) >= 10


def test_every_shipped_persona_says_why_it_exists():
    for path in persona_files(PERSONAS):
        assert path.read_text().startswith("# "), f"{path.name} has no opening comment"


# --- Personas who answer the clinic's call ---------------------------------------------

OUTBOUND = PERSONAS / "outbound"
CALLEE = {
    "name": "reminded", "direction": "outbound", "to": "+15550100201",
    "caller": {"first_name": "Margaret", "last_name": "Chen", "date_of_birth": "1948-03-14"},
    "tasks": [{"kind": "confirm_reminder"}],
    "expect": {"outcome": "confirmed"},
}


def test_an_outbound_persona_is_called_on_its_own_number_from_the_clinics():
    persona = Persona.model_validate(CALLEE)

    assert persona.outbound and persona.goal.kind == "confirm_reminder"
    assert (persona.from_number, persona.to_number) == ("+15550100100", "+15550100201")
    assert persona.own_phone == "+15550100201"


@pytest.mark.parametrize(("change", "message"), [
    ({"direction": "inbound", "from": "+15550100201"},
     "confirm_reminder is a goal on a call the clinic places"),
    ({"tasks": [{"kind": "book", "service": "a flu shot"}], "expect": {"outcome": "booked"}},
     "an outbound persona's first task is their goal as the callee"),
    ({"tasks": [{"kind": "confirm_reminder"}, {"kind": "accept_offer"}],
      "expect": {"outcome": ["confirmed", "booked"]}}, "an outbound persona has one goal"),
    ({"tasks": [{"kind": "wrong_person"}, {"kind": "book", "service": "a flu shot"}],
      "expect": {"outcome": ["wrong_person", "booked"]}}, "wrong_person ends the call"),
    ({"expect": {"outcome": "booked"}}, "a confirm_reminder callee's outcome is confirmed"),
    ({"to": "+15550100100"}, "an outbound persona's `to` is their own number"),
    ({"direction": "sideways"}, "direction: Input should be 'inbound' or 'outbound'"),
])
def test_a_bad_outbound_persona_says_what_is_wrong(tmp_path, change, message):
    path = write(tmp_path, {**CALLEE, **change})

    with pytest.raises(PersonaError) as error:
        load_persona(path)

    assert message in str(error.value)


def test_the_shipped_outbound_personas_play_every_goal_on_demo_patients():
    personas = load_personas(OUTBOUND)

    goals = Counter(persona.goal.kind for persona in personas)
    assert set(goals) == {"take_callback", "accept_offer", "decline_offer", "confirm_reminder",
                          "cancel_reminder", "move_reminder", "opt_out", "wrong_person",
                          "checkin"}
    assert all(persona.outbound for persona in personas)
    people = demo_people()
    for persona in personas:
        facts = persona.caller
        on_file = people.get(persona.to_number, [])
        if persona.goal.kind == "wrong_person" or facts.new:
            # the number is on file for someone else, or for nobody: never for them
            assert (facts.first_name, facts.last_name) not in {
                (p["first_name"], p["last_name"]) for p in on_file}, persona.name
            continue
        assert {"first_name": facts.first_name, "last_name": facts.last_name,
                "date_of_birth": facts.date_of_birth.isoformat()} in [
            {k: p[k] for k in ("first_name", "last_name", "date_of_birth")} for p in on_file
        ], f"{persona.name}: no demo patient of that name and birth date on {persona.to_number}"


def test_every_shipped_outbound_persona_says_why_it_exists():
    for path in persona_files(OUTBOUND):
        assert path.read_text().startswith("# "), f"{path.name} has no opening comment"


def test_the_inbound_folder_holds_no_outbound_persona():
    assert not any(persona.outbound for persona in load_personas(PERSONAS))


def demo_people() -> dict[str, list[dict]]:
    """The demo clinic's patients by phone number (db/data/demo_people.yaml)."""
    data = yaml.safe_load((PERSONAS.parents[1] / "db" / "data" / "demo_people.yaml").read_text())
    people: dict[str, list[dict]] = {}
    for patient in data["patients"]:
        people.setdefault(patient["phone"], []).append(patient)
    return people
