"""The rule-based persona answers what the agent asks, from its facts, in its own way."""

from datetime import date

from simulator.personas.caller import RuleCaller
from simulator.personas.model import Persona

GREETING = "Thanks for calling the clinic. How can I help you today?"
TODAY = date(2031, 3, 3)  # a Monday; the caller's own clock, injected


def persona(**fields) -> Persona:
    data = {
        "name": "test_caller", "from": "+15550100399",
        "caller": {"first_name": "Alex", "last_name": "Reid", "date_of_birth": "1991-03-02",
                   "new": True, "dob_style": "long"},
        "tasks": [{"kind": "book", "service": "a blood test", "when": "this week"}],
        "expect": {"outcome": "booked"},
    }
    data.update(fields)
    return Persona.model_validate(data)


def caller(**fields) -> RuleCaller:
    return RuleCaller(persona(**fields), today=lambda: TODAY)


def call(rules: RuleCaller, *agent_turns: str) -> list[str | None]:
    """What the caller says after each agent turn, the greeting first."""
    return [rules.respond([turn]) for turn in (GREETING, *agent_turns)]


def test_the_caller_opens_with_what_they_want_and_answers_each_question_from_their_facts():
    said = call(caller(), "Let me set you up. Could I get your first name?",
                "And your surname?", "When were you born?", "When would you like to come in?")

    opening, first, last, born, when = said
    assert "blood test" in opening.lower()
    assert "Alex" in first and "Reid" in last
    assert "March 2nd, 1991" in born
    assert "this week" in when.lower()


def test_a_front_loading_caller_says_who_they_are_and_what_they_want_in_the_first_sentence():
    (opening,) = call(caller(habits=["front_loads"]))

    assert "Alex Reid" in opening
    assert "March 2nd, 1991" in opening
    assert "blood test" in opening and "this week" in opening


def test_a_caller_may_say_their_birth_date_as_bare_numbers_and_clearly_when_asked_again():
    rules = caller(habits=["dob_as_numbers"],
                   caller={"first_name": "Elena", "last_name": "Alvarez",
                           "date_of_birth": "1978-11-20"})

    _, first, again = call(rules, "And their date of birth, please?",
                           "Sorry, could you give me the date of birth again?")

    assert "eleven twenty seventy-eight" in first.lower()
    assert "November 20th, 1978" in again


def test_a_caller_who_corrects_themselves_gives_the_slip_then_the_right_name_spelled():
    rules = caller(habits=["corrects_self"], corrections={"last_name": "Reed"}, seed=7)

    said = " ".join(line for line in call(rules, "What's your last name?",
                                          "And your date of birth?") if line)

    assert said.index("Reed") < said.index("Reid, R-E-I-D")


def test_a_read_back_with_the_slip_in_it_is_corrected_not_confirmed():
    rules = caller(habits=["corrects_self"], corrections={"last_name": "Reed"}, seed=7)
    call(rules, "What's your last name?")

    answer = rules.respond(["So that's Alex Reed, born March 2nd 1991. Is that correct?"])

    assert answer.startswith(("No", "Not quite")) and "Reid" in answer


def test_a_caller_who_spells_their_name_spells_it():
    _, last = call(caller(habits=["spells_name"]), "And how about your last name?")

    assert "R-E-I-D" in last


def test_the_caller_chooses_the_offered_time_that_suits_them_and_says_yes_to_its_read_back():
    rules = caller(tasks=[{"kind": "book", "service": "a flu shot",
                           "prefer": {"day": "thursday"}}])
    call(rules)

    choice = rules.respond(["I have Tuesday, March 4 at 9 AM with Tom Becker or Thursday, "
                            "March 6 at 10 AM with Tom Becker. Which one works for you?"])
    yes = rules.respond(["Just to confirm: Thursday, March 6 at 10 AM. Shall I book that?"])

    assert "second" in choice or "Thursday" in choice
    assert yes.lower().startswith(("yes", "yep", "that's great"))


def test_a_read_back_for_the_wrong_day_is_a_no_with_the_day_they_wanted():
    rules = caller(tasks=[{"kind": "book", "service": "a flu shot",
                           "prefer": {"day": "thursday"}}])
    call(rules)

    answer = rules.respond(["Okay, I have you down for Tuesday, March 4 at 9 AM. Does that work?"])

    assert "Thursday" in answer and "yes" not in answer.lower()


def test_a_caller_who_wants_it_soon_turns_down_a_date_months_away():
    rules = caller(tasks=[{"kind": "book", "service": "a flu shot",
                           "prefer": {"within_days": 21}}])
    call(rules)

    answer = rules.respond(["Just to confirm: Friday, July 9 at 8 AM. Shall I book that?"])

    assert "sooner" in answer


def test_a_caller_who_wants_it_soon_asks_for_sooner_when_only_far_times_are_offered():
    rules = caller(tasks=[{"kind": "book", "service": "a flu shot",
                           "prefer": {"within_days": 21}}])
    call(rules)
    far = "I have Friday, July 9 at 8 AM or Friday, July 9 at 8:15 AM. Which would you like?"

    first = rules.respond([far])
    second = rules.respond([f"Sorry, that's all I have. {far}"])

    assert "sooner" in first
    assert "first" in second or "Friday" in second  # offered nothing else, they settle


def test_a_caller_who_changes_their_mind_says_no_once_then_takes_the_other_time():
    rules = caller(habits=["changes_mind"], changes_mind="other_slot")
    call(rules, "I have Monday, March 3 at 9 AM or Wednesday, March 5 at 9 AM. Which would "
                "you like?")

    no = rules.respond(["Just to confirm: Monday, March 3 at 9 AM. Shall I book that?"])
    other = rules.respond(["Okay. I have Monday, March 3 at 9 AM or Wednesday, March 5 at "
                           "9 AM. Which would you like?"])
    yes = rules.respond(["Just to confirm: Wednesday, March 5 at 9 AM. Shall I book that?"])

    assert "no" in no.lower() and "yes" not in no.lower()
    assert "second" in other or "Wednesday" in other
    assert "yes" in yes.lower() or "perfect" in yes.lower() or "great" in yes.lower()


def test_a_caller_who_gives_up_at_the_read_back_says_goodbye_and_then_hangs_up():
    rules = caller(habits=["changes_mind"], changes_mind="gives_up")
    call(rules)

    goodbye = rules.respond(["Just to confirm: Monday, March 3 at 9 AM. Shall I book that?"])

    assert "call back" in goodbye.lower() or "another time" in goodbye.lower()
    assert rules.finished and rules.respond(["Sorry, was that a yes?"]) is None


def test_a_read_back_of_a_booking_the_caller_never_asked_for_is_refused():
    rules = caller(tasks=[{"kind": "cancel", "appointment": "my blood test"}],
                   expect={"outcome": "cancelled"})
    call(rules)

    answer = rules.respond(["Just to confirm: Friday, March 7 at 8 AM. Shall I book that?"])

    assert answer.startswith("No") and "blood test" in answer


def test_a_cancelling_caller_names_the_booking_and_confirms_only_that_one():
    rules = caller(tasks=[{"kind": "cancel", "appointment": "my blood test"}],
                   expect={"outcome": "cancelled"})
    call(rules)

    which = rules.respond(["You have a blood test on Monday, March 10 at 8:30 AM and a "
                           "follow-up on Friday, March 14 at 9 AM. Which one did you mean?"])
    wrong = rules.respond(["That's the follow-up on Friday. Do you want me to cancel it?"])
    right = rules.respond(["That's the blood test on Monday. Shall I cancel it?"])

    assert "blood test" in which.lower()
    assert wrong.startswith("No")
    assert right.lower().startswith("yes")


def test_two_tasks_are_asked_for_together_and_the_second_is_raised_when_the_first_is_done():
    rules = caller(tasks=[{"kind": "cancel", "appointment": "my blood test"},
                          {"kind": "book", "service": "a flu shot", "when": "Friday"}],
                   expect={"outcome": ["cancelled", "booked"]})

    (opening,) = call(rules)
    rules.respond(["That's your blood test on Monday. Do you want me to cancel it?"])
    next_task = rules.respond(["Done. Is there anything else I can help you with?"])

    assert "blood test" in opening and "flu shot" in opening
    assert "flu shot" in next_task


def test_the_caller_says_goodbye_once_everything_is_done_and_then_hangs_up():
    rules = caller()
    call(rules)
    rules.respond(["Just to confirm: Monday, March 3 at 9 AM. Shall I book that?"])

    bye = rules.respond(["You're booked. Can I help with anything else today?"])

    assert "bye" in bye.lower()
    assert rules.finished and rules.respond(["Thanks for calling, goodbye."]) is None


def test_emergency_words_come_out_on_their_line_whatever_the_agent_asked():
    words = "my chest feels tight and my arm has gone numb"
    rules = caller(tasks=[{"kind": "emergency", "service": "a check-up", "words": words,
                           "say_at": 2}], expect={"outcome": "emergency_redirect"})

    opening, second = call(rules, "Sure. What day or time suits you best?")

    assert words not in opening
    assert second == words
    assert "okay" in rules.respond(["That sounds like an emergency. Please call 911 now."]).lower()


def test_a_caller_on_hold_for_a_person_waits_a_little_then_hangs_up():
    rules = caller(tasks=[{"kind": "crisis", "words": "I can't see the point of anything"}],
                   expect={"outcome": "crisis_escalation"})
    call(rules)
    hold = "I'm bringing in a person from our team. Please stay on the line."

    assert rules.respond([hold]) is not None
    assert rules.respond([hold]) is not None
    assert rules.respond([hold]) is None


def test_a_caller_who_hears_the_same_thing_three_times_running_gives_up():
    rules = caller()
    call(rules)
    loop = "Sure, a blood test. What day or time suits you best?"

    first, second, third = (rules.respond([loop]) for _ in range(3))

    assert "bye" not in first.lower() and "bye" not in second.lower()
    assert "call back" in third.lower() or "another time" in third.lower()
    assert rules.finished


def test_an_impatient_caller_hangs_up_after_their_lines():
    rules = caller(habits=["hangs_up_early"], hang_up_after=2)

    said = call(rules, "What's your first name?", "And your last name?")

    assert said[0] and said[1] and said[2] is None


def test_terse_and_rambling_callers_say_the_same_facts_differently():
    terse = caller(habits=["terse"])
    rambling = caller(habits=["rambling"], seed=4)

    short = call(terse, "What's your first name?")[1]
    long = call(rambling, "What's your first name?")[1]

    assert short == "Alex."
    assert "Alex" in long and len(long) > len(short)


def test_the_same_seed_says_the_same_things_and_another_seed_varies_them():
    agent = ["What's your first name?", "And your last name?", "When were you born?",
             "What day or time suits you best?"]

    first, again = (call(caller(seed=1), *agent) for _ in range(2))
    others = {tuple(call(caller(seed=seed), *agent)) for seed in range(2, 12)}

    assert first == again
    assert len(others) > 3


def test_an_interrupting_caller_apologises_for_talking_over_the_agent():
    rules = caller()
    call(rules)

    line = rules.respond(["And your first name, please?"], interrupting=True)

    assert line.startswith(("Sorry, sorry,", "Oh, sorry, yes,")) and "Alex" in line


def test_when_the_agent_goes_straight_on_to_the_second_task_the_caller_follows():
    rules = caller(tasks=[
        {"kind": "cancel", "appointment": "my blood test", "type": "Blood test"},
        {"kind": "book", "service": "a flu shot", "type": "Flu shot", "when": "Friday",
         "prefer": {"day": "friday"}}],
        expect={"outcome": ["cancelled", "booked"]})
    call(rules, "That's a blood test on Wednesday at 9 AM. Do you want me to cancel it?")
    chose = rules.respond(["Done, cancelled. I have Friday, March 7 at 8 AM or Monday, "
                           "March 10 at 9 AM. Which would you like?"])
    yes = rules.respond(["Just to confirm: a flu shot on Friday, March 7 at 8 AM. "
                         "Shall I book that?"])
    assert "first" in chose.lower() or "friday" in chose.lower()
    assert yes is not None and not yes.lower().startswith("no")
    assert rules.progress.done == [True, True]


def test_a_closed_clinic_s_greeting_is_not_an_emergency_redirect_nor_an_answer():
    greeting = (
        "Thank you for calling Demo Clinic. We're closed right now; we open again tomorrow "
        "at 8 AM. I can still book an appointment or take a message for a callback, and if "
        "this is an emergency, please hang up and call 911. How can I help you today?")
    booking = caller()
    opening = booking.respond([greeting])
    assert opening is not None and "blood test" in opening.lower()
    assert not booking.progress.finished

    asks_hours = caller(tasks=[{"kind": "hours"}], expect={"outcome": "answered"})
    asks_hours.respond([greeting])
    assert asks_hours.progress.done == [False]  # they have not asked yet
