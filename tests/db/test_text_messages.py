"""The texts a clinic sends are on record from before Twilio is asked to its last status,
which callbacks only ever move forward; a number that texted STOP gets none until START."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from db import text_messages as texts
from tests.db.small_clinic import small_clinic

PATIENT = "+15550107100"
CLINIC = "+15550107001"


async def a_text(db, workspace_id: str, call_id: str | None = None) -> str:
    return await texts.begin(db.pool, workspace_id=workspace_id, kind="confirmation",
                             to=PATIENT, from_=CLINIC, body="You're booked.", call_id=call_id)


async def test_a_text_is_on_record_before_twilio_answers_then_follows_its_callbacks(
        db, workspace_id, call_id):
    text_id = await a_text(db, workspace_id, call_id)
    (unsent,) = await texts.for_call(db.pool, call_id)
    assert (unsent.id, unsent.status, unsent.sid) == (text_id, "unsent", None)

    await texts.accepted(db.pool, text_id, sid="SM1", status="queued")
    await texts.on_status(db.pool, "SM1", "sent")
    delivered = await texts.on_status(db.pool, "SM1", "delivered")

    assert delivered.status == "delivered" and not delivered.failed
    assert [t.status for t in await texts.for_call(db.pool, call_id)] == ["delivered"]


async def test_a_late_callback_never_moves_a_text_back(db, workspace_id):
    text_id = await a_text(db, workspace_id)
    await texts.accepted(db.pool, text_id, sid="SM2", status="queued")
    await texts.on_status(db.pool, "SM2", "delivered")

    late = await texts.on_status(db.pool, "SM2", "sent")

    assert late.status == "delivered"


async def test_twilios_answer_read_again_after_a_callback_moves_nothing_back(db, workspace_id):
    text_id = await a_text(db, workspace_id)
    await texts.accepted(db.pool, text_id, sid="SM3", status="queued")
    await texts.on_status(db.pool, "SM3", "sent")
    await texts.accepted(db.pool, text_id, sid="SM3", status="queued")  # the answer, again

    assert (await texts.on_status(db.pool, "SM3", "sending")).status == "sent"


async def test_an_undelivered_text_keeps_the_carriers_code_and_a_refused_one_twilios(
        db, workspace_id, call_id):
    undelivered, refused = await a_text(db, workspace_id, call_id), await a_text(
        db, workspace_id, call_id)
    await texts.accepted(db.pool, undelivered, sid="SM4", status="queued")
    await texts.on_status(db.pool, "SM4", "undelivered", 30003)
    await texts.refused(db.pool, refused, code=21610)

    found = {t.id: t for t in await texts.for_call(db.pool, call_id)}
    assert (found[undelivered].status, found[undelivered].error_code) == ("undelivered", 30003)
    assert (found[refused].status, found[refused].error_code) == ("refused", 21610)
    assert found[undelivered].failed and found[refused].failed


async def test_an_unknown_sid_or_status_is_not_a_text(db, workspace_id):
    assert await texts.on_status(db.pool, "SM-none", "delivered") is None
    with pytest.raises(ValueError, match="not a Twilio message status"):
        await texts.on_status(db.pool, "SM-none", "teleported")
    with pytest.raises(ValueError, match="unknown kind"):
        await texts.begin(db.pool, workspace_id=workspace_id, kind="marketing", to=PATIENT,
                          from_=CLINIC, body="Sale!")


async def test_stop_holds_every_text_of_the_workspace_until_start(db, workspace_id):
    assert await texts.may_text(db.pool, workspace_id, PATIENT)

    await texts.opt_out(db.pool, workspace_id, PATIENT)
    await texts.opt_out(db.pool, workspace_id, PATIENT)  # STOP twice
    assert not await texts.may_text(db.pool, workspace_id, PATIENT)

    await texts.opt_in(db.pool, workspace_id, PATIENT)
    assert await texts.may_text(db.pool, workspace_id, PATIENT)


async def test_an_appointment_gets_one_reminder_text_once_twilio_took_it(db, workspace_id):
    clinic = await small_clinic(db, workspace_id)
    patient = await clinic.patient("Ada")
    booking = await clinic.book(patient, datetime.now(UTC) + timedelta(days=2))

    async def remind() -> str:
        return await texts.begin(db.pool, workspace_id=workspace_id, kind="reminder",
                                 to=PATIENT, from_=CLINIC, body="A reminder.",
                                 patient_id=patient, appointment_id=booking)

    refused = await remind()
    await texts.refused(db.pool, refused, code=None)  # Twilio unreachable: tried again
    lost = await remind()
    taken = await remind()  # Twilio's answer to the last one was lost: tried again
    await texts.accepted(db.pool, taken, sid="SM-reminder", status="queued")

    assert refused == lost == taken
    with pytest.raises(texts.AlreadySent):
        await remind()
    other = await texts.begin(db.pool, workspace_id=workspace_id, kind="confirmation",
                              to=PATIENT, from_=CLINIC, body="Booked.", appointment_id=booking)
    assert other != taken  # one reminder per appointment; other kinds are not held
    (row,) = await db.pool.fetch("SELECT status, appointment_id FROM text_messages "
                                 "WHERE id = $1", uuid.UUID(taken))
    assert (row["status"], str(row["appointment_id"])) == ("queued", booking)
