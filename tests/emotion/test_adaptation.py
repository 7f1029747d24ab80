"""Steering, the voice tone chain, filler rules and the circuit breaker: what their
tables say, each level and exception on its own."""

import pytest

from call.voice_settings import DEFAULT_SENSITIVE_TOPICS
from processors.emotion.breaker import BreakerState, CircuitBreaker
from processors.emotion.fillers import (
    FILLER_AFTER_MS,
    FillerPicker,
    LatencyEstimate,
    filler_guidance,
    suppressed,
)
from processors.emotion.state import BehaviourSignals, Burst, EmotionalState, EmotionSnapshot, Trend
from processors.emotion.steering import annotation, call_phase_urgency, session_steering
from processors.emotion.tone import ToneLevel, choose_tone
from services.emotion.reading import EmotionReading, Source


def snapshot(dominant="Anger", score=0.6, valence=-0.6, arousal=0.58, segments=3,
             trend=Trend.STABLE, coherence=1.0, words=None, burst=None, toxicity=None,
             **signals):
    return EmotionSnapshot(
        segments=segments, dominant=dominant, dominant_score=score, valence=valence,
        arousal=arousal, trend=trend, coherence=coherence, voice_valence=valence,
        words_valence=None, words_dominant=words, burst=burst,
        signals=BehaviourSignals(**signals), toxicity=toxicity or {},
    )


# --- steering -------------------------------------------------------------------------

def test_every_caller_message_is_annotated_with_the_voice():
    assert annotation(snapshot("Anxiety", valence=-0.3124)) == "[VOICE: Anxiety, valence=-0.312]"
    assert annotation(snapshot(dominant=None)) is None


def test_steering_follows_the_response_matrix_and_never_reveals_detection():
    steering = session_steering(snapshot("Anxiety", valence=-0.69, arousal=0.53), elapsed_s=60)
    assert steering.response.tone == "sympathetic"
    assert "clear next steps" in steering.text and "never mention" in steering.text


def test_an_emotion_outside_the_matrix_falls_to_its_quadrant():
    low_negative = session_steering(snapshot("Shame", valence=-0.68, arousal=0.37), 60)
    assert low_negative.response.tone == "sympathetic" and "do not rush" in low_negative.text
    high_positive = session_steering(snapshot("Triumph", valence=0.8, arousal=0.76), 60)
    assert high_positive.response.tone == "enthusiastic"


def test_masking_behaviour_and_urgency_are_added():
    steering = session_steering(
        snapshot("Distress", coherence=0.1, words="Contentment", barge_ins=2,
                 short_reply_streak=3, long_silences=2, trend=Trend.DETERIORATING),
        elapsed_s=6 * 60,
    )
    assert "respond to how they sound, not what they claim" in steering.text
    assert "words suggest contentment but their voice sounds distress" in steering.text
    assert "interrupted you 2 times" in steering.text and "last 3 replies" in steering.text
    assert "2 long silences" in steering.text and "shorten your responses" in steering.text


def test_too_little_heard_means_no_steering():
    assert session_steering(snapshot(segments=1), 60) is None


@pytest.mark.parametrize(("minutes", "valence", "trend", "expected"), [
    (4.9, -0.8, Trend.DETERIORATING, None),                 # early: standard adaptation
    (5.0, -0.2, Trend.STABLE, None),                        # mid, not worsening
    (7.0, -0.2, Trend.DETERIORATING, "shorten your responses"),
    (10.0, -0.1, Trend.STABLE, "URGENCY"),                  # late and negative
    (12.0, 0.3, Trend.DETERIORATING, "shorten your responses"),  # late but positive: mid rule
])
def test_call_phase_escalation_with_a_fake_clock(minutes, valence, trend, expected):
    urgency = call_phase_urgency(snapshot(valence=valence, trend=trend), minutes * 60)
    assert (urgency is None) if expected is None else (expected in urgency)


# --- tone chain -------------------------------------------------------------------------

def tone(snap, now=100.0, text="", previous=None, workspace="neutral"):
    return choose_tone(snap, now=now, upcoming_text=text,
                       sensitive_topics=DEFAULT_SENSITIVE_TOPICS, previous=previous,
                       workspace_tone=workspace)


def test_a_recent_confident_burst_overrides_everything():
    laughed = snapshot("Anger", burst=Burst("Laugh", 0.7, at=97.0))
    choice = tone(laughed, now=100.0, text="your test results", previous="calm")
    assert (choice.tone, choice.level) == ("enthusiastic", ToneLevel.BURST)


@pytest.mark.parametrize(("burst", "now"), [
    (Burst("Laugh", 0.4, at=99.0), 100.0),  # not confident enough
    (Burst("Laugh", 0.9, at=94.0), 100.0),  # more than 5 s ago
])
def test_a_weak_or_old_burst_falls_through_to_prosody(burst, now):
    choice = tone(snapshot("Anger", burst=burst), now=now)
    assert (choice.tone, choice.level) == ("calm", ToneLevel.PROSODY)


def test_a_sensitive_topic_softens_the_voice_before_any_distress():
    choice = tone(snapshot("Interest", score=0.1, valence=0.5), text="About your test results:")
    assert (choice.tone, choice.level) == ("sympathetic", ToneLevel.SENSITIVE_TOPIC)
    assert tone(None, text="Your invoice for billing").tone == "sympathetic"


@pytest.mark.parametrize("first_segment", [
    {"Anger": 0.9},  # one furious segment
    {"Annoyance": 0.7, "Anger": 0.5},  # irritated, then angry, in one breath
    {"Distress": 0.8},  # one distressed segment
])
def test_one_segment_of_prosody_does_not_change_the_voice_tone(first_segment):
    state = EmotionalState(clock=lambda: 100.0)
    state.add(EmotionReading(Source.PROSODY, first_segment, 99.0))
    choice = tone(state.snapshot(), previous="warm")
    assert (choice.tone, choice.level) == ("warm", ToneLevel.MOMENTUM)
    assert tone(state.snapshot()).level is ToneLevel.WORKSPACE


def test_the_second_segment_of_the_same_feeling_changes_the_tone():
    state = EmotionalState(clock=lambda: 100.0)
    state.add(EmotionReading(Source.PROSODY, {"Anger": 0.7}, 97.0))
    state.add(EmotionReading(Source.PROSODY, {"Anger": 0.6, "Contempt": 0.2}, 99.0))
    choice = tone(state.snapshot(), previous="warm")
    assert (choice.tone, choice.level) == ("calm", ToneLevel.PROSODY)


def test_a_burst_keeps_its_own_rule_with_a_single_segment_heard():
    state = EmotionalState(clock=lambda: 100.0)
    state.add(EmotionReading(Source.PROSODY, {"Anger": 0.9}, 98.0))
    state.add(EmotionReading(Source.BURST, {"Laugh": 0.8}, 99.0))
    choice = tone(state.snapshot(), previous="calm")
    assert (choice.tone, choice.level) == ("enthusiastic", ToneLevel.BURST)


def test_a_weak_signal_keeps_last_turns_tone_then_the_workspace_then_neutral():
    weak = snapshot("Joy", score=0.2, valence=0.8)
    assert (tone(weak, previous="calm").tone, tone(weak, previous="calm").level) == (
        "calm", ToneLevel.MOMENTUM)
    assert tone(weak, workspace="content").level is ToneLevel.WORKSPACE
    assert tone(None, workspace="shouty").level is ToneLevel.NEUTRAL


# --- fillers -----------------------------------------------------------------------------

def test_frustrated_callers_get_no_fillers_but_anxious_ones_do():
    assert suppressed(snapshot("Anger", valence=-0.6, arousal=0.58))
    assert not suppressed(snapshot("Anxiety", valence=-0.69, arousal=0.53))
    assert not suppressed(snapshot("Sadness", valence=-0.79, arousal=0.35))  # low arousal
    assert not suppressed(snapshot("Anger", segments=1))  # too little heard


def test_a_filler_only_when_the_wait_is_long_in_the_callers_register():
    picker = FillerPicker()
    quick = picker.decide(snapshot("Anxiety", -0.69, 0.53), expected_ms=FILLER_AFTER_MS - 1)
    assert quick.say is None
    anxious = picker.decide(snapshot("Anxiety", valence=-0.69, arousal=0.53), expected_ms=900)
    assert anxious.register == "reassuring" and anxious.say
    angry = picker.decide(snapshot("Anger"), expected_ms=2000)
    assert angry.say is None and angry.register == "suppressed"
    hinted = picker.decide(None, expected_ms=900, hint="Let me check availability.")
    assert hinted.say == "Let me check availability."
    assert picker.decide(None, expected_ms=900, enabled=False).say is None
    long = picker.decide(None, expected_ms=900, verifying=True).say
    assert 3 <= len(long.split()) <= 5


def test_the_same_filler_is_not_said_twice_in_a_row():
    picker = FillerPicker()
    said = [picker.decide(None, expected_ms=900).say for _ in range(6)]
    assert all(a != b for a, b in zip(said, said[1:]))


def test_expected_latency_learns_from_what_each_turn_took():
    estimate = LatencyEstimate(prior_ms={"engage_llm": 900.0})
    assert estimate.expected_ms("engage_llm") == 900 and estimate.expected_ms("tool") == 0
    estimate.observe("engage_llm", 300.0)
    assert estimate.expected_ms("engage_llm") == pytest.approx(0.7 * 900 + 0.3 * 300)
    estimate.observe("tool", 5.0)
    assert estimate.expected_ms("tool") == 5.0


# --- circuit breaker ------------------------------------------------------------------

class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_two_failures_open_the_breaker_for_ten_seconds():
    clock, changes = Clock(), []
    breaker = CircuitBreaker(clock=clock, on_change=lambda s, why: changes.append(s))
    breaker.failure("timeout")
    assert breaker.allow()
    breaker.failure("timeout")
    assert not breaker.allow()
    clock.now = 9.9
    assert not breaker.allow()
    clock.now = 10.0
    assert breaker.allow() and breaker.state is BreakerState.HALF_OPEN
    breaker.success()
    assert changes == [BreakerState.OPEN, BreakerState.HALF_OPEN, BreakerState.CLOSED]


def test_a_failed_probe_reopens_and_five_in_a_row_disable_for_the_call():
    clock = Clock()
    breaker = CircuitBreaker(clock=clock)
    for second in range(4):
        clock.now = second * 20.0
        assert breaker.allow()
        breaker.failure("closed")
    assert breaker.state is BreakerState.OPEN
    clock.now = 100.0
    assert breaker.allow()
    breaker.failure("closed")
    assert breaker.state is BreakerState.DISABLED and not breaker.allow()
    clock.now = 1000.0
    assert not breaker.allow()


def test_an_auth_error_at_connect_disables_at_once():
    breaker = CircuitBreaker()
    breaker.disable("401 at connect")
    assert not breaker.allow() and breaker.state is BreakerState.DISABLED


def test_the_state_feeds_the_chain_end_to_end():
    state = EmotionalState(clock=lambda: 100.0)
    state.add(EmotionReading(Source.PROSODY, {"Anger": 0.8, "Annoyance": 0.3}, 98))
    state.add(EmotionReading(Source.PROSODY, {"Anger": 0.9}, 99.5))
    snap = state.snapshot()
    assert tone(snap).tone == "calm" and suppressed(snap)


def test_hostile_words_keep_the_agent_professional():
    steering = session_steering(
        snapshot("Anger", toxicity={"insult": 0.8, "obscene": 0.6, "threat": 0.1}), 60)
    assert "hostile (insult, obscene)" in steering.text
    assert "do not take it personally" in steering.text
    assert "hostile" not in session_steering(snapshot("Anger", toxicity={"insult": 0.2}), 60).text


def test_a_model_writing_its_own_filler_gets_the_register_and_length_not_a_phrase():
    confused = snapshot("Confusion", valence=-0.44, arousal=0.35)  # quiet, not frustrated
    assert "2-4 words (3-5 if you set verify_audio)" in filler_guidance(confused)
    assert "very plain, simple words" in filler_guidance(confused)
    assert "gentle and reassuring" in filler_guidance(snapshot("Fear", valence=-0.6, arousal=0.5))
    assert filler_guidance(snapshot("Anger")).startswith("leave it empty")
