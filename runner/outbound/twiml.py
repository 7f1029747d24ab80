"""The TwiML a placed call is answered with when it does not stream: words already filled
in (the clinic's name, its number), then the hang-up; or the hang-up alone."""

from __future__ import annotations

from twilio.twiml.voice_response import VoiceResponse


def say_then_hang_up(text: str) -> str:
    response = VoiceResponse()
    response.say(text)
    response.hangup()
    return str(response)


def hang_up() -> str:
    response = VoiceResponse()
    response.hangup()
    return str(response)
