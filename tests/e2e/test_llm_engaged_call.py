"""With an LLM configured, the LLM speaks for the agent inside the context graph.

A second real server runs with an OpenAI-compatible engage LLM: a local scripted model
(tests/fake_chat.py) that follows each Flows node's task and, like a careless model,
tries to write the booking while it is still reading the slot back. The graph gates
which tools each node offers and the guards refuse the early write, so the caller is
asked to confirm, and only their yes books exactly the slot they picked.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest

from runner.dev_credentials import twilio_auth_token
from simulator.simulator import CallScript, simulate_call
from tests.e2e.conftest import another_server
from tests.fake_chat import CallTool, Reply, Say, serve_chat

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

DO_NOW = re.compile(r"Do now: (\w+) — (.*)")
SETTLED = re.compile(r"What the call has settled: (\{.*\})")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    try:
        decoded = json.loads(content)
    except (TypeError, json.JSONDecodeError):
        return content
    return decoded if isinstance(decoded, str) else content


def _unspoken_result(messages: list[dict[str, Any]]) -> str | None:
    """The latest tool result the model has not talked about yet."""
    for message in reversed(messages):
        if message["role"] == "tool":
            return _text(message)
        if message["role"] == "assistant" and message.get("content"):
            return None
    return None


def careless_model(body: dict[str, Any]) -> Reply:
    """Does what each node's task says, but writes the booking before the caller's yes."""
    messages = body["messages"]
    offered = {tool["function"]["name"] for tool in body.get("tools") or []}
    task = next(_text(m) for m in reversed(messages) if "Do now:" in _text(m))
    action, description = DO_NOW.search(task).groups()
    facts = json.loads(SETTLED.search(task).group(1))
    if messages[-1]["role"] == "tool":
        result = _text(messages[-1])
        if result.startswith("blocked"):
            return Say("Before I book it, is that time right for you?")
        return Say(result)
    if action == "propose_initial_slot" and "CheckAvailability" in offered:
        return CallTool("CheckAvailability")
    if action in ("final_slot_confirmation", "book_confirmed_selected_slot"):
        return CallTool("CreateAppointment", {"slot_ref": facts["slot_picked"]})
    return Say(" ".join(filter(None, [_unspoken_result(messages), description])))


@pytest.fixture(scope="module")
async def llm_server(server, db, tmp_path_factory):
    """The service with the scripted engage LLM (and the deterministic navigator)."""
    async with serve_chat(careless_model) as chat, another_server(
        server, db, tmp_path_factory, "llm-server", {
            "LLM_PROVIDER": "openai",
            "OPENAI_BASE_URL": chat.base_url,
            "OPENAI_MODEL": "scripted-careless",
            "NAVIGATOR_PROVIDER": "deterministic",
        },
    ) as llm:
        yield llm, chat


BOOKING = CallScript.model_validate({
    "name": "llm_books_after_an_early_attempt",
    "from": "+15550100201",  # Margaret Chen in the demo clinic
    "to": "+15550100100",
    "turns": [
        {"say": "Hi, I need to book a physio session."},
        {"say": "Sometime next week in the afternoon."},
        {"say": "The first one please."},
        {"say": "Yes, that's right."},
        {"say": "That's everything, bye."},
    ],
})


async def test_the_llm_books_only_after_the_callers_yes_and_the_early_write_is_blocked(
    llm_server, db
):
    server, chat = llm_server
    result = await simulate_call(
        BOOKING, base_url=server.url, api_key=server.api_key,
        twilio_token=twilio_auth_token(server.settings), text_mode=True, log=lambda *_: None,
    )
    summary = result.to_json_dict()
    transcript = " | ".join(f"{t['speaker_role']}: {t['text']}" for t in summary["turns"])

    creates = [(t["succeeded"], t["error_class"]) for t in summary["tool_calls"]
               if t["name"] == "CreateAppointment"]
    assert creates == [(False, "guard"), (True, None)], transcript
    assert "Before I book it, is that time right for you?" in transcript
    assert "agent: Booked: Physiotherapy session" in transcript  # the tool's word, after the yes
    booked = await db.pool.fetch(
        "SELECT starts_at FROM appointments WHERE created_by_call = $1",
        uuid.UUID(result.call_id),
    )
    assert len(booked) == 1, transcript
    assert {"previous_state": "awaiting_final_confirmation", "next_state": "post_booking_closing",
            "reason": "booked"} in summary["transitions"]
    assert (summary["completion_reason"], summary["final_state"]) == ("agent_hangup", "closing")
    assert result.record["config_snapshot"]["context_graph"]["engage"] == "llm"

    # The model's context holds what it said in full (a text session never voices it).
    context = chat.requests[-1]["body"]["messages"]
    assert any("S2: Tuesday" in (m.get("content") or "") for m in context
               if m["role"] == "assistant"), context

    # Each node offered the model only its state's tools: the booking write only where the
    # caller's yes is awaited, never in the first turns.
    for request in chat.requests:
        task = next(_text(m) for m in reversed(request["body"]["messages"])
                    if "Do now:" in _text(m))
        offered = {t["function"]["name"] for t in request["body"].get("tools") or []}
        if "CreateAppointment" in offered:
            assert "awaiting_final_confirmation" in task
