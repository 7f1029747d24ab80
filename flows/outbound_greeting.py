"""The first words of a call the clinic makes: who is calling and who for, nothing more.

The runner plays a call's greeting as soon as it is answered (pre-rendered while the
phone rings), so an outbound call's greeting is the right-person question the graph
opens with (`ask_for_callee`, or `ask_for_requester` for a number with no patient
record), in the same words the offline lines use.
"""

from __future__ import annotations

import asyncpg

from call.outbound_call import OutboundCall
from db import world
from flows.engage_local import action_lines


def greeting_line(clinic: str, first_name: str | None) -> str:
    """Ask for the person by first name (no name: ask whether they asked for the call)."""
    lines = action_lines().actions
    if first_name:
        return lines["ask_for_callee"].format(clinic=clinic, callee=first_name)
    return lines["ask_for_requester"].format(clinic=clinic)


async def outbound_greeting(pool: asyncpg.Pool, call: OutboundCall, clinic: str) -> str:
    """The greeting for `call`: the task's patient's first name from their record (in the
    call's workspace only)."""
    first_name = None
    if call.patient_id is not None:
        records = await world.patients_by_ids(pool, [call.patient_id])
        first_name = next((r.first_name for r in records
                           if r.workspace_id == call.workspace_id), None)
    return greeting_line(clinic, first_name)
