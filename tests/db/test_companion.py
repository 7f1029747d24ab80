"""A person's reminders: acknowledged once, only by them, only after they said so."""

import uuid
from datetime import date

import pytest

from call.call_session import CallLog
from call.identity import CallIdentity
from db import companion, world
from db import scheduling as sched
from db.scheduling import NotFound
from db.world import Provenance
from flows.graph import bundled_graph
from flows.graph_session import Confirmation, GraphSession, reminder_subject
from flows.graph_tools import GraphTools
from tests.fakes import CollectingWriter


async def person(db, workspace_id: str, first: str) -> sched.Patient:
    record, _, _ = await world.create_patient(
        db.pool, workspace_id, first_name=first, last_name="Test",
        date_of_birth=date(1950, 1, 1), phone=None, email=None, address=None,
        provenance=Provenance("import", "test", "verified"),
    )
    return record.as_patient()


async def test_a_reminder_is_acknowledged_once_and_only_by_its_person(db, workspace_id, call_id):
    ada, bob = await person(db, workspace_id, "Ada"), await person(db, workspace_id, "Bob")
    reminder_id = await db.pool.fetchval(
        "INSERT INTO reminders (patient_id, text) VALUES ($1, 'Drink water') RETURNING id",
        uuid.UUID(ada.id),
    )
    with pytest.raises(NotFound):
        await companion.acknowledge_reminder(
            db.pool, str(reminder_id), patient_id=bob.id, call_id=call_id)

    done = await companion.acknowledge_reminder(
        db.pool, str(reminder_id), patient_id=ada.id, call_id=call_id)

    assert done.text == "Drink water"
    assert await companion.open_reminders(db.pool, ada.id) == []
    with pytest.raises(NotFound):
        await companion.acknowledge_reminder(
            db.pool, str(reminder_id), patient_id=ada.id, call_id=call_id)


async def test_a_reminder_is_marked_done_only_after_the_person_said_so(db, workspace_id, call_id):
    ada = await person(db, workspace_id, "Ada")
    reminder_id = await db.pool.fetchval(
        "INSERT INTO reminders (patient_id, text) VALUES ($1, 'Walk daily') RETURNING id",
        uuid.UUID(ada.id),
    )
    writer = CollectingWriter()
    reminders = await companion.open_reminders(db.pool, ada.id)
    session = GraphSession(identity=CallIdentity(call_id, workspace_id, "s"),
                             patient=ada, reminders=reminders)
    graph = bundled_graph("companion_checkin")
    tools = GraphTools(graph, session, db.pool, CallLog(call_id, writer))

    early = await tools.call("main", "mark_reminder_acknowledged", {"reminder_ref": "R1"})
    assert early.error_class == "guard" and "has not said" in early.text
    assert await companion.open_reminders(db.pool, ada.id) != []

    session.confirmation = Confirmation(reminder_subject(str(reminder_id)), "yes I did")
    done = await tools.call("main", "mark_reminder_acknowledged", {"reminder_ref": "R1"})
    assert done.ok and done.text == "Marked done: Walk daily."
    assert await companion.open_reminders(db.pool, ada.id) == []
