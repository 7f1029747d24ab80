"""The dashboard's Clinic view in headless Chromium against the running service: an empty
workspace opens on the walkthrough; a clinic file is checked, then imported through the
page; a closure and an opening-hours change made through the forms are there after a
reload; a bad edit shows its problem by the form and changes nothing.

Needs Debian's `chromium`; without it these tests skip, unless REQUIRE_BROWSER_TESTS=1
(CI), where they fail.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from db import repositories as repo
from tests.api.test_clinics_api import clinic_text, fictional_number, key_with_role
from tests.e2e.test_dashboard_browser import browser, log_in, page  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e


@pytest.fixture
async def empty_workspace(db) -> tuple[str, str]:
    """A workspace with no clinic, its name and an admin key."""
    name = f"newco-{uuid.uuid4().hex[:6]}"
    workspace = await repo.create_workspace(db.pool, name)
    return name, await key_with_role(db, workspace["id"], "admin")


async def clinics(server, key: str) -> list[dict]:
    async with httpx.AsyncClient() as client:
        answer = await client.get(f"{server.url}/api/clinics",
                                  headers={"Authorization": f"Bearer {key}"})
    return answer.json()


async def import_through_the_page(page, source: str) -> None:
    await page.fill("#import-text", source)
    await page.click("#import-apply")
    await page.wait_for_selector("#clinic-closures")


async def test_an_empty_workspace_is_walked_to_importing_a_clinic(page, server, empty_workspace):
    workspace_name, key = empty_workspace
    name = f"Quayside Surgery {uuid.uuid4().hex[:6]}"
    source = clinic_text(name, fictional_number())

    await log_in(page, key)
    await page.wait_for_selector("#clinic-walkthrough")
    assert await page.get_attribute("#nav a.active", "data-page") == "clinic"
    walkthrough = await page.inner_text("#clinic-walkthrough")
    assert "Your clinic" in walkthrough and "appointment_types" in walkthrough
    cli = await page.inner_text("#clinic-cli")
    assert cli == f"python main.py clinic import FILE --workspace {workspace_name}"

    # Check first: what it would do, and nothing imported.
    await page.fill("#import-text", source)
    await page.click("#import-check")
    await page.wait_for_selector("#import-result >> text=No problems")
    assert await clinics(server, key) == []

    # A file with a problem: the problem with its line, and still nothing imported.
    await page.fill("#import-text", source.replace("Europe/London", "Europe/Atlantis", 1))
    await page.click("#import-check")
    await page.wait_for_selector("#import-result .problems >> text=locations[0].timezone")
    assert "(line " in await page.inner_text("#import-result .problems")

    await import_through_the_page(page, source)
    assert await page.inner_text("h1") == name
    [imported] = await clinics(server, key)
    assert imported["name"] == name and imported["practitioners"] == 3
    assert page.errors.errors == []


async def test_pure_helpers_of_the_clinic_page(page, server):
    await log_in(page, server.api_key)
    await page.wait_for_selector("#nav a.active")
    result = await page.evaluate("""async () => {
        const c = await import('/dashboard/js/clinic.js');
        const {ApiError} = await import('/dashboard/js/api.js');
        return {
            money: [c.fmtMoney(8500), c.fmtMoney(5), c.fmtMoney(null)],
            parsed: ['85', '85.5', '$1,200.00', '1.234', 'abc', ''].map(c.parseMoney),
            blocks: [c.parseBlocks('9:00-12:00, 13:00 – 17:30'), c.parseBlocks('9-12'),
                     c.parseBlocks('')],
            shown: c.fmtBlocks([['09:00', '12:00'], ['13:00', '17:00']]),
            hours: [c.fmtHours({mon: ['08:00', '17:00'], sat: ['09:00', '12:00']}),
                    c.fmtHours({})],
            problems: c.problemsOf(new ApiError(422, 'HTTP 422', {problems: [
                {path: 'schedules[2].blocks[0]', line: null, message: 'outside hours'}]})),
            fields: c.problemsOf(new ApiError(422, 'HTTP 422', [
                {loc: ['body', 'name'], msg: 'Field required'}])),
            words: [c.shellWord('newco-1'), c.shellWord("Bob's clinic")],
            file: c.exportName('Demo Family Clinic!'),
        };
    }""")
    assert result["money"] == ["85.00", "0.05", "—"]
    assert result["parsed"] == [8500, 8550, 120000, None, None, None]
    assert result["blocks"] == [[["09:00", "12:00"], ["13:00", "17:30"]], None, []]
    assert result["shown"] == "09:00-12:00, 13:00-17:00"
    assert result["hours"] == ["Mon 08:00-17:00 · Sat 09:00-12:00", "closed every day"]
    assert result["problems"] == [
        {"path": "schedules[2].blocks[0]", "line": None, "message": "outside hours"}]
    assert result["fields"] == [{"path": "name", "line": None, "message": "Field required"}]
    assert result["words"] == ["newco-1", "'Bob'\\''s clinic'"]
    assert result["file"] == "demo-family-clinic.yaml"


async def test_forms_change_the_clinic_and_a_bad_edit_changes_nothing(page, server,
                                                                      empty_workspace):
    _, key = empty_workspace
    await log_in(page, key)
    await page.wait_for_selector("#clinic-walkthrough")
    await import_through_the_page(page, clinic_text(f"Quayside {uuid.uuid4().hex[:6]}",
                                                    fictional_number()))
    clinic_url = page.url

    # A closure, through its form.
    await page.click("#clinic-closures button.add")
    await page.fill("#closures-edit-from", "2031-05-01")
    await page.fill("#closures-edit-to", "2031-05-02")
    await page.fill("#closures-edit-reason", "the roof being repaired")
    await page.select_option("#closures-edit-location", "Hilltop")
    await page.click("#form-closures button[type=submit]")
    await page.wait_for_selector("#clinic-status >> text=Saved")

    # Opening hours: Harbour opens on Thursdays too.
    await page.click("#clinic-locations button.edit[data-key='Harbour']")
    await page.check("#locations-edit-opening_hours-thu")
    await page.fill("#locations-edit-opening_hours-thu-from", "10:00")
    await page.fill("#locations-edit-opening_hours-thu-to", "14:00")
    await page.click("#form-locations button[type=submit]")
    await page.wait_for_selector("#clinic-status >> text=Saved")

    await page.reload()
    await page.wait_for_selector("#clinic-closures")
    assert page.url == clinic_url
    closures = await page.inner_text("#clinic-closures table")
    assert "the roof being repaired" in closures and "2031-05-02" in closures
    harbour = await page.locator("#clinic-locations tr", has_text="Harbour").inner_text()
    assert "Thu 10:00-14:00" in harbour
    schedules_before = await page.locator("#clinic-schedules tbody tr").count()

    # A schedule outside the location's opening hours: the problem, and no change.
    await page.click("#clinic-schedules button.add")
    await page.select_option("#schedules-edit-practitioner", "Cara Lind")
    await page.select_option("#schedules-edit-location", "Hilltop")
    await page.check("#form-schedules input[name=days][value=thu]")
    await page.fill("#schedules-edit-blocks", "07:00-12:00")
    await page.check("#form-schedules input[name=offers][value=Dressing]")
    await page.click("#form-schedules button[type=submit]")
    problem = page.locator("#form-schedules .problems li").first
    await problem.wait_for()
    assert "schedules[2]" in await problem.inner_text()
    assert await page.is_visible("#form-schedules")  # the form keeps what was typed

    await page.reload()
    await page.wait_for_selector("#clinic-schedules")
    assert await page.locator("#clinic-schedules tbody tr").count() == schedules_before
    assert page.errors.errors == []


async def test_a_read_only_key_sees_the_clinic_but_cannot_change_it(page, server, db,
                                                                    empty_workspace):
    _, admin = empty_workspace
    source = clinic_text(f"Quayside {uuid.uuid4().hex[:6]}", fictional_number())
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"{server.url}/api/clinics", content=source.encode(),
                                   headers={"Authorization": f"Bearer {admin}",
                                            "content-type": "application/x-yaml"})
    assert answer.status_code == 201
    workspace_id = await repo.verify_api_key(db.pool, admin)
    viewer = await key_with_role(db, workspace_id, "read_only")

    await log_in(page, viewer)
    await page.wait_for_selector("#nav a.active")
    clinic_id = answer.json()["clinic_id"]
    await page.goto(f"/dashboard#/clinic/{clinic_id}")
    await page.wait_for_selector("#clinic-closures")
    assert "an admin key is needed" in await page.inner_text("#clinic-readonly")
    assert await page.locator("#clinic-page button:enabled").count() == 0
    # The API refuses anyway, and the page says why in words.
    refused = await page.evaluate(f"""async () => {{
        const {{api}} = await import('/dashboard/js/api.js');
        try {{
            await api('/api/clinics/{clinic_id}/closures',
                      {{method: 'POST', body: {{from: '2031-05-01', reason: 'training'}}}});
            return null;
        }} catch (error) {{ return [error.status, error.message]; }}
    }}""")
    assert refused[0] == 403 and "this key is read-only; this needs admin" in refused[1]
    assert page.errors.errors == []
