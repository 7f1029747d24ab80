"""What a video visit needs from any provider: the visit's window in, the link the
patient opens out, and an error that says whether asking again can help.

`LinkTemplate` is the provider for a clinic that already has its own video service: the
link is its template with the visit filled in. A template is checked when it is loaded,
so a typo fails at start rather than in a text to a patient.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from db.clinic.model import VIDEO_LINK_FIELDS as PLACEHOLDERS
from lib.url_templates import fill_template, template_fields

WHAT = "video link template"
ROOM_PREFIX = "visit-"
ROOM_HASH_CHARS = 12


@dataclass(frozen=True)
class VisitWindow:
    """One visit: which appointment, and when it runs (aware times)."""

    appointment_id: str
    starts_at: datetime
    ends_at: datetime

    def __post_init__(self) -> None:
        if not self.appointment_id:
            raise ValueError("a visit needs its appointment id")
        if self.starts_at.tzinfo is None or self.ends_at.tzinfo is None:
            raise ValueError("a visit's times must carry their time zone")
        if self.ends_at <= self.starts_at:
            raise ValueError("a visit must end after it starts")


@dataclass(frozen=True)
class VideoLink:
    """The link the patient opens. `room`: the provider's room, when there is one;
    `expires_at`: when the link stops letting anyone in, when the provider says."""

    url: str
    provider: str
    room: str | None
    expires_at: datetime | None


class TelehealthError(Exception):
    """No link could be made. `reason` is plain words safe to log (never a link with its
    token, never a key); `retryable`: asking again later may work; `status`: the
    provider's HTTP status, when it answered."""

    def __init__(self, reason: str, *, retryable: bool, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.status = status


class VideoVisits(Protocol):
    """A clinic's video provider: the link a visit's patient opens."""

    name: str

    async def link_for(self, visit: VisitWindow) -> VideoLink: ...


def room_name(appointment_id: str) -> str:
    """A short room name that is the same for every request about one appointment (so
    asking twice finds the same room) and does not show the appointment's id."""
    digest = hashlib.sha256(appointment_id.encode()).hexdigest()
    return ROOM_PREFIX + digest[:ROOM_HASH_CHARS]


class LinkTemplate:
    """A clinic's own video link, such as `https://meet.example.org/visit/{appointment_id}`.

    Placeholders: `{appointment_id}`, `{room}` (`room_name`) and `{date}` (the visit's
    day, YYYY-MM-DD, in the time zone its start was given in). The link must be https
    and its host fixed: a placeholder may fill the path, query or fragment only.
    """

    name = "template"

    def __init__(self, template: str) -> None:
        self._fields = template_fields(template, PLACEHOLDERS, what=WHAT)
        self.template = template

    async def link_for(self, visit: VisitWindow) -> VideoLink:
        """The template filled in for `visit`; each value is escaped for a URL."""
        room = room_name(visit.appointment_id)
        url = fill_template(self.template, {
            "appointment_id": visit.appointment_id, "room": room,
            "date": visit.starts_at.date().isoformat()})
        return VideoLink(url=url, provider=self.name,
                         room=room if "room" in self._fields else None, expires_at=None)


__all__ = ["PLACEHOLDERS", "LinkTemplate", "TelehealthError", "VideoLink", "VideoVisits",
           "VisitWindow", "room_name"]
