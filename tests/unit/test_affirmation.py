"""Yes/no understanding of a caller's reply."""

import pytest

from language.affirmation import Answer, classify_answer


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("Yes please", Answer.YES),
        ("yeah that would be great", Answer.YES),
        ("Sure, go ahead.", Answer.YES),
        ("no thank you", Answer.NO),
        ("Nope.", Answer.NO),
        ("not really", Answer.NO),
        ("I don't know", Answer.UNCLEAR),
        ("maybe later", Answer.UNCLEAR),
        ("what are your hours", Answer.UNCLEAR),
        ("nobody is home", Answer.UNCLEAR),  # "no" inside a word is not a no
        ("I'd like to book", Answer.UNCLEAR),
    ],
)
def test_reply_is_classified(reply, expected):
    assert classify_answer(reply) is expected


@pytest.mark.parametrize("reply", [
    "Not that one, the other one please.",
    "the other one please",
    "Hmm, a different time please",
    "sorry, not that day, the Tuesday please",
    "Oh that's the wrong one, please read me the other",
    "that's not right, I said the afternoon please",
])
def test_a_read_back_answered_with_another_choice_is_no_yes(reply):
    # "please" is no yes when the caller is choosing something other than what was read
    assert classify_answer(reply) is Answer.NO
