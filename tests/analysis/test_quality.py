"""The rules' five scores: what a reviewer sorting hundreds of calls needs to trust —
a clean booking scores high, each problem costs the dimension it belongs to and says
why, with the turns to jump to."""

from analysis.quality import score_call
from analysis.summary import summarise
from db.call_analyses import DIMENSIONS, RecordedTool
from tests.analysis.records import booked, conversation, record


def scored(call):
    return score_call(call, summarise(call))


def booking_turns(gap_ms: int = 600):
    return conversation(
        "agent: How can I help?",
        "caller: I want to book a check up",
        "agent: I have Monday at 9. Shall I book it?",
        "caller: yes book it",
        "agent: Booked, see you Monday.", gap_ms=gap_ms)


def test_a_clean_booking_scores_five_on_every_dimension():
    quality = scored(record(booking_turns(), writes=[booked(3)], completion_reason="goodbye"))

    assert {name: s.score for name, s in quality.dimensions.items()} == dict.fromkeys(
        DIMENSIONS, 5)
    assert quality.overall == 5.0
    assert quality.dimensions["task_completion"].reason.startswith("Done: Booked")


def test_repeated_questions_and_dead_air_cost_the_flow_and_point_at_their_turns():
    turns = booking_turns(gap_ms=4500)  # every reply came 4.5 s after the caller stopped
    call = record(turns, writes=[booked(3)], events=[
        ("question_repeated", {"in_a_row": 2}, 13200), ("question_repeated", {}, 13300)])
    flow = scored(call).dimensions["conversation_flow"]

    assert flow.score == 2  # two repeats cost 2, two silences 1
    assert "asked again 2 times" in flow.reason and "dead air" in flow.reason
    assert 2 in flow.turns and 4 in flow.turns


def test_an_undone_request_costs_task_completion():
    turns = conversation("agent: How can I help?", "caller: can I move my appointment to next week",
                         "agent: Sorry, I can't do that right now.")
    quality = scored(record(turns))

    assert quality.dimensions["task_completion"].score == 1
    assert quality.dimensions["task_completion"].turns == (1,)
    assert quality.dimensions["caller_experience"].score == 4  # hung up with it undone


def test_a_failed_tool_the_call_recovered_from_costs_accuracy_not_recovery_fully():
    call = record(booking_turns(), writes=[booked(3)], tools=[
        RecordedTool("CheckAvailability", False, "pms", 3000),
        RecordedTool("CheckAvailability", True, None, 3500)])
    quality = scored(call)

    assert quality.dimensions["information_accuracy"].score == 4
    assert "CheckAvailability (pms)" in quality.dimensions["information_accuracy"].reason
    assert quality.dimensions["error_recovery"].score == 4
    assert quality.dimensions["error_recovery"].reason.startswith("Recovered after")


def test_a_call_that_ended_in_silence_after_an_error_scores_low_on_recovery():
    turns = conversation("agent: How can I help?", "caller: I'd like to book a cleaning")
    call = record(turns, events=[("llm_unavailable", {}, 2700), ("silence_hangup", {}, 30000)],
                  completion_reason="silence")
    quality = scored(call)

    assert quality.dimensions["error_recovery"].score == 2
    assert "went silent" in quality.dimensions["error_recovery"].reason
    assert quality.dimensions["caller_experience"].score <= 4


def test_a_misheard_transcript_costs_information_accuracy():
    quality = scored(record(booking_turns(), writes=[booked(3)], accuracy=0.55))

    assert quality.dimensions["information_accuracy"].score == 3
    assert "55% recognised" in quality.dimensions["information_accuracy"].reason


def test_a_call_with_no_caller_words_still_gets_a_score():
    quality = scored(record(conversation("agent: Thanks for calling. How can I help?")))

    assert quality.dimensions["task_completion"].score == 3
    assert 1 <= quality.overall <= 5


def test_a_safety_escalation_hands_the_call_on_and_costs_experience_while_it_waits():
    turns = conversation("agent: How can I help?",
                         "caller: I want to book a check up but honestly I can't go on anymore",
                         "agent: I'm getting someone from our team for you right now.")
    escalation = {"seq": 0, "concept": "self_harm", "severity": "hard", "at_ms": 2700}
    waiting = scored(record(turns, escalations=[{**escalation, "status": "open"}]))
    resolved = scored(record(turns, escalations=[{**escalation, "status": "resolved"}]))

    assert waiting.dimensions["task_completion"].score == 4
    assert waiting.dimensions["task_completion"].reason.startswith("Handed on to a person")
    assert waiting.dimensions["caller_experience"].score == 4
    assert "waits for a person" in waiting.dimensions["caller_experience"].reason
    assert waiting.dimensions["caller_experience"].turns == (1,)
    assert resolved.dimensions["caller_experience"].score == 5


def test_a_deployment_without_a_language_model_is_no_error_but_a_model_failing_is():
    by_design = record(booking_turns(), writes=[booked(3)], events=[
        ("llm_unavailable", {"reason": "no LLM provider configured"}, 2700)])
    failing = record(booking_turns(), writes=[booked(3)], events=[
        ("llm_unavailable", {"reason": "llm error", "error": "503"}, 2700)])

    assert scored(by_design).dimensions["error_recovery"].score == 5
    assert scored(failing).dimensions["error_recovery"].reason == (
        "Recovered after the language model did not answer.")


def test_a_call_cut_off_by_a_service_failure_ends_badly():
    turns = conversation("agent: How can I help?", "caller: I need to move my appointment")
    quality = scored(record(turns, completion_reason="server_crash"))

    assert "cut off when the service failed" in quality.dimensions["caller_experience"].reason
    assert quality.dimensions["caller_experience"].score <= 4


def test_a_caller_who_has_to_repeat_themselves_costs_the_flow():
    turns = conversation(
        "agent: How can I help?",
        "caller: is there a human I can talk to",
        "agent: Is there anything else I can help you with?",
        "caller: as I told you, I'd like to talk to someone at the front desk",
        "agent: Putting you through now.")
    call = record(turns, tools=[RecordedTool("TransferCall", True, None, 8000)])
    flow = scored(call).dimensions["conversation_flow"]

    assert flow.score == 4 and flow.turns == (3,)
    assert flow.reason == "The caller had to say again what they wanted."
