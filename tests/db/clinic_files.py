"""A small clinic file the clinic-file tests edit, and helpers to find a line in it."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from db.clinic.file import ClinicFileInvalid, Problem, parse_clinic_text

ROOT = Path(__file__).resolve().parents[2]

# Two locations, two people, two types, two schedules, one closure. Numbers are in the
# 555-01xx range reserved for fiction.
SMALL_CLINIC = """\
version: 1
clinic:
  name: Test Clinic
  phone_numbers: ["+15550100170"]
locations:
  - name: Main
    timezone: America/New_York
    address: 1 Main Street
    opening_hours:
      mon: ["08:00", "17:00"]
      tue: ["08:00", "17:00"]
      sat: ["09:00", "12:00"]
  - name: Annex
    timezone: America/New_York
    address: 2 Side Street
    opening_hours: {mon: ["08:00", "18:00"], wed: ["08:00", "18:00"]}
practitioners:
  - {name: Dr. Ada Stone, title: Family physician, years_experience: 9}
  - {name: Cy Bell, title: Registered nurse}
appointment_types:
  - {name: Checkup, duration_min: 30, price_cents: 9000, description: A yearly checkup.}
  - {name: Flu shot, duration_min: 15, price_cents: 2500, description: This season's vaccine.}
schedules:
  - practitioner: Dr. Ada Stone
    location: Main
    days: [mon, tue]
    blocks: [["09:00", "12:00"], ["13:00", "17:00"]]
    offers: [Checkup]
  - practitioner: Cy Bell
    location: Annex
    days: [mon, wed]
    blocks: [["08:00", "12:00"]]
    offers: [Flu shot]
closures:
  - {from: 2026-12-25, reason: Christmas Day}
"""


def edited(text: str, *changes: tuple[str, str]) -> str:
    """`text` with each (old, new) replaced once; an old text missing is a test bug."""
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def line_with(text: str, fragment: str, occurrence: int = 1) -> int:
    """The line number (1-based) of the `occurrence`-th line holding `fragment`."""
    found = [number for number, line in enumerate(text.splitlines(), 1) if fragment in line]
    assert len(found) >= occurrence, fragment
    return found[occurrence - 1]


def problems_in(text: str) -> list[Problem]:
    try:
        parse_clinic_text(text, "clinic.yaml")
    except ClinicFileInvalid as invalid:
        return invalid.problems
    return []


def said(problems: list[Problem]) -> list[tuple[int | None, str]]:
    return [(problem.line, problem.message) for problem in problems]


def new_number() -> str:
    """A fictional (555) number no other test uses, as the other tests make theirs."""
    return f"+1555{uuid.uuid4().int % 10**7:07d}"


def with_numbers(text: str, name: str) -> str:
    """`text` with its clinic named `name` and each of its numbers made unique."""
    text = re.sub(r"(?m)^  name: .*$", f"  name: {name}", text, count=1)
    return re.sub(r'"\+1555\d{7}"', lambda _: f'"{new_number()}"', text)
