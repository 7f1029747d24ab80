"""The TwiML we answer with, built with twilio's `VoiceResponse`: a stream, or words then hang-up."""

from __future__ import annotations

from twilio.twiml.voice_response import Connect, Stream, VoiceResponse

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
