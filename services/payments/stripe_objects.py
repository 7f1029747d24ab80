"""The fields of Stripe's answers the deposit links read, checked at the boundary.

The SDK turns any JSON into objects without looking at it; an answer missing a field we
rely on is a fault to report (and retry), never a KeyError halfway through a link.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class PriceObject(_Answer):
    """A price (`POST /v1/prices`)."""

    id: str


class PaymentLinkObject(_Answer):
    """A payment link (`POST /v1/payment_links`)."""

    id: str
    url: str


class SessionObject(_Answer):
    """A Checkout Session; `amount_total` is in the currency's minor unit."""

    id: str
    payment_status: str
    amount_total: int | None = None


class SessionPage(_Answer):
    """One page of `GET /v1/checkout/sessions`."""

    data: list[SessionObject]
    has_more: bool


M = TypeVar("M", bound=_Answer)


def read_answer(model: type[M], answer: Any) -> M | None:
    """`answer` (a StripeObject) as `model`, or None when it lacks what the model needs."""
    try:
        return model.model_validate(answer.to_dict() if hasattr(answer, "to_dict") else answer)
    except ValidationError:
        return None


__all__ = ["PaymentLinkObject", "PriceObject", "SessionObject", "SessionPage", "read_answer"]
