"""The director's analysis: its output schema, one condensed line, rules offline."""

import json

import pytest

from call.conversation_tracker import ConversationTracker
from processors.conversation.director import (
    DirectorAnalysis,
    DirectorView,
    ModelDirector,
    condense,
    hold_wind_down,
    local_analysis,
    parse_analysis,
)
from processors.conversation.quick_rules import quick_rules


def view(latest: str, tracker: ConversationTracker | None = None, **kwargs) -> DirectorView:
    tracker = tracker or ConversationTracker()
    return DirectorView(clinic_name="Riverside Clinic", latest=latest,
                        observation=quick_rules().observe(latest), tracker=tracker,
                        elapsed_s=kwargs.pop("elapsed_s", 60.0), **kwargs)


def talked(*caller_lines: str) -> ConversationTracker:
    tracker = ConversationTracker()
    for line in caller_lines:
        tracker.caller_said(line)
        tracker.agent_said("Okay.")
    return tracker


ANSWER = {
    "analysis": {"call_phase": "main", "engagement_level": "medium",
                 "current_topic": "medication", "emotional_tone": "concerned"},
    "direction": {"stay_or_shift": "stay", "next_topic": None, "pacing_note": "good"},
    "reminder": {"should_deliver": True, "which_reminder": "Take medication",
                 "delivery_approach": "gently"},
    "guidance": {"tone": "warm", "priority_action": "Remind", "specific_instruction": "x"},
    "model_recommendation": {"use_sonnet": False, "max_tokens": 150, "reason": "short"},
}


def test_a_model_answer_is_condensed_to_one_line():
    analysis = parse_analysis(json.dumps(ANSWER))
    assert condense(analysis) == "main/medium/warm | REMIND: Take medication | (concerned)"


def test_closing_and_winding_down_name_the_phase_in_the_line():
    answer = json.loads(json.dumps(ANSWER))
    answer["analysis"].update(call_phase="closing", emotional_tone="neutral")
    answer["reminder"]["should_deliver"] = False
    answer["guidance"]["specific_instruction"] = "Say a warm goodbye. Keep it brief."
    assert condense(parse_analysis(f"```json\n{json.dumps(answer)}\n```")) == (
        "closing/medium/warm | CLOSING: Say a warm goodbye. Keep it brief.")


@pytest.mark.parametrize("junk", [
    "I think the caller is fine.",
    json.dumps({"analysis": {"call_phase": "lunch"}}),
    json.dumps({**ANSWER, "guidance": {"tone": "sarcastic", "priority_action": "x",
                                       "specific_instruction": "y"}}),
])
def test_junk_from_the_model_is_refused_without_repeating_it(junk):
    with pytest.raises(ValueError) as refused:
        parse_analysis(junk)
    assert "caller" not in str(refused.value) and "lunch" not in str(refused.value)


def test_the_rules_open_then_settle_into_the_main_phase():
    assert local_analysis(view("Hi, I need an appointment")).analysis.call_phase == "opening"
    later = local_analysis(view("Tuesday works", talked("Hi", "I need a checkup")))
    assert later.analysis.call_phase == "main"


def test_the_rules_hear_concern_and_ask_for_empathy():
    analysis = local_analysis(view("I'm really worried about this pain",
                                   talked("Hi", "It's about my knee")))
    assert analysis.analysis.emotional_tone == "concerned"
    assert analysis.guidance.tone == "empathetic"
    assert condense(analysis).endswith("(concerned)")


def test_the_rules_notice_short_answers_and_offer_a_simple_choice():
    analysis = local_analysis(view("Fine", talked("Yes", "No", "Ok")))
    assert analysis.analysis.engagement_level == "low"
    assert analysis.direction.stay_or_shift == "transition"


def test_the_rules_follow_a_goodbye_and_a_forced_wind_down():
    assert local_analysis(view("Okay, bye now", talked("a", "b"))).analysis.call_phase == "closing"
    wound = local_analysis(view("Tuesday then", talked("a", "b"), winding_down=True))
    assert wound.analysis.call_phase == "winding_down"
    assert wound.direction.stay_or_shift == "wrap_up"
    assert condense(wound).startswith("winding_down/")


def test_the_rules_and_the_model_answer_in_the_same_shape():
    analysis = local_analysis(view("Tuesday works", talked("Hi", "checkup")))
    assert DirectorAnalysis.model_validate(analysis.model_dump()) == analysis


def model_answer(phase: str, shift: str = "transition", instruction: str = "Ask about x.") -> str:
    answer = json.loads(json.dumps(ANSWER))
    answer["analysis"]["call_phase"] = phase
    answer["direction"].update(stay_or_shift=shift, next_topic="their garden")
    answer["reminder"]["should_deliver"] = False
    answer["guidance"].update(priority_action="Explore", specific_instruction=instruction)
    return json.dumps(answer)


@pytest.mark.parametrize("phase", ["opening", "rapport", "main"])
def test_a_model_answer_cannot_take_a_winding_down_call_back_to_an_earlier_phase(phase):
    held = hold_wind_down(parse_analysis(model_answer(phase)), winding_down=True)
    assert held.analysis.call_phase == "winding_down"
    assert (held.direction.stay_or_shift, held.direction.pacing_note) == ("wrap_up",
                                                                          "time_to_close")
    assert held.direction.next_topic is None
    line = condense(held)
    assert line.startswith("winding_down/") and "WINDING DOWN" in line
    assert "Ask about" not in line  # the model's new-topic advice is not passed on


def test_a_model_answer_that_is_already_wrapping_up_or_not_wound_down_is_kept():
    closing = parse_analysis(model_answer("closing", "wrap_up", "Say goodbye warmly."))
    assert hold_wind_down(closing, winding_down=True) == closing
    main = parse_analysis(model_answer("main"))
    assert hold_wind_down(main, winding_down=False) == main


async def test_the_model_director_is_told_the_call_is_winding_down():
    prompts: list[str] = []

    async def ask(prompt: str) -> str:
        prompts.append(prompt)
        return model_answer("main")

    director = ModelDirector(ask, timeout_s=1.0)
    await director.analyze(view("and another thing about my garden", talked("a", "b")))
    await director.analyze(view("and my neighbour too", talked("a", "b"), winding_down=True))
    assert "Call state: open" in prompts[0]
    assert "Call state: winding down" in prompts[1]
