"""A persona calls the real server over the text path and its call is judged from the record."""

from pathlib import Path

import pytest

from runner.dev_credentials import twilio_auth_token
from simulator.personas.model import load_persona
from simulator.personas.run import run_persona, summary

pytestmark = pytest.mark.e2e
PERSONAS = Path(__file__).resolve().parents[2] / "scenarios" / "personas"


@pytest.mark.timeout(60)
async def test_a_new_caller_persona_books_by_answering_the_agent_and_is_judged_a_success(server):
    persona = load_persona(PERSONAS / "new_patient_flu_shot.yaml")

    run = await run_persona(
        persona, base_url=server.url, api_key=server.api_key,
        twilio_token=twilio_auth_token(server.settings), text_mode=True,
        log=lambda _line: None, pause_s=0.05, quiet_s=0.3,
    )

    verdict = run.verdict
    assert verdict.success, (verdict.reasons, run.said)
    assert verdict.writes == ["CreatePatient", "CreateAppointment"]
    assert verdict.unconfirmed_writes == 0 and verdict.completion_reason == "agent_hangup"
    # The caller answered what was asked rather than reading lines: its words follow the
    # agent's questions (a name when asked for one, a birth date when asked for that).
    turns = run.result.record["turns"]
    for asked, answered in zip(turns, turns[1:], strict=False):
        if asked["speaker_role"] == "agent" and "first name" in asked["text"]:
            assert "Jordan" in answered["text"]
        if asked["speaker_role"] == "agent" and "date of birth" in asked["text"]:
            assert "1988" in answered["text"] or "eighty-eight" in answered["text"]
    ended = next(e for e in run.result.record["events"] if e["type"] == "call_ended")
    assert ended["data"]["repeated_questions"] == verdict.repeated_questions
    report = summary([run])["personas"][0]
    assert {"success", "reasons", "turns", "turns_per_task", "repeated_questions"} <= set(report)
