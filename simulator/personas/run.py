"""Play personas against a running service and judge each call from its record.

`PersonaCaller` is the simulator's `Caller` for a persona: it decides when the next
line goes (interrupting callers barge in), asks the persona's responder (rules, or a
model over the rules) what to say to what the agent just said, and voices the line on
an audio call. On an audio call the caller hears the agent's words through the
service's observer feed (`ObserverWords`): the transcript an operator watching the
call sees. `run_persona` places the call with the simulator's webhooks and legs and
judges the record; `main_personas` is `python main.py simulate --persona PATH`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from loguru import logger
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from config import Settings
from simulator.caller_audio import SAMPLE_RATE, CallerLine, LineCue, encode_ulaw, split_frames
from simulator.personas.caller import RuleCaller
from simulator.personas.judge import Verdict, judge
from simulator.personas.model import Persona, PersonaError, load_personas
from simulator.simulator import (
    CallParties,
    CallTimeline,
    Log,
    SimulationError,
    SimulationResult,
    default_base_url,
    place_call,
    resolve_credentials,
)

PAUSE_S = 0.6  # a person's pause before answering
WAIT_S = 20.0  # the longest a caller waits for the agent before speaking anyway
BARGE_IN_CHANCE = 0.5  # an interrupting caller talks over this share of the agent's turns
OBSERVER_WAIT_S = 2.0  # how long an audio caller waits for the agent's words to arrive
OUTBOUND_ONLY = ("an outbound persona answers a call the clinic places: register it with the "
                 "Twilio stand-in as a person:FILE callee instead of placing a call with it")


class Responder(Protocol):
    """What a persona says next (None: hang up); `finished` once they said goodbye."""

    @property
    def finished(self) -> bool: ...

    async def respond(self, heard: list[str], *, interrupting: bool = False) -> str | None: ...


class RuleResponder:
    """The rule-based caller as a `Responder`."""

    def __init__(self, rules: RuleCaller) -> None:
        self.rules = rules

    @property
    def finished(self) -> bool:
        return self.rules.finished

    async def respond(self, heard: list[str], *, interrupting: bool = False) -> str | None:
        return self.rules.respond(heard, interrupting=interrupting)


Voice = Callable[[str], Awaitable[bytes]]  # text -> PCM16 at 8 kHz


class PersonaCaller:
    """The simulator's `Caller` for one persona."""

    hangup_after_s: float | None = None

    def __init__(self, persona: Persona, responder: Responder, *, voice: Voice | None = None,
                 pause_s: float = PAUSE_S, wait_s: float = WAIT_S) -> None:
        self.persona = persona
        self.responder = responder
        self._voice = voice
        self._pause_s = pause_s
        self._wait_s = wait_s
        self._rng = random.Random(persona.random_seed + 1)  # its own: timing never shifts words
        self._barging = False
        self.said: list[str] = []

    def next_cue(self) -> LineCue | None:
        if self.responder.finished:
            return None
        self._barging = (self.persona.has("interrupts") and bool(self.said)
                         and self._rng.random() < BARGE_IN_CHANCE)
        return LineCue(self._pause_s, self._barging, self._wait_s)

    async def next_line(self, number: int, heard: list[str]) -> CallerLine | None:
        text = await self.responder.respond(heard, interrupting=self._barging)
        if text is None:
            return None
        self.said.append(text)
        frames: list[bytes] = []
        if self._voice is not None:
            try:
                frames = split_frames(encode_ulaw(await self._voice(text)))
            except Exception as error:  # noqa: BLE001 - a voiceless line cannot be spoken
                raise SimulationError(
                    f"the caller's voice failed on line {number}: {type(error).__name__}"
                ) from error
        return CallerLine(number, text, frames, self._pause_s, self._barging, self._wait_s)


async def espeak_voice(text: str) -> bytes:
    """One line in eSpeak NG's voice, in a fresh process (as scripted calls are voiced)."""
    from services.espeak.engine import synthesize_script

    (pcm,) = await synthesize_script([(text, {})], SAMPLE_RATE)
    return pcm


class ObserverWords:
    """The agent's words on an audio call, from the service's observer feed
    (`WS /api/calls/{id}/observe`, `agent_transcript` events)."""

    def __init__(self, timeline: CallTimeline) -> None:
        self._timeline = timeline
        self._said: list[tuple[float, str]] = []  # (wall time, text)
        self._arrived = asyncio.Event()

    async def since(self, at_s: float) -> list[str]:
        wall = self._timeline.at_wall(at_s)
        deadline = asyncio.get_running_loop().time() + OBSERVER_WAIT_S
        while not any(ts >= wall for ts, _ in self._said):
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), remaining)
        return [text for ts, text in self._said if ts >= wall]

    def take(self, message: dict[str, Any]) -> None:
        if message.get("type") != "agent_transcript":
            return
        text = str((message.get("data") or {}).get("transcript") or "").strip()
        if text:
            self._said.append((float(message.get("ts") or 0.0), text))
            self._arrived.set()
            self._timeline.note("agent_said", text)


def websocket_url(base_url: str, path: str) -> str:
    """The service's WebSocket address for `path` (http → ws, https → wss)."""
    base = urlsplit(base_url)
    return urlunsplit(("wss" if base.scheme == "https" else "ws", base.netloc, path, "", ""))


def observer_listener(base_url: str, api_key: str | None
                      ) -> Callable[[str, CallTimeline], contextlib.AbstractAsyncContextManager]:
    """How an audio persona hears the agent: the call's observer feed, with the API key."""

    @contextlib.asynccontextmanager
    async def listen(call_id: str, timeline: CallTimeline) -> AsyncIterator[ObserverWords]:
        if not api_key:
            raise SimulationError("an audio persona hears the agent through the observer feed, "
                                  "which needs an API key (--api-key or VOICE_API_KEY)")
        url = websocket_url(base_url, f"/api/calls/{call_id}/observe")
        words = ObserverWords(timeline)
        try:
            socket = await connect(url, additional_headers={"Authorization": f"Bearer {api_key}"},
                                   open_timeout=10)
        except (OSError, InvalidHandshake, TimeoutError) as error:
            raise SimulationError(f"cannot open the observer feed at {url}: "
                                  f"{type(error).__name__}") from error

        async def read() -> None:
            with contextlib.suppress(ConnectionClosed):
                async for raw in socket:
                    with contextlib.suppress(ValueError):
                        words.take(json.loads(raw))

        reader = asyncio.create_task(read(), name="persona-observer")
        try:
            yield words
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            await socket.close()

    return listen


@dataclass
class PersonaRun:
    """One persona's call: the verdict, and the call as the simulator saw it."""

    persona: Persona
    verdict: Verdict
    result: SimulationResult | None = None
    said: list[str] = field(default_factory=list)
    model_fallbacks: int = 0


def responder_for(persona: Persona, settings: Settings | None, use_model: bool) -> Responder:
    """The model-played caller when asked for and a key is set, else the rules."""
    if use_model and settings is not None:
        from simulator.personas.llm_caller import build_model_caller

        model = build_model_caller(persona, settings)
        if model is not None:
            return model
    return RuleResponder(RuleCaller(persona))


async def run_persona(
    persona: Persona, *, base_url: str, api_key: str | None, twilio_token: str,
    text_mode: bool = True, log: Log = print, responder: Responder | None = None,
    voice: Voice | None = None, pause_s: float = PAUSE_S, quiet_s: float | None = None,
    account_sid: str | None = None,
) -> PersonaRun:
    """Place one persona's call and judge it (a call that could not be placed fails)."""
    if persona.outbound:
        return PersonaRun(persona, judge(persona, None, problem=OUTBOUND_ONLY))
    responder = responder or RuleResponder(RuleCaller(persona))
    if not text_mode and voice is None:
        voice = espeak_voice
    caller = PersonaCaller(persona, responder, voice=None if text_mode else voice,
                           pause_s=pause_s)
    parties = CallParties.new(persona.from_number, persona.to_number, account_sid)
    try:
        result = await place_call(
            caller, parties, base_url=base_url, api_key=api_key, twilio_token=twilio_token,
            name=persona.name, text_mode=text_mode, log=log, quiet_s=quiet_s,
            listen=None if text_mode else observer_listener(base_url, api_key),
        )
    except SimulationError as error:
        return PersonaRun(persona, judge(persona, None, problem=str(error)), said=caller.said)
    verdict = judge(persona, result.record, problem=result.record_error)
    return PersonaRun(persona, verdict, result, caller.said,
                      getattr(responder, "fallbacks", 0))


async def run_personas(
    personas: list[Persona], *, between: Callable[[], Awaitable[None]] | None = None,
    **options: Any,
) -> list[PersonaRun]:
    """Each persona in turn (`between` runs after each, e.g. to reset the clinic)."""
    runs = []
    for persona in personas:
        runs.append(await run_persona(persona, **options))
        if between is not None:
            await between()
    return runs


# -- The command line ------------------------------------------------------------


def summary(runs: list[PersonaRun]) -> dict[str, Any]:
    """The JSON report: every persona's verdict and the totals."""
    succeeded = sum(run.verdict.success for run in runs)
    return {
        "personas": [run.verdict.to_json_dict() | ({"model_fallbacks": run.model_fallbacks}
                                                    if run.model_fallbacks else {})
                     for run in runs],
        "total": len(runs), "succeeded": succeeded,
        "success_rate": round(succeeded / len(runs), 3) if runs else 0.0,
        "unconfirmed_writes": sum(run.verdict.unconfirmed_writes for run in runs),
        "blocked_writes": sum(run.verdict.blocked_writes for run in runs),
        "repeated_questions": sum(run.verdict.repeated_questions for run in runs),
    }


def format_run(run: PersonaRun) -> str:
    verdict = run.verdict
    mark = "ok  " if verdict.success else "FAIL"
    line = (f"{mark} {verdict.persona}: {verdict.turns} caller turns, "
            f"{verdict.repeated_questions} repeated question(s), ended {verdict.completion_reason}")
    return "\n".join([line] + [f"     - {reason}" for reason in verdict.reasons])


def add_persona_arguments(parser: argparse.ArgumentParser) -> None:
    """`main.py simulate --persona PATH` options (the shared ones are the simulator's)."""
    parser.add_argument(
        "--persona", type=Path, default=None,
        help="play a persona file, or every persona in a folder (e.g. scenarios/personas/)",
    )
    parser.add_argument(
        "--caller", choices=("auto", "rules"), default="auto",
        help="who plays the persona: a fast model when GOOGLE_API_KEY or ANTHROPIC_API_KEY "
        "is set (auto), else the rules",
    )
    parser.add_argument("--verbose", action="store_true", help="print each call as it goes")


def run_persona_command(args: argparse.Namespace, settings: Settings | None = None) -> int:
    """Entry point for `python main.py simulate --persona PATH`."""
    from lib import event_loop
    try:
        return event_loop.run(main_personas(args, settings))
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


async def main_personas(args: argparse.Namespace, settings: Settings | None = None) -> int:
    """Exit codes: 0 every persona succeeded, 1 some failed, 2 no call could be made."""
    def progress(line: str) -> None:
        if args.verbose:
            print(line, file=sys.stderr, flush=True)

    try:
        personas = load_personas(args.persona)
    except PersonaError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    settings = settings or Settings()
    api_key, token = resolve_credentials(args, settings)
    runs = []
    for persona in personas:
        logger.debug(f"persona {persona.name}")
        run = await run_persona(
            persona, base_url=args.url or default_base_url(settings), api_key=api_key,
            twilio_token=token, text_mode=args.text, log=progress,
            responder=responder_for(persona, settings, use_model=args.caller != "rules"),
            account_sid=settings.telephony.twilio_account_sid,
        )
        runs.append(run)
        if not args.json:
            print(format_run(run), flush=True)
        if run.result is None and all(r.result is None for r in runs):
            print(f"error: {run.verdict.reasons[0]}", file=sys.stderr)
            return 2
    report = summary(runs)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"\n{report['succeeded']}/{report['total']} personas succeeded; "
              f"{report['unconfirmed_writes']} unconfirmed write(s); "
              f"{report['repeated_questions']} repeated question(s)")
    return 0 if report["succeeded"] == report["total"] else 1
