"""The live view's escalation list (dashboard/js/live.js `applyEvent`), run in Node:
an operator's acknowledge/resolve updates the escalation it is about, never adds one."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

LIVE_JS = Path(__file__).resolve().parents[2] / "dashboard" / "js" / "live.js"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="Node.js is not installed")


def fold(events: list[dict]) -> list[dict]:
    """The call's escalations after `events` went through applyEvent, in order."""
    script = f"""
        const l = await import({json.dumps(LIVE_JS.as_uri())});
        const call = l.newLiveCall('c1');
        for (const event of {json.dumps(events)}) l.applyEvent(call, event);
        console.log(JSON.stringify(call.escalations));
    """
    done = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True,
                          text=True, timeout=30, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def raised(concept: str, severity: str = "hard") -> dict:
    return {"type": "escalation", "data": {"concept": concept, "severity": severity,
                                           "reason": "r", "status": "open"}}


def changed(escalation_id: int, concept: str, status: str, operator: str = "Ada") -> dict:
    return {"type": "escalation", "data": {"escalation_id": escalation_id, "concept": concept,
                                           "severity": "hard", "status": status,
                                           "operator": operator}}


def test_acknowledge_then_resolve_update_the_one_escalation():
    escalations = fold([raised("self_harm"), changed(41, "self_harm", "acknowledged"),
                        changed(41, "self_harm", "resolved", "Osei")])
    assert len(escalations) == 1
    assert escalations[0] == {"concept": "self_harm", "severity": "hard", "reason": "r",
                              "status": "resolved", "escalation_id": 41, "operator": "Osei"}


def test_an_update_finds_its_escalation_by_id_then_by_concept():
    escalations = fold([
        raised("self_harm"), raised("gambling_crisis", "soft"), raised("self_harm"),
        changed(7, "self_harm", "acknowledged"),  # the first open self_harm takes id 7
        changed(8, "self_harm", "resolved"),  # then the second one takes id 8
        changed(7, "self_harm", "resolved"),  # id 7 again: by id, not by concept
    ])
    assert [(e["concept"], e.get("escalation_id"), e["status"]) for e in escalations] == [
        ("self_harm", 7, "resolved"), ("gambling_crisis", None, "open"),
        ("self_harm", 8, "resolved")]


def test_an_update_for_an_escalation_not_in_view_is_added():
    escalations = fold([raised("self_harm"), changed(9, "gambling_crisis", "acknowledged")])
    assert [(e["concept"], e["status"]) for e in escalations] == [
        ("self_harm", "open"), ("gambling_crisis", "acknowledged")]
    again = fold([raised("self_harm"), raised("self_harm")])
    assert [e["status"] for e in again] == ["open", "open"]  # new ones are always added
