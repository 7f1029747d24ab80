"""The shipped outbound personas answer the clinic's own calls, played by the rules
against the engine offline (the deterministic navigator, the real tools over the
embedded database, the spoken lines of prompts/actions.yaml), and each call is judged
from what it recorded as the persona judge judges a call record: the goal's outcome,
the writes after an explicit yes, the right-person check before any word of care, and
the task closed as the goal ended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from db import scheduling as sched
from db.seed import seed_check_in_line
from simulator.personas.caller import RuleCaller
from simulator.personas.judge import Verdict, judge
from simulator.personas.model import Persona, load_persona
from tests.flows.callers import Callee, call_to
from tests.flows.test_outbound_calls import offer_to, opened_slot

OUTBOUND = Path(__file__).resolve().parents[2] / "scenarios" / "personas" / "outbound"
MAX_LINES = 30


async def patient(db, clinic, persona: Persona, first_name: str | None = None) -> sched.Patient:
    """The demo patient the clinic calls on the persona's number (by first name)."""
    wanted = first_name or persona.caller.first_name
    found = await sched.patients_by_phone(db.pool, clinic[0], persona.to_number)
    return next(p for p in found if p.first_name == wanted)


async def reminder_to(db, clinic, persona: Persona, first_name: str | None = None) -> Callee:
    """A reminder of the patient's first upcoming appointment (of the persona's type)."""
    person = await patient(db, clinic, persona, first_name)
    upcoming = await sched.upcoming_appointments(db.pool, person.id,
                                                 sched.datetime.now().astimezone())
    wanted = persona.goal.type if persona.goal.type else None
    appointment = next(a for a in upcoming if wanted in (None, a.type_name))
    return await call_to(db, clinic, persona.to_number, kind="reminder", patient_id=person.id,
                         reason="appointment reminder", goal="confirm, cancel or move it",
                         appointment_id=appointment.id)


async def callback_to(db, clinic, persona: Persona, first_name: str | None = None) -> Callee:
    person = await patient(db, clinic, persona, first_name)
    return await call_to(db, clinic, persona.to_number, kind="callback", patient_id=person.id,
                         reason="your blood test results")


async def set_up(name: str, db, clinic, persona: Persona) -> Callee:
    """The clinic's call each shipped persona answers, as its task would be made."""
    if name in ("callback_then_flu_shot", "callback_just_thanks", "opt_out_at_once"):
        return await callback_to(db, clinic, persona)
    if name == "callback_to_a_number":
        return await call_to(db, clinic, persona.to_number, kind="callback", patient_id=None,
                             reason="a question about parking")
    if name in ("wrong_number", "wrong_number_moved_away"):
        return await callback_to(db, clinic, persona, first_name="Eleanor")
    if name in ("reminder_confirms", "reminder_cancels", "reminder_moves",
                "opt_out_after_the_reminder"):
        return await reminder_to(db, clinic, persona)
    if name == "checkin_chat":
        await seed_check_in_line(db.pool, clinic[0])
        person = await patient(db, clinic, persona)
        return await call_to(db, clinic, persona.to_number, kind="checkin",
                             patient_id=person.id, reason="weekly check-in", goal="check in")
    _, offer = await opened_slot(db, clinic)
    if name == "waitlist_too_late":  # another waitlisted patient takes it first
        first = await offer_to(db, clinic, "+15550100204", offer)
        for line in ("Speaking.", "September 30th, 1985", "Yes please."):
            await first.says(line)
    return await offer_to(db, clinic, persona.to_number, offer)


async def play(persona: Persona, callee: Callee) -> dict[str, Any]:
    """The persona answers the call until one side ends it; the call's record as the
    API would return it (a caller line's time stamps the writes it led to)."""
    rules = RuleCaller(persona)
    turns: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    heard, ended_by = [callee.heard[0]], "caller_hangup"
    for step in range(1, MAX_LINES + 1):
        turns.append({"seq": len(turns) + 1, "speaker_role": "agent", "text": heard[-1]})
        line = rules.respond(heard[-1:])
        if line is None:
            break
        at_ms = step * 1000
        turns.append({"seq": len(turns) + 1, "speaker_role": "caller", "text": line,
                      "user_speech_start_ms": at_ms, "user_speech_end_ms": at_ms + 500})
        before = len(callee.tool_calls())
        heard.append(await callee.says(line))
        tools += [{"name": r.name, "input": r.input, "output": r.output,
                   "succeeded": r.succeeded, "error_class": r.error_class,
                   "started_ms": at_ms + 600} for r in callee.tool_calls()[before:]]
        if callee.last.end_call:
            turns.append({"seq": len(turns) + 1, "speaker_role": "agent", "text": heard[-1]})
            ended_by = "agent_hangup"
            break
    else:
        pytest.fail(f"{persona.name}: the call went on for {MAX_LINES} lines:\n" + "\n".join(
            t["text"] for t in turns))
    if ended_by != "agent_hangup":  # the callee hung up: the runner closes the task
        await callee.engine.finish_outbound()
    events = [{"type": e.type, "data": e.data} for e in callee.writer.events()]
    return {"id": "call", "completion_reason": ended_by, "turns": turns, "tool_calls": tools,
            "events": events, "started_at": sched.datetime.now().astimezone().isoformat()}


def transcript(record: dict[str, Any]) -> str:
    return "\n".join(f"{t['speaker_role']}: {t['text']}" for t in record["turns"])


@pytest.mark.parametrize("path", sorted(OUTBOUND.glob("*.yaml")), ids=lambda p: p.stem)
async def test_each_outbound_persona_gets_what_it_wants_from_the_clinics_call(db, clinic, path):
    persona = load_persona(path)
    callee = await set_up(persona.name, db, clinic, persona)

    record = await play(persona, callee)
    verdict: Verdict = judge(persona, record)

    assert verdict.success, "\n".join([*verdict.reasons, transcript(record)])
