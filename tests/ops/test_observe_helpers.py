"""The observer socket's pure parts: the auth message, the snapshot, the end notice."""

from __future__ import annotations

import json

from api.observe import SNAPSHOT_ROWS, auth_message_key, call_snapshot, ended_notice
from services.ops.registry import ActiveCall


def test_only_an_auth_message_with_a_key_authenticates():
    assert auth_message_key(json.dumps({"type": "auth", "api_key": " vk_1 "})) == "vk_1"
    for raw in ["", "garbage", "[]", json.dumps({"type": "auth"}),
                json.dumps({"type": "auth", "api_key": 12}),
                json.dumps({"type": "auth", "api_key": "  "}),
                json.dumps({"type": "hello", "api_key": "vk_1"}),
                json.dumps({"type": "auth", "api_key": "k" * 5000})]:
        assert auth_message_key(raw) is None, raw


def test_the_snapshot_keeps_the_latest_rows_and_says_how_many_there_were():
    detail = {"id": "c1", "status": "in_progress", "events": [{"type": "x"}],
              "turns": [{"seq": i} for i in range(1, 81)], "transitions": [],
              "tool_calls": [{"tool_call_id": "t1"}]}
    entry = ActiveCall("c1", "w1", None, "pod", 1.0, state="booking")
    snapshot = call_snapshot(detail, entry)
    assert snapshot["call"] == {"id": "c1", "status": "in_progress"}
    assert snapshot["active"]["state"] == "booking"
    assert [t["seq"] for t in snapshot["turns"]] == list(range(81 - SNAPSHOT_ROWS, 81))
    assert snapshot["turns_total"] == 80 and snapshot["tool_calls_total"] == 1
    assert call_snapshot(None, entry) == {"active": entry.to_dict(), "record_unavailable": True}


def test_the_end_of_a_finished_call_comes_from_its_record():
    notice = ended_notice({"id": "c1", "call_sid": "CA1", "duration_s": 12.5,
                           "turns": [{}, {}, {}], "completion_reason": "agent_hangup",
                           "final_state": "done"})
    assert notice["type"] == "session_end" and notice["seq"] is None
    assert notice["data"] == {"call_sid": "CA1", "duration_s": 12.5, "turns": 3,
                              "completion_reason": "agent_hangup", "final_state": "done"}
