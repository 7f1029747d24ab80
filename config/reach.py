"""Reaching patients beyond the call: video-visit rooms and deposit links. Texts use the
Twilio account (settings.telephony)."""

from __future__ import annotations

from pydantic import Field, SecretStr

from config.group import SettingsGroup


class ReachSettings(SettingsGroup):
    """Daily's REST API for video-visit rooms (with the telephony group's DAILY_API_KEY)
    and Stripe for deposit links."""

    daily_api_base_url: str = Field(
        default="https://api.daily.co/v1",
        description="Daily's REST API (tests point it at a local stand-in).",
    )
    stripe_api_key: SecretStr | None = Field(
        default=None,
        description="Deposit links through Stripe Payment Links for appointment types with "
        "a deposit. Unset: no deposit links are offered.",
    )
    stripe_api_base_url: str = Field(
        default="https://api.stripe.com",
        description="Stripe's API (tests point it at a local stand-in).",
    )
    stripe_webhook_secret: SecretStr | None = Field(
        default=None,
        description="The signing secret (whsec_...) of the Stripe webhook endpoint "
        "PUBLIC_URL/webhooks/stripe: a paid deposit is known the moment it is paid. "
        "Unset: the endpoint refuses everything and payments are read from Stripe when asked.",
    )
    provider_timeout_s: float = Field(
        default=2.0, gt=0, le=10, validation_alias="link_provider_timeout_s",
        description="How long a call waits for Daily or Stripe before saying the link "
        "will follow by text (a job keeps trying).",
    )
