"""(c) Time from Twilio's `start` message to the first agent audio byte, against the real service.

Starts `python main.py serve` exactly as `make run` does (embedded PostgreSQL,
local voices, no keys) in a fresh data directory, then plays Twilio for each
call: the signed `/voice/answer` webhook, a ring gap (Twilio fetches the TwiML
and opens the stream; the greeting renders meanwhile), `/ws` with `connected`
and `start`, and waits for the first `media` message. The clock starts when
`start` has been sent and stops when the first media message has been read.

    python -m bench.first_audio [--calls 30] [--ring-s 1.0]
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import argparse
import asyncio
import base64
import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from websockets.asyncio.client import connect

from bench.harness import percentile
from bench.report import measured_line, write_section
from config import Settings
from lib import event_loop
from runner import dev_credentials
from simulator.caller_audio import StreamIdentity, TwilioMessages
from simulator.simulator import CallParties, TwilioWebhooks, media_stream_url, signed_upgrade
from tests.e2e.service_process import start_service

WARM_UP_S = 3.0  # the speech-recognition decoder processes spawn after start-up
FIRST_AUDIO_TIMEOUT_S = 10.0
CALLER, CLINIC = "+15555550100", "+15555550199"


@dataclass
class CallTiming:
    start_to_first_audio_ms: float
    answer_ms: float
    first_audio_voiced: bool


async def one_call(http: httpx.AsyncClient, url: str, token: str, ring_s: float) -> CallTiming:
    parties = CallParties.new(CALLER, CLINIC)
    answered = time.perf_counter()
    target = await TwilioWebhooks(http, url, token, parties).answer()
    answer_ms = (time.perf_counter() - answered) * 1000
    await asyncio.sleep(ring_s)
    messages = TwilioMessages(StreamIdentity(
        account_sid=parties.account_sid, call_sid=parties.call_sid,
        stream_sid=parties.stream_sid, custom_parameters=target.parameters,
    ))
    ws_url = media_stream_url(url, target.url)
    async with connect(ws_url, additional_headers=signed_upgrade(token, ws_url)) as websocket:
        await websocket.send(messages.connected())
        await websocket.send(messages.start())
        started = time.perf_counter()
        async with asyncio.timeout(FIRST_AUDIO_TIMEOUT_S):
            while True:
                message = json.loads(await websocket.recv())
                if message.get("event") == "media":
                    elapsed_ms = (time.perf_counter() - started) * 1000
                    payload = message["media"]["payload"]
                    break
        await websocket.send(messages.stop())
    # μ-law silence is 0xFF/0x7F; anything else means the first frame already carries speech.
    voiced = any(byte not in (0xFF, 0x7F) for byte in base64.b64decode(payload))
    return CallTiming(elapsed_ms, answer_ms, voiced)


async def measure(url: str, token: str, calls: int, ring_s: float) -> list[CallTiming]:
    timings = []
    async with httpx.AsyncClient(timeout=10) as http:
        for _ in range(calls):
            timings.append(await one_call(http, url, token, ring_s))
            await asyncio.sleep(0.3)  # let the previous call's record flush
    return timings


def summarize(timings: list[CallTiming]) -> dict:
    values = [t.start_to_first_audio_ms for t in timings]
    steady = values[1:] or values
    return {
        "calls": len(values),
        "first_call_ms": values[0],
        "p50_ms": percentile(steady, 50),
        "p95_ms": percentile(steady, 95),
        "max_ms": max(steady),
        "mean_ms": statistics.fmean(steady),
        "answer_p50_ms": percentile([t.answer_ms for t in timings], 50),
        "voiced_first_frames": sum(t.first_audio_voiced for t in timings),
    }


async def main(calls: int, ring_s: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-fa-", dir="/tmp") as directory:
        data_dir = Path(directory)
        service = await asyncio.to_thread(
            start_service, {"DATA_DIR": str(data_dir), "LOG_LEVEL": "WARNING"},
            data_dir / "service.log", timeout_s=180,
        )
        try:
            await asyncio.sleep(WARM_UP_S)
            token = dev_credentials.twilio_auth_token(Settings(_env_file=None, data_dir=data_dir))
            report = summarize(await measure(service.url, token, calls, ring_s))
        finally:
            service.stop()
    report["ring_s"] = ring_s
    print(
        f"(c) start -> first agent audio byte, {report['calls']} calls, ring gap {ring_s:g} s: "
        f"first call {report['first_call_ms']:.1f} ms; then p50 {report['p50_ms']:.1f} ms, "
        f"p95 {report['p95_ms']:.1f} ms, max {report['max_ms']:.1f} ms "
        f"(answer webhook p50 {report['answer_p50_ms']:.1f} ms)"
    )
    return report


def render(report: dict) -> str:
    verdict = "met" if report["p95_ms"] <= 100 else "NOT met"
    return "\n".join([
        "## Twilio `start` → first agent audio byte",
        "",
        measured_line("python -m bench.first_audio"),
        "",
        "The real service (`python main.py serve`: embedded PostgreSQL, local voices, no keys) "
        "in a fresh data directory; a client plays Twilio: signed `/voice/answer`, a "
        f"{report['ring_s']:g} s ring gap (the greeting renders meanwhile), `/ws` with "
        "`connected` and `start`. The clock runs from sending `start` to reading the first "
        "`media` message: stream validation, the call lookup, building the pipeline, "
        "starting it and the pre-rendered greeting's first 20 ms.",
        "",
        "| Calls | First call of the process | p50 | p95 | Max | Answer webhook p50 |",
        "|---|---|---|---|---|---|",
        f"| {report['calls']} | {report['first_call_ms']:.1f} ms | {report['p50_ms']:.1f} ms "
        f"| {report['p95_ms']:.1f} ms | {report['max_ms']:.1f} ms "
        f"| {report['answer_p50_ms']:.1f} ms |",
        "",
        f"Target ≤ 100 ms with a pre-rendered greeting: **{verdict}** (p95 of the calls after "
        f"the first). {report['voiced_first_frames']} of {report['calls']} first frames already "
        "carried voice.",
    ])


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--ring-s", type=float, default=1.0)
    parser.add_argument("--no-docs", action="store_true", help="print only")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    result = event_loop.run(main(args.calls, args.ring_s))
    if not args.no_docs:
        write_section("first-audio", render(result))
