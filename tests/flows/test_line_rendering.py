"""No spoken line is ever said with an empty slot.

Every line of prompts/actions.yaml, prompts/calendar.yaml, the director's lines and the
prompt files under prompts/ is rendered the way the agent renders it, with each value it
may be said without left empty (the optional fields) and every other value filled. A gap
left by an empty value shows as ", ." or "Thank you, ." or a space before punctuation
or a double space; none may appear.
"""

from __future__ import annotations

import re
import string

import pytest

from flows.clinic_calendar import FIELDS as CALENDAR_FIELDS
from flows.clinic_calendar import calendar_lines
from flows.engage_local import FIELDS, OPTIONAL_FIELDS, action_lines, fill
from lib.prompts import PROMPTS_DIR, render_prompt
from processors.conversation.director import director_lines

# A gap where a value should be: ", ." / "Thank you, ." / "with , please" / "about ?" /
# a double space / a slot never filled / a space at either end.
GAPS = re.compile(r",\s*[.,?!;:]|\s[.,?!;:]|\s{2,}|[{}$]|^\s|\s$|\.\.(?!\.)")

# The calendar's `for_reason` is said only for a closure with a reason.
CALENDAR_OPTIONAL = frozenset({"for_reason"})


def sample(field: str) -> str:
    return f"<{field}>"


def gaps(text: str) -> list[str]:
    return [match.group() for match in GAPS.finditer(text)]


def action_line_items() -> list[tuple[str, str]]:
    lines = action_lines()
    groups = {"actions": lines.actions, "rephrased": lines.rephrased,
              "next_steps": lines.next_steps, "lookups": lines.lookups,
              "outcomes": lines.outcomes, "clinic_numbers": lines.clinic_numbers}
    return [(f"{group}.{name}", line) for group, named in groups.items()
            for name, line in named.items()]


def fields_of(line: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(line) if field}


def renderings(line: str, fields: frozenset[str], optional: frozenset[str]
               ) -> list[tuple[str, dict[str, str]]]:
    """The line's values all given, then with each optional one it uses left empty, then
    with all of those empty."""
    used = fields_of(line) & optional
    full = {field: sample(field) for field in fields}
    cases = [("all given", full)]
    cases += [(f"no {field}", {**full, field: ""}) for field in sorted(used)]
    if len(used) > 1:
        cases.append(("none optional", {**full, **dict.fromkeys(used, "")}))
    return cases


@pytest.mark.parametrize(("name", "line"), action_line_items())
def test_an_action_line_has_no_gap_whatever_optional_value_is_missing(name, line):
    for case, values in renderings(line, FIELDS | {"clinic_number"}, OPTIONAL_FIELDS):
        said = fill(line, values)
        assert gaps(said) == [], f"{name} ({case}): {said!r}"


def test_a_callback_to_a_number_with_no_record_thanks_them_without_a_name():
    line = action_lines().actions["say_why_calling_back"]

    said = fill(line, {"name": "", "call_reason": "a question about parking"})

    assert said == ("Thank you. You asked us to call you back about a question about "
                    "parking. How can I help?")


def calendar_line_items() -> list[tuple[str, str]]:
    lines = calendar_lines()
    return ([(f"after_hours.{k}", v) for k, v in lines.after_hours.items()]
            + [(f"answers.{k}", v) for k, v in lines.answers.items()])


@pytest.mark.parametrize(("name", "line"), calendar_line_items())
def test_a_calendar_line_has_no_gap_without_a_closure_reason(name, line):
    for case, values in renderings(line, CALENDAR_FIELDS, CALENDAR_OPTIONAL):
        said = line.format(**values)
        assert gaps(said) == [], f"{name} ({case}): {said!r}"


@pytest.mark.parametrize("name", sorted(director_lines().time_limit))
def test_a_time_limit_line_has_no_gap(name):
    said = director_lines().time_limit[name].format(call_time=sample("call_time"))
    assert gaps(said) == [], f"{name}: {said!r}"


def spoken_prompt_files() -> list[str]:
    """The prompt files said to callers (`.txt`; model guidance starts with a tag)."""
    return sorted(path.relative_to(PROMPTS_DIR).as_posix()
                  for path in PROMPTS_DIR.rglob("*.txt")
                  if not path.read_text(encoding="utf-8").startswith("["))


@pytest.mark.parametrize("name", spoken_prompt_files())
def test_a_spoken_prompt_file_has_no_gap(name):
    template = string.Template((PROMPTS_DIR / name).read_text(encoding="utf-8").strip())
    values = {field: sample(field) for field in template.get_identifiers()}
    said = render_prompt(name, **values)
    assert gaps(said) == [], f"{name}: {said!r}"


def test_the_gap_check_sees_the_gaps_it_is_for():
    assert gaps("Thank you, . You asked us to call you back") == [", ."]
    assert gaps("May I speak with , please?") == [" ,"]
    assert gaps("about  parking") == ["  "]
    assert gaps("Thank you. You asked us to call you back about parking.") == []


def test_every_action_field_is_known_to_the_renderer():
    used = {field for _, line in action_line_items() for field in fields_of(line)}
    assert used <= FIELDS | {"clinic_number"}
    assert OPTIONAL_FIELDS <= FIELDS
