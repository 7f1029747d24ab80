"""The clinic file read and checked as a clinic's operator writes it: every problem at
once, each on its line with a plain reason; a valid file written back reads the same."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from db.clinic.file import (
    ClinicFile,
    ClinicFileInvalid,
    dump_clinic_yaml,
    parse_clinic_data,
    parse_clinic_text,
)
from db.clinic.problems import MAX_PROBLEMS
from db.seed import CLINIC_FILE, DEMO_CLINIC, DEMO_NUMBER, load_demo_clinic
from tests.db.clinic_files import (
    ROOT,
    SMALL_CLINIC,
    edited,
    line_with,
    problems_in,
    said,
)

EXAMPLE = ROOT / "docs" / "examples" / "clinic.yaml"


def readme_example() -> str:
    """The YAML block of README.md's "Your clinic" section."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Your clinic"):]
    return re.search(r"```yaml\n(.*?)```", section, re.DOTALL)[1]


# --- Valid files -----------------------------------------------------------------------


def test_the_readme_example_is_the_shipped_example_and_it_reads():
    assert readme_example() == EXAMPLE.read_text()
    clinic = parse_clinic_text(EXAMPLE.read_text(), str(EXAMPLE))
    assert clinic.clinic.name == "Lakeview Family Practice"
    assert clinic.locations[0].timezone == "America/Denver"
    assert [c.reason for c in clinic.closures] == ["the winter holidays"]


def test_the_demo_clinic_is_a_clinic_file():
    clinic = load_demo_clinic()
    assert clinic.clinic.name == DEMO_CLINIC
    assert clinic.clinic.phone_numbers == [DEMO_NUMBER]
    assert clinic.clinic.greeting is None  # the default greeting stays
    assert DEMO_CLINIC in clinic.clinic.keyterms
    assert len(clinic.schedules) == 10 and len(clinic.practitioners) == 10
    assert parse_clinic_text(CLINIC_FILE.read_text()) == clinic


@pytest.mark.parametrize("source", [SMALL_CLINIC, EXAMPLE.read_text(), CLINIC_FILE.read_text()])
def test_a_file_written_back_reads_as_the_same_clinic(source):
    clinic = parse_clinic_text(source)
    written = dump_clinic_yaml(clinic)
    assert parse_clinic_text(written) == clinic
    sections = [line.split(":")[0] for line in written.splitlines() if re.match(r"^[a-z_]+:", line)]
    assert sections == ["version", "clinic", "locations", "practitioners", "appointment_types",
                        "schedules", "closures"]


@pytest.mark.parametrize("indent", [None, 2, "\t"])
def test_json_reads_like_yaml(indent):
    data = yaml.safe_load(SMALL_CLINIC)
    text = json.dumps(data, default=str, indent=indent)
    assert parse_clinic_text(text) == parse_clinic_text(SMALL_CLINIC)
    assert parse_clinic_data(data) == parse_clinic_text(SMALL_CLINIC)


def test_a_problem_in_json_names_its_line():
    data = yaml.safe_load(edited(SMALL_CLINIC, ("timezone: America/New_York", "timezone: Mars")))
    text = json.dumps(data, default=str, indent=2)
    assert said(problems_in(text)) == [(line_with(text, '"Mars"'), ("unknown timezone 'Mars' "
                                        "(a name from the tz database, e.g. America/Chicago)"))]


def test_defaults_and_what_yaml_would_otherwise_misread():
    text = edited(SMALL_CLINIC,
                  ('phone_numbers: ["+15550100170"]', "phone_numbers: [+1 555 010-0171]"),
                  ('blocks: [["09:00", "12:00"], ["13:00", "17:00"]]',
                   "blocks: [[9:00, 12:00], [13:00, 17:00]]"),
                  ("days: [mon, wed]", "days: [Monday, WED]"))
    clinic = parse_clinic_text(text)
    assert clinic.clinic.phone_numbers == ["+15550100171"]
    assert [(str(a), str(b)) for a, b in clinic.schedules[0].blocks] == [
        ("09:00:00", "12:00:00"), ("13:00:00", "17:00:00")]
    assert clinic.schedules[1].days == ["mon", "wed"]
    assert clinic.appointment_types[0].currency == "USD"
    assert clinic.closures[0].last_day == clinic.closures[0].from_


# --- Each problem, on its line ------------------------------------------------------------


def test_a_yaml_syntax_error_names_its_line():
    text = edited(SMALL_CLINIC, ("address: 2 Side Street", "address: [2 Side Street"))
    [problem] = problems_in(text)
    assert problem.line == line_with(text, "[2 Side Street") + 1
    assert problem.message.startswith("not valid YAML")



def test_a_character_yaml_never_allows_names_its_line():
    text = edited(SMALL_CLINIC, ("address: 2 Side Street", "address: 2 Side\x90Street"))
    [problem] = problems_in(text)
    assert problem.line == line_with(text, "Side\x90Street")
    assert problem.message == "not valid YAML: the character U+0090 is not allowed"


def test_data_with_a_nul_character_is_refused_where_it_is():
    data = parse_clinic_text(SMALL_CLINIC).as_data()
    data["clinic"]["name"] = "Side\x00Street Clinic"
    data["locations"][0]["address"] = "2 Side\x00Street"
    with pytest.raises(ClinicFileInvalid) as refused:
        parse_clinic_data(data)
    assert [(p.path, p.message) for p in refused.value.problems] == [
        (path, "a NUL character (\\x00) cannot be stored: remove it")
        for path in ("clinic.name", "locations[0].address")]

@pytest.mark.parametrize(("old", "new", "reason"), [
    ("version: 1", "version: 2", "version 2 is not supported: this service reads version 1"),
    ("version: 1", "version: one", "'version' should be a whole number, not 'one'"),
])
def test_a_wrong_version(old, new, reason):
    text = edited(SMALL_CLINIC, (old, new))
    assert said(problems_in(text)) == [(1, reason)]


def test_a_file_without_a_version_says_how_it_starts():
    text = SMALL_CLINIC.replace("version: 1\n", "")
    assert said(problems_in(text)) == [(1, "the file must start with `version: 1`")]


@pytest.mark.parametrize(("old", "new", "fragment", "reason"), [
    ("practitioners:", "practicioners:", "practicioners:",
     "unknown field 'practicioners': did you mean 'practitioners'?"),
    ("address: 2 Side Street", "adress: 2 Side Street", "adress:",
     "unknown field 'adress': did you mean 'address'?"),
    ('{mon: ["08:00", "18:00"], wed:', '{mon: ["08:00", "18:00"], wend:', "wend:",
     "unknown field 'wend': did you mean 'wed'?"),
    ("title: Registered nurse}", "title: Registered nurse, rank: 3}", "rank: 3",
     "unknown field 'rank' (known: name, title, years_experience)"),
])
def test_an_unknown_field_is_a_typo_reported_with_its_line(old, new, fragment, reason):
    text = edited(SMALL_CLINIC, (old, new))
    problems = said(problems_in(text))
    assert (line_with(text, fragment), reason) in problems


@pytest.mark.parametrize(("old", "new", "reason"), [
    ("locations:\n", "locations: []\nformer_locations:\n", "'locations' should list at least one"),
    ("locations:\n", "locations:\nformer_locations:\n", "'locations' should list at least one"),
])
def test_a_clinic_has_at_least_one_location(old, new, reason):
    text = edited(SMALL_CLINIC, (old, new))
    assert (line_with(text, "locations:"), reason) in said(problems_in(text))


def test_a_missing_field_names_the_entry_it_is_missing_from():
    text = edited(SMALL_CLINIC, ("    timezone: America/New_York\n    address: 2 Side Street\n",
                                 "    address: 2 Side Street\n"))
    assert said(problems_in(text)) == [
        (line_with(text, "name: Annex"), "location 2 is missing 'timezone'")]


@pytest.mark.parametrize(("old", "new", "fragment", "reason"), [
    ("duration_min: 30", "duration_min: thirty", "thirty",
     "'duration_min' should be a whole number, not 'thirty'"),
    ("price_cents: 2500", "price_cents: -5", "-5",
     "'price_cents' should be greater than or equal to 0, not -5"),
    ("years_experience: 9", "years_experience: [9]", "[9]",
     "'years_experience' should be a whole number, not [9]"),
    ("address: 1 Main Street", "address: {street: Main}", "street: Main",
     "'address' should be text, not {'street': 'Main'} (put it in quotes)"),
    ("price_cents: 9000,", "price_cents: 9000, currency: dollars,", "dollars",
     "'currency' should be a three-letter currency code like USD, not 'dollars'"),
    ('mon: ["08:00", "17:00"]', 'mon: ["8 am", "17:00"]', "8 am",
     "'8 am' is not a time: write it like \"09:00\" or \"17:30\""),
    ('mon: ["08:00", "17:00"]', 'mon: ["08:00"]', 'mon: ["08:00"]',
     "['08:00'] is not a pair of times: write [\"09:00\", \"12:00\"]"),
    ("{from: 2026-12-25,", "{from: 25/12/2026,", "25/12/2026",
     "'25/12/2026' is not a date: write it like \"2026-12-25\""),
    ("offers: [Flu shot]", "offers: []", "offers: []", "'offers' should list at least one"),
])
def test_a_value_of_the_wrong_kind(old, new, fragment, reason):
    text = edited(SMALL_CLINIC, (old, new))
    assert said(problems_in(text)) == [(line_with(text, fragment), reason)]


@pytest.mark.parametrize(("zone", "hint"), [
    ("America/New_Yrok", ": did you mean 'America/New_York'?"),
    ("Mars/Olympus_Mons", ""),
    ("../../etc/passwd", ""),
])
def test_a_timezone_that_does_not_exist(zone, hint):
    text = edited(SMALL_CLINIC, ("timezone: America/New_York", f"timezone: {zone}"))
    assert said(problems_in(text)) == [(
        line_with(text, zone),
        f"unknown timezone '{zone}'{hint} (a name from the tz database, e.g. America/Chicago)")]


@pytest.mark.parametrize(("old", "new", "fragment", "reason"), [
    ("practitioner: Cy Bell", "practitioner: Cy Bel", "practitioner: Cy Bel",
     "unknown practitioner 'Cy Bel': did you mean 'Cy Bell'?"),
    ("practitioner: Cy Bell", "practitioner: Dr. Who", "Dr. Who", "unknown practitioner 'Dr. Who'"),
    ("location: Annex", "location: annex", "annex",
     "unknown location 'annex': did you mean 'Annex'?"),
    ("offers: [Checkup]", "offers: [Checkup, Massage]", "Massage",
     "unknown appointment type 'Massage'"),
    ("reason: Christmas Day}", "reason: Christmas Day, location: Uptown}", "Uptown",
     "unknown location 'Uptown'"),
])
def test_a_schedule_or_closure_naming_what_the_file_does_not_have(old, new, fragment, reason):
    text = edited(SMALL_CLINIC, (old, new))
    assert said(problems_in(text)) == [(line_with(text, fragment), reason)]


def test_a_reference_to_a_broken_entry_is_not_also_unknown():
    text = edited(SMALL_CLINIC, ("{name: Cy Bell, title: Registered nurse}",
                                 "{name: Cy Bell, title: Registered nurse, years_experience: x}"))
    assert said(problems_in(text)) == [
        (line_with(text, "name: Cy Bell"), "'years_experience' should be a whole number, not 'x'")]


@pytest.mark.parametrize(("old", "new", "first", "second", "reason"), [
    ("{name: Cy Bell,", "{name: dr. ada stone,", "Dr. Ada Stone,", "dr. ada stone",
     "a second practitioner named 'dr. ada stone'"),
    ("- name: Annex", "- name: Main", "- name: Main", "- name: Main\n",
     "a second location named 'Main'"),
    ("{name: Flu shot,", "{name: Checkup,", "{name: Checkup", "{name: Checkup,\n",
     "a second appointment type named 'Checkup'"),
])
def test_two_entries_with_one_name(old, new, first, second, reason):
    text = edited(SMALL_CLINIC, (old, new))
    first_line = line_with(text, first)
    second_line = line_with(text, second.rstrip("\n"), 1 if second == second.rstrip() else 2)
    problems = said(problems_in(text))
    assert (second_line, f"{reason} (the first is at line {first_line})") in problems


@pytest.mark.parametrize(("extra", "reasons"), [
    # another block of the same schedule, across the lunch break: it overlaps both
    ('[["09:00", "12:00"], ["11:30", "14:00"], ["13:00", "17:00"]]', [
        ("Dr. Ada Stone's block 11:30–14:00 at Main overlaps their block 09:00–12:00 at Main "
        "(line 27) on mon, tue"),
        ("Dr. Ada Stone's block 13:00–17:00 at Main overlaps their block 11:30–14:00 at Main "
        "(line 27) on mon, tue")]),
    # a block inside another
    ('[["09:00", "12:00"], ["13:00", "17:00"], ["14:00", "15:00"]]', [
        ("Dr. Ada Stone's block 14:00–15:00 at Main overlaps their block 13:00–17:00 at Main "
        "(line 27) on mon, tue")]),
])
def test_overlapping_blocks_in_one_schedule(extra, reasons):
    text = edited(SMALL_CLINIC, ('[["09:00", "12:00"], ["13:00", "17:00"]]', extra))
    assert line_with(text, 'blocks: [["09:00"') == 27
    assert said(problems_in(text)) == [(27, reason) for reason in reasons]


def test_overlapping_blocks_at_two_locations_on_a_shared_day():
    text = edited(SMALL_CLINIC, ("practitioner: Cy Bell", "practitioner: Dr. Ada Stone"))
    assert said(problems_in(text)) == [(
        line_with(text, 'blocks: [["08:00", "12:00"]]'),
        ("Dr. Ada Stone's block 08:00–12:00 at Annex overlaps their block 09:00–12:00 at Main "
        "(line 27) on mon"))]


def test_blocks_that_only_touch_or_apply_in_other_periods_do_not_overlap():
    touching = edited(SMALL_CLINIC, ('[["09:00", "12:00"], ["13:00", "17:00"]]',
                                     '[["09:00", "12:00"], ["12:00", "17:00"]]'))
    periods = edited(SMALL_CLINIC, ("practitioner: Cy Bell", "practitioner: Dr. Ada Stone"),
                     ("offers: [Flu shot]", "offers: [Flu shot]\n    valid_from: 2030-01-01"),
                     ("offers: [Checkup]", "offers: [Checkup]\n    valid_until: 2029-12-31"))
    assert problems_in(touching) == []
    assert problems_in(periods) == []


@pytest.mark.parametrize(("block", "reason"), [
    ('["12:00", "09:00"]', "the block 12:00–09:00 ends before it starts"),
    ('["09:00", "09:00"]', "the block 09:00–09:00 ends when it starts"),
])
def test_a_block_that_ends_before_it_starts(block, reason):
    text = edited(SMALL_CLINIC, ('[["09:00", "12:00"], ["13:00", "17:00"]]', f"[{block}]"))
    assert said(problems_in(text)) == [(line_with(text, block), reason)]


@pytest.mark.parametrize(("old", "new", "reason"), [
    ('[["09:00", "12:00"], ["13:00", "17:00"]]', '[["07:30", "12:00"]]',
     ("the block 07:30–12:00 is outside Main's opening hours on mon (open 08:00–17:00), "
     "tue (open 08:00–17:00)")),
    ("days: [mon, tue]", "days: [mon, tue, wed]",
     "the block 09:00–12:00 is outside Main's opening hours on wed (closed)"),
    ('[["08:00", "12:00"]]', '[["15:00", "18:30"]]',
     ("the block 15:00–18:30 is outside Annex's opening hours on mon (open 08:00–18:00), "
     "wed (open 08:00–18:00)")),
])
def test_a_schedule_outside_the_locations_opening_hours(old, new, reason):
    text = edited(SMALL_CLINIC, (old, new))
    assert reason in [message for _, message in said(problems_in(text))]


def test_opening_hours_that_close_before_they_open():
    text = edited(SMALL_CLINIC, ('sat: ["09:00", "12:00"]', 'sat: ["12:00", "09:00"]'))
    assert said(problems_in(text)) == [
        (line_with(text, "sat:"), "Main closes at 09:00 on sat, before it opens at 12:00")]


@pytest.mark.parametrize("day", ["tues", "Funday", "Sat."])
def test_a_bad_day_name(day):
    text = edited(SMALL_CLINIC, ("days: [mon, wed]", f"days: [mon, {day}]"))
    assert said(problems_in(text)) == [
        (line_with(text, day), f"'{day}' is not a day: use mon, tue, wed, thu, fri, sat or sun")]


def test_a_day_listed_twice():
    text = edited(SMALL_CLINIC, ("days: [mon, wed]", "days: [mon, wed, Monday]"))
    assert said(problems_in(text)) == [(line_with(text, "Monday"), "'mon' is listed twice")]


@pytest.mark.parametrize("number", ["555-0100", "+1 555 CALL NOW", "+0123456789", "15550100170"])
def test_an_invalid_phone_number(number):
    text = edited(SMALL_CLINIC, ('"+15550100170"', f'"{number}"'))
    [(line, message)] = said(problems_in(text))
    assert line == 4
    assert message.startswith(f"'{number}' is not a phone number in international form")


def test_a_number_listed_twice_or_also_a_transfer_number():
    text = edited(SMALL_CLINIC,
                  ('["+15550100170"]', '["+15550100170", "+15550100172", "+15550100170"]'),
                  ("address: 1 Main Street",
                   'address: 1 Main Street\n    phone_number: "+15550100172"'))
    assert said(problems_in(text)) == [
        (4, "+15550100170 is listed twice"),
        (line_with(text, 'phone_number: "+15550100172"'),
         ("+15550100172 is one of the clinic's own numbers: a transfer there would ring this "
         "agent again"))]


def test_a_closure_that_ends_before_it_starts():
    text = edited(SMALL_CLINIC, ("{from: 2026-12-25,", "{from: 2026-12-25, to: 2026-12-24,"))
    assert said(problems_in(text)) == [
        (line_with(text, "to: 2026-12-24"),
         "the closure ends on 2026-12-24, before it starts on 2026-12-25")]


# --- All at once, bounded, safe -----------------------------------------------------------


def test_every_problem_is_reported_at_once_in_file_order():
    text = edited(SMALL_CLINIC,
                  ("timezone: America/New_York", "timezone: Europe/Nowhere"),
                  ("title: Registered nurse}", "title: Registered nurse, grade: 2}"),
                  ("duration_min: 15", "duration_min: 0"),
                  ("practitioner: Dr. Ada Stone", "practitioner: Dr. Ada Ston"),
                  ("days: [mon, wed]", "days: [mon, wednesday, thurs]"),
                  ("{from: 2026-12-25,", "{from: 2026-12-25, to: 2026-01-01,"))
    problems = problems_in(text)
    lines = [problem.line for problem in problems]
    assert lines == sorted(lines) and len(problems) == 6
    assert [p.path for p in problems] == [
        "locations[0].timezone", "practitioners[1].grade", "appointment_types[1].duration_min",
        "schedules[0].practitioner", "schedules[1].days[2]", "closures[0].to"]
    with pytest.raises(ClinicFileInvalid) as raised:
        parse_clinic_text(text, "clinic.yaml")
    assert raised.value.problems[0].format("clinic.yaml").startswith(
        f"clinic.yaml:{line_with(text, 'Europe/Nowhere')}: unknown timezone")


def test_problems_are_bounded_and_values_echoed_short():
    people = "".join(f"  - {{name: P{i}, title: Nurse, years_experience: x}}\n"
                     for i in range(MAX_PROBLEMS + 50))
    text = edited(SMALL_CLINIC, ("  - {name: Dr. Ada Stone", people + "  - {name: Dr. Ada Stone"))
    problems = problems_in(text)
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[-1].message == "and 50 more problems (fix these first)"
    long = edited(SMALL_CLINIC, ("duration_min: 30", f"duration_min: {'z' * 5000}"))
    [problem] = problems_in(long)
    assert len(problem.message) < 120


def test_aliases_and_keys_given_twice_are_refused():
    aliases = edited(SMALL_CLINIC, ("address: 1 Main Street", "address: &street 1 Main Street"),
                     ("address: 2 Side Street", "address: *street"))
    twice = edited(SMALL_CLINIC, ("    address: 2 Side Street\n",
                                  "    address: 2 Side Street\n    address: 3 Side Street\n"))
    assert said(problems_in(aliases)) == [(
        line_with(aliases, "*street"),
        "anchors and aliases (&name, *name) are not supported: write the value out")]
    assert said(problems_in(twice)) == [
        (line_with(twice, "3 Side Street"), "'address' is given twice (also line 15)")]


@pytest.mark.parametrize("text", ["", "just words", "- a list\n- of things\n",
                                  "---\na: 1\n---\nb: 2\n"])
def test_text_that_is_not_a_clinic_file(text):
    problems = problems_in(text)
    assert len(problems) >= 1 and all(p.line for p in problems)


def test_data_without_text_has_paths_but_no_lines():
    data = yaml.safe_load(edited(SMALL_CLINIC, ("location: Annex", "location: Attic")))
    with pytest.raises(ClinicFileInvalid) as raised:
        parse_clinic_data(data)
    [problem] = raised.value.problems
    assert (problem.path, problem.line) == ("schedules[1].location", None)
    assert problem.format("body") == "body: schedules[1].location: unknown location 'Attic'"


def test_a_read_file_knows_its_lines():
    clinic = parse_clinic_text(SMALL_CLINIC)
    assert clinic.line_of(("schedules", 1, "offers", 0)) == line_with(SMALL_CLINIC, "[Flu shot]")
    assert isinstance(clinic, ClinicFile) and clinic == parse_clinic_data(
        yaml.safe_load(SMALL_CLINIC))


# --- Video visits and deposits --------------------------------------------------------


def with_video(settings: str, *changes: tuple[str, str]) -> str:
    return edited(SMALL_CLINIC, ('  phone_numbers: ["+15550100170"]\n',
                                 f'  phone_numbers: ["+15550100170"]\n  video_visits: {settings}\n'),
                  *changes)


def test_a_clinics_video_visits_and_a_types_deposit_read_and_write_back():
    text = with_video('{provider: link, link: "https://meet.example.org/c/{room}?d={date}"}',
                      ("description: A yearly checkup.}",
                       "description: A yearly checkup., deposit_cents: 1500}"),
                      ("description: This season's vaccine.}",
                       "description: This season's vaccine., video: true}"))
    clinic = parse_clinic_text(text)
    assert clinic.clinic.video_visits.provider == "link"
    assert [(t.deposit_cents, t.video) for t in clinic.appointment_types] == [
        (1500, None), (None, True)]
    assert parse_clinic_text(dump_clinic_yaml(clinic)) == clinic
    assert parse_clinic_text(with_video("{provider: daily}")).clinic.video_visits.link is None


@pytest.mark.parametrize(("settings", "reason"), [
    ("{provider: link}", "needs the clinic's video address"),
    ('{provider: link, link: "http://meet.example.org/{room}"}', "must be an https:// address"),
    ('{provider: link, link: "https://{room}.example.org/"}', "host cannot hold a placeholder"),
    ('{provider: link, link: "https://meet.example.org/{patient}"}',
     "unknown placeholder {patient}"),
    ('{provider: daily, link: "https://meet.example.org/{room}"}', 'only for provider "link"'),
    ("{provider: zoom}", "'link'"),
])
def test_a_video_link_that_could_send_a_patient_astray_is_refused_at_load(settings, reason):
    text = with_video(settings)
    [(line, message)] = said(problems_in(text))
    assert line == line_with(text, "video_visits") and reason in message


def test_a_deposit_is_a_positive_amount():
    text = edited(SMALL_CLINIC, ("description: A yearly checkup.}",
                                 "description: A yearly checkup., deposit_cents: 0}"))
    [(_, message)] = said(problems_in(text))
    assert "deposit_cents" in message
