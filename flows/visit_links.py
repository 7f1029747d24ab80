"""A booking's links, made once and kept: the video visit's, from the clinic's video
provider (a Daily room, or the clinic's own link), and the deposit's, from the payment
provider. Used on the call (flows/post_booking_tools.py) and by the job that finishes
what a call could not (runner/visit_link_jobs.py).

Each provider request is bounded: a provider that refuses, answers junk or stays silent
is a `LinkNotMade` that says whether trying again may help. Nothing here logs a link:
a video link carries its room's token, and both name a patient's visit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

import asyncpg

from db import visit_links
from db.visit_links import VisitLink, VisitTerms
from flows.reach import Reach
from services.payments import Deposit, PaymentError
from services.telehealth.links import LinkTemplate, TelehealthError, VideoVisits, VisitWindow

T = TypeVar("T")


class LinkNotMade(Exception):
    """No link: `reason` in plain words (safe to log), `retryable` if asking later may
    work (a job tries again); False when it never can here (not set up, refused)."""

    def __init__(self, reason: str, *, retryable: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


@dataclass(frozen=True)
class Needed:
    """The links a visit should have, by its type and its clinic."""

    video: bool
    deposit: bool

    @classmethod
    def of(cls, terms: VisitTerms) -> Needed:
        return cls(video=terms.video, deposit=bool(terms.deposit_cents))


def video_provider(reach: Reach, terms: VisitTerms) -> VideoVisits:
    settings = terms.video_visits or {}
    if settings.get("provider") == "link" and settings.get("link"):
        return LinkTemplate(str(settings["link"]))
    if settings.get("provider") == "daily" and reach.daily is not None:
        return reach.daily
    raise LinkNotMade("video visits are not set up for this clinic", retryable=False)


async def video_link(pool: asyncpg.Pool, reach: Reach, terms: VisitTerms, *,
                     call_id: str | None = None,
                     timeout_s: float | None = None) -> VisitLink:
    """The visit's video link: the one kept, else a new one from the clinic's provider."""
    kept = await visit_links.link_of(pool, terms.appointment_id, "video")
    if kept is not None:
        return kept
    if not terms.video:
        raise LinkNotMade("this visit is in person", retryable=False)
    provider = video_provider(reach, terms)
    window = VisitWindow(terms.appointment_id, terms.starts_at, terms.ends_at)
    made = await _asked(provider.link_for(window), timeout_s or reach.provider_timeout_s,
                        "the video provider")
    return await visit_links.keep(pool, terms, "video", provider=made.provider, url=made.url,
                                  external_id=made.room, expires_at=made.expires_at,
                                  call_id=call_id)


async def payment_link(pool: asyncpg.Pool, reach: Reach, terms: VisitTerms, description: str,
                       *, call_id: str | None = None,
                       timeout_s: float | None = None) -> VisitLink:
    """The visit's deposit link: the one kept, else a new one from the payment provider."""
    kept = await visit_links.link_of(pool, terms.appointment_id, "payment")
    if kept is not None:
        return kept
    if not terms.deposit_cents:
        raise LinkNotMade("this visit takes no deposit", retryable=False)
    if reach.payments is None:
        raise LinkNotMade("deposit links are not set up here", retryable=False)
    deposit = Deposit(terms.appointment_id, terms.deposit_cents, terms.currency.lower(),
                      description)
    made = await _asked(reach.payments.create_link(deposit),
                        timeout_s or reach.provider_timeout_s, "the payment provider")
    return await visit_links.keep(pool, terms, "payment", provider=reach.payment_provider,
                                  url=made.url, external_id=made.id,
                                  amount_cents=made.amount_minor,
                                  currency=made.currency.upper(), call_id=call_id)


async def deposit_paid(pool: asyncpg.Pool, reach: Reach, link: VisitLink, *,
                       timeout_s: float | None = None) -> bool:
    """Whether the deposit behind `link` is paid: as kept, else as the provider says now
    (and then kept)."""
    if link.paid_at is not None:
        return True
    if reach.payments is None or not link.external_id:
        raise LinkNotMade("deposit links are not set up here", retryable=False)
    state = await _asked(reach.payments.state(link.external_id),
                         timeout_s or reach.provider_timeout_s, "the payment provider")
    if state.paid:
        await visit_links.mark_paid(pool, link.provider, link.external_id, datetime.now(UTC))
    return state.paid


async def _asked(request: Awaitable[T], timeout_s: float, who: str) -> T:
    """A provider's answer within `timeout_s`; its refusal or silence as `LinkNotMade`."""
    try:
        return await asyncio.wait_for(request, timeout_s)
    except TimeoutError:
        raise LinkNotMade(f"{who} did not answer in time", retryable=True) from None
    except (TelehealthError, PaymentError) as error:
        raise LinkNotMade(error.reason, retryable=error.retryable) from None
