"""A local fake of Cliniko's REST API: the parts services/cliniko/practice.py uses, in
the shapes the docs give (github.com/redguava/cliniko-api: readme.md, sections/
patients.md, individual_appointments.md, available_times.md, appointment_types.md,
practitioners.md, businesses.md).

In memory; a real HTTP server on 127.0.0.1 under `/v1`. Every request is recorded
(`requests`), then checked like Cliniko does: HTTP Basic with the API key (with or
without its shard suffix) as user name and no password, else 401; a `User-Agent` of
the form `NAME (EMAIL)`, else 403; `Accept: application/json`, else 406. Lists are
paginated (`page`, `per_page`, `links.next`, `total_entries`). Tests queue faults with
`fail_next` (a status such as 503 or 429, a body of the wrong shape, a slow answer).

Where the docs give a status but no body (401, 403, 422, 429, 5xx) the bodies here are
this fake's choice; nothing in the adapter depends on them beyond the status.
"""

from __future__ import annotations

import asyncio
import base64
import random
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from aiohttp import web
from multidict import CIMultiDict

from tests.local_http import serve_http

USER_AGENT = re.compile(r"^\S.* \([^()\s]+@[^()\s]+\)$")
EMAIL = re.compile(r"\A[A-Z0-9!#$%&'*+\-/=?^_`{|}~.]+@[A-Z0-9.-]+\.[A-Z]{2,63}\Z", re.I)
TIME_FRAME = "Invalid time frame definition. Please check from/to param limitations."
CANCELLATION_REASONS = {10: "Feeling Better", 20: "Condition Worse", 30: "Sick",
                        31: "COVID-19 related", 40: "Away", 50: "Other", 60: "Work"}
FILTER = re.compile(r"^(\w+):(>=|<=|!=|~~|>|<|=|~)(.*)$", re.S)
MAX_PER_PAGE = 100


@dataclass(frozen=True)
class Received:
    method: str
    path: str  # with the /v1 prefix
    query: list[tuple[str, str]]
    body: Any
    headers: Mapping[str, str]  # case-insensitive

    def params(self, name: str) -> list[str]:
        return [value for key, value in self.query if key == name]


@dataclass
class Fault:
    status: int | None  # None: answer normally, after `delay_s`
    body: Any = None
    delay_s: float = 0.0
    reset_at: datetime | None = None
    only: str | None = None  # "POST /v1/patients": the first such request; None: the next

    def applies(self, request: web.Request) -> bool:
        return self.only in (None, f"{request.method} {request.path}")


@dataclass
class FakeCliniko:
    """Cliniko's state for one test: build its directory, then point the adapter at it."""

    api_key: str = "MS0xLWZha2VjbGluaWtva2V5-au1"
    account_timezone: str = "America/Chicago"
    today: date | None = None  # the account's "today" (available times refuse earlier days)
    max_per_page: int = MAX_PER_PAGE
    base_url: str = ""
    requests: list[Received] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    businesses: dict[str, dict[str, Any]] = field(default_factory=dict)
    practitioners: dict[str, dict[str, Any]] = field(default_factory=dict)
    appointment_types: dict[str, dict[str, Any]] = field(default_factory=dict)
    patients: dict[str, dict[str, Any]] = field(default_factory=dict)
    appointments: dict[str, dict[str, Any]] = field(default_factory=dict)
    works_at: dict[str, set[str]] = field(default_factory=dict)  # business → practitioners
    offers: dict[str, set[str]] = field(default_factory=dict)  # type → practitioners
    open: dict[tuple[str, str, str], set[datetime]] = field(default_factory=dict)

    # --- Directory --------------------------------------------------------------------

    def add_business(self, name: str) -> str:
        business_id = _new_id()
        self.businesses[business_id] = {"id": business_id, "business_name": name}
        self.works_at[business_id] = set()
        return business_id

    def add_practitioner(self, first: str, last: str, *, title: str = "",
                         businesses: Iterable[str] = ()) -> str:
        practitioner_id = _new_id()
        self.practitioners[practitioner_id] = {
            "id": practitioner_id, "first_name": first, "last_name": last, "title": title}
        for business_id in businesses:
            self.works_at[business_id].add(practitioner_id)
        return practitioner_id

    def add_appointment_type(self, name: str, minutes: int, *,
                             practitioners: Iterable[str] = ()) -> str:
        type_id = _new_id()
        self.appointment_types[type_id] = {"id": type_id, "name": name,
                                           "duration_in_minutes": minutes}
        self.offers[type_id] = set(practitioners)
        return type_id

    def open_times(self, business_id: str, practitioner_id: str, type_id: str,
                   starts: Iterable[datetime]) -> None:
        self.open.setdefault((business_id, practitioner_id, type_id), set()).update(
            s.astimezone(UTC) for s in starts)

    def add_patient(self, first: str, last: str, born: date | None) -> str:
        patient_id = _new_id()
        self.patients[patient_id] = {"id": patient_id, "first_name": first, "last_name": last,
                                     "date_of_birth": born and born.isoformat(), "email": None,
                                     "address_1": "", "patient_phone_numbers": []}
        return patient_id

    def add_appointment(self, patient_id: str, practitioner_id: str, type_id: str,
                        business_id: str, starts: datetime, *, notes: str | None = None) -> str:
        """An individual appointment (ends after the type's duration, as Cliniko sets it)."""
        minutes = self.appointment_types[type_id]["duration_in_minutes"]
        appointment_id = _new_id()
        self.appointments[appointment_id] = {
            "id": appointment_id, "patient_id": patient_id, "practitioner_id": practitioner_id,
            "appointment_type_id": type_id, "business_id": business_id,
            "starts_at": _stamp(starts), "ends_at": _stamp(starts + timedelta(minutes=minutes)),
            "cancelled_at": None, "cancellation_reason": None, "cancellation_note": None,
            "deleted_at": None, "notes": notes,
        }
        return appointment_id

    # --- Faults and inspection ----------------------------------------------------------

    def fail_next(self, status: int | None, *, body: Any = None, delay_s: float = 0.0,
                  reset_at: datetime | None = None, only: str | None = None,
                  count: int = 1) -> None:
        """The next request (or the next `only="METHOD /v1/path"`) gets `status` (None:
        its normal answer, `delay_s` late)."""
        self.faults.extend(Fault(status, body, delay_s, reset_at, only) for _ in range(count))

    def received(self, method: str, path: str | None = None) -> list[Received]:
        return [r for r in self.requests
                if r.method == method and (path is None or r.path == path)]

    # --- HTTP -------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json() if request.can_read_body else None
        self.requests.append(Received(request.method, request.path, list(request.query.items()),
                                      body, CIMultiDict(request.headers)))
        fault = next((f for f in self.faults if f.applies(request)), None)
        if fault:
            self.faults.remove(fault)
        if fault and fault.status is not None:
            await asyncio.sleep(fault.delay_s)
            return _fault(fault)
        refused = self._refused(request)
        response = refused or self._route(request, body)
        if fault:  # a slow answer: the work is done, the reply comes late (or never)
            await asyncio.sleep(fault.delay_s)
        return response

    def _refused(self, request: web.Request) -> web.Response | None:
        scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
        try:
            user, _, password = base64.b64decode(encoded).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            user, password = "", "?"
        key = self.api_key.rpartition("-")[0] or self.api_key
        if scheme != "Basic" or password or user not in (self.api_key, key):
            return web.Response(status=401, text="HTTP Basic: Access denied.\n",
                                headers={"WWW-Authenticate": 'Basic realm="Application"'})
        if not USER_AGENT.match(request.headers.get("User-Agent", "")):
            return web.json_response({"message": "Send a User-Agent with your application's "
                                      "name and a contact email."}, status=403)
        if "application/json" not in request.headers.get("Accept", ""):
            return web.json_response({"message": "Accept application/json"}, status=406)
        return None

    def _route(self, request: web.Request, body: Any) -> web.Response:
        path, method = request.path.removeprefix("/v1").rstrip("/"), request.method
        for pattern, verb, handler in self._routes():
            match = re.fullmatch(pattern, path)
            if match and verb == method:
                return handler(request, body, *match.groups())
        return _not_found()

    def _routes(self) -> list[tuple[str, str, Any]]:
        n = r"(\d+)"
        return [
            (r"/appointment_types", "GET", self._types),
            (rf"/appointment_types/{n}/practitioners", "GET", self._type_staff),
            (r"/businesses", "GET", self._businesses),
            (rf"/businesses/{n}/practitioners", "GET", self._business_staff),
            (r"/practitioners", "GET", self._practitioners),
            (rf"/businesses/{n}/practitioners/{n}/appointment_types/{n}/available_times", "GET",
             self._available_times),
            (r"/patients", "GET", self._patients),
            (r"/patients", "POST", self._create_patient),
            (rf"/patients/{n}", "GET", self._patient),
            (rf"/patients/{n}", "PUT", self._update_patient),
            (r"/individual_appointments", "GET", self._appointments),
            (r"/individual_appointments", "POST", self._create_appointment),
            (rf"/individual_appointments/{n}", "GET", self._appointment),
            (rf"/individual_appointments/{n}/cancel", "PATCH", self._cancel),
        ]

    # --- Directory routes ---------------------------------------------------------------

    def _types(self, request: web.Request, _body: Any) -> web.Response:
        return self._page(request, "appointment_types",
                          [self._type_json(t) for t in self.appointment_types.values()])

    def _type_staff(self, request: web.Request, _body: Any, type_id: str) -> web.Response:
        if type_id not in self.appointment_types:
            return _not_found()
        return self._page(request, "practitioners", [self._practitioner_json(p) for p in
                                                     sorted(self.offers[type_id])])

    def _businesses(self, request: web.Request, _body: Any) -> web.Response:
        return self._page(request, "businesses",
                          [self._business_json(b) for b in self.businesses])

    def _business_staff(self, request: web.Request, _body: Any, business_id: str
                        ) -> web.Response:
        if business_id not in self.businesses:
            return _not_found()
        return self._page(request, "practitioners", [self._practitioner_json(p) for p in
                                                     sorted(self.works_at[business_id])])

    def _practitioners(self, request: web.Request, _body: Any) -> web.Response:
        return self._page(request, "practitioners",
                          [self._practitioner_json(p) for p in self.practitioners])

    def _available_times(self, request: web.Request, _body: Any, business_id: str,
                         practitioner_id: str, type_id: str) -> web.Response:
        if (practitioner_id not in self.works_at.get(business_id, ())
                or practitioner_id not in self.offers.get(type_id, ())):
            return _not_found()
        zone = ZoneInfo(self.account_timezone)
        try:
            first = date.fromisoformat(request.query["from"])
            last = date.fromisoformat(request.query["to"])
        except (KeyError, ValueError):
            return web.Response(status=400, text=TIME_FRAME)
        today = self.today or datetime.now(zone).date()
        if last < first or (last - first).days > 6 or first < today:
            return web.Response(status=400, text=TIME_FRAME)
        start = datetime.combine(first, time(), zone)
        end = datetime.combine(last + timedelta(days=1), time(), zone)
        taken = {a["starts_at"] for a in self.appointments.values()
                 if a["practitioner_id"] == practitioner_id and not a["cancelled_at"]}
        times = sorted(t for t in self.open.get((business_id, practitioner_id, type_id), ())
                       if start <= t < end and _stamp(t) not in taken)
        return self._page(request, "available_times",
                          [{"appointment_start": _stamp(t)} for t in times])

    # --- Patients ---------------------------------------------------------------------

    def _patients(self, request: web.Request, _body: Any) -> web.Response:
        found = _filtered(self.patients.values(), request)
        return self._page(request, "patients", [self._patient_json(p) for p in found])

    def _patient(self, _request: web.Request, _body: Any, patient_id: str) -> web.Response:
        if patient_id not in self.patients:
            return _not_found()
        return web.json_response(self._patient_json(self.patients[patient_id]))

    def _create_patient(self, _request: web.Request, body: Any) -> web.Response:
        body = body if isinstance(body, dict) else {}
        errors = _patient_errors({"first_name": None, "last_name": None, **body})
        if errors:
            return _unprocessable(errors)
        patient_id = self.add_patient(body["first_name"], body["last_name"], None)
        self.patients[patient_id].update(_patient_fields(body))
        return web.json_response(self._patient_json(self.patients[patient_id]), status=201,
                                 headers={"Location": f"{self.base_url}/patients/{patient_id}"})

    def _update_patient(self, _request: web.Request, body: Any, patient_id: str
                        ) -> web.Response:
        if patient_id not in self.patients:
            return _not_found()
        body = body if isinstance(body, dict) else {}
        errors = _patient_errors({**self.patients[patient_id], **body})
        if errors:
            return _unprocessable(errors)
        self.patients[patient_id].update(_patient_fields(body))
        return web.json_response(self._patient_json(self.patients[patient_id]))

    # --- Individual appointments ----------------------------------------------------------

    def _appointments(self, request: web.Request, _body: Any) -> web.Response:
        found = _filtered(self.appointments.values(), request)
        return self._page(request, "individual_appointments",
                          [self._appointment_json(a) for a in found])

    def _appointment(self, _request: web.Request, _body: Any, appointment_id: str
                     ) -> web.Response:
        if appointment_id not in self.appointments:
            return _not_found()
        return web.json_response(self._appointment_json(self.appointments[appointment_id]))

    def _create_appointment(self, _request: web.Request, body: Any) -> web.Response:
        body = body if isinstance(body, dict) else {}
        known = {"patient_id": self.patients, "practitioner_id": self.practitioners,
                 "appointment_type_id": self.appointment_types, "business_id": self.businesses}
        errors = {name: ["can't be blank"] for name in (*known, "starts_at") if not body.get(name)}
        errors |= {name: ["does not exist"] for name, table in known.items()
                   if body.get(name) and str(body[name]) not in table}
        try:
            starts = datetime.fromisoformat(str(body.get("starts_at")))
        except ValueError:
            errors.setdefault("starts_at", ["is invalid"])
        if errors:
            return _unprocessable(errors)
        appointment_id = self.add_appointment(
            *(str(body[name]) for name in known), starts, notes=body.get("notes"))
        return web.json_response(
            self._appointment_json(self.appointments[appointment_id]), status=201,
            headers={"Location": f"{self.base_url}/individual_appointments/{appointment_id}"})

    def _cancel(self, _request: web.Request, body: Any, appointment_id: str) -> web.Response:
        appointment = self.appointments.get(appointment_id)
        if appointment is None:
            return _not_found()
        reason = body.get("cancellation_reason") if isinstance(body, dict) else None
        if reason not in CANCELLATION_REASONS:
            return _unprocessable({"cancellation_reason": ["is not included in the list"]})
        if appointment["cancelled_at"]:
            return _unprocessable({"base": ["The appointment is already cancelled"]})
        appointment.update(cancelled_at=_stamp(datetime.now(UTC)), cancellation_reason=reason,
                           cancellation_note=body.get("cancellation_note"))
        return web.Response(status=204)

    # --- Shapes -----------------------------------------------------------------------

    def _page(self, request: web.Request, key: str, items: list[dict[str, Any]]
              ) -> web.Response:
        try:
            page = max(1, int(request.query.get("page", 1)))
            per_page = min(int(request.query.get("per_page", 50)), self.max_per_page)
        except ValueError:
            return web.json_response({"message": "Bad page"}, status=400)
        chunk = items[(page - 1) * per_page: page * per_page]
        kept = [(k, v) for k, v in request.query.items() if k not in ("page", "per_page")]

        def link(number: int) -> str:
            return str(request.url.with_query([*kept, ("page", str(number)),
                                               ("per_page", str(per_page))]))

        links = {"self": link(page)}
        if page * per_page < len(items):
            links["next"] = link(page + 1)
        if page > 1:
            links["previous"] = link(page - 1)
        return web.json_response({key: chunk, "total_entries": len(items), "links": links})

    def _link(self, path: str) -> dict[str, Any]:
        return {"links": {"self": f"{self.base_url}/{path}"}}

    def _type_json(self, kind: dict[str, Any]) -> dict[str, Any]:
        return {**kind, "category": None, "color": "#00FF00", "description": None,
                "max_attendees": 1, "show_in_online_bookings": True,
                "practitioners": self._link(f"appointment_types/{kind['id']}/practitioners"),
                **self._link(f"appointment_types/{kind['id']}")}

    def _business_json(self, business_id: str) -> dict[str, Any]:
        return {**self.businesses[business_id], "address_1": "", "city": "", "country": "",
                "show_in_online_bookings": True,
                "practitioners": self._link(f"businesses/{business_id}/practitioners"),
                **self._link(f"businesses/{business_id}")}

    def _practitioner_json(self, practitioner_id: str) -> dict[str, Any]:
        person = self.practitioners[practitioner_id]
        return {**person, "label": f"{person['first_name']} {person['last_name']}",
                "designation": "", "description": None, "show_in_online_bookings": True,
                "appointments": self._link(f"practitioners/{practitioner_id}/appointments"),
                **self._link(f"practitioners/{practitioner_id}")}

    def _patient_json(self, patient: dict[str, Any]) -> dict[str, Any]:
        return {**patient, "address_2": "", "address_3": "", "archived_at": None,
                "deleted_at": None, "time_zone": None,
                "appointments": self._link(f"patients/{patient['id']}/appointments"),
                **self._link(f"patients/{patient['id']}")}

    def _appointment_json(self, appointment: dict[str, Any]) -> dict[str, Any]:
        patient = self.patients.get(appointment["patient_id"], {})
        reason = appointment["cancellation_reason"]
        return {
            "id": appointment["id"], "starts_at": appointment["starts_at"],
            "ends_at": appointment["ends_at"], "cancelled_at": appointment["cancelled_at"],
            "cancellation_reason": reason, "cancellation_note": appointment["cancellation_note"],
            "cancellation_reason_description": CANCELLATION_REASONS.get(reason, ""),
            "deleted_at": appointment["deleted_at"], "notes": appointment["notes"],
            "did_not_arrive": False, "patient_arrived": False,
            "patient_name": f"{patient.get('first_name', '')} {patient.get('last_name', '')}",
            "appointment_type": self._link(
                f"appointment_types/{appointment['appointment_type_id']}"),
            "business": self._link(f"businesses/{appointment['business_id']}"),
            "practitioner": self._link(f"practitioners/{appointment['practitioner_id']}"),
            "patient": self._link(f"patients/{appointment['patient_id']}"),
            **self._link(f"individual_appointments/{appointment['id']}"),
        }


@asynccontextmanager
async def serve_cliniko(fake: FakeCliniko) -> AsyncIterator[str]:
    """Serve the fake on a free loopback port; yields its API base URL (`…/v1`)."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    async with serve_http(app) as root:
        fake.base_url = f"{root}/v1"
        yield fake.base_url


def _new_id() -> str:
    """Cliniko's ids are 64-bit numbers sent as strings; random ones never collide with
    another test's in the shared database's external_refs."""
    return str(random.randrange(10**17, 10**18))


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fault(fault: Fault) -> web.Response:
    if fault.status == 429:
        reset = fault.reset_at or datetime.now(UTC) + timedelta(seconds=30)
        return web.Response(status=429, text="Rate limit exceeded",
                            headers={"X-RateLimit-Reset": str(int(reset.timestamp()))})
    if fault.body is not None:
        return web.json_response(fault.body, status=fault.status or 200)
    return web.json_response({"message": "Something went wrong"}, status=fault.status or 500)


def _not_found() -> web.Response:
    return web.json_response({"message": "Not found"}, status=404)


def _unprocessable(errors: dict[str, list[str]]) -> web.Response:
    return web.json_response({"message": "Validation failed", "errors": errors}, status=422)


def _patient_errors(values: dict[str, Any]) -> dict[str, list[str]]:
    errors = {name: ["can't be blank"] for name in ("first_name", "last_name")
              if not values.get(name)}
    if values.get("email") and not EMAIL.match(values["email"]):
        errors["email"] = ["is invalid"]
    return errors


def _patient_fields(body: dict[str, Any]) -> dict[str, Any]:
    names = ("first_name", "last_name", "date_of_birth", "email", "address_1", "title",
             "patient_phone_numbers", "time_zone")
    return {name: body[name] for name in names if name in body}


def _filtered(rows: Iterable[dict[str, Any]], request: web.Request) -> list[dict[str, Any]]:
    """Rows matching every `q[]` (or `q`) filter `field:OPvalue` (docs: Filtering Results)."""
    filters = [FILTER.match(q) for q in request.query.getall("q[]", [])
               + request.query.getall("q", [])]
    found = []
    for row in rows:
        if all(f and _holds(str(row.get(f[1]) or ""), f[2], f[3]) for f in filters):
            found.append(row)
    return found


def _holds(value: str, operator: str, wanted: str) -> bool:
    if operator == "~":
        return wanted.casefold() in value.casefold()
    if operator == "~~":
        return re.fullmatch(re.escape(wanted).replace("%", ".*"), value, re.I) is not None
    return {"=": value == wanted, "!=": value != wanted, ">": value > wanted,
            "<": value < wanted, ">=": value >= wanted, "<=": value <= wanted}[operator]
