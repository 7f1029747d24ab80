"""The quick observer's rules: what a caller's words signal, in ~0 ms, without a model."""

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from processors.conversation.quick_rules import DATA_FILE, load_rules, quick_rules, render_guidance
from tests.observers.data_files import rewritten


@pytest.fixture
def rules():
    return load_rules()


def test_pain_becomes_one_compact_health_guidance_line(rules):
    observation = rules.observe("My back has been hurting all week.")
    assert observation.signal_ids == ["pain"]
    assert observation.guidance == "[HEALTH] They mentioned pain. Ask how they are feeling."


def test_patterns_match_whole_words_in_any_case(rules):
    assert rules.observe("I'm in PAIN").signal_ids == ["pain"]
    assert rules.observe("I'm flying to Spain").signals == ()  # "pain" inside a word
    assert rules.observe("bye-bye then").goodbye == "strong"
    assert rules.observe("I'll stop by tomorrow").goodbye is None  # "by" is not "bye"


def test_several_signals_are_ordered_most_urgent_first_and_capped_at_three_categories(rules):
    observation = rules.observe(
        "My husband fell yesterday, I'm so worried, my back hurts and what day is it?")
    assert observation.categories == ["cognitive", "emotion", "family", "health"]
    tags = re.findall(r"\[([A-Z]+)\]", observation.guidance)
    assert tags == ["HEALTH", "COGNITIVE", "EMOTION"]


def test_two_categories_make_one_line_in_order_of_urgency(rules):
    assert rules.observe("I'm worried about my chest pain").guidance == (
        "[HEALTH] They mentioned chest pain. Ask if it is happening now; if so, tell them to "
        "call emergency services. [EMOTION] They sound worried. Reassure them calmly and "
        "explain what happens next.")


def test_priority_not_the_order_in_the_file_decides_urgency(tmp_path):
    reordered = load_rules(_write(tmp_path, lambda d: d.update(
        categories=dict(reversed(list(d["categories"].items()))))))
    said = "My dog is frightened of the smoke alarm going off"
    assert reordered.observe(said).guidance == load_rules().observe(said).guidance
    assert reordered.observe(said).signal_ids == ["home_danger", "anxious", "pet"]


def test_signals_carry_what_the_pattern_file_says(rules):
    (crisis,) = rules.observe("you won't hear from me again").signals
    assert (crisis.category, crisis.tag, crisis.priority, crisis.tokens) == (
        "safety", "SAFETY", 1, 300)
    assert crisis.holds_call and crisis.escalate == "suicidal_ideation"
    (night,) = rules.observe("night night").signals
    assert night.clause_start and night.strength == "strong" and not night.holds_call
    (sad,) = rules.observe("I've been so sad").signals
    assert (sad.valence, sad.intensity) == (-0.6, 0.6)


def test_emotion_signals_carry_valence_and_intensity(rules):
    (signal,) = rules.observe("Honestly I'm just so frustrated with all this").signals
    assert signal.id == "frustrated" and signal.valence < 0 and 0 < signal.intensity <= 1


def test_a_strong_goodbye_a_weak_one_and_one_taken_back(rules):
    assert rules.observe("Okay, thanks, goodbye!").goodbye == "strong"
    assert rules.observe("I think that's all for today").goodbye == "weak"
    taken_back = rules.observe("Bye, oh wait, one more thing")
    assert taken_back.goodbye is None and taken_back.false_goodbye
    assert "GOODBYE" not in (taken_back.guidance or "")
    # "Wait" before the goodbye does not take it back.
    assert rules.observe("Wait, no, that's fine. Goodbye.").goodbye == "strong"


def test_engagement_follows_how_much_the_caller_says(rules):
    assert rules.observe("Yes.").engagement == "low"
    assert rules.observe("Yes, Tuesday please").engagement == "low"  # at most three words
    assert rules.observe("Yes, Tuesday morning please").engagement == "medium"
    assert rules.observe(" ".join(["word"] * 24)).engagement == "medium"
    assert rules.observe(" ".join(["word"] * 25)).engagement == "high"  # at least 25
    assert rules.observe("I would like to come in on Tuesday if possible").engagement == "medium"
    assert rules.observe(" ".join(["word"] * 30)).engagement == "high"


def test_ordinary_booking_words_signal_nothing(rules):
    observation = rules.observe("I need a checkup tomorrow morning.")
    assert observation.signals == () and observation.guidance is None
    assert observation.tokens == 150


def test_the_reply_length_follows_the_most_demanding_signal(rules):
    assert rules.observe("I can't breathe").tokens == 350
    assert rules.observe("I'm in a hurry").tokens == 80


def _write(tmp_path: Path, change) -> Path:
    return rewritten(DATA_FILE, tmp_path, change)


def test_a_pattern_file_with_a_broken_regex_is_refused_at_load(tmp_path):
    def broken(data):
        data["categories"]["health"]["patterns"][0]["regex"] = "(unclosed"

    with pytest.raises(ValidationError, match="bad regular expression"):
        load_rules(_write(tmp_path, broken))


def test_a_pattern_file_with_a_duplicate_id_is_refused_at_load(tmp_path):
    def duplicate(data):
        patterns = data["categories"]["health"]["patterns"]
        patterns.append(dict(patterns[0]))

    with pytest.raises(ValidationError, match="used twice"):
        load_rules(_write(tmp_path, duplicate))


def test_emotion_patterns_must_say_how_they_feel(tmp_path):
    def bare(data):
        del data["categories"]["emotion"]["patterns"][0]["valence"]

    with pytest.raises(ValidationError, match="valence and intensity"):
        load_rules(_write(tmp_path, bare))


# --- Goodbye: a farewell, not the word -------------------------------------------------

@pytest.mark.parametrize("text", [
    "We lost Dad in March and none of us got the chance to say goodbye",
    "I didn't get to say bye to my sister before she died",
    "I couldn't say goodbye to him, that's why I'm not sleeping",
    "There was never a way to say goodbye properly, it all happened so fast",
    "The film is called Goodbye Lenin, my grandson put it on for me",
    "My favourite hymn was played at the service, it's titled 'Goodbye my friend' I think",
    "She just said bye and put the phone down on me",
    "The nurse goes, 'bye then', and I'm left standing there with my bag",
    "We had a little goodbye party for my neighbour last week",
    "It was such a sad goodbye at the airport",
    "Goodbye party tonight!",
    "I can't sleep at night since the operation",
    "I haven't had a good night's rest in weeks",
])
def test_goodbye_in_another_sense_is_not_a_farewell(rules, text):
    observation = rules.observe(text)
    assert observation.goodbye is None and not observation.false_goodbye
    assert "GOODBYE" not in (observation.guidance or "")


def test_a_real_farewell_after_talking_about_a_goodbye_is_still_caught(rules):
    observation = rules.observe("I never said goodbye to my brother. Anyway, cheers, bye now.")
    assert observation.goodbye == "strong"


@pytest.mark.parametrize("text", [
    "Right, I'd best let you get on then",
    "Well, I'll let you get back to work, dear",
    "I'll let you go now",
    "I won't keep you. Bye for now",
    "Night, love",
    "Okay then, nighty night",
    "Thank you, good night",
    "I'm going to get off the phone now",
    "I'm going to hang up now, thanks",
    "It's been lovely talking to you",
    "Nice to chat with you, take care",
    "That's everything I wanted, thanks",
    "That's all I needed, cheers",
    "Ta-ra, duck",
    "Cheerio then",
    "Okay, talk soon",
    "Catch you later",
    "You have a lovely rest of your day",
    "Bye-bye now, you've been ever so helpful",
    "I'll see you Thursday then",
    "Thanks ever so much, bye!",
    "Mind how you go",
    "Gotta run, bye",
    "thank you good night",
    "okay night then",
    "Cheerio, see you Friday at ten",
    "I\u2019ll let you go now, dear",
])
def test_everyday_closings_are_goodbyes(rules, text):
    assert rules.observe(text).goodbye == "strong"


@pytest.mark.parametrize("text", [
    "No, that's it for today",
    "I think that's everything",
    "Alright, thanks",
    "No, I'm fine, thank you",
    "That'll be all",
])
def test_a_probable_ending_is_a_weak_goodbye_for_the_agent_to_check(rules, text):
    assert rules.observe(text).goodbye == "weak"


@pytest.mark.parametrize("text", [
    "Can someone take care of my repeat prescription while I'm away?",
    "Who will take care of the cat when I go in for the operation",
    "When can I see you about my hip?",
    "I need to go to the pharmacy after this, can you send it there",
    "I'll let you go ahead and pick the time then",
    "Bye the way, do you take walk-ins on a Saturday?",
    "Thanks so much, bye, oh and what's the postcode for the sat nav?",
    "Lovely talking to you, now can we sort out the Wednesday slot for my husband?",
    "I have to go to work at eight so could it be after five",
    "Take care of the booking for both of us, would you, for next Friday afternoon",
    "There's nothing else wrong apart from my knee, can I book for Monday",
])
def test_a_closing_inside_a_request_that_goes_on_is_not_a_goodbye(rules, text):
    observation = rules.observe(text)
    assert observation.goodbye is None
    assert "GOODBYE" not in (observation.guidance or "")


def test_a_goodbye_guides_the_reply_by_how_sure_it_is(rules):
    assert rules.observe("Cheerio!").guidance == (
        "[GOODBYE] They are saying goodbye. Say a warm, brief goodbye.")
    assert rules.observe("No, that's it for today").guidance == (
        "[GOODBYE] They may be finishing. Check if there is anything else before saying "
        "goodbye.")


def test_a_probable_ending_taken_back_is_not_one(rules):
    observation = rules.observe("Alright, thanks. Oh wait, one more thing about parking")
    assert observation.goodbye is None


def test_a_goodbye_taken_back_after_an_earlier_one_in_the_same_turn_ends_nothing(rules):
    observation = rules.observe("Okay, bye now. Bye, oh hang on, what time was it?")
    assert observation.goodbye is None and observation.false_goodbye
    assert "GOODBYE" not in (observation.guidance or "")


# --- Safety: a farewell in a crisis, danger at home, scams -----------------------------

@pytest.mark.parametrize("text", [
    "So this is my goodbye, thank you for being kind",
    "I just wanted to say bye forever",
    "I won't be here after tonight. Bye",
    "I won't be around any more, so goodbye",
    "Please tell my daughter I love her",
    "Tell everyone I'm sorry",
    "I'm sorry for everything. Goodbye",
    "You won't hear from me again",
    "This is the last time you'll hear from me",
    "I've written my goodbye letter",
])
def test_a_farewell_said_in_crisis_holds_the_call_and_escalates(rules, text):
    observation = rules.observe(text)
    assert observation.holds_call and observation.goodbye is None
    assert observation.escalations == ["suicidal_ideation"]
    assert observation.guidance.startswith("[SAFETY]") and "Do not end the call" in (
        observation.guidance)


def test_words_a_more_urgent_pattern_matched_are_not_matched_again(rules):
    observation = rules.observe("Please tell my husband I love him, and my daughter")
    # "my husband" is part of the farewell, "my daughter" is not
    assert observation.signal_ids == ["crisis_farewell", "child"]


def test_a_crisis_farewell_outweighs_any_goodbye_in_the_same_turn(rules):
    observation = rules.observe("Thanks for everything, bye forever, take care")
    assert observation.goodbye is None and observation.holds_call
    assert "GOODBYE" not in observation.guidance


@pytest.mark.parametrize("text", [
    "I won't be around on Tuesday, can we do Thursday",
    "Tell the doctor I'm sorry I missed last week",
    "Sorry, this is goodbye for now, I'll ring back tomorrow",
])
def test_ordinary_absence_and_apology_do_not_hold_the_call(rules, text):
    observation = rules.observe(text)
    assert not observation.holds_call and observation.escalations == []


@pytest.mark.parametrize("text", [
    "There's a funny smell of gas coming from the cooker",
    "It smells like something's burning in the flat",
    "I think the kitchen's full of smoke",
    "Hang on, the fire alarm just went off",
    "The carbon monoxide detector is beeping at me",
    "My CO alarm keeps sounding",
    "There's smoke pouring out of the back bedroom",
    "The pan caught fire",
])
def test_danger_in_the_home_gets_emergency_guidance_with_the_configured_number(rules, text):
    observation = rules.observe(text)
    assert "home_danger" in observation.signal_ids
    spoken = render_guidance(observation.guidance, emergency_number="112")
    assert "leave the building" in spoken and "call 112" in spoken
    assert not any(ch.isdigit() for ch in spoken.replace("112", ""))


@pytest.mark.parametrize("text", [
    "A lady phoned to say I'd won a holiday but I have to pay a deposit first",
    "They said there's a fee to release my winnings",
    "Somebody rang and kept asking for my PIN",
    "A man wanted me to read him my card number off the back",
    "He said he was from the bank's fraud team and I must move my savings to a safe account",
    "They told me to buy Apple cards and read out the codes",
    "A woman says she's from Medicare and I owe them money",
    "The tax office rang and said they'd arrest me if I don't pay today",
    "He claimed to be from Microsoft and asked for my online banking password",
])
def test_scam_calls_get_a_do_not_pay_hang_up_call_your_bank_signal(rules, text):
    observation = rules.observe(text)
    assert "scam" in observation.signal_ids
    assert "hang up" in observation.guidance and "number printed on their card" in (
        observation.guidance)


@pytest.mark.parametrize("text", [
    "Do you want my insurance card number?",
    "Is there a charge for a copy of my notes?",
    "When will the refund for my cancelled appointment come through?",
    "The consultant says it's a safe procedure",
    "My knee feels like it's on fire after the walk",
])
def test_ordinary_clinic_talk_is_not_a_scam_or_a_fire(rules, text):
    ids = rules.observe(text).signal_ids
    assert "scam" not in ids and "home_danger" not in ids


# --- The pattern file is checked when it is loaded -------------------------------------

@pytest.mark.parametrize(("change", "error"), [
    (lambda d: d["categories"]["safety"]["patterns"][1].update(
        guidance="Tell them to call 999 now."), "number of its own"),
    (lambda d: d["categories"]["safety"]["patterns"][1].update(
        guidance="Tell them to call $clinic_phone now."), "only hold \\$emergency_number"),
    (lambda d: d["categories"]["health"]["patterns"][0].update(regex="Chest Pain"),
     "lower-cased"),
    (lambda d: d["farewell"]["other_senses"].append("(unclosed"), "bad regular expression"),
    (lambda d: d["farewell"]["closing_words"].append("Thanks"), "lower-cased"),
    (lambda d: d["categories"]["health"]["patterns"][0].update(strength="strong"),
     "only goodbye patterns have a strength"),
    (lambda d: d["categories"]["health"]["patterns"][0].update(clause_start=True),
     "only goodbye patterns start a clause"),
    (lambda d: d["categories"]["goodbye"]["patterns"].pop(0) and d["categories"]["goodbye"][
        "patterns"].pop(0), "strong goodbye pattern is required"),
    (lambda d: d["categories"].pop("goodbye"), "strong goodbye pattern is required"),
    (lambda d: d["farewell"].update(tail_words=-1), "greater than or equal"),
    (lambda d: d["farewell"].update(taken_back=[]), "at least 1"),
    (lambda d: d["categories"]["safety"]["patterns"][0].update(escalate="Suicide"),
     "should match pattern"),
    (lambda d: d["categories"]["safety"]["patterns"][0].update(urgent=True), "not permitted"),
])
def test_a_pattern_file_that_would_misbehave_is_refused_at_load(tmp_path, change, error):
    with pytest.raises(ValidationError, match=error):
        load_rules(_write(tmp_path, change))


def test_the_farewell_tail_is_a_setting_of_the_pattern_file(tmp_path):
    said = "Bye then, Mrs Patel"
    assert quick_rules().observe(said).goodbye == "strong"
    strict = load_rules(_write(tmp_path, lambda d: d["farewell"].update(tail_words=1)))
    assert strict.observe(said).goodbye is None
    assert strict.observe("Bye then, dear").goodbye == "strong"  # closing words are free


@pytest.mark.parametrize(
    "said",
    ["there's a heaviness on my chest and my left arm has gone numb",
     "his face has sort of slipped on one side",
     "I keep gasping for air, it's getting worse"],
)
def test_a_red_flag_in_everyday_words_gets_the_emergency_guidance(said):
    observation = quick_rules().observe(said)
    assert "emergency" in observation.signal_ids
    assert "$emergency_number" in observation.guidance


def test_a_crisis_or_no_symptom_gets_no_emergency_guidance_from_the_red_flags():
    assert "emergency" not in quick_rules().observe("my knee's been stiff for weeks").signal_ids
    crisis = quick_rules().observe("I just want to end it all")
    assert "emergency" not in crisis.signal_ids


def test_the_patterns_must_name_the_emergency_the_red_flags_fall_back_on(tmp_path):
    def without_emergency(data):
        safety = data["categories"]["safety"]
        safety["patterns"] = [p for p in safety["patterns"] if p["id"] != "emergency"]

    with pytest.raises(ValidationError, match="'emergency' is required"):
        load_rules(_write(tmp_path, without_emergency))


@pytest.mark.parametrize(
    ("said", "goodbye"),
    [
        ("That's all, thank you so much. Bye now. My grandson set this phone up for me.",
         "strong"),
        ("Cheerio then! Mind the weather out there, love.", "strong"),
        ("Okay, goodbye. Lovely weather today, isn't it?", None),  # a question: it goes on
        ("Right, bye. I'd like to check my results first though.", None),
        ("Ta-ra. Oh, and when's my next one.", None),
    ],
)
def test_a_sentence_after_the_goodbye_is_an_afterthought_unless_it_asks_for_something(
        said, goodbye):
    assert quick_rules().observe(said).goodbye == goodbye
