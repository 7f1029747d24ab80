"""Stripe's webhook: a deposit paid is on record the moment Stripe says so.

Every event is checked against the endpoint's signing secret (STRIPE_WEBHOOK_SECRET)
before anything in it is read: unsigned, wrongly signed or stale events are refused
with 400 and change nothing. A completed, paid Checkout Session marks the deposit of
the payment link it came from as paid; every other event is acknowledged and ignored
(Stripe sends what the endpoint subscribed to). Nothing here logs an event's body: it
carries the payer's details.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from loguru import logger

from api.deps import get_runtime
from db import visit_links
from runner.runtime import AppRuntime
from services.payments import WebhookRejected, verify_webhook

router = APIRouter(prefix="/webhooks", tags=["payments"])
PAID_EVENTS = frozenset({"checkout.session.completed",
                         "checkout.session.async_payment_succeeded"})


@router.post("/stripe", status_code=204)
async def stripe_event(request: Request, runtime: AppRuntime = Depends(get_runtime)
                       ) -> Response:
    secret = runtime.settings.reach.stripe_webhook_secret
    if secret is None:
        raise HTTPException(503, "STRIPE_WEBHOOK_SECRET is not set: events cannot be checked")
    payload = await request.body()
    try:
        event = verify_webhook(payload, request.headers.get("Stripe-Signature", ""),
                               secret.get_secret_value())
    except WebhookRejected as rejected:
        logger.warning(f"stripe webhook refused ({rejected.reason})")
        raise HTTPException(400, rejected.reason) from None
    session = (event.get("data") or {}).get("object") or {}
    link = session.get("payment_link")
    if event.get("type") not in PAID_EVENTS or session.get("payment_status") != "paid" or not (
            isinstance(link, str) and link):
        return Response(status_code=204)
    try:
        marked = await runtime.db.bounded(
            visit_links.mark_paid(runtime.db.pool, "stripe", link, datetime.now(UTC)),
            what="deposit paid")
    except Exception as error:  # noqa: BLE001 - Stripe sends the event again on a 5xx
        logger.error(f"stripe webhook: deposit not recorded ({type(error).__name__})")
        return Response(status_code=503)
    if marked is None:
        logger.info("stripe webhook: a payment link this service does not know")
    return Response(status_code=204)
