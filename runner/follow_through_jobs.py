"""The follow-through's jobs: offering a freed slot to the waitlist, and the periodic
sweep that makes reminders (call tasks, or text jobs). Both are idempotent (unique
indexes and dedupe keys keep one offer per entry and slot, one reminder per
appointment), so a job run again changes nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from loguru import logger

from config import Settings
from db import reminders, waitlist_offers

if TYPE_CHECKING:
    from runner.runtime import AppRuntime


def sweep_interval(settings: Settings) -> timedelta:
    return timedelta(minutes=settings.outbound.reminder_sweep_minutes)


async def offer_freed_slot(runtime: AppRuntime, payload: dict[str, Any]) -> None:
    """A cancelled appointment's slot, offered to the first waitlisted patients."""
    made = await waitlist_offers.offer_freed_slot(
        runtime.db.pool, str(payload["appointment_id"]),
        limit=runtime.settings.outbound.waitlist_offers_per_slot, now=runtime.clock())
    if made:
        logger.info(f"waitlist: a freed slot offered to {len(made)} patient(s)")


async def sweep_reminders(runtime: AppRuntime, payload: dict[str, Any]) -> None:
    """The reminders every enabled campaign is due: calls, or texts when this deployment
    can send them."""
    swept = await reminders.sweep_reminders(
        runtime.db.pool, runtime.clock(), interval=sweep_interval(runtime.settings),
        can_text=runtime.reach.texter is not None)
    if swept.tasks:
        logger.info(f"reminders: {len(swept.tasks)} reminder call(s) scheduled")
    if swept.text_jobs:
        logger.info(f"reminders: {len(swept.text_jobs)} reminder text(s) scheduled")
    if swept.untexted:
        logger.warning(f"reminders: {len(swept.untexted)} clinic(s) remind by text, but "
                       "texting is not set up (the Twilio account); no reminder texts")
