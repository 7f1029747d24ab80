"""The ambient channel: what the engage LLM always has.

Built from what the call already loaded (the caller's chart, their upcoming bookings,
the clinic's locations and services), so building it costs no query. Budgeted: each
list keeps its first few items and says how many more there are, and if the whole
still runs over the budget the least needed sections go first (allergies and who the
caller is never do). An unidentified caller gets the clinic's context only: nobody
else's record is ever in the prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from flows.clinic_calendar import calendar_context
from flows.graph_session import GraphSession
from flows.same_day import left_for_team, recaps
from language.spoken import say_date, say_hours, say_list, say_time
from processors.world.write_safety import SELF_REFERENCE

AMBIENT_BUDGET_CHARS = 2000
LIST_ITEMS = 5
MEMORY_CHARS = 160  # one memory, at most, in the prompt


def _capped(items: Sequence[str]) -> str:
    shown = list(items[:LIST_ITEMS])
    if len(items) > LIST_ITEMS:
        shown.append(f"{len(items) - LIST_ITEMS} more")
    return "; ".join(shown)


def patient_sections(session: GraphSession) -> list[tuple[str, str]]:
    """(section name, text) for the identified caller, most needed first."""
    chart = session.chart
    if session.patient is None or chart is None or chart.patient.id != session.patient.id:
        return []
    record = chart.patient
    who = [f"{record.full_name} ({SELF_REFERENCE}), born {record.date_of_birth.isoformat()}"]
    who += [f"{label} {value}" for label, value in (
        ("MRN", record.mrn), ("phone", record.phone), ("email", record.email),
        ("address", record.address)) if value]
    sections = [("caller", "The caller: " + ", ".join(who) + ".")]
    if chart.allergies:
        sections.append(("allergies", "Allergies: " + _capped([
            f"{a.substance}" + (f" ({a.reaction}, {a.severity})" if a.reaction else "")
            for a in chart.allergies]) + "."))
    if session.upcoming:
        sections.append(("appointments", "Upcoming appointments: " + _capped([
            f"{ref}: {a.type_name} with {a.practitioner_name} at {a.location_name}, "
            f"{say_time(a.local_start)}" for ref, a in session.appointment_refs.items()]) + "."))
    elif session.upcoming is not None:
        sections.append(("appointments", "Upcoming appointments: none."))
    earlier = recaps(session)
    if earlier:
        left = left_for_team(session)
        sections.append(("earlier_today", "Earlier today the caller " + say_list(earlier) + "."
                         + (" Still with the team: " + _capped(left) + "." if left else "")))
    if session.told_before:
        sections.append(("memories", "What the caller told us on earlier calls (their "
                         "words; the kind, the day last said): " + _capped([
                             f'"{m.text[:MEMORY_CHARS]}" ({m.kind}, '
                             f"{say_date(m.reinforced_at.date())})"
                             for m in session.told_before]) + "."))
    if chart.medications:
        sections.append(("medications", "Medications: " + _capped([
            " ".join(part for part in (m.name, m.dose, m.frequency) if part)
            for m in chart.medications]) + "."))
    if chart.conditions:
        sections.append(("conditions", "Active conditions: " + _capped(
            [c.name for c in chart.conditions]) + "."))
    if chart.coverages:
        sections.append(("insurance", "Insurance: " + _capped([
            f"{c.carrier_name}" + (f" {c.plan_name}" if c.plan_name else "")
            + f", member id {c.member_id}"
            + (f", holder {c.subscriber_name} ({c.relationship})" if c.subscriber_name else "")
            + ("" if c.confidence == "verified" else " (not yet verified)")
            for c in chart.coverages]) + "."))
    return sections


def clinic_sections(session: GraphSession, dialled: str | None,
                    now: datetime | None = None) -> list[tuple[str, str]]:
    """The location the caller dialled (else every location), its hours, whether it is
    open now (else its next opening) and its closures of the coming days, what it offers."""
    here = [loc for loc in session.locations if dialled and loc.phone_number == dialled]
    places = here or session.locations
    sections = []
    if places:
        sections.append(("locations", ("Called location: " if here else "Locations: ") + _capped([
            f"{loc.name}, {loc.address}, open {say_hours(loc.opening_hours)}"
            for loc in places]) + "."))
        sections.append(("calendar", calendar_context(
            session.locations, session.closures, now or datetime.now(UTC), dialled=dialled)))
    if session.services:
        sections.append(("services", "Appointment types: " + say_list([
            f"{t.name} ({t.duration_min} min)" for t in session.services]) + "."))
    return sections


# Dropped first when over budget (the caller, allergies and appointments never are).
DROP_ORDER = ("services", "locations", "memories", "conditions", "insurance", "medications",
              "calendar", "earlier_today")


def ambient_context(session: GraphSession, *, dialled: str | None = None,
                    budget: int = AMBIENT_BUDGET_CHARS, now: datetime | None = None) -> str:
    """The patient and clinic context block for the system prompt (within `budget`), as
    it stands at `now` (default: this moment)."""
    sections = patient_sections(session) + clinic_sections(session, dialled, now)
    for name in DROP_ORDER:
        if _length(sections) <= budget:
            break
        sections = [s for s in sections if s[0] != name]
    text = "\n".join(body for _, body in sections)
    if not text:
        return ""
    header = ("Patient and clinic context (from the clinic's records; use it, never read it "
              "out unasked):")
    return f"{header}\n{text}"  # over budget only by sections never dropped


def _length(sections: list[tuple[str, str]]) -> int:
    return sum(len(body) + 1 for _, body in sections)
