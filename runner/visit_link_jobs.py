"""Finishing a booking's links after the call: the video or deposit link a provider
could not make while the caller waited is made here, then texted to the patient.

The caller was told "I'll text it to you as soon as it's ready": this job keeps that
promise. It retries while the provider may still answer (5 times, from 30 s doubling to
10 min); a refusal that cannot change (a wrong key, a clinic with no video provider)
ends it, logged. It is idempotent: a link kept is reused, and a text already sent for
the call is not sent again. A booking cancelled meanwhile gets nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from loguru import logger

from db import scheduling, visit_links
from db import text_messages as texts
from db.visit_links import VisitTerms
from flows.post_booking_tools import deposit_description, text_body
from flows.reach import Reach
from flows.texting import TextRequest
from flows.visit_links import LinkNotMade, Needed, payment_link, video_link
from runner.job_retries import Retries

if TYPE_CHECKING:
    from runner.runtime import AppRuntime

RETRIES = Retries(max_attempts=5, initial_delay=timedelta(seconds=30),
                  max_delay=timedelta(minutes=10))
# Off the call, a provider may take longer to answer.
JOB_PROVIDER_TIMEOUT_S = 10.0


class LinkNotReady(Exception):
    """A provider did not make the link yet, or the text did not go: try again later."""


async def finish_visit_links(runtime: AppRuntime, payload: dict[str, Any]) -> None:
    pool, reach = runtime.db.pool, runtime.reach
    terms = await visit_links.terms(pool, str(payload["appointment_id"]))
    if terms is None or not terms.live:
        logger.info("visit links: the booking is gone; nothing to send")
        return
    appointment = await scheduling.get_appointment(pool, terms.appointment_id)
    assert appointment is not None  # terms came from it
    await _make_links(runtime, reach, terms, deposit_description(terms, appointment))
    links = await visit_links.links_of(pool, terms.appointment_id)
    if not links:
        return
    kind = "telehealth_link" if "video" in links else "payment_link"
    call_id = payload.get("call_id")
    if reach.texter is None or not terms.patient_phone:
        logger.warning("visit links: made, but there is no way to text them")
        return
    if call_id and await texts.sent_on_call(pool, call_id, kind):
        return
    outcome = await reach.texter.send(TextRequest(
        workspace_id=terms.workspace_id, kind=kind, to=terms.patient_phone,
        body=text_body(kind, str(payload.get("clinic_name") or ""), appointment, links),
        from_number=payload.get("from_number"), call_id=call_id,
        patient_id=terms.patient_id))
    if outcome.sent or outcome.opted_out:
        return
    raise LinkNotReady(f"visit links not texted ({outcome.why_not})")


async def _make_links(runtime: AppRuntime, reach: Reach, terms: VisitTerms,
                      description: str) -> None:
    needed, pool = Needed.of(terms), runtime.db.pool
    try:
        if needed.video:
            await video_link(pool, reach, terms, timeout_s=JOB_PROVIDER_TIMEOUT_S)
        if needed.deposit:
            await payment_link(pool, reach, terms, description,
                               timeout_s=JOB_PROVIDER_TIMEOUT_S)
    except LinkNotMade as failure:
        if failure.retryable:
            raise LinkNotReady(f"visit link not made yet ({failure.reason})") from None
        logger.warning(f"visit links: one cannot be made ({failure.reason})")
