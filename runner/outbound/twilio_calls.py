"""The Twilio Calls client the dispatcher places and follows calls through, built from
the settings; None, with the reason, when outbound calling cannot work here."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from config import Settings
from services.twilio.calls import PlacedCall, TwilioCallError, TwilioCalls
from services.twilio.numbers import TwilioAccount


class CallPlacer(Protocol):
    """What the dispatcher asks of Twilio (services/twilio/calls.TwilioCalls)."""

    async def create(self, *, to: str, from_: str, url: str, status_callback: str,
                     machine_detection: bool = True) -> PlacedCall: ...

    async def since(self, *, to: str, from_: str, after: datetime) -> list[PlacedCall]: ...

    async def hang_up(self, sid: str) -> None: ...


def twilio_calls(settings: Settings) -> tuple[CallPlacer | None, str | None]:
    """The account's Calls client, or None and why outbound calls cannot be placed (the
    reason names the settings to set, never their values)."""
    telephony = settings.telephony
    missing = [name for name, value in (("TWILIO_ACCOUNT_SID", telephony.twilio_account_sid),
                                        ("TWILIO_AUTH_TOKEN", telephony.twilio_auth_token))
               if not value]
    if missing:
        return None, f"outbound calling needs a Twilio account ({' and '.join(missing)})"
    if not settings.server.public_url:
        return None, ("outbound calling needs PUBLIC_URL (the address Twilio reaches this "
                      "service at, for the answer and status webhooks)")
    account = TwilioAccount(telephony.twilio_account_sid,
                            telephony.twilio_auth_token.get_secret_value(),
                            telephony.twilio_api_base_url)
    return TwilioCalls(account), None


__all__ = ["CallPlacer", "PlacedCall", "TwilioCallError", "twilio_calls"]
