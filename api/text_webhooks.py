"""Twilio's webhooks for texts: the status callbacks of the texts a clinic sends, and the
texts people send to a clinic's number, of which STOP and START matter here. Signed like
every Twilio webhook (api/twilio_auth.py: 403 without a valid signature).

STOP (or any of Twilio's other opt-out words) marks the sender's number in the clinic's
workspace so the agent never offers them a text; START lifts it. Twilio itself answers
those words (Advanced Opt-Out) and refuses texts to that number meanwhile, so the reply
here is empty TwiML. Anything else people text is not read: the clinic's number is
answered by phone.
"""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends, Request, Response
from loguru import logger

from api.deps import get_runtime
from api.twilio_auth import verified_form
from db import service_numbers
from db import text_messages as texts
from runner.runtime import AppRuntime

router = APIRouter(prefix="/sms", tags=["sms"])

# Twilio's default opt-out and opt-in keywords (a message that is only that word).
OPT_OUT = frozenset({"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "OPTOUT",
                     "REVOKE"})
OPT_IN = frozenset({"START", "YES", "UNSTOP"})
EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>'


def keyword(body: str) -> str:
    """The message as a keyword: its letters only, upper case ("Stop." → STOP)."""
    return re.sub(r"[^A-Za-z]", "", body).upper()


@router.post("/status")
async def status(request: Request, runtime: AppRuntime = Depends(get_runtime)) -> Response:
    form = await verified_form(request, runtime.settings)
    sid, reported = form.get("MessageSid", ""), form.get("MessageStatus", "")
    code = form.get("ErrorCode")
    try:
        found = await runtime.db.bounded(
            texts.on_status(runtime.db.pool, sid, reported,
                            int(code) if code and code.isdigit() else None),
            what="text status")
    except ValueError:
        logger.warning(f"text status callback with an unknown status {reported[:20]!r}")
        return Response(status_code=204)
    except Exception as error:  # noqa: BLE001 - the status is read again from Twilio later
        logger.error(f"text status callback not recorded ({type(error).__name__})")
        return Response(status_code=503)
    if found is None:
        logger.info("status callback for an unknown text")
    return Response(status_code=204)


@router.post("/inbound")
async def inbound(request: Request, runtime: AppRuntime = Depends(get_runtime)) -> Response:
    form = await verified_form(request, runtime.settings)
    word = keyword(form.get("Body", ""))
    if word in OPT_OUT or word in OPT_IN:
        pool = runtime.db.pool
        owner = await runtime.db.bounded(service_numbers.number_row(pool, form.get("To", "")),
                                         what="texted number")
        if owner is None:
            logger.info("opt-out word texted to a number no clinic owns; ignored")
        else:
            change = texts.opt_out if word in OPT_OUT else texts.opt_in
            await runtime.db.bounded(change(pool, str(owner["workspace_id"]),
                                            form.get("From", "")), what="text opt-out")
            logger.info(f"texts {'stopped' if word in OPT_OUT else 'allowed again'} for a "
                        "number, at the caller's request")
    return Response(EMPTY_TWIML, media_type="application/xml")
