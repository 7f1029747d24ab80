"""An outbound call the clinic places: which task it carries out, for whom, and which
context graph runs it. The dispatcher builds one when it dials; the call's engine reads
it to greet the callee, check it is the right person and pursue the task's goal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The context graph each kind of task runs.
OUTBOUND_GRAPHS: dict[str, str] = {
    "callback": "outbound_callback",
    "scheduled": "outbound_callback",
    "waitlist_offer": "waitlist_offer",
    "reminder": "appointment_reminder",
    "checkin": "companion_checkin",
}


@dataclass(frozen=True)
class OutboundCall:
    task_id: str
    attempt_id: str
    kind: str
    workspace_id: str
    service_id: str | None
    patient_id: str | None  # None: a callback to a caller who was never identified
    phone: str  # the number dialled
    reason: str
    goal: str
    appointment_id: str | None = None  # a reminder's appointment
    # A waitlist offer's slot: practitioner_id, location_id, appointment_type_id,
    # starts_at, ends_at (ISO).
    offer: dict[str, Any] | None = None

    @property
    def graph_id(self) -> str:
        return OUTBOUND_GRAPHS[self.kind]
