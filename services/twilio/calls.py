"""Outbound calls through Twilio's REST API (twilio SDK): place one, find the ones placed to
a number since a moment, hang one up.

A call is placed with the TwiML URL Twilio requests once the callee answers and a status
callback for every progress event (initiated, ringing, answered, completed). With
machine detection on, detection is synchronous and waits for the end of a greeting
(`DetectMessageEnd`): Twilio requests the URL only after it has decided, with
`AnsweredBy` = human | machine_end_beep | machine_end_silence | machine_end_other | fax |
unknown, so a message left on a machine starts after the beep.

Each request runs off the event loop (`services/twilio/rest.py`); a refusal is a
TwilioCallError that says whether trying again can help.

Placing a call that timed out may still have placed it: `since` finds out before dialling
again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from services.twilio.numbers import TwilioAccount, rest_client
from services.twilio.rest import TwilioRequestError, run_request

# The progress events a placed call reports to its status callback.
PROGRESS_EVENTS = ("initiated", "ringing", "answered", "completed")
# Wait for the end of an answering machine's greeting before requesting the TwiML URL.
MACHINE_DETECTION = "DetectMessageEnd"
# The most calls `since` reads; a number is never dialled this often in a day.
SINCE_LIMIT = 50
# Twilio: the call is not in a state that can be changed (it has already ended).
CALL_ALREADY_ENDED = 21220
# Twilio error codes a person can act on, named without Twilio's message.
EXPLAINED = {
    20003: "the account SID or auth token is wrong",
    20404: "no such resource",
    20429: "too many requests",
    21201: "no To number",
    21205: "the TwiML URL is not valid",
    21210: "the From number is not verified for this account",
    21211: "the To number is not a valid phone number",
    21212: "the From number is not one of the account's numbers",
    21213: "no From number",
    21214: "the To number cannot be reached",
    21215: "the account may not call that region",
    21216: "the account may not call that number",
    21217: "the To number is not a valid phone number",
}


@dataclass(frozen=True)
class PlacedCall:
    """A call as Twilio reports it."""

    sid: str
    status: str
    to: str
    from_: str
    start_time: datetime | None


class TwilioCallError(TwilioRequestError):
    """Twilio did not place, list or end a call (see TwilioRequestError)."""


class TwilioCalls:
    """The account's Calls resource."""

    def __init__(self, account: TwilioAccount) -> None:
        self._account = account

    async def create(self, *, to: str, from_: str, status_callback: str, url: str | None = None,
                     twiml: str | None = None, machine_detection: bool = True,
                     ring_s: int | None = None) -> PlacedCall:
        """Place a call from `from_` (one of the account's numbers) to `to`; once answered
        Twilio runs `twiml`, or POSTs `url` for it; every progress event goes to
        `status_callback`. `ring_s`: how long it rings before it is `no-answer`."""
        if (url is None) == (twiml is None):
            raise ValueError("a call needs either its TwiML URL or its TwiML")
        options: dict[str, Any] = {
            "to": to, "from_": from_,
            "status_callback": status_callback, "status_callback_method": "POST",
            "status_callback_event": list(PROGRESS_EVENTS),
            **({"url": url, "method": "POST"} if url is not None else {"twiml": twiml}),
        }
        if machine_detection:
            options["machine_detection"] = MACHINE_DETECTION
        if ring_s is not None:
            options["timeout"] = ring_s

        def place() -> Any:
            return self._calls().create(**options)

        return _placed(await self._run("place a call", place))

    async def since(self, *, to: str, from_: str, after: datetime) -> list[PlacedCall]:
        """Calls from `from_` to `to` that started at or after `after`, newest first. Twilio
        filters by day (`StartTime>=` takes a date), the rest is filtered here; a call not
        dialled yet has no start time and is listed too."""
        after = after.astimezone(UTC) if after.tzinfo else after.replace(tzinfo=UTC)

        def listed() -> list[Any]:
            return self._calls().list(to=to, from_=from_,
                                      start_time_after=after.strftime("%Y-%m-%d"),
                                      limit=SINCE_LIMIT)

        calls = [_placed(call) for call in await self._run("list calls", listed)]
        return [call for call in calls if call.start_time is None or call.start_time >= after]

    async def run_twiml(self, sid: str, twiml: str) -> None:
        """Replace what the live call `sid` is doing with `twiml` (Twilio ends a media
        stream it was running, then runs this)."""

        def update() -> Any:
            return self._calls()(sid).update(twiml=twiml)

        await self._run("redirect a call", update)

    async def hang_up(self, sid: str) -> None:
        """End the call whatever its state; one that has already ended is left as it is."""

        def end() -> Any:
            return self._calls()(sid).update(status="completed")

        try:
            await self._run("hang up a call", end)
        except TwilioCallError as error:
            if error.code != CALL_ALREADY_ENDED:
                raise

    def _calls(self) -> Any:
        """A fresh client per request: the SDK's HTTP session is not shared across threads."""
        return rest_client(self._account).api.v2010.accounts(self._account.account_sid).calls

    async def _run(self, doing: str, request: Any) -> Any:
        return await run_request(self._account, doing, request, explained=EXPLAINED,
                                 error=TwilioCallError)


def _placed(call: Any) -> PlacedCall:
    start = call.start_time if isinstance(call.start_time, datetime) else None
    return PlacedCall(sid=call.sid, status=call.status, to=call.to,
                      from_=getattr(call, "_from", None) or "", start_time=start)
