"""Persona files: validated at load with errors a person can act on; the shipped ones vary."""

from collections import Counter
from pathlib import Path

import pytest
import yaml

from simulator.personas.model import PersonaError, load_persona, load_personas, persona_files

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
