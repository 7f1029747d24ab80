"""The rules a failing voice provider is handled by: how long to wait before each try
and when to stop, which caller audio a reopened stream must hear again, which words of a
cut-off sentence are still to be said, and which provider messages are skipped."""

import base64
import json

import pytest

from services.provider_faults import (
    ReconnectBudget,
    ReconnectPolicy,
    UnconfirmedAudio,
    screened_elevenlabs,
    unspoken_words,
)


def test_waits_double_from_the_first_and_stop_at_the_ceiling():
    policy = ReconnectPolicy(first_delay_s=0.25, factor=2.0, max_delay_s=2.0)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [0.25, 0.5, 1.0, 2.0, 2.0]


def test_three_tries_in_a_row_then_give_up_unless_the_stream_worked_in_between():
    budget = ReconnectBudget(ReconnectPolicy(tries=3, stable_s=5.0))
    assert [budget.next_try(0.0) for _ in range(4)] == [1, 2, 3, None]
    assert budget.spent

    budget = ReconnectBudget(ReconnectPolicy(tries=3, stable_s=5.0))
    assert [budget.next_try(0.0), budget.next_try(0.0)] == [1, 2]
    budget.proved()  # a result came through: the next drop is a new outage
    assert budget.next_try(0.1) == 1
    assert budget.next_try(0.0) == 2
    assert budget.next_try(60.0) == 1  # the connection stayed up a minute before dropping


def test_audio_a_final_result_has_not_covered_is_what_a_new_stream_hears():
    kept = UnconfirmedAudio(8000)  # 16 000 bytes a second
    kept.add(b"a" * 16000)  # 1 s on the first stream
    kept.confirm_until(0.5)  # a final result covered its first half
    assert kept.seconds == pytest.approx(0.5)
    start = kept.new_stream()
    kept.add(b"b" * 8000)  # said while the new stream was opening
    assert kept.since(start) == b"a" * 8000 + b"b" * 8000
    kept.confirm_until(0.75)  # the new stream's clock starts at the replayed audio
    assert kept.since(start) == b"b" * 4000


def test_at_most_max_s_is_kept_and_the_oldest_goes_first():
    kept = UnconfirmedAudio(8000, max_s=1.0)
    kept.add(b"a" * 16000)
    kept.add(b"b" * 8000)
    assert kept.seconds == pytest.approx(1.0)
    assert kept.since(kept.front).startswith(b"a" * 8000) and kept.since(kept.end) == b""


def test_a_cut_off_sentence_resumes_at_the_first_word_not_heard():
    sent = "Your appointment is on Tuesday at nine."
    assert unspoken_words(sent, 3) == "on Tuesday at nine."
    assert unspoken_words(sent, 0) == sent
    assert unspoken_words(sent, 7) == ""


def audio_message(**extra) -> str:
    return json.dumps({"audio": base64.b64encode(b"\x00\x01").decode(), "contextId": "c1",
                       "alignment": {"chars": ["H", "i"], "charStartTimesMs": [0, 60],
                                     "charDurationsMs": [60, 60]}, **extra})


@pytest.mark.parametrize("raw", [
    '{"audio": "AAE=", "contextId": ',  # cut off
    "[1, 2, 3]",  # not an object
    json.dumps({"audio": "not base64!", "contextId": "c1"}),
    json.dumps({"alignment": {"chars": ["a", "b"], "charStartTimesMs": [0],
                              "charDurationsMs": [60, 60]}}),  # lists of different lengths
    json.dumps({"alignment": "a, b"}),
])
def test_messages_off_the_elevenlabs_protocol_are_screened_out(raw):
    assert screened_elevenlabs(raw) is None


@pytest.mark.parametrize("raw", [
    audio_message(), json.dumps({"isFinal": True, "contextId": "c1"}),
    audio_message(normalizedAlignment=None), json.dumps({"audio": None, "contextId": "c1"}),
])
def test_messages_on_the_elevenlabs_protocol_pass(raw):
    assert screened_elevenlabs(raw) == json.loads(raw)
