"""The TwiML we answer with, built with twilio's `VoiceResponse`: a stream, or words then hang-up."""

from __future__ import annotations

from dataclasses import dataclass

from twilio.twiml.voice_response import Connect, Dial, Start, Stream, VoiceResponse

from lib.prompts import render_prompt


def stream_twiml(stream_url: str, call_id: str) -> str:
    """`<Connect><Stream>` with our call id as a custom parameter."""
    response = VoiceResponse()
    connect = Connect()
    stream = Stream(url=stream_url)
    stream.parameter(name="call_id", value=call_id)
    connect.append(stream)
    response.append(connect)
    return str(response)


def say_then_hang_up(text: str) -> str:
    """Words (already filled in), then the hang-up."""
    response = VoiceResponse()
    response.say(text)
    response.hangup()
    return str(response)


def hang_up() -> str:
    response = VoiceResponse()
    response.hangup()
    return str(response)


def say_and_hang_up_twiml(prompt: str) -> str:
    """Never silence: when we cannot take the call, say why before hanging up."""
    return say_then_hang_up(render_prompt(prompt))


def unavailable_twiml() -> str:
    return say_and_hang_up_twiml("telephony/unavailable.txt")


def busy_twiml() -> str:
    return say_and_hang_up_twiml("telephony/busy.txt")


def not_in_service_twiml() -> str:
    return say_and_hang_up_twiml("telephony/not_in_service.txt")


def transfer_twiml(number: str) -> str:
    """Put the caller through to `number` (a configured or location number, never a spoken one)."""
    response = VoiceResponse()
    response.dial(number)
    return str(response)


@dataclass(frozen=True)
class Fork:
    """A copy of one party's audio streamed to us while they are in a conference (the
    record's transcript of that party): `<Start><Stream>` with the call and the party."""

    url: str
    call_id: str
    party: str  # caller | operator


@dataclass(frozen=True)
class Conference:
    """A hand-off's conference, as each leg joins it."""

    name: str
    status_callback: str
    action: str | None = None  # where Twilio posts when this leg's <Dial> ends


def conference_twiml(conference: Conference, *, say: str | None = None, starts: bool,
                     fork: Fork | None = None) -> str:
    """One leg into the conference: its fork first, then what it hears, then the room.
    The person answering `starts` it (the caller waits, in silence, until they join);
    either leaving ends it."""
    response = VoiceResponse()
    if fork is not None:
        start = Start()
        stream = Stream(url=fork.url, track="inbound_track")
        stream.parameter(name="call_id", value=fork.call_id)
        stream.parameter(name="party", value=fork.party)
        start.append(stream)
        response.append(start)
    if say:
        response.say(say)
    dial = Dial(**({"action": conference.action, "method": "POST"} if conference.action
                   else {}))
    dial.conference(
        conference.name, start_conference_on_enter=starts, end_conference_on_exit=True,
        beep=False, wait_url="", status_callback=conference.status_callback,
        status_callback_method="POST", status_callback_event="start end join leave")
    response.append(dial)
    return str(response)


def back_to_agent_twiml(stream_url: str, call_id: str, resume: str) -> str:
    """The caller back on the agent's media stream, on the same call, saying why."""
    response = VoiceResponse()
    connect = Connect()
    stream = Stream(url=stream_url)
    stream.parameter(name="call_id", value=call_id)
    stream.parameter(name="resume", value=resume)
    connect.append(stream)
    response.append(connect)
    return str(response)
