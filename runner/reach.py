"""How this deployment reaches patients beyond the call, built from the settings: texts
through Twilio's Messages resource when the account is configured."""

from __future__ import annotations

import asyncpg

from config import Settings
from flows.post_booking_tools import Reach
from flows.texting import Texter
from services.twilio.messages import TwilioMessages
from services.twilio.numbers import TwilioAccount

# Where Twilio posts a text's status changes (api/text_webhooks.py).
TEXT_STATUS_PATH = "/sms/status"


def build_reach(settings: Settings, pool: asyncpg.Pool) -> Reach:
    telephony = settings.telephony
    if not (telephony.twilio_account_sid and telephony.twilio_auth_token):
        return Reach()
    account = TwilioAccount(telephony.twilio_account_sid,
                            telephony.twilio_auth_token.get_secret_value(),
                            telephony.twilio_api_base_url)
    public_url = settings.server.public_url
    status_callback = public_url.rstrip("/") + TEXT_STATUS_PATH if public_url else None
    texter = Texter(pool, TwilioMessages(account),
                    messaging_service_sid=telephony.twilio_messaging_service_sid,
                    status_callback=status_callback)
    return Reach(texter=texter)
