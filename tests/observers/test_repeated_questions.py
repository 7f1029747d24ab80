"""The call record counts the agent asking the same question again, whatever engine spoke."""

from pipecat.frames.frames import (
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    StartFrame,
    TranscriptionFrame,
    UserStoppedSpeakingFrame,
)

from call.call_session import SessionMode
from call.conversation_tracker import ConversationTracker, asking_question, same_question
from observers.call_record_observer import CallRecordObserver
from tests.fakes import make_session
from tests.processors.test_call_recorder import Clock, feed


def test_a_question_asked_again_word_for_word_or_nearly_is_counted_in_a_row():
    tracker = ConversationTracker()

    assert tracker.agent_said("Sure, a flu shot. What day or time suits you best?") is None
    second = tracker.agent_said("What day or time suits you best?")
    third = tracker.agent_said("Sorry. So what day or time would suit you best?")

    assert (second.in_a_row, second.total) == (2, 1)
    assert (third.in_a_row, third.total) == (3, 2)
    assert tracker.repeated_questions == 2


def test_a_different_question_starts_a_new_row_and_the_total_keeps_counting():
    tracker = ConversationTracker()
    tracker.agent_said("And your date of birth, please?")
    tracker.agent_said("Could I have your date of birth, please?")

    assert tracker.agent_said("Thanks, Sam. And your last name?") is None
    again = tracker.agent_said("Sorry, and your last name?")

    assert (again.in_a_row, again.total) == (2, 2)


def test_questions_that_differ_in_what_they_ask_are_not_repeats():
    tracker = ConversationTracker()
    tracker.agent_said("What's your first name?")

    assert tracker.agent_said("And your last name?") is None
    assert tracker.agent_said("Would the earliest available suit you, or a particular day?") is None
    assert tracker.agent_said("Which of those times would you like?") is None
    assert tracker.repeated_questions == 0


def test_a_turn_that_asks_nothing_does_not_break_the_row():
    tracker = ConversationTracker()
    tracker.agent_said("Is this the best number to call you back on?")
    tracker.agent_said("One moment, please.")

    again = tracker.agent_said("Is this the best number to call you back on?")

    assert again is not None and again.in_a_row == 2


def test_the_question_of_a_turn_is_its_last_one_in_plain_words():
    assert asking_question("I have Monday at 9 or Tuesday at 10. Which would you like?") == (
        "which would you like")
    assert asking_question("You're booked. Goodbye.") is None
    assert same_question("shall i book that", "shall i book that then")
    assert not same_question("what's your first name", "and your last name")


async def agent_turn(recorder: CallRecordObserver, clock: Clock, at_ms: int, text: str) -> None:
    await feed(recorder, clock, at_ms, LLMFullResponseStartFrame())
    await feed(recorder, clock, at_ms + 5, LLMTextFrame(text))
    await feed(recorder, clock, at_ms + 10, LLMFullResponseEndFrame())


async def caller_turn(recorder: CallRecordObserver, clock: Clock, at_ms: int, text: str) -> None:
    await feed(recorder, clock, at_ms, TranscriptionFrame(text, "caller", ""))
    await feed(recorder, clock, at_ms + 5, UserStoppedSpeakingFrame())


async def test_each_repeat_is_an_event_with_counts_and_never_the_words(writer):
    session = make_session(writer, mode=SessionMode.TEXT)
    recorder = CallRecordObserver(session)
    clock = Clock()
    await feed(recorder, clock, 0, StartFrame())
    await agent_turn(recorder, clock, 10, "Thanks, Jordan. What day or time suits you best?")
    await caller_turn(recorder, clock, 1000, "whenever's quickest")
    await agent_turn(recorder, clock, 1100, "What day or time suits you best?")
    await caller_turn(recorder, clock, 2000, "honestly whenever")
    await agent_turn(recorder, clock, 2100, "What day or time suits you best?")
    await recorder.flush()

    repeats = writer.events("question_repeated")
    assert [r.data for r in repeats] == [{"in_a_row": 2, "total": 1}, {"in_a_row": 3, "total": 2}]
    assert session.conversation.tracker.repeated_questions == 2


def test_asking_again_in_other_filler_words_is_the_same_question_but_adding_help_is_not():
    assert same_question(asking_question("And your date of birth, please?"),
                         asking_question("Sorry, could I get your date of birth?"))
    assert not same_question(
        asking_question("And your date of birth, please?"),
        asking_question("Could you tell me your date of birth as month, day and year?"))
    assert not same_question(asking_question("Shall we carry on?"),
                             asking_question("Shall I book that?"))
