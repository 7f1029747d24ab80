"""The stand-in's Conferences and Participants resources (simulator/twilio_rest.py serves
them), in the shapes Twilio documents (twilio.com/docs/voice/api/conference-resource,
/docs/voice/api/conference-participant-resource).

`GET Conferences.json` lists every conference, newest first, by `FriendlyName` and
`Status` (`init`, `in-progress`, `completed`); `GET Conferences/{CF}.json` reads one and
`POST Conferences/{CF}.json` with `Status=completed` ends it. `GET
Conferences/{CF}/Participants.json` lists the participants in it now (by `Muted`,
`Hold`; none once it has ended: Twilio keeps no history there), `GET` / `POST
Conferences/{CF}/Participants/{CA}.json` read one and update it with `Muted` and `Hold`
(`true` / `false`). An unknown conference, or a participant not in it, is 404 (20404).
"""

from __future__ import annotations

import re

from aiohttp import web

from simulator.twilio_api_shapes import error, page
from simulator.twilio_conference import ConferenceBridge, ConferenceState, Participant


def conference_route(bridge: ConferenceBridge, request: web.Request, form: dict[str, str],
                     account: str, api: str) -> web.Response | None:
    """The answer to a Conferences request under `account` (the account's escaped path);
    None when the request is not about conferences."""
    path, method = request.path, request.method
    if re.fullmatch(rf"{account}/Conferences\.json", path) and method == "GET":
        found = bridge.listed(request.query.get("FriendlyName"), request.query.get("Status"))
        return page(request, "conferences", [c.resource(api) for c in found])
    one = re.fullmatch(rf"{account}/Conferences/(CF\w+)(/Participants(?:/(CA\w+))?)?\.json",
                       path)
    if one is None:
        return None
    conference = bridge.find(one.group(1))
    if conference is None:
        return _not_found(request)
    if one.group(2) is None:
        return _conference(bridge, conference, method, form, api)
    if one.group(3) is None:
        return _participants(request, conference, api) if method == "GET" else None
    participant = conference.participants.get(one.group(3))
    if participant is None or not participant.present:
        return _not_found(request)
    if method == "GET":
        return web.json_response(participant.resource(api))
    return _update(bridge, conference, participant, form, api)


def _conference(bridge: ConferenceBridge, conference: ConferenceState, method: str,
                form: dict[str, str], api: str) -> web.Response:
    if method == "POST" and "Status" in form:
        if form["Status"] != "completed":
            return error(400, 20001, "Status must be completed")
        bridge.end(conference)
    return web.json_response(conference.resource(api))


def _participants(request: web.Request, conference: ConferenceState, api: str) -> web.Response:
    query = request.query
    found = [p for p in conference.present()
             if ("Muted" not in query or p.muted == (query["Muted"].lower() == "true"))
             and ("Hold" not in query or p.hold == (query["Hold"].lower() == "true"))]
    return page(request, "participants", [p.resource(api) for p in found])


def _update(bridge: ConferenceBridge, conference: ConferenceState, participant: Participant,
            form: dict[str, str], api: str) -> web.Response:
    changes: dict[str, bool] = {}
    for name in ("Muted", "Hold"):
        if name in form:
            value = form[name].strip().lower()
            if value not in ("true", "false"):
                return error(400, 20001, f"{name} must be true or false")
            changes[name.lower()] = value == "true"
    bridge.update(conference, participant, **changes)
    return web.json_response(participant.resource(api))


def _not_found(request: web.Request) -> web.Response:
    return error(404, 20404, f"The requested resource {request.path} was not found")
