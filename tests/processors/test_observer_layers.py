"""The guidance stripper, the director and the silence monitor in a pipeline."""

import asyncio
import time

import asyncpg
import pytest
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMMessagesAppendFrame,
    LLMTextFrame,
    TranscriptionFrame,
    TTSSpeakFrame,
)
from pipecat.tests.utils import SleepFrame, run_test

from call.call_session import CompletionReason, SessionMode
from call.frames import EndCallFrame, SpokenTextFrame
from db import outbound
from db.call_backs import CallBacks
from processors.conversation.conversation_director_processor import ConversationDirectorProcessor
from processors.conversation.director import DirectorAnalysis, LocalDirector
from processors.conversation.guidance_filter import strip_guidance
from processors.conversation.guidance_stripper_processor import GuidanceStripperProcessor
from processors.conversation.silence_monitor_processor import SilenceMonitorProcessor
from processors.conversation.silence_schedule import SilenceSchedule
from tests.call_backs import SATURDAY_9, call_back_tasks, clinic_call
from tests.fakes import make_session


def said(text: str) -> TranscriptionFrame:
    return TranscriptionFrame(text=text, user_id="caller", timestamp="")


def reply(*chunks: str) -> list:
    return [LLMFullResponseStartFrame(), *(LLMTextFrame(c) for c in chunks),
            LLMFullResponseEndFrame()]


# --- Guidance stripper ------------------------------------------------------------------


async def test_a_tag_split_over_text_frames_never_reaches_the_tts(writer):
    session = make_session(writer)
    down, _ = await run_test(
        GuidanceStripperProcessor(session),
        frames_to_send=reply("Of course. [HEA", "LTH] I can", " book that. <guid",
                             "ance>be brief</guidance> Tuesday?"),
    )
    spoken = "".join(f.text for f in down if isinstance(f, LLMTextFrame))
    assert spoken == "Of course. I can book that. Tuesday?"
    assert all(isinstance(f, SpokenTextFrame) for f in down if isinstance(f, LLMTextFrame))
    assert writer.events("guidance_stripped")[0].data == {"removed": 2, "where": "reply"}


async def test_a_spoken_line_is_cleaned_and_plain_speech_passes_untouched(writer):
    session = make_session(writer)
    down, _ = await run_test(
        GuidanceStripperProcessor(session),
        frames_to_send=[TTSSpeakFrame("[GOODBYE] Goodbye now."), *reply("Option [1] is fine.")],
    )
    assert next(f for f in down if isinstance(f, TTSSpeakFrame)).text == "Goodbye now."
    assert "".join(f.text for f in down if isinstance(f, LLMTextFrame)) == "Option [1] is fine."


async def test_an_echoed_director_line_and_a_stray_closing_tag_are_not_spoken(writer):
    session = make_session(writer)
    chunks = ("[Director gui", "dance] main/medium/warm | REMIND: x\nRi", "ght.</guid",
              "ance> Press [1", "] to confirm.")
    down, _ = await run_test(GuidanceStripperProcessor(session), frames_to_send=reply(*chunks))
    spoken = "".join(f.text for f in down if isinstance(f, LLMTextFrame))
    assert spoken == "Right. Press [1] to confirm."
    assert spoken == strip_guidance("".join(chunks))  # what the call record keeps
    assert writer.events("guidance_stripped")[0].data == {"removed": 2, "where": "reply"}


# --- Conversation director --------------------------------------------------------------


class SlowDirector:
    """A director that takes 5 s per turn."""

    name = "slow"

    def __init__(self) -> None:
        self.started = 0

    async def analyze(self, view):
        self.started += 1
        await asyncio.sleep(5)
        raise AssertionError("never reached within the test")


async def test_a_director_that_takes_5_s_delays_no_frame(writer):
    session = make_session(writer, SessionMode.TEXT)
    director = SlowDirector()
    sent = time.perf_counter()
    down, _ = await run_test(
        ConversationDirectorProcessor(session, director, timeout_s=10),
        frames_to_send=[said("I need a checkup"), SleepFrame(sleep=0.05), said("Tuesday please")],
        expected_down_frames=[TranscriptionFrame, TranscriptionFrame],
    )
    assert time.perf_counter() - sent < 1.0
    assert director.started == 2  # the second turn replaced the first analysis


async def test_the_previous_turns_guidance_goes_in_with_the_next_turn(writer):
    session = make_session(writer, SessionMode.TEXT)
    session.conversation.tracker.caller_said("Hello")
    down, _ = await run_test(
        ConversationDirectorProcessor(session, LocalDirector()),
        frames_to_send=[said("I'm so worried about my results"), SleepFrame(sleep=0.1),
                        said("Can I come in on Tuesday?")],
        expected_down_frames=[TranscriptionFrame, LLMMessagesAppendFrame, TranscriptionFrame],
    )
    guidance = down[1].messages[0]["content"]
    assert guidance.startswith("[Director guidance] main/medium/empathetic |")
    assert guidance.endswith("(concerned)") and down[1].run_llm is False
    actions = [e.data["action"] for e in writer.events("director")]
    assert actions[:2] == ["analysis", "guidance"]


async def test_a_director_timeout_means_no_guidance_and_an_event(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(
        ConversationDirectorProcessor(session, SlowDirector(), timeout_s=0.1),
        frames_to_send=[said("Hello"), SleepFrame(sleep=0.3), said("Tuesday")],
        expected_down_frames=[TranscriptionFrame, TranscriptionFrame],
    )
    assert writer.events("director")[0].data["why"] == "timeout"


async def test_time_fallbacks_wind_down_then_end_the_call_with_a_closing_line(writer):
    session = make_session(writer, SessionMode.TEXT)
    director = ConversationDirectorProcessor(session, LocalDirector(), wind_down_s=0.1, force_end_s=0.2,
                                    time_limit="end")
    import processors.conversation.conversation_director_processor as module

    module.FORCE_END_DELAY_S, saved = 0.05, module.FORCE_END_DELAY_S
    try:
        down, _ = await run_test(director, frames_to_send=[SleepFrame(sleep=0.6)])
    finally:
        module.FORCE_END_DELAY_S = saved
    kinds = [type(f) for f in down]
    assert kinds == [LLMMessagesAppendFrame, LLMFullResponseStartFrame, LLMTextFrame,
                     LLMFullResponseEndFrame, EndCallFrame]
    assert "I have to end our call now" in down[2].text
    assert "WINDING DOWN" in down[0].messages[0]["content"]
    assert session.conversation.winding_down
    assert [e.data["action"] for e in writer.events("director")] == [
        "force_winding_down", "time_limit", "force_end"]


class KeepTalkingModel:
    """A model director that always says the call is in its main phase, after `delay_s`."""

    name = "model"

    def __init__(self, delay_s: float = 0.0, on_ask=None) -> None:
        self.delay_s = delay_s
        self.on_ask = on_ask

    async def analyze(self, view):
        if self.on_ask is not None:
            self.on_ask()
        await asyncio.sleep(self.delay_s)
        return DirectorAnalysis.model_validate({
            "analysis": {"call_phase": "main", "engagement_level": "high",
                         "current_topic": "their holiday", "emotional_tone": "positive"},
            "direction": {"stay_or_shift": "transition", "next_topic": "their family",
                          "pacing_note": "good"},
            "guidance": {"tone": "cheerful", "priority_action": "Open a new topic",
                         "specific_instruction": "Ask about their family."},
        })


async def guidance_after_two_turns(session, backend) -> str:
    down, _ = await run_test(
        ConversationDirectorProcessor(session, backend),
        frames_to_send=[said("we went to the coast last week"), SleepFrame(sleep=0.15),
                        said("and the weather was lovely")],
        expected_down_frames=[TranscriptionFrame, LLMMessagesAppendFrame, TranscriptionFrame],
    )
    return down[1].messages[0]["content"]


async def test_a_model_director_cannot_take_a_winding_down_call_out_of_it(writer):
    session = make_session(writer, SessionMode.TEXT)
    session.conversation.winding_down = True
    line = await guidance_after_two_turns(session, KeepTalkingModel())
    assert line.startswith("[Director guidance] winding_down/high/cheerful | WINDING DOWN:")
    assert "family" not in line


async def test_the_wind_down_holds_when_the_timer_starts_it_during_an_analysis(writer):
    session = make_session(writer, SessionMode.TEXT)

    def timer_fires() -> None:
        session.conversation.winding_down = True

    line = await guidance_after_two_turns(session, KeepTalkingModel(0.05, on_ask=timer_fires))
    assert "winding_down/" in line and "family" not in line


async def test_no_forced_end_while_a_human_has_the_call(writer):
    session = make_session(writer, SessionMode.TEXT)
    session.conversation.suspended = True
    down, _ = await run_test(
        ConversationDirectorProcessor(session, LocalDirector(), wind_down_s=0.05, force_end_s=0.1),
        frames_to_send=[SleepFrame(sleep=0.4)],
    )
    assert not any(isinstance(f, EndCallFrame) for f in down)


# --- Silence monitor --------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def started(monitor: SilenceMonitorProcessor) -> None:
    """Until the monitor's pipeline has started (frames queued before it would be lost)."""
    while monitor._ticker is None:
        await asyncio.sleep(0.01)


async def advance(clock: FakeClock, seconds: float) -> None:
    clock.now += seconds
    await asyncio.sleep(0.05)  # a few polls of the monitor


async def test_three_unanswered_check_ins_then_a_goodbye_and_hang_up(writer):
    session = make_session(writer, SessionMode.TEXT)
    clock = FakeClock()
    session.conversation.clock = clock
    monitor = SilenceMonitorProcessor(session, schedule=SilenceSchedule(), poll_s=0.01)

    async def silence():
        await started(monitor)
        for step in (9, 1.5, 20, 40, 10):
            await advance(clock, step)

    task = asyncio.create_task(silence())
    down, _ = await run_test(monitor, frames_to_send=[SleepFrame(sleep=0.6)])
    await task
    lines = [f.text for f in down if isinstance(f, LLMTextFrame)]
    assert lines == ["Are you still there?",
                     "I'm still here whenever you're ready. Take your time.",
                     "I haven't heard anything for a while. If you can hear me, just say something.",
                     "I can't hear anyone on the line, so I'll end the call now. Please call "
                     "us back whenever you need us. Goodbye."]
    assert isinstance(down[-1], EndCallFrame)
    assert down[-1].reason == CompletionReason.CALLER_SILENT.value
    assert [e.data.get("number") for e in writer.events("silence_checkin")] == [1, 2, 3]
    assert len(writer.events("silence_hangup")) == 1


async def test_an_answer_or_the_agent_speaking_is_not_silence(writer):
    session = make_session(writer)
    clock = FakeClock()
    session.conversation.clock = clock
    schedule = SilenceSchedule()
    monitor = SilenceMonitorProcessor(session, schedule=schedule, poll_s=0.01)

    async def tell(frame, heard) -> None:
        """Queue `frame` and let the monitor take it in before the clock moves on."""
        await monitor.queue_frame(frame)
        while not heard():
            await asyncio.sleep(0.005)

    async def conversation():
        await started(monitor)
        await advance(clock, 9)
        await tell(said("I'm here"), lambda: schedule.last_activity == clock.now)
        await advance(clock, 9)  # 9 s since the answer: no check-in yet
        await tell(BotStartedSpeakingFrame(), lambda: schedule.active)
        await advance(clock, 30)  # the agent speaking for 30 s is not silence
        await tell(BotStoppedSpeakingFrame(), lambda: not schedule.active)
        await advance(clock, 5)

    task = asyncio.create_task(conversation())
    down, _ = await run_test(monitor, frames_to_send=[SleepFrame(sleep=0.5)])
    await task
    assert writer.events("silence_checkin") == []


# --- The time limit: the graph's policy ---------------------------------------------------


# Call backs that can be offered (a test that takes one up gets a database's).
OFFERABLE = CallBacks(None, lambda: None)


def director_at_limit(session, policy, transfer_number=None,
                      call_backs=OFFERABLE) -> ConversationDirectorProcessor:
    return ConversationDirectorProcessor(session, LocalDirector(), wind_down_s=0.05, force_end_s=0.1,
                                time_limit=policy, transfer_number=transfer_number,
                                call_backs=call_backs)


def spoken(down) -> list[str]:
    return [f.text for f in down if isinstance(f, LLMTextFrame)]


async def test_a_clinic_call_at_the_limit_is_escalated_not_cut_off(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(director_at_limit(session, "escalate"),
                             frames_to_send=[SleepFrame(sleep=0.3)])
    assert not any(isinstance(f, EndCallFrame) for f in down)
    assert "asked someone from our team" in spoken(down)[0]
    (escalation,) = writer.events("escalation")
    assert escalation.data["concept"] == "call_time_limit"
    assert escalation.data["severity"] == "soft"
    (limit,) = [e.data for e in writer.events("director") if e.data["action"] == "time_limit"]
    assert (limit["policy"], limit["step"]) == ("escalate", "escalate")


async def test_with_a_transfer_number_the_escalated_caller_is_put_through(writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(director_at_limit(session, "escalate", "+15550100999"),
                             frames_to_send=[SleepFrame(sleep=0.3)])
    assert "putting you through" in spoken(down)[0]
    assert down[-1].reason == CompletionReason.TRANSFERRED.value
    assert session.transfer_to == "+15550100999"
    assert writer.events("transfer_requested")[0].data == {"state": "time_limit"}


async def offer_then_answer(writer, answer: str, session=None, call_backs=OFFERABLE):
    session = session or make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(director_at_limit(session, "offer_callback", call_backs=call_backs),
                             frames_to_send=[SleepFrame(sleep=0.3), said(answer),
                                             SleepFrame(sleep=0.1)])
    return session, down


@pytest.mark.parametrize("answer", ["Yes please", "yeah, that'd be good",
                                    "Could you ring me back tomorrow instead?", "ok sure"])
async def test_a_caller_who_takes_the_call_back_is_promised_it_and_the_call_ends(
        db, workspace_id, writer, answer):
    session, call_backs = await clinic_call(db, workspace_id, writer, mode=SessionMode.TEXT)

    _, down = await offer_then_answer(writer, answer, session, call_backs)

    lines = spoken(down)
    assert "call you back to finish this?" in lines[0]
    assert "will call you back tomorrow morning from 9 AM to finish this" in lines[1]
    assert not any(isinstance(f, TranscriptionFrame) for f in down)  # not the agent's turn
    assert isinstance(down[-1], EndCallFrame)
    assert writer.events("callback_requested")[0].data == {"source": "time_limit"}
    assert writer.events("escalation")[0].data["concept"] == "call_time_limit"
    (task,) = await call_back_tasks(db, session.call_id)
    assert (task["kind"], task["not_before"]) == ("callback", SATURDAY_9)
    assert writer.events("call_back_promised")[0].data["task_id"] == str(task["id"])


async def test_a_call_back_at_the_limit_that_could_not_be_written_is_not_promised(
        db, workspace_id, writer, monkeypatch):
    session, call_backs = await clinic_call(db, workspace_id, writer, mode=SessionMode.TEXT)

    async def refuse(conn, spec):
        raise asyncpg.exceptions.ReadOnlySQLTransactionError("read-only replica")

    monkeypatch.setattr(outbound, "create_task", refuse)

    _, down = await offer_then_answer(writer, "Yes please", session, call_backs)

    said_then = spoken(down)[1]
    assert "will call you" not in said_then and "wasn't able to arrange a call back" in said_then
    assert "let's carry on" in said_then  # the caller is not left alone: the call goes on
    assert not any(isinstance(f, EndCallFrame) for f in down)
    assert await call_back_tasks(db, session.call_id) == []
    assert writer.events("call_not_arranged")[0].data["source"] == "time_limit"
    assert writer.events("escalation")[0].data["concept"] == "call_time_limit"


async def test_a_call_with_no_way_to_call_back_is_escalated_at_the_limit_not_offered_one(
        writer):
    session = make_session(writer, SessionMode.TEXT)
    down, _ = await run_test(director_at_limit(session, "offer_callback", call_backs=None),
                             frames_to_send=[SleepFrame(sleep=0.3)])
    assert "call you back" not in spoken(down)[0]
    assert "asked someone from our team" in spoken(down)[0]
    (limit,) = [e.data for e in writer.events("director") if e.data["action"] == "time_limit"]
    assert (limit["policy"], limit["step"]) == ("offer_callback", "escalate")


@pytest.mark.parametrize("answer", ["No thanks", "nah, let's keep going",
                                    "no need to call me back, we're nearly done"])
async def test_a_caller_who_would_rather_carry_on_carries_on(writer, answer):
    _, down = await offer_then_answer(writer, answer)
    assert spoken(down)[1] == "No problem, let's carry on."
    assert not any(isinstance(f, (EndCallFrame, TranscriptionFrame)) for f in down)
    assert writer.events("escalation") == []


async def test_a_caller_who_just_goes_on_talking_is_answered_by_the_agent(writer):
    _, down = await offer_then_answer(writer, "what about the Thursday afternoon slot then")
    assert [f.text for f in down if isinstance(f, TranscriptionFrame)] == [
        "what about the Thursday afternoon slot then"]
    assert len(spoken(down)) == 1 and not any(isinstance(f, EndCallFrame) for f in down)
    offer = [e.data for e in writer.events("director") if e.data["action"] == "callback_offer"]
    assert offer == [{"action": "callback_offer", "answer": "not_answered"}]


@pytest.mark.parametrize("policy", ["end", "offer_callback"])
async def test_a_call_that_raised_a_safety_concern_is_escalated_at_the_limit(writer, policy):
    session = make_session(writer, SessionMode.TEXT)
    session.log.escalation("self_harm", "soft", similarity=0.6, judge="rules", reason="x")
    down, _ = await run_test(director_at_limit(session, policy),
                             frames_to_send=[SleepFrame(sleep=0.3)])
    assert not any(isinstance(f, EndCallFrame) for f in down)
    assert "asked someone from our team" in spoken(down)[0]
    assert [e.data["concept"] for e in writer.events("escalation")] == [
        "self_harm", "call_time_limit"]
