"""Calls on a real service process, for the chaos tests: a simulated caller on its media
stream (audio, as Twilio sends it), and answers signed as Twilio signs them."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from dataclasses import dataclass, field

import httpx
from twilio.request_validator import RequestValidator

from simulator.simulator import CallScript, SimulationResult, simulate_call

DEMO_NUMBER = "+15550100100"

# A caller who keeps talking for longer than any chaos test waits.
CALLER = CallScript.model_validate({
    "name": "chaos_caller", "from": "+15550100231", "to": DEMO_NUMBER,
    "turns": [
        # Waits out the whole greeting (over 20 s with the after-hours line), so that
        # nothing the agent says is cut short by the caller talking over it.
        {"say": "Hi, I'd like to book a checkup for my daughter, please.", "pause_s": 0.5,
         "wait_s": 45},
        {"say": "Tomorrow morning would suit us best, if you have anything then.",
         "pause_s": 1.0},
        {"say": "Her name is Mia Jones and she was born on the third of May.", "pause_s": 1.0},
    ],
    "hangup_after_s": 60,
})
# A caller who listens for a long while before saying anything.
PATIENT_CALLER = CallScript.model_validate({
    "name": "chaos_patient_caller", "from": "+15550100233", "to": DEMO_NUMBER,
    "turns": [{"say": "Sorry, I'm still here. Can I book a checkup?", "pause_s": 30}],
    "hangup_after_s": 60,
})
_ANSWERED = re.compile(r"answered: call ([0-9a-f-]{36})")


@dataclass
class LiveCall:
    """A simulated call under way; `task` returns what the caller heard."""

    task: asyncio.Task[SimulationResult]
    log: list[tuple[float, str]] = field(default_factory=list)  # (monotonic time, line)
    call_id: str | None = None
    answered_at: float | None = None  # ~ the caller's time zero (its stream opens then)

    def heard_speaking(self) -> bool:
        return any("agent speaking" in line for _, line in self.log)

    def at_s(self, moment: float) -> float:
        """A monotonic `moment` on the caller's clock (seconds since its stream opened)."""
        assert self.answered_at is not None
        return moment - self.answered_at


async def place(base_url: str, api_key: str, twilio_token: str,
                script: CallScript = CALLER, *, text_mode: bool = False) -> LiveCall:
    """Start a simulated call (audio unless `text_mode`) and return once the service
    answered it."""
    call = LiveCall(task=None)  # type: ignore[arg-type]

    def log(line: str) -> None:
        now = time.monotonic()
        call.log.append((now, line))
        if (found := _ANSWERED.search(line)) is not None:
            call.call_id, call.answered_at = found[1], now

    call.task = asyncio.create_task(simulate_call(
        script, base_url=base_url, api_key=api_key, twilio_token=twilio_token, log=log,
        text_mode=text_mode, record_wait_s=0.0, analysis_wait_s=0.0))
    await until(lambda: call.call_id is not None or call.task.done(), 30, "the answer")
    if call.task.done():
        call.task.result()  # raises what went wrong
    return call


async def until(condition, timeout_s: float, what: str, poll_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s} s for {what}")
        await asyncio.sleep(poll_s)


def answer_form(to_number: str = DEMO_NUMBER) -> dict[str, str]:
    return {"CallSid": "CA" + uuid.uuid4().hex, "AccountSid": "AC" + "0" * 32,
            "From": "+15550100232", "To": to_number, "CallStatus": "ringing",
            "Direction": "inbound", "ApiVersion": "2010-04-01"}


def signed_post(base_url: str, path: str, twilio_token: str, form: dict[str, str]
                ) -> httpx.Response:
    """A webhook as Twilio sends it (signed with the account's token)."""
    url = f"{base_url}{path}"
    signature = RequestValidator(twilio_token).compute_signature(url, form)
    return httpx.post(url, data=form, headers={"X-Twilio-Signature": signature}, timeout=10)
