"""Text messages through Twilio's Messages resource (twilio SDK): send one, read one.

A message is sent from one of the account's numbers, or through a Messaging Service
(`MessagingServiceSid`, which picks the sender), with a status callback that hears it
go from queued to sent, delivered, undelivered or failed. Twilio refuses a number that
texted STOP (code 21610) until it texts START: such a refusal says `opted_out`, so the
caller can record it and never retry.

Each request runs off the event loop (`services/twilio/rest.py`). The body is never in
an error or a log line: it can name a patient's appointment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.twilio.numbers import TwilioAccount, rest_client
from services.twilio.rest import TwilioRequestError, run_request

# Twilio: the recipient texted STOP to this sender; nothing reaches them until START.
RECIPIENT_OPTED_OUT = 21610
# What a message's status callback reports, in order; the last two are failures.
STATUSES = ("accepted", "queued", "sending", "sent", "delivered", "undelivered", "failed")
EXPLAINED = {
    20003: "the account SID or auth token is wrong",
    20429: "too many requests",
    21211: "the To number is not a valid phone number",
    21408: "the account may not text that region",
    21602: "the message has no body",
    21604: "no To number",
    21606: "the From number cannot send text messages for this account",
    21610: "the recipient has opted out of texts from this number (they texted STOP)",
    21612: "that number cannot receive texts from this sender",
    21614: "the To number cannot receive text messages",
    21617: "the message is too long",
}


@dataclass(frozen=True)
class SentMessage:
    """A message as Twilio reported it."""

    sid: str
    status: str
    to: str
    error_code: int | None = None


class TwilioMessageError(TwilioRequestError):
    """Twilio did not take the message (see TwilioRequestError)."""

    @property
    def opted_out(self) -> bool:
        """The recipient texted STOP: do not try again, tell the caller another way."""
        return self.code == RECIPIENT_OPTED_OUT


@dataclass(frozen=True)
class Sender:
    """Who a message is from: one of the account's numbers, or a Messaging Service."""

    number: str | None = None
    messaging_service_sid: str | None = None

    def __post_init__(self) -> None:
        if not (self.number or self.messaging_service_sid):
            raise ValueError("a text needs a From number or a Messaging Service")


class TwilioMessages:
    """The account's Messages resource."""

    def __init__(self, account: TwilioAccount) -> None:
        self._account = account

    async def send(self, *, to: str, sender: Sender, body: str,
                   status_callback: str | None = None) -> SentMessage:
        """Queue `body` to `to`; Twilio POSTs each status change to `status_callback`."""
        options: dict[str, Any] = {"to": to, "body": body}
        if sender.messaging_service_sid:
            options["messaging_service_sid"] = sender.messaging_service_sid
        else:
            options["from_"] = sender.number
        if status_callback:
            options["status_callback"] = status_callback

        def create() -> Any:
            return self._messages().create(**options)

        return _sent(await self._run("send a text", create))

    async def get(self, sid: str) -> SentMessage:
        """The message's status now (when its callbacks did not arrive)."""

        def fetch() -> Any:
            return self._messages()(sid).fetch()

        return _sent(await self._run("read a text's status", fetch))

    def _messages(self) -> Any:
        """A fresh client per request: the SDK's HTTP session is not shared across threads."""
        return rest_client(self._account).api.v2010.accounts(self._account.account_sid).messages

    async def _run(self, doing: str, request: Any) -> Any:
        return await run_request(self._account, doing, request, explained=EXPLAINED,
                                 error=TwilioMessageError)


def _sent(message: Any) -> SentMessage:
    code = message.error_code
    return SentMessage(sid=message.sid, status=message.status, to=message.to,
                       error_code=int(code) if code not in (None, "") else None)


__all__ = ["STATUSES", "Sender", "SentMessage", "TwilioMessageError", "TwilioMessages"]
