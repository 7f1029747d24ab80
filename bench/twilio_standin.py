"""The simulator's Twilio stand-in (simulator/twilio_rest.py) in its own process, with a
clock on every call it is asked to place, for `bench.outbound`.

Twilio is not on the service's machine: serving its stand-in from the benchmark's own
event loop would charge its work (placing calls, posting their webhooks) to the process
being measured. So it runs here, and the benchmark reads what it saw over HTTP:

- `POST /bench/callees` {number: kind}: who answers those numbers (busy, no_answer,
  voicemail, fail);
- `GET /bench/calls`: every call placed, with when the create request arrived and when
  the call ended (epoch seconds), its To number, the status callback it named, its final
  status, and how many status callbacks it posted and how many of those the service
  refused or never answered.

    python -m bench.twilio_standin CLINIC_NUMBER [--ring-s 0.5] [--no-answer-s 1.0]

prints one JSON line (base_url, account_sid, auth_token), then serves until stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from simulator.outbound_callee import CallTiming, PlacedCallState
from simulator.twilio_rest import FakeTwilioRest, serve_twilio_rest

# A phone rings this long before a machine answers, and this long before nobody does:
# short, so a run is short; what the dispatcher does per call is the same.
DEFAULT_RING_S = 0.5
DEFAULT_NO_ANSWER_S = 1.0


@dataclass
class TimedTwilioRest(FakeTwilioRest):
    """The stand-in, noting when each create request arrived and each call ended."""

    placed_at: dict[str, float] = field(default_factory=dict)  # by SID
    ended_at: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.on_call_ended = self._ended

    def _place(self, fields: tuple[tuple[str, str], ...]) -> web.Response:
        arrived = time.time()
        response = super()._place(fields)
        if response.status == 201:
            sid = next(reversed(self.calls))  # the call just added
            self.placed_at[sid] = arrived
        return response

    def _ended(self, state: PlacedCallState) -> None:
        self.ended_at[state.sid] = time.time()

    def report(self) -> dict[str, Any]:
        return {
            "calls": [{
                "sid": sid, "to": state.resource["to"], "status": state.resource["status"],
                "status_callback": state.param("StatusCallback"),
                "placed_at": self.placed_at.get(sid), "ended_at": self.ended_at.get(sid),
                "callbacks": len(self.status_callbacks(sid)),
                "callbacks_refused": sum(sent.status_code not in (200, 204)
                                         for sent in self.status_callbacks(sid)),
            } for sid, state in self.calls.items()],
        }


def bench_routes(fake: TimedTwilioRest) -> web.Application:
    """The benchmark's own routes, beside the Twilio API."""
    app = web.Application()

    async def callees(request: web.Request) -> web.Response:
        for number, kind in (await request.json()).items():
            fake.add_callee(number, kind)
        return web.json_response({"callees": len(fake.callees)})

    async def calls(_request: web.Request) -> web.Response:
        return web.json_response(fake.report())

    app.router.add_post("/callees", callees)
    app.router.add_get("/calls", calls)
    return app


async def serve(args: argparse.Namespace) -> None:
    fake = TimedTwilioRest(timing=CallTiming(ring_s=args.ring_s, no_answer_s=args.no_answer_s))
    fake.add_number(args.clinic_number)
    async with serve_twilio_rest(fake) as base_url:
        bench = web.AppRunner(bench_routes(fake))
        await bench.setup()
        site = web.TCPSite(bench, "127.0.0.1", 0)
        await site.start()
        bench_port = site._server.sockets[0].getsockname()[1]
        print(json.dumps({"base_url": base_url, "account_sid": fake.account_sid,
                          "auth_token": fake.auth_token,
                          "bench_url": f"http://127.0.0.1:{bench_port}"}), flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await bench.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clinic_number")
    parser.add_argument("--ring-s", type=float, default=DEFAULT_RING_S)
    parser.add_argument("--no-answer-s", type=float, default=DEFAULT_NO_ANSWER_S)
    args = parser.parse_args()
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
