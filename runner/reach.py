"""How this deployment reaches patients beyond the call, built from the settings: texts
through Twilio's Messages resource when the Twilio account is configured, video-visit
rooms through Daily's REST API with DAILY_API_KEY, deposit links through Stripe with
STRIPE_API_KEY. Each is left out (None) when its keys are not set."""

from __future__ import annotations

import asyncpg

from config import Settings
from flows.reach import Reach
from flows.texting import Texter
from services.payments import StripeLinks
from services.telehealth.daily import DailyRooms
from services.twilio.messages import TwilioMessages
from services.twilio.numbers import TwilioAccount

# Where Twilio posts a text's status changes (api/text_webhooks.py).
TEXT_STATUS_PATH = "/sms/status"


def build_reach(settings: Settings, pool: asyncpg.Pool) -> Reach:
    reach = settings.reach
    daily_key = settings.telephony.daily_api_key
    stripe_key = reach.stripe_api_key
    # Each provider request gets half the wait: a room and its token, a price and its link.
    per_request_s = reach.provider_timeout_s / 2
    return Reach(
        texter=_texter(settings, pool),
        daily=DailyRooms(daily_key.get_secret_value(), base_url=reach.daily_api_base_url,
                         timeout_s=per_request_s) if daily_key else None,
        payments=StripeLinks(stripe_key.get_secret_value(), api_base=reach.stripe_api_base_url,
                             timeout_s=per_request_s) if stripe_key else None,
        provider_timeout_s=reach.provider_timeout_s,
    )


def _texter(settings: Settings, pool: asyncpg.Pool) -> Texter | None:
    telephony = settings.telephony
    if not (telephony.twilio_account_sid and telephony.twilio_auth_token):
        return None
    account = TwilioAccount(telephony.twilio_account_sid,
                            telephony.twilio_auth_token.get_secret_value(),
                            telephony.twilio_api_base_url)
    public_url = settings.server.public_url
    status_callback = public_url.rstrip("/") + TEXT_STATUS_PATH if public_url else None
    return Texter(pool, TwilioMessages(account),
                  messaging_service_sid=telephony.twilio_messaging_service_sid,
                  status_callback=status_callback)
