"""Twilio numbers: `python main.py twilio connect +1NUMBER --workspace W [--clinic NAME]`.

Points the Twilio number's voice webhook at `PUBLIC_URL/voice/answer` and its status
callback at `PUBLIC_URL/voice/status` (both POST) through Twilio's REST API, then records
the number on the clinic (`service_numbers`, with the number's SID) and in the audit log.
Everything is checked before anything changes: the settings, the workspace and clinic,
and that the number reaches no other clinic; a refusal from Twilio changes nothing here.
Exit status 2, with the reason on stderr, for every refusal.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from typing import Any

from commands.database import find_workspace_id, run_with_database
from config import Settings
from db import audit
from db import repositories as repo
from db.pool import Database
from db.service_numbers import number_row, record_twilio_number, workspace_clinics
from services.twilio.numbers import (
    ConnectedNumber,
    TwilioAccount,
    TwilioNumberError,
    connect_number,
)

E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")


def register(subparsers: Any) -> None:
    twilio = subparsers.add_parser("twilio", help="Twilio phone numbers")
    sub = twilio.add_subparsers(dest="twilio_command", required=True)
    connect = sub.add_parser(
        "connect", help="point a Twilio number at this service and give it to a clinic")
    connect.add_argument("number", help="the number, in E.164 (+15551234567)")
    connect.add_argument("--workspace", required=True)
    connect.add_argument("--clinic", default=None,
                         help="the clinic's name (needed when the workspace has several)")


def run(settings: Settings, args: argparse.Namespace) -> int:
    if args.twilio_command == "connect":
        return connect(settings, args.number, args.workspace, args.clinic)
    return 2


class Refused(Exception):
    """A reason to change nothing, said to the operator."""


def connect(settings: Settings, number: str, workspace: str, clinic: str | None) -> int:
    try:
        account, public_url = _account(settings), _public_url(settings)
        if not E164.match(number):
            raise Refused(f"{number!r} is not a number in E.164 form (+15551234567)")
    except Refused as refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2

    async def action(db: Database) -> int:
        workspace_id = await find_workspace_id(db, workspace)
        if workspace_id is None:
            return 2
        try:
            service = await _chosen_clinic(db, workspace_id, clinic)
            await _refuse_another_clinics_number(db, number, service)
            before = await number_row(db.pool, number)
            connected = await _point_at(account, number, public_url)
            await _record(db, workspace_id, service, number, connected, before)
        except Refused as refused:
            print(f"error: {refused}", file=sys.stderr)
            return 2
        print(f"connected {connected.phone_number} ({connected.sid}) to {service['name']}: "
              f"calls {connected.voice_method} {connected.voice_url}, status "
              f"{connected.status_callback_method} {connected.status_callback}")
        return 0

    return run_with_database(settings, action)


def _account(settings: Settings) -> TwilioAccount:
    telephony = settings.telephony
    missing = [name for name, value in (("TWILIO_ACCOUNT_SID", telephony.twilio_account_sid),
                                        ("TWILIO_AUTH_TOKEN", telephony.twilio_auth_token))
               if not value]
    if missing:
        raise Refused(f"{' and '.join(missing)} must be set: the Twilio account that owns "
                      "the number")
    return TwilioAccount(telephony.twilio_account_sid,
                         telephony.twilio_auth_token.get_secret_value(),
                         telephony.twilio_api_base_url)


def _public_url(settings: Settings) -> str:
    url = (settings.server.public_url or "").rstrip("/")
    if not url:
        raise Refused("PUBLIC_URL is not set: the https:// address Twilio reaches this "
                      "service at (e.g. https://agent.example.com)")
    if not url.startswith(("https://", "http://")):
        raise Refused(f"PUBLIC_URL must start with https:// (it is {url!r})")
    return url


async def _chosen_clinic(db: Database, workspace_id: str, name: str | None) -> dict:
    """The clinic named, or the workspace's only clinic."""
    if name is not None:
        service = await repo.get_service_by_name(db.pool, workspace_id, name)
        if service is None:
            raise Refused(f"no clinic named {name!r} in this workspace")
        return service
    clinics = await workspace_clinics(db.pool, workspace_id)
    if not clinics:
        raise Refused("the workspace has no clinic yet: import one first "
                      "(python main.py clinic import FILE --workspace W)")
    if len(clinics) > 1:
        names = ", ".join(repr(c["name"]) for c in clinics)
        raise Refused(f"the workspace has several clinics ({names}): name one with --clinic")
    return clinics[0]


async def _refuse_another_clinics_number(db: Database, number: str, service: dict) -> None:
    """A number reaches one clinic at most."""
    owner = await repo.find_service_by_phone(db.pool, number)
    if owner is None or owner["id"] == service["id"]:
        return
    workspace = await db.pool.fetchval("SELECT name FROM workspaces WHERE id = $1",
                                       repo.as_uuid(owner["workspace_id"]))
    raise Refused(f"{number} already reaches another clinic ({owner['name']!r} in workspace "
                  f"{workspace!r}); a number reaches one clinic only")


async def _point_at(account: TwilioAccount, number: str, public_url: str) -> ConnectedNumber:
    try:
        return await asyncio.to_thread(
            connect_number, account, number, voice_url=f"{public_url}/voice/answer",
            status_url=f"{public_url}/voice/status", sms_url=f"{public_url}/sms/inbound")
    except TwilioNumberError as error:
        raise Refused(str(error)) from error


async def _record(db: Database, workspace_id: str, service: dict, number: str,
                  connected: ConnectedNumber, before: dict | None) -> None:
    """The number on the clinic and its audit row, in one transaction."""
    async with db.pool.acquire() as connection, connection.transaction():
        row = await record_twilio_number(connection, service["id"], number, connected.sid)
        if row is None:
            raise Refused(f"{number} was given to another clinic meanwhile; Twilio now sends "
                          "its calls here, but it stays with that clinic")
        await audit.record_change(
            connection, workspace_id, actor=audit.CLI_ACTOR, action="twilio.connect",
            target=number,
            before=None if before is None else {
                "clinic": before["clinic"], "twilio_sid": before["twilio_sid"],
                "connected_at": before["connected_at"]},
            after={"clinic": service["name"], "twilio_sid": connected.sid,
                   "voice_url": connected.voice_url,
                   "status_callback": connected.status_callback})
