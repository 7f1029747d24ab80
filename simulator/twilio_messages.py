"""The Twilio stand-in's Messages resource (simulator/twilio_rest.py serves it), in the
shapes Twilio documents (twilio.com/docs/messaging/api/message-resource, /docs/errors).

`POST Messages.json` takes To, Body and From (one of the account's numbers) or
MessagingServiceSid, with an optional StatusCallback, and answers 201 with the message
resource: `queued` (`accepted` through a Messaging Service). Refusals as Twilio's: no To
(21604), a To that is not E.164 (21211), no Body (21602), a body over 1600 characters
(21617), neither From nor MessagingServiceSid (21603), a From the account does not own
(21606), a recipient who texted STOP (21610, `opt_out`). The message then goes sent and
delivered (or undelivered, for a number registered with `undeliverable`), each change
POSTed to its StatusCallback signed with X-Twilio-Signature as Twilio signs it.
`GET Messages/{Sid}.json` reads one; `GET Messages.json` lists them newest first (To,
From filters), in Twilio's paged shape.

Every message sent is kept (`sent`), so a test reads what reached the phone.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from loguru import logger
from twilio.request_validator import RequestValidator

from simulator.simulator import E164, send_signed
from simulator.twilio_wire import rfc2822, webhook_tls

MAX_BODY = 1600
# How long a message takes to be sent, then delivered.
STEP_S = 0.05


def segments(body: str) -> int:
    """How many SMS a body takes: one up to 160 characters, else 153 per part."""
    return 1 if len(body) <= 160 else -(-len(body) // 153)


@dataclass(frozen=True)
class Refusal:
    status: int
    code: int
    message: str


@dataclass
class TextedPhone:
    """One message as the stand-in keeps it, with every status callback it POSTed (the
    HTTP status the service answered, None when it could not be reached)."""

    resource: dict[str, Any]
    callbacks: list[tuple[str, int | None]] = field(default_factory=list)

    @property
    def body(self) -> str:
        return self.resource["body"]


@dataclass
class FakeMessages:
    """The account's texts: what was sent, who opted out, whom texts cannot reach."""

    account_sid: str
    auth_token: str
    api: str
    sent: dict[str, TextedPhone] = field(default_factory=dict)  # by SID, in order
    opted_out: set[str] = field(default_factory=set)
    undeliverable: set[str] = field(default_factory=set)
    messaging_services: set[str] = field(default_factory=set)
    _running: set[asyncio.Task[None]] = field(default_factory=set)

    def to(self, number: str) -> list[TextedPhone]:
        """The messages sent to `number`, in order."""
        return [m for m in self.sent.values() if m.resource["to"] == number]

    def add_messaging_service(self) -> str:
        sid = "MG" + secrets.token_hex(16)
        self.messaging_services.add(sid)
        return sid

    def create(self, form: dict[str, str], owned: set[str]) -> dict[str, Any] | Refusal:
        to, body = form.get("To", ""), form.get("Body", "")
        from_, service = form.get("From", ""), form.get("MessagingServiceSid", "")
        if not to:
            return Refusal(400, 21604, "A 'To' phone number is required.")
        if not re.fullmatch(E164, to):
            return Refusal(400, 21211, f"Invalid 'To' Phone Number: {to}")
        if not body and not form.get("MediaUrl"):
            return Refusal(400, 21602, "Message body is required.")
        if len(body) > MAX_BODY:
            return Refusal(400, 21617, "The concatenated message body exceeds the 1600 "
                           "character limit.")
        if not from_ and not service:
            return Refusal(400, 21603, "A 'From' phone number is required.")
        if service and service not in self.messaging_services:
            return Refusal(404, 20404, f"The requested resource MessagingService {service} "
                           "was not found")
        if from_ and from_ not in owned:
            return Refusal(400, 21606, "The 'From' phone number provided is not a valid "
                           "message-capable Twilio phone number for this destination.")
        if to in self.opted_out:
            return Refusal(400, 21610, "Attempt to send to unsubscribed recipient")
        return self._queued(to, from_ or None, service or None, body, form)

    def _queued(self, to: str, from_: str | None, service: str | None, body: str,
                form: dict[str, str]) -> dict[str, Any]:
        sid, now = "SM" + secrets.token_hex(16), rfc2822(datetime.now(UTC))
        uri = f"{self.api}/Accounts/{self.account_sid}/Messages/{sid}"
        resource = {
            "sid": sid, "account_sid": self.account_sid, "api_version": "2010-04-01",
            "body": body, "date_created": now, "date_updated": now, "date_sent": None,
            "direction": "outbound-api", "error_code": None, "error_message": None,
            "from": from_, "messaging_service_sid": service, "num_media": "0",
            "num_segments": str(segments(body)),
            "price": None, "price_unit": "USD", "status": "accepted" if service else "queued",
            "to": to, "uri": f"{uri}.json",
            "subresource_uris": {"media": f"{uri}/Media.json",
                                 "feedback": f"{uri}/Feedback.json"},
        }
        texted = TextedPhone(resource)
        self.sent[sid] = texted
        task = asyncio.create_task(self._deliver(texted, form.get("StatusCallback")),
                                   name=f"twilio-text-{sid[:8]}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return resource

    async def _deliver(self, texted: TextedPhone, callback: str | None) -> None:
        failed = texted.resource["to"] in self.undeliverable
        steps = ["queued", "sent", "undelivered" if failed else "delivered"]
        if texted.resource["status"] == "accepted":
            steps.insert(0, "accepted")
        async with httpx.AsyncClient(timeout=5.0, verify=webhook_tls()) as http:
            for status in steps[1:]:
                await asyncio.sleep(STEP_S)
                self._set(texted, status, error_code=30003 if status == "undelivered" else None)
                if callback:
                    await self._post(http, texted, callback)

    def _set(self, texted: TextedPhone, status: str, *, error_code: int | None) -> None:
        now = rfc2822(datetime.now(UTC))
        texted.resource.update(status=status, date_updated=now, error_code=error_code)
        if status == "sent":
            texted.resource["date_sent"] = now

    async def _post(self, http: httpx.AsyncClient, texted: TextedPhone, url: str) -> None:
        message = texted.resource
        params = {"MessageSid": message["sid"], "SmsSid": message["sid"],
                  "MessageStatus": message["status"], "SmsStatus": message["status"],
                  "To": message["to"], "From": message["from"] or "",
                  "AccountSid": self.account_sid, "ApiVersion": "2010-04-01"}
        if message["messaging_service_sid"]:
            params["MessagingServiceSid"] = message["messaging_service_sid"]
        if message["error_code"]:
            params["ErrorCode"] = str(message["error_code"])
        try:
            response = await send_signed(http, RequestValidator(self.auth_token), url, params)
        except httpx.HTTPError as error:
            logger.warning(f"twilio stand-in: text status callback not delivered "
                           f"({type(error).__name__})")
            texted.callbacks.append((message["status"], None))
            return
        texted.callbacks.append((message["status"], response.status_code))

    def listed(self, to: str | None, from_: str | None) -> list[dict[str, Any]]:
        return [m.resource for m in reversed(self.sent.values())
                if (to is None or m.resource["to"] == to)
                and (from_ is None or m.resource["from"] == from_)]

    async def wait_settled(self, timeout_s: float = 5.0) -> None:
        """Every message sent has reached its last status (and posted it)."""
        if self._running:
            await asyncio.wait_for(asyncio.gather(*self._running, return_exceptions=True),
                                   timeout_s)

    async def close(self) -> None:
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

__all__ = ["FakeMessages", "Refusal", "TextedPhone"]
