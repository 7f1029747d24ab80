"""The calls the clinic places: whether the dispatcher may dial, how often one number may
be tried, how fast one process dials, how much of the process's capacity it leaves to callers, how often it looks
again at what it is waiting for; how many waitlisted patients hear of a freed slot, and
how often reminder campaigns look for appointments."""

from __future__ import annotations

from pydantic import Field

from config.group import SettingsGroup


class OutboundSettings(SettingsGroup):
    """The outbound dispatcher (runner/outbound) and the follow-through jobs that give it
    tasks (waitlist offers, reminder sweeps)."""

    enabled: bool = Field(
        default=True, validation_alias="outbound_enabled",
        description="False: nothing is dialled; due tasks wait, each saying why.",
    )
    max_attempts_per_number_per_day: int = Field(
        default=3, ge=1, le=20, validation_alias="max_outbound_attempts_per_number_per_day",
        description="Dial attempts one number may get in any 24 hours, across all of a "
        "workspace's tasks; past it the next waits until the oldest is a day old.",
    )
    inbound_reserve: int = Field(
        default=2, ge=0, validation_alias="outbound_inbound_reserve",
        description="Lines outbound calls leave free for callers: the dispatcher dials only "
        "while fewer than capacity minus this many calls are in hand (at least one line "
        "when the process is idle).",
    )
    dials_per_second: float = Field(
        default=1.0, gt=0, le=1000, validation_alias="outbound_dials_per_second",
        description="How fast one process places calls: due tasks past this rate wait "
        "their turn, so a burst (a reminder campaign, a backlog) never slows the callers "
        "it is serving. Twilio places an account's calls at its calls-per-second limit "
        "(1 by default) anyway.",
    )
    capacity_recheck_s: float = Field(
        default=45.0, gt=0, validation_alias="outbound_capacity_recheck_s",
        description="How soon a task that found no free line looks again.",
    )
    unavailable_recheck_s: float = Field(
        default=300.0, gt=0, validation_alias="outbound_unavailable_recheck_s",
        description="How soon a task looks again when outbound calling cannot work yet "
        "(no Twilio account or PUBLIC_URL, the clinic has no number, turned off).",
    )
    follow_up_s: float = Field(
        default=120.0, gt=0, validation_alias="outbound_follow_up_s",
        description="How often a placed call is checked with Twilio while it lasts, in case "
        "its status callback never arrives.",
    )
    ring_hold_s: float = Field(
        default=100.0, gt=0, validation_alias="outbound_ring_hold_s",
        description="How long a dialled call holds a line before it is answered (ringing "
        "plus answering-machine detection); released at the answer or the outcome.",
    )
    max_retry_backoff_minutes: int = Field(
        default=1440, ge=1, validation_alias="outbound_max_retry_backoff_minutes",
        description="The longest wait between two attempts (the task's backoff doubles "
        "each attempt up to this).",
    )
    waitlist_offers_per_slot: int = Field(
        default=3, ge=1, le=20, validation_alias="waitlist_offers_per_slot",
        description="How many waitlisted patients are called about one freed slot (the "
        "first in line first; the first to say yes books it).")
    reminder_sweep_minutes: int = Field(
        default=5, ge=1, le=60, validation_alias="reminder_sweep_minutes",
        description="How often reminder campaigns look for appointments to call about.")
