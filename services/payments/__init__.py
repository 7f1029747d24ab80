"""Payments: deposit links through Stripe Payment Links, and Stripe's signed webhooks."""

from services.payments.stripe_errors import PaymentError
from services.payments.stripe_links import Deposit, PaymentLink, PaymentState, StripeLinks
from services.payments.stripe_webhook import WebhookRejected, verify_webhook

__all__ = ["Deposit", "PaymentError", "PaymentLink", "PaymentState", "StripeLinks",
           "WebhookRejected", "verify_webhook"]
