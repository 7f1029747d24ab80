"""Caller scripts: what a valid one looks like, and errors that name the bad key."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.simulator import CallScript, ScriptError, load_script

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
VALID = {"from": "+15550100123", "to": "+15550100100", "turns": [{"say": "Hello"}]}


@pytest.mark.timeout(10)
def test_a_minimal_script_gets_the_documented_defaults(write_script):
    script = load_script(write_script(VALID))

    turn = script.turns[0]
    assert (script.from_number, script.to_number) == ("+15550100123", "+15550100100")
    assert (turn.pause_s, turn.barge_in, turn.wait_s) == (0.6, False, 20.0)
    assert script.hangup_after_s is None


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "change, named",
    [
        ({"turns": [{"sya": "Hello"}]}, "turns[0].sya"),
        ({"turns": [{"say": "Hi", "pause_s": -1}]}, "turns[0].pause_s"),
        ({"turns": []}, "turns"),
        ({"to": 15550100100}, "to: Value error, write phone numbers in quotes"),
        ({"from": "555-0101"}, "from"),
        ({"hangup_after": 3}, "hangup_after"),
    ],
)
def test_an_invalid_script_names_the_bad_key(write_script, change, named):
    path = write_script({**VALID, **change})

    with pytest.raises(ScriptError) as caught:
        load_script(path)

    assert named in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.timeout(10)
def test_a_missing_file_is_a_script_error(tmp_path):
    with pytest.raises(ScriptError, match="cannot read script"):
        load_script(tmp_path / "nope.yaml")


@pytest.mark.timeout(10)
@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_the_shipped_scenarios_are_valid(path):
    script = load_script(path)

    assert isinstance(script, CallScript) and script.name == path.stem


@pytest.mark.timeout(10)
def test_the_shipped_scenarios_exercise_barge_in_and_early_hangup():
    assert load_script(SCENARIOS / "barge_in.yaml").turns[0].barge_in
    assert load_script(SCENARIOS / "caller_hangs_up.yaml").hangup_after_s is not None


def test_expectations_name_exactly_what_the_record_does_not_show():
    from simulator.simulator import ScriptExpectation

    summary = {
        "completion_reason": "agent_hangup", "final_state": "closing",
        "turns": [
            {"speaker_role": "agent", "text": "Hello. I have Tuesday at 9 AM."},
            {"speaker_role": "caller", "text": "Shall I book that?"},
            {"speaker_role": "agent", "text": "You're booked."},
        ],
        "tool_calls": [{"name": "CreateAppointment", "succeeded": True},
                       {"name": "CancelAppt", "succeeded": False}],
        "transitions": [{"next_state": "offering_slots"}],
    }
    met = ScriptExpectation(
        completion_reason="agent_hangup", agent_says=["I have", "You're booked."],
        tools_succeeded=["CreateAppointment"], tools_never_succeeded=["CancelAppt"],
        states=["offering_slots"],
    )
    assert met.failures(summary) == []
    unmet = ScriptExpectation(
        final_state="post_booking_closing", agent_says=["You're booked.", "I have"],
        tools_succeeded=["CancelAppt"], tools_never_succeeded=["CreateAppointment"],
        states=["closing"],
    )
    assert unmet.failures(summary) == [
        "final_state is 'closing', expected 'post_booking_closing'",
        "the agent never said 'I have' (after what came before)",
        "CancelAppt did not succeed", "CreateAppointment succeeded", "never reached closing",
    ]
    # the caller's words never count as the agent's
    assert ScriptExpectation(agent_says=["Shall I book that?"]).failures(summary)
