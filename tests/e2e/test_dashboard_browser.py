"""The operator dashboard in headless Chromium against the running service: log in with
a key, watch a simulated call live, open it afterwards, play its recording and scrub it
by word; the state guide and the review queue from real records; data is never HTML.

Needs Debian's `chromium`; without it these tests skip, unless REQUIRE_BROWSER_TESTS=1
(CI), where they fail. Playwright never downloads a browser here.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from db import repositories as repo
from runner.dev_credentials import twilio_auth_token
from simulator.simulator import load_script, simulate_call
from tests.e2e.test_two_pods import CALL as TWO_POD_CALL
from tests.e2e.test_two_pods import pods, redis_url  # noqa: F401  (fixtures: two pods, Valkey)

pytestmark = pytest.mark.e2e
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]
WAIT_MS = 30_000


def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    reason = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if os.environ.get("REQUIRE_BROWSER_TESTS") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator:
    _require_chromium()
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            await chromium.close()


class PageErrors:
    """Script errors and CSP violations the page reported."""

    def __init__(self, page) -> None:
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        page.on("console", self._console)

    def _console(self, message) -> None:
        if message.type == "error" and "Content Security Policy" in message.text:
            self.errors.append(f"csp: {message.text}")


@pytest.fixture
async def page(browser, server):
    context = await browser.new_context(
        base_url=server.url, viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.errors = PageErrors(page)
    yield page
    await context.close()


async def eventually(page, expression: str, timeout_s: float) -> None:
    """Polls `expression` from outside the page (the page's CSP forbids eval, which
    Playwright's own wait_for_function needs)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await page.evaluate(expression):
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"still false after {timeout_s} s: {expression}")
        await asyncio.sleep(0.1)


async def log_in(page, key: str) -> None:
    await page.goto("/dashboard")
    await page.fill("#api-key", key)
    await page.click("#login button[type=submit]")


async def test_a_wrong_key_is_refused_and_the_right_one_opens_the_dashboard(page, server):
    assets = httpx.get(f"{server.url}/dashboard/js/app.js")
    assert assets.status_code == 200
    assert assets.headers["content-type"].startswith("text/javascript")
    # Only files under dashboard/ by exact name: an encoded "../" reaches nothing.
    for path in ("/dashboard/%2e%2e/main.py", "/dashboard/%2e%2e/%2e%2e/etc/passwd",
                 "/dashboard/js/missing.js"):
        assert httpx.get(f"{server.url}{path}").status_code == 404, path

    await page.goto("/dashboard")
    help_text = await page.inner_text("#key-help")  # where a key comes from
    assert ".data/dev_api_key" in help_text
    assert "python main.py api-key create --workspace demo" in help_text
    await log_in(page, "vk_00000000_" + "x" * 43)
    await page.wait_for_selector("#login-status >> text=invalid API key")
    assert await page.is_hidden("#nav")

    await page.fill("#api-key", server.api_key)
    await page.click("#login button[type=submit]")
    await page.wait_for_selector("#nav a.active[data-page=live]")
    assert await page.evaluate("sessionStorage.length") == 1
    await page.click("#logout")
    await page.wait_for_selector("#api-key")
    assert await page.evaluate("sessionStorage.length") == 0
    assert page.errors.errors == []


async def test_a_read_only_key_sees_only_what_it_may_use(page, server, db):
    workspace_id = await seeded_workspace(db, server)
    viewer = await repo.create_api_key(db.pool, workspace_id, "viewer", role="read_only")
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="eval", from_number=None, to_number=None, status="completed")

    await log_in(page, viewer)
    await page.wait_for_selector("#nav a.active[data-page=calls]")  # its home: the history
    assert await page.is_hidden("#nav a[data-page=live]")
    assert await page.is_hidden("#nav a[data-page=review]")
    assert (await page.inner_text("#whoami")).endswith("· read-only")
    await page.goto("/dashboard#/live")
    notice = await page.inner_text("#not-allowed")
    assert "needs operator rights; this key is read-only" in notice
    await page.goto(f"/dashboard#/calls/{call_id}")
    await page.wait_for_selector("#verify")
    assert await page.is_disabled("#verify")
    refused = await page.evaluate("""async () => {
        const {api} = await import('/dashboard/js/api.js');
        try { await api('/api/escalations'); return null; }
        catch (error) { return [error.status, error.message]; }
    }""")
    assert refused == [403, "Not allowed: this key is read-only; this needs operator. "
                            "Ask an admin of the workspace for a key with that role."]
    assert page.errors.errors == []


async def test_pure_helpers_of_the_page(page, server):
    """Word timing, word lookup, live event folding and the history query, in the browser."""
    await log_in(page, server.api_key)
    await page.wait_for_selector("#nav a.active")
    result = await page.evaluate("""async () => {
        const d = await import('/dashboard/js/detail.js');
        const l = await import('/dashboard/js/live.js');
        const h = await import('/dashboard/js/history.js');
        const est = d.turnWords({speaker_role: 'caller', text: 'ab cd',
                                 user_speech_start_ms: 1000, user_speech_end_ms: 1600});
        const stored = d.turnWords({speaker_role: 'agent', text: 'x',
                                    words: [{word: 'Hi', start_ms: 5, end_ms: 9}]});
        const words = [{start_ms: 0, end_ms: 100}, {start_ms: 500, end_ms: 700}];
        const call = l.newLiveCall('c1');
        for (const e of [
            {type: 'state_transition', data: {previous_state: 'a', next_state: 'b'}},
            {type: 'user_transcript', data: {transcript: 'hello'}},
            {type: 'tool_call_started', data: {tool_name: 'T', call_id: 't1'}},
            {type: 'tool_call_completed', data: {tool_name: 'T', call_id: 't1',
                                                 succeeded: false, error_class: 'guard'}},
            {type: 'session_end', data: {completion_reason: 'agent_hangup'}}]) {
            l.applyEvent(call, e);
        }
        const snapshot = {type: 'session_info', call_id: 'c2', data: {
            active: {state: 'greeting'},
            turns: [{speaker_role: 'agent', text: 'Hello'}, {speaker_role: 'caller', text: 'hi'}],
            transitions: [{previous_state: 'init', next_state: 'greeting', reason: 'prefetched'}],
            tool_calls: [{name: 'T', tool_call_id: 't1', error_class: null, duration_ms: 3}]}};
        const replayed = [
            {type: 'agent_transcript', data: {transcript: 'Hello'}},
            {type: 'user_transcript', data: {transcript: 'hi'}},
            {type: 'state_transition', data: {previous_state: 'init', next_state: 'greeting',
                                              reason: 'prefetched'}},
            {type: 'tool_call_started', data: {tool_name: 'T', call_id: 't1'}},
            {type: 'tool_call_completed', data: {tool_name: 'T', call_id: 't1', succeeded: true}},
            {type: 'agent_transcript', data: {transcript: 'Next'}}];
        const late = l.newLiveCall('c2');
        for (const e of [snapshot, ...replayed]) l.applyEvent(late, e);
        const whole = l.newLiveCall('c2');
        for (const e of [snapshot, {type: 'session_start', data: {}}, ...replayed]) {
            l.applyEvent(whole, e);
        }
        const view = (c) => ({lines: c.lines.map((x) => x.text), transitions: c.transitions.length,
                              tools: c.tools.length});
        return {
            late: view(late), whole: view(whole),
            est, stored,
            at: [d.wordAt(words, 50), d.wordAt(words, 240), d.wordAt(words, 400),
                 d.wordAt(words, 600), d.wordAt(words, -1)],
            call: {state: call.state, lines: call.lines, tools: call.tools, ended: call.ended},
            query: h.historyQuery({state: 'closing', escalated: '', tool_error: 'pms'}, 'abc'),
            envelope: [l.activeCalls([1]).length, l.activeCalls({calls: [1, 2]}).length],
        };
    }""")
    assert [(w["word"], w["start_ms"], w["end_ms"], w["estimated"]) for w in result["est"]] == [
        ("ab", 1000, 1300, True), ("cd", 1300, 1600, True)]
    assert result["stored"] == [{"word": "Hi", "start_ms": 5, "end_ms": 9, "estimated": False}]
    assert result["at"] == [0, 0, -1, 1, -1]  # 240 ms: within the 150 ms tail of word 0
    assert result["call"]["state"] == "b" and result["call"]["ended"] is True
    assert result["call"]["lines"] == [{"role": "caller", "text": "hello"}]
    assert [(t["tool_name"], t["pending"], t["error_class"]) for t in result["call"]["tools"]] == [
        ("T", False, "guard")]
    assert result["query"] == "/api/calls?limit=50&state=closing&tool_error=pms&cursor=abc"
    assert result["envelope"] == [1, 2]
    # A late joiner: the snapshot, then a replay that repeats it, shows everything once.
    assert result["late"] == {"lines": ["Hello", "hi", "Next"], "transitions": 1, "tools": 1}
    # A replay from session_start is complete and replaces the snapshot.
    assert result["whole"] == result["late"]


async def seeded_workspace(db, server) -> str:
    return await repo.verify_api_key(db.pool, server.api_key)


async def test_call_text_is_shown_as_text_never_as_html(page, server, db):
    workspace_id = await seeded_workspace(db, server)
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="eval", from_number=None, to_number=None, status="completed")
    hostile = '<img src=x id="xss" onerror="window.__xss=1">Tuesday'
    await db.pool.execute(
        "INSERT INTO turns (call_id, seq, speaker_id, speaker_role, text) "
        "VALUES ($1, 1, 'caller', 'caller', $2)", uuid.UUID(call_id), hostile)

    await log_in(page, server.api_key)
    await page.wait_for_selector("#nav a.active")
    await page.goto(f"/dashboard#/calls/{call_id}")
    await page.wait_for_selector("#transcript .turn")
    text = await page.inner_text("#transcript")
    assert 'id="xss"' in text and "Tuesday" in text
    assert await page.query_selector("#xss") is None
    assert await page.evaluate("window.__xss") is None
    await page.wait_for_selector("text=This call has no recording")


async def test_state_guide_and_review_queue_pages_show_the_records(page, server):
    headers = {"Authorization": f"Bearer {server.api_key}"}
    guide = httpx.get(f"{server.url}/api/insights/state-guide?last=500", headers=headers).json()

    await log_in(page, server.api_key)
    await page.wait_for_selector("#nav a.active")
    await page.goto("/dashboard#/guide")
    await page.fill("#guide-last", "500")
    await page.click("form.filters button[type=submit]")
    await page.wait_for_selector("#guide-states tbody tr")
    rows = await page.locator("#guide-states tbody tr").count()
    assert rows == guide["canonical_states"] == len(guide["states"])
    never = await page.locator("#guide-states .badge.never").count()
    assert never == sum(1 for s in guide["states"] if s["never_observed"])
    tool_rows = await page.locator("#guide-tools tbody tr").all_inner_texts()
    assert [r.split("\t")[0] for r in tool_rows] == [t["name"] for t in guide["tools"]]

    await page.goto("/dashboard#/review")
    await page.wait_for_selector("#review-queue table, #review-queue .empty, #review-queue .error")
    assert await page.locator("#review-queue .notice.error").count() == 0
    assert page.errors.errors == []


async def test_history_filters_and_loads_more_a_page_at_a_time(page, server, db):
    workspace_id = await seeded_workspace(db, server)
    marker = f"page_test_{uuid.uuid4().hex[:6]}"  # a final state only these calls have
    for _ in range(55):
        call_id = await repo.create_call(
            db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
            direction="eval", from_number=None, to_number=None, status="completed")
        await db.pool.execute("UPDATE calls SET final_state = $2 WHERE id = $1",
                              uuid.UUID(call_id), marker)

    await log_in(page, server.api_key)
    await page.wait_for_selector("#nav a.active")
    await page.goto("/dashboard#/calls")
    await page.wait_for_selector("#history-rows tr")
    await page.fill("#f-state", marker)
    await page.click("form.filters button[type=submit]")
    rows = page.locator("#history-rows tr")
    # The filtered page replaced the unfiltered one (rows and button are set together).
    await page.locator(f"#history-rows tr td:nth-child(7) >> text={marker}").first.wait_for()
    assert await page.is_visible("#load-more")
    assert await rows.count() == 50
    await page.click("#load-more")
    await page.wait_for_selector("#load-more[hidden]", state="attached")
    assert await rows.count() == 55
    states = await page.locator("#history-rows tr td:nth-child(7)").all_inner_texts()
    assert set(states) == {marker}
    ids = await page.locator("#history-rows tr").evaluate_all(
        "rows => rows.map(r => r.dataset.callId)")
    assert len(set(ids)) == 55  # no call twice across the pages
    assert page.errors.errors == []


async def test_the_review_queue_shows_flagged_events_and_acknowledges_escalations(
        page, server, db):
    workspace_id = await seeded_workspace(db, server)
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="eval", from_number=None, to_number=None, status="completed")
    summary = f"Phone changed to a number never said ({uuid.uuid4().hex[:6]})"
    await db.pool.execute(
        "INSERT INTO clinical_events (workspace_id, call_id, type, summary, source, written_by,"
        " confidence, verification, verification_notes, review_action) VALUES ($1, $2,"
        " 'contact_updated', $3, 'tool', 'tool:UpdatePatient', 'moderate', 'flagged',"
        " $4::jsonb, $5)",
        uuid.UUID(workspace_id), uuid.UUID(call_id), summary,
        '[{"stage": "event", "verdict": "flagged", "reason": "never said on the call",'
        ' "judge": "rules"}]', "Check the patient's details in Cliniko: never said")
    escalation_id = await db.pool.fetchval(
        "INSERT INTO escalations (call_id, seq, concept, severity, reason, at_ms) "
        "VALUES ($1, 1, 'self_harm', 'hard', 'test escalation', 4200) RETURNING id",
        uuid.UUID(call_id))

    await log_in(page, server.api_key)
    await page.wait_for_selector("#nav a.active")
    await page.goto("/dashboard#/review")
    await page.fill("#operator", "nurse-on-duty")
    await page.dispatch_event("#operator", "change")
    flagged = page.locator("#review-queue tr", has_text=summary)
    await flagged.wait_for()
    assert "event: flagged — never said on the call (rules)" in await flagged.inner_text()
    assert "Check the patient's details in Cliniko: never said" in await flagged.inner_text()
    button = page.locator(f"#escalations button.ack[data-id='{escalation_id}']")
    await button.click()
    await button.wait_for(state="detached")
    row = await db.pool.fetchrow(
        "SELECT status, acknowledged_by FROM escalations WHERE id = $1", escalation_id)
    assert dict(row) == {"status": "acknowledged", "acknowledged_by": "nurse-on-duty"}
    assert page.errors.errors == []


@pytest.mark.timeout(300)
async def test_watch_a_call_live_then_play_it_back_and_scrub_by_word(page, server, db):
    await log_in(page, server.api_key)
    await page.wait_for_selector("#nav a.active[data-page=live]")
    await page.wait_for_selector("#stream-status.stream-live", timeout=10_000)

    script = load_script(SCENARIOS / "voice_booking.yaml")
    call = asyncio.create_task(simulate_call(
        script, base_url=server.url, api_key=server.api_key,
        twilio_token=twilio_auth_token(server.settings), text_mode=False, log=lambda *_: None))
    try:
        link = page.locator("#live-calls a.call-link").first
        await link.wait_for(timeout=60_000)
        call_id = await link.get_attribute("data-call-id")
        # What is said streams into the list while the call runs.
        await page.locator("#live-calls .live-lines .line").first.wait_for(timeout=60_000)
        started = await page.locator("#live-calls tbody tr td:nth-child(3)").first.inner_text()
        assert str(datetime.now().year) in started  # the registry's Unix time, read as such
        await link.click()
        await page.wait_for_selector("#live-transcript .line.caller", timeout=90_000)
        await page.wait_for_selector("#live-transitions li")
        result = await call
    finally:
        if not call.done():
            call.cancel()
    assert result.call_id == call_id
    await page.wait_for_selector("#open-record", timeout=30_000)
    await page.click("button.action[data-action=end]")  # too late: the call has ended
    await page.wait_for_selector("#action-status >> text=end: call is not active")

    # Afterwards: history with the call's quality score, then the record with its summary.
    score = await analysed(db, call_id)
    await page.goto("/dashboard#/calls")
    row = page.locator(f"#history-rows tr[data-call-id='{call_id}']")
    assert await row.locator("td:nth-child(4)").inner_text() == f"{score:.1f}"
    await page.wait_for_selector("#quality-trend")
    await row.locator("a").click()
    await page.wait_for_selector("#transcript .turn.agent")
    assert await page.locator("#transcript .turn").count() == len(result.record["turns"])
    assert await page.inner_text("#quality-score") == f"{score:.1f}"
    assert "Book an appointment" in await page.inner_text("#call-summary dd[data-part=wanted]")
    assert await page.locator("#quality-dimensions tbody tr").count() == 5
    await page.locator("#call-summary dd[data-part=wanted] button.link").first.click()
    await page.wait_for_selector("#transcript li.turn.flash")
    await page.wait_for_selector("#player[data-ready=true]")

    # Play: the clock moves.
    await page.evaluate("document.getElementById('player').play()")
    await eventually(page, "document.getElementById('player').currentTime > 0.5", 20)
    await page.evaluate("document.getElementById('player').pause()")

    # A word: the audio jumps to its start, and it is the word lit.
    word = page.locator("#transcript .turn.caller button.word").nth(1)
    start_ms = int(await word.get_attribute("data-start-ms"))
    await word.click()
    position = await page.evaluate("document.getElementById('player').currentTime")
    assert abs(position * 1000 - start_ms) < 50
    await page.wait_for_selector("#transcript button.word.playing")
    assert await page.locator("#transcript button.word.playing").get_attribute(
        "data-start-ms") == str(start_ms)

    # The waveform: a click halfway seeks halfway.
    box = await page.locator("#waveform").bounding_box()
    await page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    half = await page.evaluate(
        "(() => { const a = document.getElementById('player');"
        " return a.currentTime / a.duration; })()")
    assert abs(half - 0.5) < 0.02

    # Verification: the recording re-transcribed, the accuracy shown.
    assert await page.inner_text("#accuracy") == "not verified"
    await page.click("#verify")
    await page.wait_for_selector("#accuracy >> text=%", timeout=120_000)
    stored = await db.pool.fetchrow(
        "SELECT transcript_accuracy, transcript_verifier FROM calls WHERE id = $1",
        uuid.UUID(call_id))
    assert await page.inner_text("#accuracy") == (
        f"{stored['transcript_accuracy'] * 100:.1f}% ({stored['transcript_verifier']})")
    assert page.errors.errors == []


async def analysed(db, call_id: str, timeout_s: float = 60.0) -> float:
    """The call's quality score once its after-call analysis is written."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        score = await db.pool.fetchval(
            "SELECT quality_score FROM call_analyses WHERE call_id = $1", uuid.UUID(call_id))
        if score is not None:
            return score
        assert asyncio.get_running_loop().time() < deadline, "the call was never analysed"
        await asyncio.sleep(0.25)


@pytest.mark.timeout(240)
async def test_a_call_on_pod_a_is_watched_live_in_the_browser_from_pod_b(browser, pods):
    """Two pods on one Postgres and one Redis: the operator's browser talks only to pod B
    while pod A carries the call."""
    pod_a, pod_b = pods
    context = await browser.new_context(base_url=pod_b.url)
    try:
        page = await context.new_page()
        page.set_default_timeout(WAIT_MS)
        errors = PageErrors(page)
        await log_in(page, pod_b.api_key)
        await page.wait_for_selector("#stream-status.stream-live")

        call = asyncio.create_task(simulate_call(
            TWO_POD_CALL, base_url=pod_a.url, api_key=pod_a.api_key,
            twilio_token=twilio_auth_token(pod_a.settings), text_mode=True,
            log=lambda *_: None))
        try:
            link = page.locator("#live-calls a.call-link").first
            await link.wait_for()
            call_id = await link.get_attribute("data-call-id")
            await link.click()
            await page.wait_for_selector("#live-transcript .line.caller")
            await page.wait_for_selector("#open-record", timeout=60_000)
            result = await call
        finally:
            if not call.done():
                call.cancel()
        assert result.call_id == call_id
        live_lines = await page.locator("#live-transcript .line").count()
        assert live_lines == len(result.record["turns"])

        await page.click("#open-record")
        await page.wait_for_selector("#transcript .turn")
        assert await page.locator("#transcript .turn").count() == live_lines
        assert errors.errors == []
    finally:
        await context.close()
