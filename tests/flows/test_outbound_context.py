"""What a model is told on a call the clinic makes: before the right-person check, the
first name to ask for and nothing else; after it, who the patient is and why the clinic
calls (the reminder's appointment, the offered slot, the callback's reason). A model
navigator cannot take the call past the check either."""

from __future__ import annotations

import json

from call.call_session import CallLog
from db import scheduling as sched
from flows.catalog import runnable_graph
from flows.compile import EngageNodes
from flows.llm_navigator import LLMNavigator
from flows.navigator import NavDecision
from flows.router import NO_ROUTE
from language.spoken import say_time
from tests.fakes import CollectingWriter, ScriptedModel, choice
from tests.flows.callers import call_to
from tests.flows.test_outbound_calls import MARGARET_PHONE, margaret

SECRETS = ("Chen", "Maya Patel", "1948", "remind")


async def hang_up(_action, _flow_manager) -> None:
    """Stands in for the navigator's end-of-call action."""


async def reminder_call(db, clinic, **kwargs):
    patient = await margaret(db, clinic)
    (appointment,) = await sched.upcoming_appointments(
        db.pool, patient.id, sched.datetime.now().astimezone())
    callee = await call_to(db, clinic, MARGARET_PHONE, kind="reminder", patient_id=patient.id,
                           reason="Remind them of their follow-up visit",
                           goal="confirm, cancel or move it", appointment_id=appointment.id,
                           **kwargs)
    return callee, appointment


def what_a_model_sees(callee) -> str:
    """The engage task of the current decision and the ambient context, together."""
    engine = callee.engine
    node = EngageNodes(engine, end_call=hang_up).node(
        NavDecision(state=engine.state, action=engine.session.last_action, route=NO_ROUTE))
    return node["task_messages"][0]["content"] + "\n" + engine.ambient()


async def test_before_the_check_a_model_knows_only_the_first_name_to_ask_for(db, clinic):
    callee, appointment = await reminder_call(db, clinic)
    await callee.engine.refresh_chart()

    seen = what_a_model_sees(callee)
    when = say_time(appointment.local_start)
    assert "Margaret" in seen and "nothing about why the clinic is calling" in seen
    assert when not in seen
    assert not [secret for secret in SECRETS if secret in seen], seen
    assert json.loads(json.dumps(callee.engine.session.facts()))["right_person_confirmed"] is False

    await callee.says("Yes, speaking.")
    await callee.engine.refresh_chart()
    seen = what_a_model_sees(callee)
    assert not [secret for secret in SECRETS if secret in seen] and when not in seen, seen


async def test_after_the_check_the_patient_and_the_appointment_reach_the_model(db, clinic):
    callee, appointment = await reminder_call(db, clinic)
    await callee.says("Yes, speaking.")
    await callee.says("March 14, 1948")
    await callee.engine.refresh_chart()

    seen = what_a_model_sees(callee)

    facts = callee.engine.session.facts()
    assert facts["right_person_confirmed"] is True and facts["kind"] == "reminder"
    assert facts["reason"] == "Remind them of their follow-up visit"
    assert appointment.practitioner_name in facts["appointment"]
    assert appointment.location_name in facts["appointment"]
    assert "Margaret Chen" in seen and appointment.practitioner_name in seen
    assert say_time(appointment.local_start) in seen


async def test_a_model_navigator_cannot_take_the_call_past_the_check(db, clinic):
    graph = runnable_graph("appointment_reminder")
    # the model insists on the exit that would skip the check, three times
    model = ScriptedModel(*[choice("confirmed")] * 3)
    nav = LLMNavigator(graph, model, CallLog("c", CollectingWriter()),
                       clinic_name="Demo Family Clinic", timeout_s=0.2)
    callee, _ = await reminder_call(db, clinic, graph=graph, navigator=nav)

    said = await callee.says("Yes, speaking. What's this about?")

    assert callee.engine.state == "checking_person"
    assert "- confirmed (exit" not in model.prompts[0]
    assert not [secret for secret in SECRETS if secret in said], said
    assert callee.engine.session.patient is None
