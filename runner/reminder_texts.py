"""Reminder texts: the `reminder_text` job a texting campaign's sweep queues for each
appointment it covers (`db/reminder_texts.py`), run when the reminder is due.

The job reads the appointment again when it runs: one cancelled, moved or under way
since, or a campaign turned off or back to calls, gets nothing. The text goes from the
clinic's first number (or through the deployment's Messaging Service) with the visit's
links, and once: a second run finds it sent (`db/text_messages`). A patient who texted
STOP, or a refusal that cannot change (a landline), ends the job, logged; Twilio
unreachable or silent leaves it to be retried (5 times, from a minute doubling to 15
minutes). Neither the text nor the number it goes to is logged.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from loguru import logger

from db import reminder_texts, visit_links
from flows.post_booking_tools import text_body
from flows.texting import TextOutcome, TextRequest
from runner.job_retries import Retries

if TYPE_CHECKING:
    from runner.runtime import AppRuntime

RETRIES = Retries(max_attempts=5, initial_delay=timedelta(minutes=1),
                  max_delay=timedelta(minutes=15))


class ReminderNotSent(Exception):
    """Twilio did not take the reminder text, or did not answer: try again later."""


async def send_reminder_text(runtime: AppRuntime, payload: dict[str, Any]) -> None:
    appointment_id = str(payload["appointment_id"])
    what = f"reminder text for appointment {appointment_id}"
    texter = runtime.reach.texter
    if texter is None:
        logger.warning(f"{what}: texting is not set up (the Twilio account); not sent")
        return
    pool = runtime.db.pool
    reminder = await reminder_texts.to_send(pool, appointment_id, runtime.clock())
    if reminder is None:
        logger.info(f"{what}: nothing to send (the appointment is cancelled, moved or under "
                    "way, or the clinic no longer reminds by text)")
        return
    links = await visit_links.links_of(pool, appointment_id)
    outcome = await texter.send(TextRequest(
        workspace_id=reminder.workspace_id, kind="reminder", to=reminder.phone,
        body=text_body("reminder", reminder.clinic_name, reminder.appointment, links),
        from_number=reminder.clinic_number, patient_id=reminder.patient_id,
        appointment_id=appointment_id))
    _settle(what, outcome)


def _settle(what: str, outcome: TextOutcome) -> None:
    """Done, logged, unless trying again can still get the text there (then raise)."""
    if outcome.sent:
        logger.info(f"{what}: sent (text {outcome.text_id})")
    elif outcome.already_sent or outcome.opted_out:
        logger.info(f"{what}: not sent ({outcome.why_not})")
    elif outcome.unsure or outcome.retryable:
        raise ReminderNotSent(f"{what}: not sent yet ({outcome.why_not})")
    else:
        logger.warning(f"{what}: not sent ({outcome.why_not}, code {outcome.error_code})")
