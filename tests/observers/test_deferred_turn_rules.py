"""What a caller says over the agent's voice: listening noises, early answers, and when a
kept answer is out of date."""

import pytest

from turns.deferred_turns import DeferredTurns, overlap_words


@pytest.mark.parametrize("said", [
    "Mm-hmm.", "mmhmm", "Mmm.", "hmm", "Uh-huh.", "uh huh", "Okay.", "OK, OK.", "right",
    "Right, right, right.", "alright", "all right then", "I see.", "Oh, I see.", "got it",
    "Yeah.", "yeah, yeah", "Sure.", "oh okay", "Ah.", "aha", "lovely", "Mm, okay, right.",
])
def test_listening_noises_are_backchannels(said):
    assert overlap_words().is_backchannel(said)


@pytest.mark.parametrize("said", [
    "Yes.", "yes please", "No.", "Mm, no.", "nope", "yep", "Tuesday", "the second one",
    "Thursday afternoon", "okay, Friday", "the 14th", "ten thirty", "Doctor Patel",
    "mm, not that one", "yeah the morning", "eight", "that's wrong",
])
def test_anything_with_an_answer_in_it_is_kept(said):
    assert not overlap_words().is_backchannel(said)


@pytest.mark.parametrize("said", [
    "no, Wednesday", "No no, the other one", "Actually, Friday", "sorry, I meant eleven",
    "wait, not Tuesday", "not that one", "make it the afternoon", "on second thought, Monday",
    "I mean the first one", "hang on, Thursday",
])
def test_words_that_take_back_what_came_before(said):
    assert overlap_words().replaces(said)


@pytest.mark.parametrize("said", [
    "in the afternoon please", "and at the Elm Street clinic", "Nottingham", "now is fine",
    "yes and also", "the earlier the better", "nothing else",
])
def test_words_that_add_to_what_came_before(said):
    assert not overlap_words().replaces(said)


def test_kept_answers_are_taken_once_the_agent_has_been_silent_long_enough():
    turns = DeferredTurns(max_age_s=8.0, settle_s=0.4)
    turns.keep("Tuesday", 10.0, reply=3)
    turns.keep("afternoon", 11.0, reply=3)
    assert not turns.due(12.0)  # the agent is still talking
    turns.agent_stopped(12.0)
    assert not turns.due(12.3) and turns.due(12.4)
    taken, expired = turns.take(12.4, reply=3)
    assert (taken.text, taken.fragments, taken.age_s) == ("Tuesday afternoon", 2, 2.4)
    assert expired == [] and turns.pending == []


def test_an_answer_older_than_the_bound_expires_and_the_rest_is_kept():
    turns = DeferredTurns(max_age_s=5.0)
    turns.keep("yes", 0.0, reply=1)
    turns.keep("the second one", 4.0, reply=1)
    taken, expired = turns.take(6.0, reply=1)
    assert taken.text == "the second one"
    assert [(e.why, e.fragments) for e in expired] == [("too_old", 1)]


def test_answers_over_an_earlier_reply_expire_when_the_agent_starts_a_new_one():
    turns = DeferredTurns()
    turns.keep("Monday", 1.0, reply=2)
    turns.agent_stopped(2.0)
    assert turns.agent_started(2.1, reply=2) is None  # the same reply going on
    assert turns.pending
    expiry = turns.agent_started(3.0, reply=3)
    assert (expiry.why, expiry.fragments, expiry.age_s) == ("agent_moved_on", 1, 2.0)
    assert turns.pending == [] and not turns.due(10.0)


def test_only_the_newest_few_fragments_are_kept():
    turns = DeferredTurns(max_fragments=2)
    turns.keep("one", 0.0, reply=1)
    turns.keep("two", 1.0, reply=1)
    expiry = turns.keep("three", 2.0, reply=1)
    assert expiry.why == "too_many"
    taken, _ = turns.take(2.5, reply=1)
    assert taken.text == "two three"
