"""What a failed Stripe request means: may the same request be sent again?

The SDK's exceptions carry Stripe's message and, for a refused key, the key itself
(masked, but still a piece of it); a `PaymentError` carries plain words of its own, the
HTTP status, and whether trying again can help, so it is safe in a log line.
"""

from __future__ import annotations

import json

import stripe


class PaymentError(Exception):
    """Stripe did not do what was asked. `reason`: plain words, safe to log; `retryable`:
    the same request may succeed later (network, timeout, 429, Stripe's own failure);
    `status`: the HTTP status, when there was an answer."""

    def __init__(self, reason: str, *, retryable: bool, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.status = status


def payment_error(failure: stripe.StripeError, doing: str) -> PaymentError:
    """The `PaymentError` for an SDK exception raised while `doing` something."""
    status = failure.http_status
    said = f" (HTTP {status})" if status is not None else ""
    if isinstance(failure, stripe.AuthenticationError):
        return PaymentError(f"Stripe refused the API key to {doing}{said}",
                            retryable=False, status=status)
    if isinstance(failure, stripe.PermissionError):
        return PaymentError(f"the API key may not {doing}{said}", retryable=False, status=status)
    if isinstance(failure, stripe.RateLimitError):
        return PaymentError(f"Stripe is limiting requests; could not {doing}{said}",
                            retryable=True, status=status)
    if isinstance(failure, stripe.APIConnectionError):
        cause = type(failure.__cause__).__name__ if failure.__cause__ else "no answer"
        return PaymentError(f"cannot reach Stripe to {doing} ({cause})", retryable=True,
                            status=status)
    if isinstance(failure, stripe.IdempotencyError):
        return PaymentError(f"Stripe saw this idempotency key with other parameters; "
                            f"could not {doing}{said}", retryable=False, status=status)
    if isinstance(failure, stripe.InvalidRequestError):
        what = failure.code or "invalid request"
        param = f" ({failure.param})" if failure.param else ""
        return PaymentError(f"Stripe refused to {doing}: {what}{param}{said}",
                            retryable=False, status=status)
    if type(failure) is stripe.APIError:
        why = "Stripe's answer was not JSON" if _junk(failure.http_body) else "Stripe failed"
        return PaymentError(f"{why}; could not {doing}{said}", retryable=True, status=status)
    return PaymentError(f"Stripe refused to {doing}{said}", retryable=False, status=status)


def _junk(body: str | None) -> bool:
    try:
        json.loads(body or "")
    except ValueError:
        return True
    return False


__all__ = ["PaymentError", "payment_error"]
