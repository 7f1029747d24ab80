"""Call records to analyse, built the way a finished call leaves them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from db.call_analyses import CallRecord, RecordedEvent, RecordedTool, RecordedTurn, RecordedWrite


def conversation(*lines: str, gap_ms: int = 600) -> list[RecordedTurn]:
    """Turns from "caller: ..." / "agent: ..." lines, each 2 s long, `gap_ms` apart."""
    turns, clock = [], 0
    for seq, line in enumerate(lines):
        role, _, text = line.partition(": ")
        turns.append(RecordedTurn(seq, role, text, speech_start_ms=clock,
                                  speech_end_ms=clock + 2000))
        clock += 2000 + gap_ms
    return turns


def record(turns: list[RecordedTurn], *, events: list[tuple[str, dict[str, Any], int | None]] = (),
           tools: list[RecordedTool] = (), writes: list[RecordedWrite] = (),
           escalations: list[dict[str, Any]] = (), accuracy: float | None = None,
           completion_reason: str = "caller_hangup") -> CallRecord:
    return CallRecord(
        call_id="00000000-0000-0000-0000-000000000001",
        workspace_id="00000000-0000-0000-0000-000000000002", service_id=None, patient_id=None,
        direction="inbound", started_at=datetime(2026, 11, 27, 10, tzinfo=UTC),
        duration_s=60.0, completion_reason=completion_reason, final_state="end",
        transcript_accuracy=accuracy, verified_words=[], turns=turns, tools=list(tools),
        events=[RecordedEvent(i, kind, data, at) for i, (kind, data, at) in enumerate(events)],
        escalations=list(escalations), writes=list(writes))


def booked(turn_seq: int, what: str = "Physiotherapy with Dr Okafor at Harbour, "
           "Tuesday 1 December at 10 AM") -> RecordedWrite:
    return RecordedWrite("appointment_booked", f"Booked: {what}.", turn_seq,
                         {"type": "Physiotherapy"})
