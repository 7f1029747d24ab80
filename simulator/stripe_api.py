"""A local stand-in for the parts of Stripe's API that services/payments uses, in the
shapes Stripe documents (docs.stripe.com/api: prices, payment links, Checkout Sessions,
errors, idempotent requests; docs.stripe.com/webhooks: signatures).

In memory; a real HTTP server on 127.0.0.1 under `/v1`. Every request is recorded
(`requests`: method, path, form or query with Stripe's bracket keys, Idempotency-Key;
never the key it was sent with), then checked like Stripe does: the secret key as a
Bearer token (or as the user name of HTTP Basic), else 401 with Stripe's error body
(`{"error": {"type", "message"}}`, the key masked as Stripe masks it). Bodies are
form-encoded with bracket keys (`product_data[name]`, `line_items[0][price]`); a missing
parameter is 400 `parameter_missing` naming it, an unknown price 400 `resource_missing`.

- `POST /v1/prices`: a one-time price (`currency`, `unit_amount`, and `product` or
  `product_data[name]`, which makes the product).
- `POST /v1/payment_links`: a link (`line_items[i][price]`, `line_items[i][quantity]`,
  `metadata[...]`, `restrictions[completed_sessions][limit]`) at
  `https://buy.stripe.com/test_…`; it goes inactive once its limit of completed sessions
  is reached.
- `GET /v1/checkout/sessions`: a list object, newest first, filtered by `payment_link`,
  paged by `limit` (1..100, 10 by default) and `starting_after`.

Idempotency as Stripe documents it: a POST's `Idempotency-Key` keeps the first answer
once the request got past validation; the same key with the same parameters replays it
(`Idempotent-Replayed: true`), with other parameters or another path is 400
`idempotency_error`.

Tests play the patient (`open_session`: they opened the link; `pay`: they paid, and a
signed `checkout.session.completed` event goes to each endpoint given to `webhook_to`)
and the network (`fail_next`, `stall_next`, `junk_next`).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import re
import secrets
import string
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from simulator.loopback import serve_on_loopback

API = "/v1"
# The API version events are rendered in (the one the pinned SDK asks for).
API_VERSION = "2026-10-28.endive"
MAX_KEY_LENGTH = 255  # an Idempotency-Key's longest
MAX_LIMIT = 100  # the largest page a list returns
DEFAULT_LIMIT = 10
SESSION_LIFETIME_S = 24 * 3600  # an open Checkout Session expires after a day
WEBHOOK_TIMEOUT_S = 10.0
KEY_PREFIX = re.compile(r"^(?:sk|rk|pk)_(?:test|live)_")
LINE_ITEM = re.compile(r"^line_items\[(\d+)\]\[price\]$")
METADATA = re.compile(r"^metadata\[(.+)\]$")
ALPHANUMERIC = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Received:
    """A request the stand-in received: `form` is the body of a POST, the query of a GET."""

    method: str
    path: str
    form: dict[str, str]
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Fault:
    """What the next request gets instead of its answer: after `stall_s`, Stripe's error
    body (`status`, `error_type`), a body that is not JSON (`junk`), or else its answer."""

    stall_s: float = 0.0
    status: int | None = None
    error_type: str = "api_error"
    junk: bool = False


@dataclass(frozen=True)
class Delivery:
    """An event posted to a webhook endpoint and the endpoint's answer (None: no answer)."""

    url: str
    event: dict[str, Any]
    status: int | None


@dataclass(frozen=True)
class _Saved:
    """The first answer to an idempotency key, and what it answered."""

    request: tuple[str, str, tuple[tuple[str, str], ...]]
    status: int
    body: dict[str, Any]


class Refused(Exception):
    """A request Stripe refuses: the status and Stripe's error body."""

    def __init__(self, status: int, error_type: str, message: str, *,
                 code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = error_body(error_type, message, code=code, param=param)


@dataclass
class FakeStripe:
    """One Stripe account in test mode for one test: point `StripeLinks` at it with its
    `api_key`, check events with its `webhook_secret`."""

    api_key: str = field(default_factory=lambda: "sk_test_" + secrets.token_hex(12))
    webhook_secret: str = field(default_factory=lambda: "whsec_" + secrets.token_hex(16))
    base_url: str = ""
    products: dict[str, dict[str, Any]] = field(default_factory=dict)  # by id
    prices: dict[str, dict[str, Any]] = field(default_factory=dict)
    links: dict[str, dict[str, Any]] = field(default_factory=dict)
    line_items: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # by link
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)  # oldest first
    requests: list[Received] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    webhook_urls: list[str] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    _saved: dict[str, _Saved] = field(default_factory=dict)

    # --- What tests arrange ---------------------------------------------------------

    def fail_next(self, status: int, error_type: str = "api_error") -> None:
        """The next request is refused with `status` and Stripe's error body."""
        self.faults.append(Fault(status=status, error_type=error_type))

    def stall_next(self, seconds: float) -> None:
        """The next request is answered only after `seconds`."""
        self.faults.append(Fault(stall_s=seconds))

    def junk_next(self) -> None:
        """The next request is answered 200 with a page that is not JSON (a proxy's)."""
        self.faults.append(Fault(junk=True))

    def webhook_to(self, url: str) -> None:
        """An endpoint that gets the account's events, signed with `webhook_secret`."""
        self.webhook_urls.append(url)

    def posted(self, path: str) -> list[Received]:
        """The POSTs to `path` (e.g. `/v1/prices`), in order."""
        return [r for r in self.requests if r.method == "POST" and r.path == path]

    def link(self, link_id_or_url: str) -> dict[str, Any]:
        """A payment link by its id (plink_…) or its URL."""
        for link in self.links.values():
            if link_id_or_url in (link["id"], link["url"]):
                return link
        raise KeyError(f"no payment link {link_id_or_url}")

    def open_session(self, link_id_or_url: str) -> dict[str, Any]:
        """The patient opened the link and has not paid: an open, unpaid session."""
        return self._start_session(self.link(link_id_or_url), paid=False, amount_minor=None)

    async def pay(self, link_id_or_url: str, amount_minor: int | None = None) -> dict[str, Any]:
        """The patient paid through the link (its whole amount unless told): a completed,
        paid session, and `checkout.session.completed` posted to each webhook endpoint."""
        link = self.link(link_id_or_url)
        session = self._start_session(link, paid=True, amount_minor=amount_minor)
        restriction = (link["restrictions"] or {}).get("completed_sessions")
        if restriction is not None:
            restriction["count"] += 1
            if restriction["count"] >= restriction["limit"]:
                link["active"] = False
        await self._deliver("checkout.session.completed", session)
        return session

    def sign(self, payload: bytes, *, at: int | None = None, secret: str | None = None) -> str:
        """A `Stripe-Signature` header for `payload` as Stripe signs events."""
        timestamp = int(time.time()) if at is None else at
        digest = hmac.new((secret or self.webhook_secret).encode(),
                          f"{timestamp}.".encode() + payload, hashlib.sha256).hexdigest()
        return f"t={timestamp},v1={digest}"

    # --- HTTP -------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.Response:
        if request.method == "POST":
            fields = tuple((k, str(v)) for k, v in (await request.post()).items())
        else:
            fields = tuple(request.query.items())
        key = request.headers.get("Idempotency-Key") if request.method == "POST" else None
        self.requests.append(Received(request.method, request.path, dict(fields), key))
        if self.faults:
            fault = self.faults.pop(0)
            await asyncio.sleep(fault.stall_s)
            if fault.junk:
                return web.Response(text="<html><body>502 Bad Gateway</body></html>",
                                    content_type="text/html")
            if fault.status is not None:
                return _answer(fault.status, error_body(fault.error_type, "injected fault"))
        try:
            self._authenticate(request)
            sent = (request.method, request.path, tuple(sorted(fields)))
            if key is not None and (replay := self._replay(key, sent)) is not None:
                return replay
            status, body = self._route(request.method, request.path, dict(fields))
        except Refused as refused:
            return _answer(refused.status, refused.body, key=key)
        if key is not None:
            self._saved[key] = _Saved(sent, status, body)
        return _answer(status, body, key=key)

    def _authenticate(self, request: web.Request) -> None:
        given = _given_key(request.headers.get("Authorization", ""))
        if not given:
            raise Refused(401, "invalid_request_error",
                          "You did not provide an API key. You need to provide your API key "
                          "in the Authorization header, using Bearer auth (e.g. "
                          "'Authorization: Bearer YOUR_SECRET_KEY').")
        if not hmac.compare_digest(given.encode(), self.api_key.encode()):
            raise Refused(401, "invalid_request_error",
                          f"Invalid API Key provided: {mask_key(given)}")

    def _replay(self, key: str, sent: tuple[str, str, tuple[tuple[str, str], ...]]
                ) -> web.Response | None:
        """The saved answer to `key`, when the request is the one it answered."""
        if len(key) > MAX_KEY_LENGTH:
            raise Refused(400, "invalid_request_error",
                          f"Idempotency-Key is longer than {MAX_KEY_LENGTH} characters.")
        saved = self._saved.get(key)
        if saved is None:
            return None
        if saved.request != sent:
            raise Refused(400, "idempotency_error",
                          f"Keys for idempotent requests can only be used with the same "
                          f"parameters they were first used with. Use a key other than "
                          f"'{key}' for a different request.")
        return _answer(saved.status, saved.body, key=key, replayed=True)

    def _route(self, method: str, path: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if (method, path) == ("POST", f"{API}/prices"):
            return 200, self._create_price(form)
        if (method, path) == ("POST", f"{API}/payment_links"):
            return 200, self._create_link(form)
        if (method, path) == ("GET", f"{API}/checkout/sessions"):
            return 200, self._list_sessions(form)
        raise Refused(404, "invalid_request_error",
                      f"Unrecognized request URL ({method}: {path}). Please see "
                      "https://docs.stripe.com/api.")

    # --- Prices, payment links, sessions ---------------------------------------------

    def _create_price(self, form: dict[str, str]) -> dict[str, Any]:
        currency = _required(form, "currency").lower()
        if not re.fullmatch(r"[a-z]{3}", currency):
            raise Refused(400, "invalid_request_error", f"Invalid currency: {currency}.",
                          param="currency")
        amount = _integer(form, "unit_amount", _required(form, "unit_amount"), least=0)
        if "product" in form:
            product = form["product"]
            if product not in self.products:
                raise Refused(400, "invalid_request_error", f"No such product: '{product}'",
                              code="resource_missing", param="product")
        elif "product_data[name]" in form:
            product = self._create_product(form["product_data[name]"])
        else:
            raise _missing("product")
        price = {
            "id": _id("price"), "object": "price", "active": True, "billing_scheme": "per_unit",
            "created": int(time.time()), "currency": currency, "custom_unit_amount": None,
            "livemode": False, "lookup_key": None, "metadata": {}, "nickname": None,
            "product": product, "recurring": None, "tax_behavior": "unspecified",
            "tiers_mode": None, "transform_quantity": None, "type": "one_time",
            "unit_amount": amount, "unit_amount_decimal": str(amount),
        }
        self.prices[price["id"]] = price
        return price

    def _create_product(self, name: str) -> str:
        if not name:
            raise _missing("product_data[name]")
        product = {"id": _id("prod"), "object": "product", "active": True,
                   "created": int(time.time()), "livemode": False, "metadata": {}, "name": name,
                   "type": "service"}
        self.products[product["id"]] = product
        return product["id"]

    def _create_link(self, form: dict[str, str]) -> dict[str, Any]:
        indexes = sorted(int(m.group(1)) for name in form if (m := LINE_ITEM.match(name)))
        if not indexes:
            raise _missing("line_items")
        items: list[tuple[str, int]] = []
        for index in indexes:
            price = form[f"line_items[{index}][price]"]
            if price not in self.prices:
                raise Refused(400, "invalid_request_error", f"No such price: '{price}'",
                              code="resource_missing", param=f"line_items[{index}][price]")
            name = f"line_items[{index}][quantity]"
            items.append((price, _integer(form, name, _required(form, name), least=1)))
        restrictions = None
        if "restrictions[completed_sessions][limit]" in form:
            name = "restrictions[completed_sessions][limit]"
            restrictions = {"completed_sessions": {
                "count": 0, "limit": _integer(form, name, form[name], least=1)}}
        link_id = _id("plink")
        link = {
            "id": link_id, "object": "payment_link", "active": True,
            "after_completion": {"hosted_confirmation": {"custom_message": None},
                                 "type": "hosted_confirmation"},
            "allow_promotion_codes": False, "application_fee_amount": None,
            "application_fee_percent": None,
            "automatic_tax": {"enabled": False, "liability": None},
            "billing_address_collection": "auto",
            "currency": self.prices[items[0][0]]["currency"],
            "customer_creation": "if_required", "livemode": False,
            "metadata": {m.group(1): value for name, value in form.items()
                         if (m := METADATA.match(name))},
            "payment_method_types": None, "restrictions": restrictions,
            "url": f"https://buy.stripe.com/test_{_token(22)}",
        }
        self.links[link_id] = link
        self.line_items[link_id] = items
        return link

    def _list_sessions(self, query: dict[str, str]) -> dict[str, Any]:
        limit = _integer(query, "limit", query.get("limit", str(DEFAULT_LIMIT)), least=1)
        if limit > MAX_LIMIT:
            raise Refused(400, "invalid_request_error",
                          f"This value must be less than or equal to {MAX_LIMIT}.",
                          param="limit")
        found = [s for s in reversed(self.sessions.values())
                 if query.get("payment_link") in (None, s["payment_link"])]
        after = query.get("starting_after")
        if after is not None:
            ids = [s["id"] for s in found]
            if after not in ids:
                raise Refused(400, "invalid_request_error",
                              f"No such checkout.session: '{after}'",
                              code="resource_missing", param="starting_after")
            found = found[ids.index(after) + 1:]
        return {"object": "list", "data": found[:limit], "has_more": len(found) > limit,
                "url": f"{API}/checkout/sessions"}

    def _start_session(self, link: dict[str, Any], *, paid: bool,
                       amount_minor: int | None) -> dict[str, Any]:
        if not link["active"]:
            raise ValueError(f"payment link {link['id']} is no longer active")
        total = sum(self.prices[price]["unit_amount"] * quantity
                    for price, quantity in self.line_items[link["id"]])
        amount = total if amount_minor is None else amount_minor
        now = int(time.time())
        session_id = _id("cs_test")
        session = {
            "id": session_id, "object": "checkout.session", "amount_subtotal": amount,
            "amount_total": amount, "cancel_url": None, "client_reference_id": None,
            "created": now, "currency": link["currency"], "customer": None,
            "customer_details": None, "expires_at": now + SESSION_LIFETIME_S,
            "livemode": False, "metadata": {}, "mode": "payment",
            "payment_intent": _id("pi") if paid else None, "payment_link": link["id"],
            "payment_status": "paid" if paid else "unpaid",
            "status": "complete" if paid else "open", "success_url": None,
            "url": None if paid else f"https://checkout.stripe.com/c/pay/{session_id}",
        }
        self.sessions[session_id] = session
        return session

    # --- Webhooks ---------------------------------------------------------------------

    async def _deliver(self, kind: str, data: dict[str, Any]) -> None:
        """The event posted to each endpoint, signed, as Stripe posts it."""
        event = {"id": _id("evt"), "object": "event", "api_version": API_VERSION,
                 "created": int(time.time()), "data": {"object": data}, "livemode": False,
                 "pending_webhooks": len(self.webhook_urls),
                 "request": {"id": None, "idempotency_key": None}, "type": kind}
        payload = json.dumps(event).encode()
        timeout = aiohttp.ClientTimeout(total=WEBHOOK_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            for url in self.webhook_urls:
                headers = {"Content-Type": "application/json; charset=utf-8",
                           "Stripe-Signature": self.sign(payload)}
                try:
                    async with http.post(url, data=payload, headers=headers) as answer:
                        status: int | None = answer.status
                except (aiohttp.ClientError, TimeoutError):
                    status = None
                self.deliveries.append(Delivery(url, event, status))


def error_body(error_type: str, message: str, *, code: str | None = None,
               param: str | None = None) -> dict[str, Any]:
    """Stripe's error body: `type` and `message`, with `code` and `param` when known."""
    error: dict[str, Any] = {"type": error_type, "message": message}
    if code is not None:
        error["code"] = code
    if param is not None:
        error["param"] = param
    return {"error": error}


def mask_key(key: str) -> str:
    """A key as Stripe quotes it back: its kind, then stars, then its last four."""
    prefix = match.group(0) if (match := KEY_PREFIX.match(key)) else ""
    rest = key[len(prefix):]
    shown = rest[-4:] if len(rest) > 8 else ""
    return prefix + "*" * (len(rest) - len(shown)) + shown


def _answer(status: int, body: dict[str, Any], *, key: str | None = None,
            replayed: bool = False) -> web.Response:
    headers = {"Request-Id": _id("req"), "Stripe-Version": API_VERSION}
    if key is not None:
        headers["Idempotency-Key"] = key
    if replayed:
        headers["Idempotent-Replayed"] = "true"
    return web.json_response(body, status=status, headers=headers)


def _missing(param: str) -> Refused:
    return Refused(400, "invalid_request_error", f"Missing required param: {param}.",
                   code="parameter_missing", param=param)


def _required(form: dict[str, str], name: str) -> str:
    if not form.get(name):
        raise _missing(name)
    return form[name]


def _integer(form: dict[str, str], name: str, value: str, *, least: int) -> int:
    if not re.fullmatch(r"-?[0-9]+", value):
        raise Refused(400, "invalid_request_error", f"Invalid integer: {value}",
                      code="parameter_invalid_integer", param=name)
    if int(value) < least:
        raise Refused(400, "invalid_request_error",
                      f"This value must be greater than or equal to {least}.", param=name)
    return int(value)


def _given_key(authorization: str) -> str:
    """The key a request was sent with: a Bearer token, or the user name of HTTP Basic
    (`curl -u KEY:`)."""
    scheme, _, credential = authorization.partition(" ")
    if scheme == "Bearer":
        return credential
    if scheme != "Basic":
        return ""
    try:
        return base64.b64decode(credential, validate=True).decode().partition(":")[0]
    except (ValueError, UnicodeDecodeError):
        return ""


def _id(prefix: str) -> str:
    return f"{prefix}_{_token(24)}"


def _token(length: int) -> str:
    return "".join(secrets.choice(ALPHANUMERIC) for _ in range(length))


@asynccontextmanager
async def serve_stripe(fake: FakeStripe, port: int = 0) -> AsyncIterator[str]:
    """Serve the stand-in on a loopback port (a free one by default); yields the base URL
    to point the adapter at (Stripe's is `https://api.stripe.com`)."""
    async with serve_on_loopback(fake.handle, port) as url:
        fake.base_url = url
        yield url


__all__ = ["Delivery", "FakeStripe", "Received", "Refused", "error_body", "mask_key",
           "serve_stripe"]
