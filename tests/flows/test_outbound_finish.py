"""Closing an outbound call's task never breaks the call: a database that fails leaves an
event in the call record (the dialer closes the task after the call), and a "don't call
me again" that could not be recorded goes to the operator queue."""

from __future__ import annotations

import asyncio
from contextlib import suppress

from call.call_session import CallLog
from call.identity import CallIdentity
from call.outbound_call import OutboundCall
from flows.callee import Callee
from flows.graph_session import GraphSession
from flows.outbound_tools import UNRECORDED_OPT_OUT, finish
from tests.fakes import CollectingWriter


class BrokenPool:
    async def fetchrow(self, *args, **kwargs):
        raise OSError("connection refused")


def outbound_session() -> GraphSession:
    call = OutboundCall(task_id="00000000-0000-0000-0000-000000000001", attempt_id="a",
                        kind="callback", workspace_id="w", service_id="s", patient_id=None,
                        phone="+15550100288", reason="a question", goal="answer it")
    return GraphSession(identity=CallIdentity("c", "w", "s"), callee=Callee(call))


async def test_a_task_the_database_would_not_close_is_in_the_call_record():
    session, writer = outbound_session(), CollectingWriter()
    session.callee.status = "declined"
    session.callee.declined_as = "wrong_number"

    await finish(session, BrokenPool(), CallLog("c", writer))

    (event,) = writer.events("outbound_task_unfinished")
    assert event.data == {"outcome": "wrong_person", "error": "DatabaseUnavailable"}
    await finish(session, BrokenPool(), CallLog("c", writer))  # once per call
    assert len(writer.events("outbound_task_unfinished")) == 1


class SlowThenAnswering:
    """A database whose first answer never comes (the write is cut short), then answers."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.writes = 0

    async def fetchrow(self, *args, **kwargs):
        self.writes += 1
        if self.writes == 1:
            self.asked.set()
            await asyncio.Event().wait()
        return {"id": args[1]}


async def test_a_close_cut_short_by_the_caller_speaking_again_is_made_when_the_call_ends():
    session, writer = outbound_session(), CollectingWriter()
    session.callee.status = "declined"
    session.callee.declined_as = "wrong_number"
    pool = SlowThenAnswering()
    turn = asyncio.create_task(finish(session, pool, CallLog("c", writer)))
    await pool.asked.wait()

    turn.cancel()  # the caller spoke over the goodbye: the turn that was closing is cut
    with suppress(asyncio.CancelledError):
        await turn
    await finish(session, pool, CallLog("c", writer))  # the call's end closes it

    (event,) = writer.events("outbound_task_finished")
    assert (event.data["outcome"], event.data["status"]) == ("wrong_person", "failed")
    assert pool.writes == 2


async def test_a_do_not_call_that_was_not_recorded_goes_to_the_operator_queue():
    session, writer = outbound_session(), CollectingWriter()
    session.callee.opt_out_words = "stop calling me"  # heard; the write never happened

    await finish(session, BrokenPool(), CallLog("c", writer))

    assert writer.events("do_not_call_failed")
    (escalation,) = writer.of_type("EscalationRecord")
    assert escalation.concept == UNRECORDED_OPT_OUT
    assert writer.events("outbound_task_unfinished")[0].data["outcome"] == "opted_out"
