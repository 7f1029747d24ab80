"""The observer socket's parts without a server: the auth message, the snapshot, the end
notice, the call id as pods key it, the stream's own tasks."""

from __future__ import annotations

import asyncio
import json
import uuid

from starlette.websockets import WebSocketState

from api.observe import (
    SNAPSHOT_ROWS,
    auth_message_key,
    call_snapshot,
    canonical_call_id,
    ended_notice,
    stream,
)
from ops.bus import InProcessBus
from ops.events import ObserverEvent
from ops.registry import ActiveCall


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


def test_the_snapshot_says_whether_there_is_a_recording_never_where_it_is_kept():
    detail = {"id": "c1", "recording_path": "/srv/data/recordings/c1.wav", "turns": [],
              "transitions": [], "tool_calls": [], "events": []}
    call = call_snapshot(detail, None)["call"]
    assert call == {"id": "c1", "has_recording": True,
                    "recording_url": "/api/calls/c1/recording/stereo"}


def test_the_end_of_a_finished_call_comes_from_its_record():
    notice = ended_notice({"id": "c1", "call_sid": "CA1", "duration_s": 12.5,
                           "turns": [{}, {}, {}], "completion_reason": "agent_hangup",
                           "final_state": "done"})
    assert notice["type"] == "session_end" and notice["seq"] is None
    assert notice["data"] == {"call_sid": "CA1", "duration_s": 12.5, "turns": 3,
                              "completion_reason": "agent_hangup", "final_state": "done"}


def test_a_call_id_is_looked_up_as_pods_key_it():
    call_id = str(uuid.uuid4())
    assert canonical_call_id(call_id.upper()) == call_id
    assert canonical_call_id(call_id.replace("-", "")) == call_id
    assert canonical_call_id("not-a-uuid") == "not-a-uuid"


class QuietObserver:
    """A connected socket whose client never speaks; what it is sent is kept."""

    client_state = WebSocketState.CONNECTED

    def __init__(self) -> None:
        self.sent: list[dict] = []

    async def receive(self) -> dict:
        await asyncio.Event().wait()  # until cancelled
        return {"type": "websocket.disconnect"}

    async def send_text(self, text: str) -> None:
        self.sent.append(json.loads(text))

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        return None


async def test_a_cancelled_stream_leaves_no_task_behind():
    bus = InProcessBus("pod", replay_events=10, queue_events=100)
    sub, _ = await bus.subscribe("w1", "c1")
    observer = QuietObserver()
    streaming = asyncio.create_task(stream(observer, sub, ping_s=30, until_end=True))
    bus.publish(ObserverEvent("c1", "w1", 1, "user_transcript", {"transcript": "hi"}))
    for _ in range(100):
        if observer.sent:
            break
        await asyncio.sleep(0.01)
    assert [m["seq"] for m in observer.sent] == [1]
    streaming.cancel()
    await asyncio.gather(streaming, return_exceptions=True)
    left = [t for t in asyncio.all_tasks()
            if t.get_name() in ("observer-client", "observer-next") and not t.done()]
    assert left == []
