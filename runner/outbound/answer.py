"""What a placed call's webhooks do (api/outbound_voice.py checks their signatures).

**Answer** (Twilio asks once machine detection has decided, `AnsweredBy`):
- an answering machine: a short message with the clinic's name and its own number to
  call back (`prompts/telephony/voicemail.txt`), nothing about why, then the hang-up;
  the attempt's outcome is `voicemail`;
- a fax: the hang-up; the task fails, a fax never becomes a person;
- a person (or detection unsure): the call's record is created (outbound, from the
  clinic's number to the callee), its profile resolved as an inbound call's is (voice
  settings, keyterms, safety concepts) running the task's graph with the task attached,
  greeted by the callee's first name only (flows/outbound_greeting.py: the right-person
  question the graph opens with), and the call streams;
- the task closed while the phone rang, or no free line left: a short apology, then the
  hang-up.

Every answer that does not stream is a call record closed at once with its reason and
event; the attempt links to it.

**Status**: progress moves the attempt forward; the end settles it (the dispatcher's
`call_ended`: its outcome, then another try, done or failed).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from loguru import logger

from call.outbound_call import OutboundCall
from db import outbound
from db import outbound_dial as dials
from db import repositories as repo
from db.outbound import OPEN_STATUSES, Attempt, OutboundTask
from db.records import TurnedAwayCall, write_records
from flows.outbound_greeting import outbound_greeting
from language.spoken import say_phone
from lib.prompts import render_prompt
from runner.outbound.context import Clinic, load_clinic
from runner.outbound.dispatcher import FAX_ANSWERED, dispatcher_for
from runner.outbound.outcomes import FAX, MACHINE, TERMINAL, progress_of
from services.twilio import PHONE_SAMPLE_RATE
from services.twilio.twiml import hang_up, say_then_hang_up, stream_twiml

if TYPE_CHECKING:
    from runner.runtime import AppRuntime, CallProfile


def voicemail_message(clinic_name: str, clinic_number: str) -> str:
    """The message left on a machine: who called and the clinic's own number."""
    return render_prompt("telephony/voicemail.txt", clinic_name=clinic_name,
                         callback_number=say_phone(clinic_number))


async def answer_call(runtime: AppRuntime, attempt_id: str, form: dict[str, str],
                      stream_url: str) -> str:
    """The TwiML for the answered call of attempt `attempt_id`."""
    pool = runtime.db.pool
    attempt = await dials.get_attempt(pool, attempt_id)
    if attempt is None:
        logger.warning("outbound answer for an unknown attempt; hanging up")
        return hang_up()
    if attempt.call_id is not None:
        return await _answer_again(runtime, attempt, stream_url)
    sid = form.get("CallSid") or None
    if not await dials.progress(pool, attempt.id, status="in_progress", sid=sid):
        logger.warning(f"outbound answer: not the call of attempt {attempt.id}; hanging up")
        return hang_up()
    runtime.release_ringing(attempt.id)
    task = await outbound.get_task(pool, None, attempt.task_id)
    clinic = await load_clinic(pool, task, runtime.clock()) if task is not None else None
    if task is None or clinic is None:
        logger.warning(f"outbound answer: attempt {attempt.id} has no task or clinic now")
        await dials.answered(pool, attempt.id, sid=sid, outcome="failed", call_id=None,
                             detail="answered, but its task or clinic is gone")
        return hang_up()
    answered_by = form.get("AnsweredBy") or ""
    said = {"task_id": task.id, "attempt": attempt.number, "answered_by": answered_by or None}
    if task.status not in OPEN_STATUSES:
        await _not_streamed(runtime, attempt, task, clinic, form, "outbound_not_needed", said,
                            outcome="answered", detail="the task was closed before the answer")
        return say_then_hang_up(render_prompt("outbound/no_longer_needed.txt",
                                              clinic_name=clinic.name))
    if answered_by in MACHINE:
        number = attempt.from_number or clinic.number
        if not number:  # never a number the clinic does not own
            await _not_streamed(runtime, attempt, task, clinic, form, "voicemail_not_left", said,
                                outcome="voicemail", detail="no clinic number to leave")
            return hang_up()
        await _not_streamed(runtime, attempt, task, clinic, form, "voicemail_left", said,
                            outcome="voicemail", detail="a message was left")
        return say_then_hang_up(voicemail_message(clinic.name, number))
    if answered_by == FAX:
        await _not_streamed(runtime, attempt, task, clinic, form, "fax_answered", said,
                            outcome="failed", detail=FAX_ANSWERED)
        return hang_up()
    if not runtime.has_capacity():
        await _not_streamed(runtime, attempt, task, clinic, form, "at_capacity", said,
                            outcome="failed", detail="no free line when the callee answered")
        return say_then_hang_up(render_prompt("outbound/cannot_talk_now.txt",
                                              clinic_name=clinic.name))
    return await _converse(runtime, attempt, task, clinic, form, stream_url)


async def _converse(runtime: AppRuntime, attempt: Attempt, task: OutboundTask, clinic: Clinic,
                    form: dict[str, str], stream_url: str) -> str:
    """A person answered: the call record, its profile, the greeting rendering, the stream."""
    call_id = str(uuid.uuid4())
    profile = await _profile(runtime, call_id, attempt, task, clinic)
    if profile.graph is None:
        # No graph that checks who answered: nothing is said about the call.
        logger.error(f"outbound task {task.id}: no graph can carry the call "
                     f"({'; '.join(profile.graph_problems) or 'none found'})")
        await _not_streamed(runtime, attempt, task, clinic, form, "outbound_graph_unavailable",
                            {"task_id": task.id, "attempt": attempt.number,
                             "problems": profile.graph_problems},
                            outcome="failed", detail="no graph can carry the call")
        return say_then_hang_up(render_prompt("outbound/cannot_talk_now.txt",
                                              clinic_name=clinic.name))
    sid = form.get("CallSid") or None
    await repo.create_call(
        runtime.db.pool, workspace_id=task.workspace_id, service_id=clinic.service_id,
        call_sid=sid, direction="outbound", from_number=attempt.from_number,
        to_number=attempt.to_number, status="ringing", config_snapshot=runtime.snapshot(profile),
        owner_instance=runtime.identity.instance_id, call_id=call_id,
        stream_setup=runtime.stream_setup(profile))
    answered_by = form.get("AnsweredBy") or "no detection"
    await dials.answered(runtime.db.pool, attempt.id, sid=sid, outcome="answered",
                         call_id=call_id, detail=f"answered ({answered_by})")
    runtime.remember_profile(profile)
    runtime.greetings.warm(runtime.plan.tts_identity(runtime.settings, profile.voice),
                           profile.greeting, PHONE_SAMPLE_RATE, profile.voice.speed)
    logger.info(f"outbound task {task.id}: attempt {attempt.number} answered; call {call_id}")
    return stream_twiml(stream_url, call_id)


async def _profile(runtime: AppRuntime, call_id: str, attempt: Attempt, task: OutboundTask,
                   clinic: Clinic) -> CallProfile:
    call = OutboundCall(
        task_id=task.id, attempt_id=attempt.id, kind=task.kind, workspace_id=task.workspace_id,
        service_id=clinic.service_id, patient_id=task.patient_id, phone=attempt.to_number,
        reason=task.reason, goal=task.goal, appointment_id=task.appointment_id,
        offer=task.offer)
    greeting = await outbound_greeting(runtime.db.pool, call, clinic.name)
    return await runtime.outbound_profile(call_id, clinic.service, call, greeting=greeting,
                                          clinic_number=attempt.from_number or clinic.number)


async def profile_for_call(runtime: AppRuntime, call: dict[str, Any]) -> CallProfile | None:
    """The profile of an answered outbound call, built again (its pre-resolved one
    expired); None when its attempt, task or clinic is gone."""
    pool = runtime.db.pool
    attempt = await dials.attempt_for_call(pool, str(call["id"]))
    task = await outbound.get_task(pool, None, attempt.task_id) if attempt else None
    clinic = await load_clinic(pool, task, runtime.clock()) if task else None
    if attempt is None or task is None or clinic is None:
        return None
    return await _profile(runtime, str(call["id"]), attempt, task, clinic)


async def _not_streamed(runtime: AppRuntime, attempt: Attempt, task: OutboundTask,
                        clinic: Clinic, form: dict[str, str], reason: str,
                        data: dict[str, Any], *,
                        outcome: str, detail: str) -> None:
    """An answer that does not stream: its call record, closed with `reason` and its
    event, and the attempt's outcome, written together."""
    call_id = str(uuid.uuid4())
    record = TurnedAwayCall(
        call_id=call_id, call_sid=form.get("CallSid") or None, completion_reason=reason,
        event=reason, event_data=data, workspace_id=task.workspace_id,
        service_id=clinic.service_id, from_number=attempt.from_number,
        to_number=attempt.to_number, direction="outbound")
    async with runtime.db.pool.acquire() as conn, conn.transaction():
        await write_records(conn, [record])
        exists = await conn.fetchval("SELECT id FROM calls WHERE id = $1", uuid.UUID(call_id))
        await dials.answered(conn, attempt.id, sid=form.get("CallSid") or None, outcome=outcome,
                             call_id=call_id if exists else None, detail=detail)
    logger.info(f"outbound task {task.id}: attempt {attempt.number} {reason}")


async def _answer_again(runtime: AppRuntime, attempt: Attempt, stream_url: str) -> str:
    """Twilio asked again (our first answer was slow): the same stream, if it has not
    started; otherwise the hang-up."""
    call = await repo.get_call(runtime.db.pool, attempt.call_id or "")
    if call is not None and call.get("connected_at") is None and call.get("ended_at") is None:
        return stream_twiml(stream_url, str(call["id"]))
    return hang_up()


async def call_status(runtime: AppRuntime, attempt_id: str, form: dict[str, str]) -> bool:
    """Twilio's report on attempt `attempt_id`'s call; False when the attempt is unknown
    or the call is not its own."""
    pool = runtime.db.pool
    attempt = await dials.get_attempt(pool, attempt_id)
    status, sid = form.get("CallStatus", ""), form.get("CallSid") or None
    if attempt is None:
        return False
    if not await dials.progress(pool, attempt.id, status=progress_of(status), sid=sid):
        return False
    if status in TERMINAL:
        current = await dials.get_attempt(pool, attempt.id) or attempt
        await dispatcher_for(runtime).call_ended(current, status,
                                                 answered_by=form.get("AnsweredBy") or None)
    return True
