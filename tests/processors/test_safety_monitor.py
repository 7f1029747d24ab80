"""The safety monitor in a pipeline: crisis escalates even with the judge down, an idiom
does not when the judge says no, a soft concern guides the LLM, a held agent answers
nothing generated."""

import asyncio

from pipecat.frames.frames import (
    InterruptionFrame,
    LLMContextFrame,
    LLMMessagesAppendFrame,
    LLMTextFrame,
    TranscriptionFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.tests.utils import SleepFrame, run_test

from call.call_session import CompletionReason, SessionMode
from call.frames import EndCallFrame
from config import CrisisResource
from processors.conversation.agent_gate_processor import AgentGateProcessor
from processors.safety.judge import RulesJudge, Verdict
from processors.safety.monitor import SafetyServices
from processors.safety.safety_monitor_processor import SafetyMonitorProcessor
from services.embeddings import LocalEmbedder
from tests.fakes import make_session


def said(text: str) -> TranscriptionFrame:
    return TranscriptionFrame(text=text, user_id="caller", timestamp="")


class DownJudge:
    """A judge whose provider is unreachable."""

    name = "down"

    def __init__(self) -> None:
        self.asked = 0

    async def judge(self, text, concept):
        self.asked += 1
        raise ConnectionError("judge unreachable")


class NoJudge:
    """A judge that says no to everything, quickly."""

    name = "no"

    async def judge(self, text, concept):
        return Verdict(False, "figure of speech", "no")


def services(judge) -> SafetyServices:
    return SafetyServices(embedder=LocalEmbedder(), judge=judge)


def spoken(frames) -> str:
    return " ".join(f.text for f in frames if isinstance(f, LLMTextFrame))


async def test_a_crisis_utterance_escalates_and_suspends_the_agent_with_the_judge_down(writer):
    session = make_session(writer, SessionMode.TEXT)
    judge = DownJudge()
    down, up = await run_test(
        SafetyMonitorProcessor(session, services(judge), emergency_number="911"),
        frames_to_send=[said("I want to kill myself"), SleepFrame(sleep=0.3)],
    )
    (escalation,) = writer.of_type("EscalationRecord")
    assert (escalation.concept, escalation.severity, escalation.judge) == (
        "suicidal_ideation", "hard", None)
    assert escalation.similarity >= 0.85
    assert session.conversation.suspended
    assert any(isinstance(f, InterruptionFrame) for f in up)  # what was playing stops
    line = spoken(down)
    assert "please call 911" in line and "can't give you a crisis line number" in line
    assert [e.type for e in writer.events()][:2] == ["escalation", "agent_suspended"]
    assert judge.asked == 1  # asked afterwards, for the record; nothing waited for it


async def test_a_benign_utterance_with_a_crisis_word_does_not_escalate_when_the_judge_says_no(
    writer,
):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        SafetyMonitorProcessor(session, services(NoJudge())),
        frames_to_send=[said("This wait is killing me"), SleepFrame(sleep=0.3)],
        expected_down_frames=[TranscriptionFrame],
    )
    assert writer.of_type("EscalationRecord") == [] and not session.conversation.suspended
    checks = writer.events("safety_check")
    assert checks and checks[0].data["concept"] == "suicidal_ideation"
    assert checks[0].data["confirmed"] is False


async def test_the_offline_judge_confirms_a_candidate_below_the_threshold(writer):
    session = make_session(writer, SessionMode.TEXT)
    await run_test(
        SafetyMonitorProcessor(session, services(RulesJudge())),
        frames_to_send=[said("My boyfriend hit me last night"), SleepFrame(sleep=0.3)],
    )
    (escalation,) = writer.of_type("EscalationRecord")
    assert (escalation.concept, escalation.judge) == ("domestic_violence", "rules")
    assert escalation.similarity < 0.85 and session.conversation.suspended


async def test_a_soft_concern_guides_the_llm_and_the_call_goes_on(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        SafetyMonitorProcessor(session, services(RulesJudge())),
        frames_to_send=[said("Since I started the new tablets my face is swollen"),
                        SleepFrame(sleep=0.3)],
    )
    (escalation,) = writer.of_type("EscalationRecord")
    assert (escalation.concept, escalation.severity) == ("adverse_drug_reaction", "soft")
    assert not session.conversation.suspended
    (guidance,) = [f for f in down if isinstance(f, LLMMessagesAppendFrame)]
    assert guidance.messages[0]["content"].startswith("[SAFETY]") and not guidance.run_llm


async def test_a_configured_crisis_line_and_transfer_number_are_used(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        SafetyMonitorProcessor(session, services(DownJudge()),
                      crisis_resources=[CrisisResource(name="the crisis line", phone="988")],
                      transfer_number="+15550100999"),
        frames_to_send=[said("I want to die"), SleepFrame(sleep=0.3)],
    )
    assert "reach the crisis line at 9 8 8" in spoken(down)
    assert isinstance(down[-1], EndCallFrame)
    assert down[-1].reason == CompletionReason.TRANSFERRED.value
    assert session.transfer_to == "+15550100999"


async def test_no_turn_reaches_a_suspended_agent_and_the_caller_still_hears_someone(writer):
    session = make_session(writer, SessionMode.TEXT)
    session.conversation.suspended = True
    session.conversation.escalated_on = "I want to die"

    def turn(text: str) -> LLMContextFrame:
        return LLMContextFrame(LLMContext(messages=[{"role": "user", "content": text}]))

    down, _ = await run_test(
        AgentGateProcessor(session), frames_to_send=[turn("I want to die"), turn("Hello? Anyone?")],
    )
    assert not any(isinstance(f, LLMContextFrame) for f in down)
    assert spoken(down) == ("I'm still here with you. A person from our team is joining; "
                            "please stay on the line.")
    assert [e.data["answered"] for e in writer.events("agent_held")] == [
        "holding line", "still holding"]


async def test_the_check_never_delays_the_words_on_their_way(writer):
    session = make_session(writer, SessionMode.TEXT)

    class SlowEmbedder(LocalEmbedder):
        async def embed(self, texts):
            await asyncio.sleep(2)
            return self.embed_now(texts)

    slow = SafetyServices(embedder=SlowEmbedder(), judge=RulesJudge())
    index = await services(RulesJudge()).index()  # (the defaults are embedded at start-up)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await run_test(SafetyMonitorProcessor(session, slow, index=index), frames_to_send=[said("Hello")],
                   expected_down_frames=[TranscriptionFrame])
    assert loop.time() - started < 1.0


class DownEmbedder(LocalEmbedder):
    """An embedder whose provider is unreachable."""

    async def embed(self, texts):
        raise ConnectionError("embedder unreachable")


async def test_a_crisis_farewell_escalates_by_rule_with_the_embedder_and_judge_down(writer):
    session = make_session(writer, SessionMode.TEXT)
    index = await services(RulesJudge()).index()
    down, _ = await run_test(
        SafetyMonitorProcessor(session, SafetyServices(embedder=DownEmbedder(), judge=DownJudge()),
                      index=index, emergency_number="999"),
        frames_to_send=[said("Just ring my sister and tell her I love her. Bye forever."),
                        SleepFrame(sleep=0.3)],
    )
    (escalation,) = writer.of_type("EscalationRecord")
    assert (escalation.concept, escalation.severity, escalation.judge) == (
        "suicidal_ideation", "hard", "rules")
    assert session.conversation.suspended and "please call 999" in spoken(down)
    assert writer.events("safety_check")[0].data == {"stage": "embedding",
                                                     "error": "ConnectionError"}


async def test_passive_thoughts_of_death_are_a_soft_concern_that_keeps_the_agent_there(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        SafetyMonitorProcessor(session, services(RulesJudge())),
        frames_to_send=[said("To be honest the grandkids would be happier without me"),
                        SleepFrame(sleep=0.3)],
    )
    (escalation,) = writer.of_type("EscalationRecord")
    assert (escalation.concept, escalation.severity) == ("passive_ideation", "soft")
    assert not session.conversation.suspended
    (guidance,) = [f for f in down if isinstance(f, LLMMessagesAppendFrame)]
    assert "do not end the call" in guidance.messages[0]["content"]


async def test_no_point_waiting_in_a_booking_is_not_a_concern(writer):
    session = make_session(writer, SessionMode.TEXT)
    await run_test(
        SafetyMonitorProcessor(session, services(RulesJudge())),
        frames_to_send=[said("There's no point me waiting for Monday, is Friday free?"),
                        SleepFrame(sleep=0.3)],
    )
    assert writer.of_type("EscalationRecord") == [] and not session.conversation.suspended
