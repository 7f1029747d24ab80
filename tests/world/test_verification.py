"""The three verification stages on crafted calls, the review queue, and the sync of
what is verified."""

from __future__ import annotations

import asyncio
import json

import pytest

from call.call_session import CallLog
from db import repositories as repo
from db import world
from db.world import EventDraft, Provenance
from db.writer import CallRecordWriter
from processors.world.verification import ModelJudges, RulesJudges, verify_call
from runner.after_call import verify_after_call, verify_and_sync
from services.practice.base import PMSError
from services.practice.builtin import BuiltinPractice
from tests.world.conftest import TODAY, Clinic, transcript

EXTRACTED = Provenance("extraction", "extraction:rules", "moderate")


async def reported(db, clinic: Clinic, call_id: str, patient_id: str | None, kind: str,
                   summary: str, payload: dict) -> str:
    return await world.write_event(db.pool, clinic.workspace_id, EventDraft(
        kind, summary, payload, patient_id), Provenance(
        EXTRACTED.source, EXTRACTED.written_by, EXTRACTED.confidence, call_id, 2))


async def verdicts(db, call_id: str) -> dict[str, tuple[str, str]]:
    return {e.type: (e.verification, e.confidence) for e in await world.call_events(db.pool,
                                                                                     call_id)}


async def test_a_junk_call_rejects_everything_it_wrote(db, clinic):
    call_id = await clinic.call(db)
    walsh = await clinic.patient(db, "Henry", "Walsh")
    await transcript(db, call_id, ("agent", "Thanks for calling, how can I help?"), (
        "caller", "This is an important message about your car's extended warranty, "
                  "press one to speak to an agent, my number is 312 555 0199"))
    await reported(db, clinic, call_id, walsh.id, "contact_reported", "Caller reported phone.",
                   {"changes": {"phone": "+13125550199"}})

    report = await verify_call(db.pool, call_id, RulesJudges(), today=TODAY)

    assert report.classification.label == "junk"
    assert await verdicts(db, call_id) == {"contact_reported": ("rejected", "moderate")}
    assert (await world.latest_verification(db.pool, call_id))["classification"] == "junk"


async def test_new_insurance_and_phone_are_corrected_upgraded_and_synced(db, clinic):
    call_id = await clinic.call(db)
    walsh = await clinic.patient(db, "Henry", "Walsh")
    await transcript(
        db, call_id, ("agent", "How can I help?"),
        ("caller", "Hi, I have new insurance, it's Blue Cross now, member ID XJH four four "
                   "eight two two nine one"),
        ("agent", "Thanks, noted."),
        ("caller", "And my new phone number is three one two, five five five, zero one nine "
                   "nine"))
    await reported(db, clinic, call_id, walsh.id, "insurance_reported",
                   "Caller reported insurance: carrier name Blue Cross Blue Shield, member id "
                   "xjh4482291.", {"carrier_name": "Blue Cross Blue Shield",
                                   "member_id": "xjh4482291"})
    await reported(db, clinic, call_id, walsh.id, "contact_reported",
                   "Caller reported new contact details: phone 312-555-0199.",
                   {"changes": {"phone": "312-555-0199"}})

    report, synced = await verify_and_sync(db.pool, call_id, RulesJudges(),
                                           BuiltinPractice(db.pool), today=TODAY)

    assert report.classification.label == "clinical"
    assert await verdicts(db, call_id) == {"insurance_reported": ("corrected", "verified"),
                                           "contact_reported": ("corrected", "verified")}
    events = {e.type: e for e in await world.call_events(db.pool, call_id)}
    assert events["contact_reported"].payload["changes"]["phone"] == "+13125550199"
    assert events["insurance_reported"].payload["member_id"] == "XJH4482291"
    stages = [n["stage"] for n in events["contact_reported"].notes]
    assert stages == ["event_judge", "coherence"]
    assert synced.pushed == 2
    record = await world.patient_record(db.pool, walsh.id)
    assert record.phone == "+13125550199" and record.written_by.startswith("sync:")
    context = await world.clinical_context(db.pool, walsh.id)
    assert "XJH4482291" in {c.member_id for c in context.coverages}


async def test_a_date_of_birth_that_contradicts_the_record_is_flagged_for_review(db, clinic):
    call_id = await clinic.call(db)
    walsh = await clinic.patient(db, "Henry", "Walsh")  # born 1962-04-17
    await transcript(db, call_id, ("caller", "It's Henry Walsh, born April seventh 1962, and "
                                             "my insurance is Aetna, member id W 9 8 7 6 5 4"))
    event_id = await reported(db, clinic, call_id, walsh.id, "insurance_reported",
                              "Caller reported insurance: Aetna, member id W987654.",
                              {"carrier_name": "Aetna", "member_id": "W987654"})

    report = await verify_call(db.pool, call_id, RulesJudges(), today=TODAY)

    assert "differs from the record" in report.flagged[event_id]
    assert await verdicts(db, call_id) == {"insurance_reported": ("flagged", "moderate")}
    queue = await world.review_queue(db.pool, clinic.workspace_id)
    assert event_id in [e.id for e in queue]


async def test_an_impossible_birth_date_and_an_unsaid_number_are_flagged(db, clinic):
    call_id = await clinic.call(db)
    walsh = await clinic.patient(db, "Henry", "Walsh")
    await transcript(db, call_id, ("caller", "I want to register my son Leo Walsh, he was "
                                             "born March 3rd 2031"),
                     ("caller", "please update my phone"))
    await world.write_event(db.pool, clinic.workspace_id, EventDraft(
        "patient_created", "New patient Leo Walsh.", {
            "first_name": "Leo", "last_name": "Walsh", "date_of_birth": "2031-03-03"},
        walsh.id), Provenance("tool", "tool:CreatePatient", "moderate", call_id))
    await reported(db, clinic, call_id, walsh.id, "contact_reported", "Phone.",
                   {"changes": {"phone": "+13125550123"}})

    report = await verify_call(db.pool, call_id, RulesJudges(), today=TODAY)

    reasons = sorted(report.flagged.values())
    assert any("impossible date of birth" in r for r in reasons)
    assert any("never said on the call" in r for r in reasons)
    assert report.counts["verified"] == 0


async def test_insurance_discussed_but_never_recorded_goes_to_review(db, clinic):
    call_id = await clinic.call(db)
    await transcript(db, call_id, ("caller", "I need to book a physio appointment and update "
                                             "my insurance card details"))

    report = await verify_call(db.pool, call_id, RulesJudges(), today=TODAY)

    assert report.counts["missing"] == 1
    [gap] = await world.call_events(db.pool, call_id)
    assert (gap.type, gap.verification, gap.payload["topic"]) == (
        "missing_data", "flagged", "insurance")
    again = await verify_call(db.pool, call_id, RulesJudges(), today=TODAY)  # re-runnable
    assert again.counts["missing"] == 1
    assert len(await world.call_events(db.pool, call_id)) == 1


def scripted(*answers):
    """A structured model double: each question gets the next answer (or raises it)."""
    queue = list(answers)

    async def ask(prompt: str) -> str:
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return ask


async def test_the_model_judge_is_never_looser_than_the_rules(db, clinic):
    call_id = await clinic.call(db)
    walsh = await clinic.patient(db, "Henry", "Walsh")
    await transcript(db, call_id, ("caller", "my new phone number is 312 555 0199, and my "
                                             "email is henry at example dot com"))
    phone = await reported(db, clinic, call_id, walsh.id, "contact_reported", "Phone.",
                           {"changes": {"phone": "+13125550199"}})
    email = await reported(db, clinic, call_id, walsh.id, "contact_reported", "Email.",
                           {"changes": {"email": "henry@example.org"}})  # misheard domain
    judges = ModelJudges({
        "classify": scripted(json.dumps({"label": "clinical", "reason": "a patient"})),
        "event": scripted(json.dumps({"outcome": "approve", "reason": "said"}),
                          json.dumps({"outcome": "flag", "reason": "example.org not said"})),
        "coherence": scripted(TimeoutError()),  # the rules' review stands
    }, timeout_s=1.0)

    report = await verify_call(db.pool, call_id, judges, today=TODAY)

    assert report.flagged == {email: "model: example.org not said"}
    assert phone not in report.flagged and judges.fallbacks == 1
    assert report.judge == "model"


class BrokenJudges(RulesJudges):
    """A classifier that fails (its message quotes the caller) or never answers."""

    def __init__(self, outcome: str) -> None:
        self.outcome = outcome

    async def classify(self, facts):
        if self.outcome == "hang":
            await asyncio.sleep(3600)
        raise RuntimeError("could not classify 'my number is 312 555 0199'")


class RefusingPractice(BuiltinPractice):
    """A practice system that refuses every change (its message names the patient)."""

    name = "cliniko"

    async def push(self, event):
        raise PMSError("Cliniko refused the change for Henry Walsh, +13125550199")


async def recorded_events(db, settings, clinic: Clinic, call_id: str, after_call) -> list[dict]:
    """Run `after_call(log)` on the call's record, through a real writer; its events."""
    writer = CallRecordWriter(db.pool, settings)
    await writer.start()
    await after_call(CallLog(call_id, writer))
    await writer.close(timeout=5)
    return (await repo.get_call_detail(db.pool, call_id, clinic.workspace_id))["events"]


@pytest.mark.parametrize(("outcome", "error"), [("fail", "RuntimeError"),
                                                ("hang", "TimeoutError")])
async def test_a_verification_that_fails_after_the_call_is_an_event_on_its_record(
    db, clinic, settings, outcome, error
):
    call_id = await clinic.call(db)
    await transcript(db, call_id, ("caller", "My number is 312 555 0199"))

    events = await recorded_events(db, settings, clinic, call_id, lambda log: verify_after_call(
        db.pool, log, BrokenJudges(outcome), BuiltinPractice(db.pool), timeout_s=0.2))

    assert [(e["type"], e["data"]) for e in events] == [
        ("verification_failed", {"error": error})]


async def test_a_practice_system_refusing_verified_changes_is_an_event_on_the_calls_record(
    db, clinic, settings
):
    call_id = await clinic.call(db)
    walsh = await clinic.patient(db, "Henry", "Walsh")
    await transcript(db, call_id, ("caller", "My new phone number is three one two, five five "
                                             "five, zero one nine nine"))
    await reported(db, clinic, call_id, walsh.id, "contact_reported",
                   "Caller reported new contact details: phone 312-555-0199.",
                   {"changes": {"phone": "312-555-0199"}})

    events = await recorded_events(db, settings, clinic, call_id, lambda log: verify_after_call(
        db.pool, log, RulesJudges(), RefusingPractice(db.pool), timeout_s=30, country_code="1"))

    assert [(e["type"], e["data"]) for e in events] == [
        ("practice_sync_failed", {"practice": "cliniko", "failed": 1, "pushed": 0})]
    [change] = await world.call_events(db.pool, call_id)
    assert change.verification == "corrected"  # verified, waiting to be pushed again
