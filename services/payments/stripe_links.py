"""Deposit links through Stripe Payment Links, with Stripe's Python SDK.

A deposit is one price (with its own product, named by the deposit's description) and
one payment link for it, the appointment's id in the link's metadata and a single
completed checkout allowed. Both requests carry an Idempotency-Key made from the
appointment and the amount, so a request sent again (after a lost answer, or by a job
retrying) gets Stripe's first answer back instead of a second link. Stripe keeps a key
for at least 24 hours and refuses it with other parameters: the same appointment and
amount described differently is refused (not retryable) rather than given a second link
that could be paid as well.

Whether a link was paid is read from its Checkout Sessions (`state`); Stripe's webhook
says so sooner (`stripe_webhook.verify_webhook`).

Nothing here blocks the event loop: every request is the SDK's async method over its
httpx client, each bounded by `timeout_s`. The SDK retries nothing itself; the caller
decides from `PaymentError.retryable`. The description is shown on Stripe's checkout
page and kept in Stripe's records, so it never names the patient.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import stripe
from loguru import logger

from services.payments.stripe_errors import PaymentError, payment_error
from services.payments.stripe_objects import (
    PaymentLinkObject,
    PriceObject,
    SessionObject,
    SessionPage,
    read_answer,
)

STRIPE_API = "https://api.stripe.com"
TIMEOUT_S = 4.0
PAGE_SIZE = 100  # the largest page Stripe lists
MAX_PAGES = 10  # reading stops at 1,000 sessions on one deposit link
CURRENCY = re.compile(r"^[a-z]{3}$")

# Off: with telemetry on, the SDK calls platform.platform() (which reads the interpreter's
# binary) on the event loop for every request and writes an id under ~/.config/stripe.
stripe.enable_telemetry = False

M = TypeVar("M", PriceObject, PaymentLinkObject, SessionPage)


@dataclass(frozen=True)
class Deposit:
    """What one appointment's deposit asks for; `amount_minor` in cents (the currency's
    minor unit), `currency` ISO 4217 in lower case, `description` without the patient."""

    appointment_id: str
    amount_minor: int
    currency: str
    description: str

    def __post_init__(self) -> None:
        if not self.appointment_id:
            raise ValueError("a deposit needs its appointment's id")
        if self.amount_minor <= 0:
            raise ValueError("a deposit's amount must be above zero")
        if not CURRENCY.match(self.currency):
            raise ValueError("a deposit's currency is three lower-case letters, e.g. 'usd'")


@dataclass(frozen=True)
class PaymentLink:
    """A link the patient pays the deposit through (`id` is plink_…)."""

    id: str
    url: str
    amount_minor: int
    currency: str


@dataclass(frozen=True)
class PaymentState:
    """What Stripe has seen on a link: `sessions` counts its Checkout Sessions, paid or
    not; `amount_paid_minor` sums the paid ones."""

    paid: bool
    amount_paid_minor: int
    sessions: int


def idempotency_key(deposit: Deposit, step: str) -> str:
    """The key of one step (`price`, `link`) of a deposit's link: the same deposit always
    sends the same key."""
    return f"deposit-{deposit.appointment_id}-{deposit.amount_minor}-{step}"


class StripeLinks:
    """One Stripe account's deposit links; `api_base` points it elsewhere (a stand-in).
    Close it (`aclose`, or `async with`) to release its connections."""

    def __init__(self, api_key: str, *, api_base: str = STRIPE_API,
                 timeout_s: float = TIMEOUT_S) -> None:
        self._timeout_s = timeout_s
        self._http = stripe.HTTPXClient(timeout=timeout_s)
        self._client = stripe.StripeClient(
            api_key, base_addresses={"api": api_base}, max_network_retries=0,
            http_client=self._http)

    async def create_link(self, deposit: Deposit) -> PaymentLink:
        """A price for the deposit, then a payment link for it that takes one payment."""
        price = await self._request(
            "create a deposit's price", PriceObject,
            self._client.v1.prices.create_async(
                {"currency": deposit.currency, "unit_amount": deposit.amount_minor,
                 "product_data": {"name": deposit.description}},
                {"idempotency_key": idempotency_key(deposit, "price")}))
        link = await self._request(
            "create a deposit's payment link", PaymentLinkObject,
            self._client.v1.payment_links.create_async(
                {"line_items": [{"price": price.id, "quantity": 1}],
                 "metadata": {"appointment_id": deposit.appointment_id},
                 "restrictions": {"completed_sessions": {"limit": 1}}},
                {"idempotency_key": idempotency_key(deposit, "link")}))
        logger.info(f"Stripe: deposit link {link.id} for appointment {deposit.appointment_id}")
        return PaymentLink(id=link.id, url=link.url, amount_minor=deposit.amount_minor,
                           currency=deposit.currency)

    async def state(self, link_id: str) -> PaymentState:
        """Whether the link was paid, from its Checkout Sessions (every page of them)."""
        sessions: list[SessionObject] = []
        after: str | None = None
        for _ in range(MAX_PAGES):
            params: dict[str, Any] = {"payment_link": link_id, "limit": PAGE_SIZE}
            if after is not None:
                params["starting_after"] = after
            page = await self._request(
                "read a deposit link's payments", SessionPage,
                self._client.v1.checkout.sessions.list_async(params))
            sessions.extend(page.data)
            if not page.has_more or not page.data:
                break
            after = page.data[-1].id
        paid = [session for session in sessions if session.payment_status == "paid"]
        return PaymentState(paid=bool(paid),
                            amount_paid_minor=sum(s.amount_total or 0 for s in paid),
                            sessions=len(sessions))

    async def aclose(self) -> None:
        await self._http.close_async()

    async def __aenter__(self) -> StripeLinks:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()

    async def _request(self, doing: str, model: type[M], sent: Awaitable[Any]) -> M:
        """The answer to `sent` within the timeout, read as `model`; any failure is a
        PaymentError, logged in its own words."""
        try:
            answer = await asyncio.wait_for(sent, self._timeout_s)
        except TimeoutError as failure:
            error = PaymentError(f"Stripe did not answer in {self._timeout_s:g} s ({doing})",
                                 retryable=True)
            logger.warning(f"Stripe: {error.reason}")
            raise error from failure
        except stripe.StripeError as failure:
            error = payment_error(failure, doing)
            logger.warning(f"Stripe: {error.reason}")
            raise error from None  # the SDK's message can quote part of the key
        read = read_answer(model, answer)
        if read is None:
            error = PaymentError(f"Stripe's answer lacked what was needed to {doing}",
                                 retryable=True)
            logger.warning(f"Stripe: {error.reason}")
            raise error
        return read


__all__ = ["Deposit", "PaymentLink", "PaymentState", "StripeLinks", "idempotency_key"]
