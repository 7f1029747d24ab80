"""Daily's REST answers as the adapter reads them (docs.daily.co/reference/rest-api):
only the fields it uses, each checked, so an answer of another shape is refused at the
boundary instead of failing somewhere inside."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ROOM_NAME = r"^[A-Za-z0-9_-]{1,128}$"  # Daily's room name rule


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class RoomConfig(_Answer):
    """A room's access window, as unix seconds."""

    nbf: int | None = None
    exp: int | None = None


class Room(_Answer):
    """The room object (`POST /rooms`, `GET /rooms/{name}`)."""

    name: str = Field(pattern=ROOM_NAME)
    url: str = Field(pattern=r"^https://\S+$")
    privacy: str
    config: RoomConfig = Field(default_factory=RoomConfig)


class MeetingToken(_Answer):
    """`POST /meeting-tokens`: the token that lets one person into a private room."""

    token: str = Field(min_length=1, pattern=r"^\S+$")


class RoomDeleted(_Answer):
    """`DELETE /rooms/{name}`."""

    deleted: Literal[True]
    name: str


class Refusal(_Answer):
    """Daily's error body: `error` is a stable type, `info` free text for people."""

    error: str = ""
    info: str = ""


__all__ = ["MeetingToken", "Refusal", "Room", "RoomConfig", "RoomDeleted"]
