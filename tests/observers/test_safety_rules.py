"""Safety stage 1 (similarity to the concepts) and stage 2 (the offline judge), and the
one line a suspended agent says."""

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from config import CrisisResource
from processors.conversation.quick_rules import DATA_FILE as QUICK_PATTERNS
from processors.conversation.quick_rules import load_rules, quick_rules
from processors.safety.concepts import DATA_FILE as CONCEPTS_FILE
from processors.safety.concepts import (
    ConceptFile,
    ConceptIndex,
    ConceptSpec,
    SafetyConcept,
    default_concepts,
    load_concepts,
)
from processors.safety.judge import (
    IDIOM,
    NO_RULES,
    NO_STATEMENT,
    STATEMENT,
    RulesJudge,
    Verdict,
    judge_by_rules,
)
from processors.safety.monitor import concepts_named_by, holding_line, soft_guidance
from services.embeddings import LocalEmbedder


@pytest.fixture(scope="module")
def index() -> ConceptIndex:
    embedder = LocalEmbedder()
    index = ConceptIndex(embedder.model, embedder.dimension)
    for concept in default_concepts():
        index.add(concept, embedder.embed_now(list(concept.examples)))
    return index


def near(index: ConceptIndex, text: str):
    vector = LocalEmbedder().embed_now([text])[0]
    return index.assess(vector, escalate_at=0.85, candidate_at=0.45, text=text)


def concept(key: str):
    return next(c for c in default_concepts() if c.key == key)


def test_the_default_concepts_are_always_there():
    assert [c.key for c in default_concepts()] == [
        "suicidal_ideation", "passive_ideation", "self_harm", "domestic_violence",
        "adverse_drug_reaction", "post_discharge_red_flag"]


def test_the_local_embedder_needs_no_network_and_gives_unit_vectors():
    vectors = LocalEmbedder().embed_now(["I want to book a checkup", "hello"])
    assert vectors.shape == (2, 256)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_plain_statement_of_suicidal_intent_escalates_on_similarity_alone(index):
    assessment = near(index, "I want to kill myself")
    assert [n.concept.key for n in assessment.escalate] == ["suicidal_ideation"]


def test_an_idiom_with_the_same_words_is_only_a_candidate_and_the_judge_says_no(index):
    assessment = near(index, "This wait is killing me")
    assert assessment.escalate == ()
    (candidate,) = [n for n in assessment.candidates if n.concept.key == "suicidal_ideation"]
    assert not judge_by_rules("This wait is killing me", candidate.concept).confirmed


@pytest.mark.parametrize(("text", "key", "confirmed"), [
    ("Honestly I just want to end it all", "suicidal_ideation", True),
    ("I don't see the point in living", "suicidal_ideation", True),
    ("I'm dying to see the doctor", "suicidal_ideation", False),
    ("I've been cutting myself again", "self_harm", True),
    ("I cut myself shaving this morning", "self_harm", False),
    ("My boyfriend hit me last night", "domestic_violence", True),
    ("The pain hits me every morning", "domestic_violence", False),
    ("Since I started the new tablets my face is swollen", "adverse_drug_reaction", True),
    ("I was discharged on Monday and the wound is oozing", "post_discharge_red_flag", True),
])
def test_the_offline_judge_tells_statements_from_figures_of_speech(text, key, confirmed):
    assert judge_by_rules(text, concept(key)).confirmed is confirmed


def test_ordinary_booking_talk_never_escalates(index):
    for text in ("I need a checkup tomorrow morning", "Can I reschedule my appointment",
                 "Yes please, book it", "What time do you open on Saturday?"):
        assessment = near(index, text)
        assert assessment.escalate == ()
        assert not any(judge_by_rules(text, n.concept).confirmed for n in assessment.candidates)


def test_the_holding_line_never_invents_a_crisis_line():
    line = holding_line(concept("suicidal_ideation"), emergency_number="112", crisis_resources=[])
    assert "112" in line and "can't give you a crisis line number" in line
    assert not any(ch.isdigit() for ch in line.replace("112", ""))


def test_the_holding_line_reads_a_configured_crisis_line_digit_by_digit():
    line = holding_line(concept("self_harm"), emergency_number="911",
                        crisis_resources=[CrisisResource(name="the crisis line", phone="988")])
    assert "You can also reach the crisis line at 9 8 8" in line


def test_a_non_crisis_concern_gets_the_plain_holding_line():
    line = holding_line(concept("domestic_violence"), emergency_number="911",
                        crisis_resources=[CrisisResource(name="the crisis line", phone="988")])
    assert "988" not in line and "9 8 8" not in line and "911" in line


@pytest.mark.parametrize("text", [
    "I've become nothing but a burden to my children",
    "Honestly, I'm such a burden on everybody now",
    "What's the point of it all these days",
    "I really can't see any point in carrying on",
    "My family would be better off if I was gone",
    "They'd be happier without me, to be honest",
    "Some nights I hope I go to sleep and never wake up",
    "I wouldn't mind if I didn't wake up tomorrow",
    "No one would even notice if I wasn't here",
    "I'm so tired of life",
    "I just wish I could vanish",
])
def test_passive_thoughts_of_death_reach_the_judge_and_are_a_soft_concern(index, text):
    assessment = near(index, text)
    reached = [n.concept.key for n in assessment.escalate + assessment.candidates]
    assert "passive_ideation" in reached
    passive = concept("passive_ideation")
    assert passive.severity == "soft" and passive.crisis
    assert judge_by_rules(text, passive).confirmed


@pytest.mark.parametrize("text", [
    "There's no point ringing back tomorrow, I'll just wait on the line",
    "No point in me coming in before the results are back",
    "What's the point of booking if she's on holiday?",
    "We'd be better off going for the Thursday slot",
    "You're better off calling the pharmacy directly",
    "I'm tired of waiting for my results",
    "I'd love a lie-in and not to wake up early on Saturday",
])
def test_everyday_talk_with_the_same_words_is_not_escalated(index, text):
    assessment = near(index, text)
    assert assessment.escalate == ()
    assert not any(judge_by_rules(text, n.concept).confirmed for n in assessment.candidates)


def test_a_crisis_farewell_is_named_by_the_quick_rules_for_the_safety_monitor():
    named = concepts_named_by(quick_rules())
    assert set(named) == {"suicidal_ideation"} and named["suicidal_ideation"].severity == "hard"


def test_a_quick_rule_naming_an_unknown_safety_concept_is_refused(tmp_path):
    data = yaml.safe_load(QUICK_PATTERNS.read_text())
    data["categories"]["safety"]["patterns"][0]["escalate"] = "no_such_concept"
    path = tmp_path / "patterns.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="no_such_concept"):
        concepts_named_by(load_rules(path))


def test_a_soft_crisis_concern_keeps_the_agent_with_the_caller():
    crisis = soft_guidance(concept("passive_ideation"))
    assert crisis.startswith("[SAFETY]") and "do not end the call" in crisis
    assert "passive thoughts of death" in crisis
    plain = soft_guidance(concept("adverse_drug_reaction"))
    assert "adverse drug reaction" in plain and "do not end the call" not in plain


# --- The offline judge's reasons, and concepts built from specs -----------------------

def workspace_concept(**fields) -> SafetyConcept:
    spec = ConceptSpec(**{"key": "gambling", "name": "Gambling harm", "severity": "soft",
                          "description": "The caller says gambling is harming them.",
                          "examples": ["I gambled away my pension"], **fields})
    return SafetyConcept.from_spec(spec, workspace_id="w1")


@pytest.mark.parametrize(("text", "key", "verdict"), [
    ("This queue is killing me", "suicidal_ideation", Verdict(False, IDIOM, "rules")),
    ("This is killing me, I want to kill myself", "suicidal_ideation",
     Verdict(True, STATEMENT, "rules")),
    ("I WANT TO DIE", "suicidal_ideation", Verdict(True, STATEMENT, "rules")),
    ("I don\u2019t want to be alive", "suicidal_ideation", Verdict(True, STATEMENT, "rules")),
    ("I'd like to upskill myself with a first-aid course", "suicidal_ideation",
     Verdict(False, NO_STATEMENT, "rules")),
    ("I need a checkup", "self_harm", Verdict(False, NO_STATEMENT, "rules")),
])
async def test_the_offline_judge_says_why_for_the_escalation_record(text, key, verdict):
    assert judge_by_rules(text, concept(key)) == verdict
    assert await RulesJudge().judge(text, concept(key)) == verdict


def test_a_concept_without_rules_is_confirmed_by_nearness_unless_it_is_an_idiom():
    bare = workspace_concept()
    assert judge_by_rules("I lost it all at the bookies", bare) == Verdict(True, NO_RULES, "rules")
    only_idioms = workspace_concept(reject=["bet your life"])
    assert judge_by_rules("You bet your life I'll be there", only_idioms) == Verdict(
        False, IDIOM, "rules")
    assert judge_by_rules("I bet the rent money", only_idioms).confirmed


def test_a_workspace_concept_keeps_what_its_spec_says():
    made = workspace_concept(confirm=["gambl(e|ed|ing)"], confirm_makes_candidate=True)
    assert (made.key, made.name, made.severity, made.crisis, made.workspace_id) == (
        "gambling", "Gambling harm", "soft", False, "w1")
    assert made.description == "The caller says gambling is harming them."
    assert made.examples == ("I gambled away my pension",) and made.reject is None
    assert made.stated_in("My GAMBLING is out of hand")
    assert not workspace_concept(confirm=["gambl(e|ed|ing)"]).stated_in("I gambled it all")


def test_a_concept_file_that_would_misbehave_is_refused(tmp_path):
    data = yaml.safe_load(CONCEPTS_FILE.read_bytes())
    data["concepts"].append(dict(data["concepts"][0]))
    with pytest.raises(ValidationError, match="keys must be unique"):
        ConceptFile.model_validate(data)
    with pytest.raises(ValidationError, match="needs confirm patterns"):
        ConceptSpec(key="x", name="X", severity="soft", description="x", examples=["x"],
                    confirm_makes_candidate=True)
    path = tmp_path / "concepts.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "concepts": [data["concepts"][1]]}))
    assert [c.key for c in load_concepts(path)] == ["passive_ideation"]


def unit(angle: float) -> np.ndarray:
    return np.array([np.cos(angle), np.sin(angle)], dtype=np.float32)


@pytest.fixture
def flat() -> ConceptIndex:
    """Two concepts on a plane, so a turn's similarity to each is exactly known."""
    index = ConceptIndex("plane", 2)
    index.add(concept("suicidal_ideation"), np.stack([unit(0.0)]))
    index.add(concept("passive_ideation"), np.stack([unit(np.pi / 2)]))
    return index


def test_at_the_escalation_similarity_it_escalates_and_at_the_candidate_one_it_asks(flat):
    turn = unit(np.pi / 3)  # about 0.5 to the first concept, 0.87 to the second
    exact = flat.assess(turn, escalate_at=float(turn @ unit(np.pi / 2)),
                        candidate_at=float(turn @ unit(0.0)))
    assert [n.concept.key for n in exact.escalate] == ["passive_ideation"]
    assert [n.concept.key for n in exact.candidates] == ["suicidal_ideation"]
    assert exact.best.concept.key == "passive_ideation"


def test_the_nearest_concept_comes_first(flat):
    turn = unit(0.2)
    assessment = flat.assess(turn, escalate_at=0.99, candidate_at=0.0)
    assert [n.concept.key for n in assessment.candidates] == [
        "suicidal_ideation", "passive_ideation"]
    assert assessment.best.concept.key == "suicidal_ideation"
    assert assessment.best.similarity == pytest.approx(np.cos(0.2), abs=1e-6)
    assert ConceptIndex("plane", 2).assess(turn, escalate_at=0.9, candidate_at=0.5).best is None


def test_a_turn_that_states_a_concern_in_so_many_words_is_a_candidate_however_far(flat):
    far = unit(np.pi)  # opposite to the first concept, orthogonal to the second
    stated = flat.assess(far, escalate_at=0.85, candidate_at=0.45,
                         text="Honestly I feel like a burden and I want to die")
    assert [n.concept.key for n in stated.candidates] == ["passive_ideation"]
    assert flat.assess(far, escalate_at=0.85, candidate_at=0.45, text="").candidates == ()


def test_a_workspace_concept_joins_a_copy_and_wrong_embeddings_are_refused(flat):
    extra = workspace_concept()
    joined = flat.with_concepts([(extra, np.stack([unit(np.pi)]))])
    assert (joined.model, joined.dimension) == ("plane", 2)
    assert [c.key for c in joined.concepts] == [
        "suicidal_ideation", "passive_ideation", "gambling"]
    assert len(flat.concepts) == 2
    best = joined.assess(unit(np.pi), escalate_at=0.9, candidate_at=0.5)
    assert [n.concept.key for n in best.escalate] == ["gambling"]
    for wrong in (np.ones((1, 3)), np.ones(2), None):
        with pytest.raises(ValueError, match="gambling: embeddings of shape"):
            flat.add(extra, wrong)
