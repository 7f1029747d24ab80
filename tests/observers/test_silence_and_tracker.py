"""Silence check-ins on a clock, and what the tracker remembers of a call."""

import pytest
from pydantic import ValidationError

from call.conversation_tracker import WORDS_FILE, ConversationTracker, advice_pattern, tracker_words
from processors.conversation.silence_schedule import SilenceSchedule
from tests.observers.data_files import rewritten


def test_check_ins_come_at_growing_intervals_then_a_goodbye():
    schedule = SilenceSchedule(checkins_s=(10, 20, 40), goodbye_after_s=10)
    schedule.activity(0.0)
    assert schedule.due(9.9) is None
    assert schedule.due(10.0) == "checkin"
    schedule.said("checkin", 10.0)
    assert schedule.due(29.0) is None and schedule.due(30.0) == "checkin"
    schedule.said("checkin", 30.0)
    assert schedule.due(70.0) == "checkin"
    schedule.said("checkin", 70.0)
    assert schedule.due(79.0) is None and schedule.due(80.0) == "goodbye"
    schedule.said("goodbye", 80.0)
    assert schedule.done and schedule.due(1000.0) is None


def test_an_answer_starts_the_check_ins_over_and_speech_is_never_silence():
    schedule = SilenceSchedule(checkins_s=(10, 20, 40))
    schedule.activity(0.0)
    schedule.said("checkin", 10.0)
    schedule.caller_answered(12.0)
    assert schedule.unanswered == 0 and schedule.due(21.0) is None and schedule.due(22.0)
    schedule.activity(22.0, speaking=True)  # a long reply from the agent
    assert schedule.due(100.0) is None
    schedule.activity(100.0, speaking=False)
    assert schedule.due(109.0) is None and schedule.due(110.0) == "checkin"


def test_the_tracker_keeps_the_last_forty_turns_and_what_the_agent_asked_and_advised():
    tracker = ConversationTracker()
    for n in range(30):
        tracker.caller_said(f"line {n}")
        tracker.agent_said("Which day suits you? You should bring your insurance card.")
    assert len(tracker.turns) == 40
    assert tracker.questions == ["Which day suits you?"]
    assert tracker.advice == ["You should bring your insurance card."]
    tracker.add_topics(["pain", "pain", "medication"])
    summary = tracker.summary()
    assert summary.startswith("Topics so far: pain, medication.")
    assert "Already asked: Which day suits you?" in summary
    assert tracker.transcript(last=2) == (
        "Caller: line 29\nAgent: Which day suits you? You should bring your insurance card.")


def test_the_agents_advice_is_recognised_whatever_its_capitals():
    assert advice_pattern().search("It's best to come ten minutes early.")
    assert not advice_pattern().search("It was the best day of the week.")


def test_a_tracker_words_file_with_a_broken_advice_pattern_is_refused_at_load(tmp_path):
    path = rewritten(WORDS_FILE, tmp_path, lambda d: d["advice"].append("[oops"))
    with pytest.raises(ValidationError, match="bad regular expression"):
        tracker_words(path)
