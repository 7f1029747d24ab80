"""Video visits in Daily rooms (docs.daily.co/reference/rest-api), one per appointment.

Each visit gets a private room named from its appointment (`links.room_name`), open from
`early_join_min` before the start to `grace_min` after the end, Daily ejecting whoever is
left when it closes; the patient's link carries a meeting token for that room alone,
expiring with it. Creating the room again finds the one already there, so asking twice
for a visit's link is safe, and a cancelled visit's room can be deleted.

Every failure is a `TelehealthError` that says whether asking again can help: a refused
key or a refused request cannot; a rate limit, an outage, a timeout or an answer that is
not Daily's documented JSON can. Neither the API key nor a token is ever in an error or
a log line: a token is the patient's way into the visit.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from loguru import logger
from pydantic import BaseModel, ValidationError

from services.telehealth.daily_shapes import MeetingToken, Refusal, Room, RoomDeleted
from services.telehealth.links import TelehealthError, VideoLink, VisitWindow, room_name

DAILY_API = "https://api.daily.co/v1"
UNREADABLE = "Daily answered with something unreadable"
ALREADY_EXISTS = "already exists"
ERROR_TYPE = re.compile(r"^[a-z][a-z-]{0,40}$")  # Daily's error types, safe to repeat

M = TypeVar("M", bound=BaseModel)


class DailyRooms:
    """One Daily domain (its API key): a private room and a patient's link per visit."""

    name = "daily"

    def __init__(self, api_key: str, *, base_url: str = DAILY_API, timeout_s: float = 3.0,
                 early_join_min: int = 15, grace_min: int = 30,
                 client: httpx.AsyncClient | None = None) -> None:
        if not api_key:
            raise ValueError("Daily needs an API key")
        if timeout_s <= 0 or early_join_min < 0 or grace_min < 0:
            raise ValueError("Daily's timeout must be positive and its margins not negative")
        self._api_key = api_key
        self._base = base_url.rstrip("/")
        self._timeout_s = timeout_s
        self._early_join = timedelta(minutes=early_join_min)
        self._grace = timedelta(minutes=grace_min)
        self._client = client

    async def link_for(self, visit: VisitWindow) -> VideoLink:
        """The patient's link into the visit's own private room, made if need be."""
        name = room_name(visit.appointment_id)
        closes_at = visit.ends_at + self._grace
        if closes_at <= datetime.now(UTC):
            raise TelehealthError("the visit is over: its room would already be closed",
                                  retryable=False)
        nbf, exp = _unix(visit.starts_at - self._early_join), _unix(closes_at)
        async with self._session() as http:
            room = await self._open_room(http, name, nbf, exp)
            token = await self._token(http, room.name, exp)
        logger.info("Daily room {} ready for a visit", room.name)
        return VideoLink(url=f"{room.url}?t={token.token}", provider=self.name,
                         room=room.name, expires_at=datetime.fromtimestamp(exp, UTC))

    async def delete_room(self, name: str) -> None:
        """Close a cancelled visit's room; a room Daily no longer has counts as done."""
        async with self._session() as http:
            response = await self._send(http, "DELETE", f"/rooms/{quote(name, safe='')}",
                                        "delete a room")
        if response.status_code == 404:
            logger.info("Daily room {} was already gone", name)
            return
        _read(RoomDeleted, response, "delete a room")
        logger.info("Daily room {} deleted", name)

    async def _open_room(self, http: httpx.AsyncClient, name: str, nbf: int,
                         exp: int) -> Room:
        """Create the room, or read it when an earlier request already did."""
        body = {"name": name, "privacy": "private",
                "properties": {"nbf": nbf, "exp": exp, "eject_at_room_exp": True,
                               "enable_prejoin_ui": True}}
        created = await self._send(http, "POST", "/rooms", "create the visit's room", body)
        if _already_exists(created):
            existing = await self._send(http, "GET", f"/rooms/{quote(name, safe='')}",
                                        "read the visit's room")
            room = _read(Room, existing, "read the visit's room")
        else:
            room = _read(Room, created, "create the visit's room")
        if room.name != name or room.privacy != "private":
            raise TelehealthError("Daily's room for the visit is not the private room asked "
                                  "for", retryable=False)
        return room

    async def _token(self, http: httpx.AsyncClient, room: str, exp: int) -> MeetingToken:
        body = {"properties": {"room_name": room, "exp": exp, "is_owner": False}}
        answer = await self._send(http, "POST", "/meeting-tokens",
                                  "issue the patient's token", body)
        return _read(MeetingToken, answer, "issue the patient's token")

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[httpx.AsyncClient]:
        """The shared client, or one for this operation alone."""
        if self._client is not None:
            yield self._client
            return
        async with httpx.AsyncClient(follow_redirects=False) as http:
            yield http

    async def _send(self, http: httpx.AsyncClient, method: str, path: str, doing: str,
                    body: dict[str, Any] | None = None) -> httpx.Response:
        """One request; a timeout or a network failure is a retryable TelehealthError."""
        try:
            return await http.request(
                method, self._base + path, json=body, timeout=self._timeout_s,
                headers={"Authorization": f"Bearer {self._api_key}",
                         "Accept": "application/json"})
        except httpx.TimeoutException as error:
            raise _failed(f"Daily did not answer in {self._timeout_s:g} s ({doing})",
                          retryable=True) from error
        except httpx.HTTPError as error:
            raise _failed(f"cannot reach Daily to {doing} ({type(error).__name__})",
                          retryable=True) from error


def _unix(moment: datetime) -> int:
    return int(moment.timestamp())


def _already_exists(response: httpx.Response) -> bool:
    """Daily's answer when a room of that name is there already (400, invalid request)."""
    if response.status_code != 400:
        return False
    refusal = _refusal(response)
    return (refusal is not None and refusal.error == "invalid-request-error"
            and ALREADY_EXISTS in refusal.info)


def _read(model: type[M], response: httpx.Response, doing: str) -> M:
    """The answer as `model`, or the TelehealthError its status or shape means."""
    if not response.is_success:
        raise _refused(response, doing)
    try:
        return model.model_validate_json(response.content)
    except ValidationError as error:
        raise _failed(UNREADABLE, retryable=True, status=response.status_code,
                      doing=doing) from error


def _refused(response: httpx.Response, doing: str) -> TelehealthError:
    status = response.status_code
    if status in (401, 403):
        return _failed(f"Daily refused the API key (HTTP {status}, {doing})",
                       retryable=False, status=status)
    if status == 429:
        return _failed(f"Daily is limiting requests (HTTP 429, {doing})",
                       retryable=True, status=status)
    if status >= 500:
        return _failed(f"Daily is unavailable (HTTP {status}, {doing})",
                       retryable=True, status=status)
    refusal = _refusal(response)
    kind = (f", {refusal.error}" if refusal is not None and ERROR_TYPE.match(refusal.error)
            else "")
    return _failed(f"Daily refused to {doing} (HTTP {status}{kind})",
                   retryable=False, status=status)


def _refusal(response: httpx.Response) -> Refusal | None:
    try:
        return Refusal.model_validate_json(response.content)
    except ValidationError:
        return None


def _failed(reason: str, *, retryable: bool, status: int | None = None,
            doing: str | None = None) -> TelehealthError:
    """The error, logged once with what was being done (never a key, token or link)."""
    logger.warning("Daily: {}{}", reason, f" ({doing})" if doing else "")
    return TelehealthError(reason, retryable=retryable, status=status)


__all__ = ["DAILY_API", "DailyRooms"]
