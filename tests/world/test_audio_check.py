"""Audio verification: the offline check's confidence bands, and what the agent does
with each (use, read back, ask again, ask to spell), or without one (timeout)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import date

import pytest
from pipecat.frames.frames import LLMContextFrame, LLMTextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import SleepFrame, run_test

from call.identity import CallIdentity
from flows.graph import bundled_graph
from flows.graph_engine import GraphEngine
from flows.graph_navigator_processor import GraphNavigatorProcessor
from flows.graph_session import GraphSession
from processors.world.audio_check import AudioCheck, Correction, LocalAudioVerifier
from tests.fakes import make_session

PCM = b"\x10\x00" * 8000  # 1 s of 8 kHz audio
TODAY = date(2026, 11, 25)


@dataclass
class Reading:
    value: str | None
    score: int


class Recognizer:
    """Stands in for the grammar pass (processors/world/field_grammar.FieldRecognizer)."""

    def __init__(self, reading: Reading | None) -> None:
        self.reading = reading

    async def recognize(self, pcm, sample_rate, kind, *, timeout_s):
        return self.reading


async def local_check(transcript: str, reading: Reading | None) -> AudioCheck:
    verifier = LocalAudioVerifier(Recognizer(reading), today=lambda: TODAY)
    return await verifier.check(PCM, 8000, transcript, "date", [])


async def test_the_grammar_pass_agreeing_with_the_transcript_is_certain():
    check = await local_check("march fourteenth nineteen forty eight", Reading("1948-03-14", 7))
    assert [(c.corrected, c.confidence) for c in check.corrections] == [("1948-03-14", 9)]
    assert check.band == "use"


async def test_a_disagreement_is_read_back_and_nothing_at_all_is_spelled():
    differs = await local_check("march fourteenth nineteen forty eight", Reading("1948-03-04", 8))
    assert (differs.band, differs.corrections[0].corrected) == ("confirm", "1948-03-04")
    only_audio = await local_check("march something", Reading("1948-03-14", 9))
    assert only_audio.corrections[0].confidence == 7  # one engine's word is never certain
    neither = await local_check("march something", Reading(None, 2))
    assert neither.both_wrong and neither.band == "spell"
    with pytest.raises(TimeoutError):
        await local_check("march", None)  # the pass did not answer: no corrections


def test_names_are_not_checked_offline():
    assert not LocalAudioVerifier(Recognizer(None)).supports("name")


class Verifier:
    name = "fake"

    def __init__(self, check: AudioCheck | None = None, delay_s: float = 0.0) -> None:
        self.result, self.delay_s, self.calls = check, delay_s, 0

    def supports(self, kind) -> bool:
        return True

    async def check(self, pcm, sample_rate, transcript, kind, hints):
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        return self.result


def navigator_asking_for_a_birth_date(writer, verifier: Verifier):
    session = make_session(writer)
    session.turn_audio.last_turn = PCM
    booking = GraphSession(identity=CallIdentity("call-1", "w", "s"),
                             services_read=True, upcoming=[], task=None)
    engine = GraphEngine(bundled_graph("clinic_booking"), booking, pool=None, log=session.log,
                           clinic_name="Riverside Clinic", emergency_number="911",
                           today=lambda: TODAY)
    engine.state, booking.last_action = "collecting_new_patient", "ask_date_of_birth"

    async def already_asked() -> None:  # the call is past its start: the question is out
        pass

    engine.start = already_asked
    booking.new_patient.first_name, booking.new_patient.last_name = "Sam", "Reed"
    return GraphNavigatorProcessor(session, engine, audio_verifier=verifier, audio_timeout_s=0.3), booking


async def said_after(writer, verifier: Verifier, caller: str):
    navigator, booking = navigator_asking_for_a_birth_date(writer, verifier)
    turn = LLMContextFrame(context=LLMContext(messages=[{"role": "user", "content": caller}]))
    down, _ = await run_test(navigator, frames_to_send=[turn, SleepFrame(0.5)],
                             expected_down_frames=None)
    text = "".join(f.text for f in down if isinstance(f, LLMTextFrame))
    return text, booking


def check(confidence: int | None, corrected: str = "1948-03-14") -> AudioCheck:
    if confidence is None:
        return AudioCheck("date", (), True, "fake")
    return AudioCheck("date", (Correction("date", "", corrected, confidence),), False, "fake")


async def test_a_certain_correction_is_used(writer):
    text, booking = await said_after(writer, Verifier(check(9)), "march forty nineteen eight")
    assert booking.new_patient.date_of_birth == date(1948, 3, 14)
    assert "Just to check" not in text
    [event] = writer.events("audio_verification")
    assert event.data["outcome"] == "use"
    assert event.data["corrections"] == [{"heard": "", "corrected": "1948-03-14",
                                          "confidence": 9}]


async def test_a_likely_correction_is_read_back(writer):
    text, booking = await said_after(writer, Verifier(check(6)), "march forty nineteen eight")
    assert text.startswith("Just to check, I have March 14, 1948.")
    assert booking.new_patient.date_of_birth == date(1948, 3, 14)


async def test_an_uncertain_answer_is_asked_again_and_the_question_stays_open(writer):
    text, booking = await said_after(writer, Verifier(check(3)), "march mumble")
    assert "say it again, slowly" in text and "date of birth" in text
    assert booking.last_action == "ask_date_of_birth" and booking.heard == []


async def test_when_both_fail_the_caller_is_asked_to_spell_it(writer):
    text, _ = await said_after(writer, Verifier(check(None)), "mumble")
    assert "one letter or digit at a time" in text


async def test_a_check_that_takes_too_long_is_skipped_and_the_call_goes_on(writer):
    text, booking = await said_after(writer, Verifier(check(9), delay_s=2.0),
                                     "march fourteenth nineteen forty eight")
    assert booking.new_patient.date_of_birth == date(1948, 3, 14)  # the transcript's own
    [event] = writer.events("audio_verification")
    assert (event.data["outcome"], event.data["error"]) == ("unavailable", "TimeoutError")
    assert text
