"""The dashboard's Recognition view in headless Chromium against the running service: an
operator sees a clinic's proposed keyterms with what the recognizer wrote instead,
accepts one (it moves to the accepted list and joins the clinic's keyterms) and rejects
another; a read-only key sees the words but cannot decide.

Needs Debian's `chromium`; without it these tests skip, unless REQUIRE_BROWSER_TESTS=1
(CI), where they fail.
"""

from __future__ import annotations

import uuid

import pytest

from db import repositories as repo
from db import stt_suggestions as stt
from db.stt_suggestions import Misheard
from tests.e2e import test_dashboard_browser as dashboard
from tests.e2e.test_dashboard_browser import log_in

pytestmark = pytest.mark.e2e
browser, page = dashboard.browser, dashboard.page  # the dashboard tests' fixtures


async def clinic_with_misses(db) -> tuple[str, dict, dict[str, str]]:
    workspace = await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}")
    service = await repo.create_service(db.pool, workspace["id"], "Kestrel Bay Clinic",
                                        keyterms=["flu shot"])
    for heard in ("a bar nanny", "abba nanny"):
        call_id = await repo.create_call(
            db.pool, workspace_id=workspace["id"], service_id=service["id"], call_sid=None,
            direction="inbound", from_number=None, to_number=None, status="completed")
        await stt.record_misheard(db.pool, workspace["id"], service["id"], call_id, [
            Misheard("Abernathy", heard, 65_000, "verification"),
            Misheard("Dunmore", "done more", 70_000, "verification")])
    found = await stt.list_suggestions(db.pool, workspace["id"])
    return workspace["id"], service, {s["term"]: s["id"] for s in found}


def row(status: str, suggestion_id: str) -> str:
    return f"table.suggestions[data-status='{status}'] button[data-id='{suggestion_id}']"


async def open_recognition(page, key: str) -> None:
    await log_in(page, key)
    await page.wait_for_selector("#nav a.active")
    await page.goto("/dashboard#/recognition")
    await page.wait_for_selector("#suggestions-proposed table, #suggestions-proposed .empty")


async def test_an_operator_accepts_and_rejects_proposed_keyterms(page, server, db):
    workspace_id, service, ids = await clinic_with_misses(db)
    key = await repo.create_api_key(db.pool, workspace_id, role="operator")

    await open_recognition(page, key)
    proposed = await page.inner_text("#suggestions-proposed")
    assert "Kestrel Bay Clinic" in proposed and "Abernathy" in proposed
    assert "“a bar nanny”" in proposed and "“abba nanny”" in proposed and "2 calls" in proposed

    await page.click(f"{row('proposed', ids['Abernathy'])}.accept")
    await page.wait_for_selector("#suggestions-accepted >> text=Abernathy")
    await page.click(f"{row('proposed', ids['Dunmore'])}.reject")
    await page.wait_for_selector("#suggestions-rejected >> text=Dunmore")

    assert "Nothing proposed." in await page.inner_text("#suggestions-proposed")
    keyterms = await db.pool.fetchval("SELECT keyterms FROM services WHERE id = $1",
                                      uuid.UUID(service["id"]))
    assert keyterms == ["flu shot", "Abernathy"]
    assert page.errors.errors == []


async def test_a_read_only_key_sees_the_words_but_cannot_decide(page, server, db):
    workspace_id, _service, ids = await clinic_with_misses(db)
    key = await repo.create_api_key(db.pool, workspace_id, role="read_only")

    await open_recognition(page, key)

    assert await page.is_visible("#recognition-read-only")
    assert await page.is_disabled(f"{row('proposed', ids['Dunmore'])}.accept")
    assert await page.is_disabled(f"{row('proposed', ids['Dunmore'])}.reject")
    assert "done more" in await page.inner_text("#suggestions-proposed")
