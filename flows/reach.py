"""How a deployment reaches patients beyond the call: texts, video-visit rooms, deposit
links. Each is None when this deployment has not set it up; the agent then offers none."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from flows.texting import Texter
from services.payments import Deposit, PaymentLink, PaymentState
from services.telehealth.links import VideoVisits


class PaymentLinks(Protocol):
    """A payment provider's deposit links (services/payments/StripeLinks)."""

    async def create_link(self, deposit: Deposit) -> PaymentLink: ...

    async def state(self, link_id: str) -> PaymentState: ...


@dataclass(frozen=True)
class Reach:
    texter: Texter | None = None
    daily: VideoVisits | None = None  # a private Daily room per visit (DAILY_API_KEY)
    payments: PaymentLinks | None = None  # deposit links (STRIPE_API_KEY)
    payment_provider: str = "stripe"
    # A call waits this long for a provider before the link is left to a job.
    provider_timeout_s: float = 2.0
