"""The dashboard's Tasks view and the Clinic view's reminders in headless Chromium
against the running service: a person claims a callback and it leaves the dialer's queue,
another task is cancelled; a task's attempts link to their call records; a task made
through the form has its dial job; the reminder campaign changed through the page (to
texts) is there after a reload; a read-only key sees no action.

Needs Debian's `chromium`; without it these tests skip, unless REQUIRE_BROWSER_TESTS=1
(CI), where they fail.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest

from db import jobs, outbound
from db import reminder_campaigns as campaigns
from db import repositories as repo
from tests.api.outbound_world import World, add_patient, make_task, new_world
from tests.e2e.test_dashboard_browser import browser, log_in, page  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e


@pytest.fixture
async def world(db) -> World:
    return await new_world(db)


async def open_page(page, key: str, hash_path: str, ready: str) -> None:
    await log_in(page, key)
    await page.wait_for_selector("#nav a.active")
    await page.goto(f"/dashboard#{hash_path}")
    await page.wait_for_selector(ready)


def task_row(task_id: str, status: str | None = None) -> str:
    state = f"[data-status='{status}']" if status else ""
    return f"#task-rows tr.task-row[data-task-id='{task_id}']{state}"


async def test_a_person_claims_a_callback_and_cancels_another_task(page, server, db, world):
    callback = await make_task(db, world, kind="callback", reason="asked about their invoice")
    checkin = await make_task(db, world, kind="checkin", reason="a week after the visit")
    prefix = (await repo.get_api_key(db.pool, world.keys["operator"]))["prefix"]

    await open_page(page, world.keys["operator"], "/tasks", task_row(checkin))
    assert "pending 2" in await page.inner_text("#summary-status")
    row = await page.inner_text(task_row(callback))
    assert "asked about their invoice" in row and "Byron" in row and "(Europe/London)" in row

    claim = page.locator(f"{task_row(callback)} button.claim")
    assert await claim.inner_text() == "I'll call them myself"
    await claim.click()
    await page.wait_for_selector(task_row(callback, "claimed"))
    await page.click(f"{task_row(checkin)} button.cancel")
    await page.wait_for_selector(task_row(checkin, "cancelled"))
    await page.wait_for_selector("#summary-status >> text=claimed 1")

    assert await jobs.job_for(db.pool, outbound.dial_key(callback)) is None
    assert await jobs.job_for(db.pool, outbound.dial_key(checkin)) is None
    claimed = await outbound.get_task(db.pool, world.workspace_id, callback)
    assert (claimed.status, claimed.claimed_by) == ("claimed", f"key vk_{prefix}")
    assert await page.locator(f"{task_row(callback)} button").count() == 0  # nothing left to do
    assert "cancelled 1" in await page.inner_text("#summary-status")

    await page.click(f"{task_row(callback)} a.task-link")
    await page.wait_for_selector("#task-state >> text=claimed")
    assert f"key vk_{prefix}" in await page.inner_text("#task-fields")
    assert page.errors.errors == []


async def test_a_tasks_attempts_link_to_their_call_records(page, server, db, world):
    call_id = await repo.create_call(
        db.pool, workspace_id=world.workspace_id, service_id=world.clinic_id, call_sid=None,
        direction="outbound", from_number=None, to_number=None, status="completed")
    task_id = await make_task(db, world)
    await db.pool.execute(
        "INSERT INTO outbound_attempts (task_id, number, call_id, to_number, status, outcome, "
        "detail) VALUES ($1, 1, $2, '+15550001', 'ended', 'voicemail', 'left the message')",
        uuid.UUID(task_id), uuid.UUID(call_id))

    await open_page(page, world.keys["read_only"], f"/tasks/{task_id}", "#task-attempts")
    attempts = await page.inner_text("#task-attempts")
    assert "voicemail" in attempts and "left the message" in attempts
    await page.click("#task-attempts a.call-link")
    await page.wait_for_selector("#call-detail")
    assert page.url.endswith(f"#/calls/{call_id}")
    assert page.errors.errors == []


async def test_a_task_made_through_the_form_has_its_dial_job(page, server, db, world):
    first = f"Grace{uuid.uuid4().hex[:4]}"
    patient_id = await add_patient(db.pool, world.workspace_id, first, "Hopper")
    when = (datetime.now() + timedelta(days=2)).replace(second=0, microsecond=0)

    await open_page(page, world.keys["operator"], "/tasks", "#task-new")
    await page.click("#task-new")
    await page.fill("#task-patient-search", first[:7])
    await page.click("#task-patient-find")
    await page.wait_for_selector(f"#task-patient option[value='{patient_id}']", state="attached")
    await page.select_option("#task-patient", patient_id)
    await page.select_option("#task-kind", "checkin")
    await page.fill("#task-reason", "a week after the knee surgery")
    await page.fill("#task-goal", "ask how the knee feels")
    await page.fill("#task-priority", "8")
    await page.fill("#task-not-before", when.strftime("%Y-%m-%dT%H:%M"))
    await page.click("#task-create")
    await page.wait_for_selector("#task-state >> text=pending")

    task_id = page.url.rsplit("/", 1)[-1]
    task = await outbound.get_task(db.pool, world.workspace_id, task_id)
    assert (task.kind, task.priority, task.patient_id) == ("checkin", 8, patient_id)
    job = await jobs.job_for(db.pool, outbound.dial_key(task_id))
    assert job is not None and job.status == "queued"
    assert abs((job.execute_after - when.astimezone()).total_seconds()) < 60
    assert page.errors.errors == []


async def test_the_reminder_campaign_changed_on_the_page_is_there_after_a_reload(
        page, server, db, world):
    await open_page(page, world.keys["admin"], f"/clinic/{world.clinic_id}", "#reminders-form")
    assert not await page.is_checked("#reminders-enabled")
    await page.check("#reminders-enabled")
    await page.select_option("#reminders-channel", "text")
    await page.fill("#reminders-lead", "6")
    await page.check("input[name=reminder-types][value=Vaccination]")
    await page.click("#reminders-save")
    await page.wait_for_selector("#reminders-status >> text=Saved")

    await page.reload()
    await page.wait_for_selector("#reminders-form")
    assert await page.is_checked("#reminders-enabled")
    assert await page.input_value("#reminders-lead") == "6"
    assert await page.input_value("#reminders-channel") == "text"
    assert await page.is_checked("input[name=reminder-types][value=Vaccination]")
    assert not await page.is_checked("input[name=reminder-types][value=Dressing]")
    campaign = await campaigns.get_campaign(db.pool, world.workspace_id, world.clinic_id)
    assert (campaign.enabled, campaign.channel, campaign.lead_hours,
            len(campaign.appointment_type_ids)) == (True, "text", 6, 1)
    assert page.errors.errors == []


async def test_a_read_only_key_sees_tasks_and_reminders_but_no_action(page, server, db, world):
    task_id = await make_task(db, world)

    await open_page(page, world.keys["read_only"], "/tasks", task_row(task_id))
    assert await page.locator("#tasks-page button.task-action").count() == 0
    assert await page.locator("#task-new").count() == 0
    await page.click(f"{task_row(task_id)} a.task-link")
    await page.wait_for_selector("#task-state")
    assert await page.locator("#task-actions button").count() == 0

    await page.goto(f"/dashboard#/clinic/{world.clinic_id}")
    await page.wait_for_selector("#reminders-form")
    assert await page.is_disabled("#reminders-save")
    assert await page.is_disabled("#reminders-enabled")
    assert await page.is_disabled("#reminders-channel")
    assert (await outbound.get_task(db.pool, world.workspace_id, task_id)).status == "pending"
    assert page.errors.errors == []


async def test_pure_helpers_of_the_tasks_page(page, server):
    await log_in(page, server.api_key)
    await page.wait_for_selector("#nav a.active")
    result = await page.evaluate("""async () => {
        const t = await import('/dashboard/js/tasks.js');
        return {
            words: [t.words('no_answer'), t.words(null)],
            london: t.fmtInZone('2031-03-05T10:00:00+00:00', 'Europe/London'),
            denver: t.fmtInZone('2031-07-05T18:30:00Z', 'America/Denver'),
            none: t.fmtInZone(null, 'UTC'),
            actions: [{status: 'pending'}, {status: 'in_progress'}, {status: 'claimed'},
                      {status: 'failed'}, {status: 'cancelled', outcome: 'opted_out'}]
                .map(t.actionsFor),
            query: t.listQuery({status: 'failed', kind: ''}, '2031-01-01T00:00:00+00:00'),
        };
    }""")
    assert result["words"] == ["no answer", "—"]
    assert result["london"] == "5 Mar 2031, 10:00 (Europe/London)"
    assert result["denver"] == "5 Jul 2031, 12:30 (America/Denver)"
    assert result["none"] == "—"
    assert result["actions"] == [["claim", "cancel"], ["claim", "cancel"], [], ["retry"], []]
    assert result["query"] == ("/api/tasks?limit=50&status=failed"
                               "&before=2031-01-01T00%3A00%3A00%2B00%3A00")
