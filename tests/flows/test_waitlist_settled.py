"""A waitlisted patient who says yes to an opened slot on the clinic's call books it, and
that settles the offer: the slot's other offers still waiting to be dialled are called
off, and they leave the waitlist."""

from __future__ import annotations

import uuid

from db import outbound
from db import scheduling as sched
from tests.flows.test_outbound_calls import (
    DAVID_PHONE,
    PRIYA_PHONE,
    PRIYAS_BIRTH_DATE,
    confirmed_for_the_offer,
    opened_slot,
)


async def test_a_yes_on_the_call_calls_off_the_other_offers_of_the_slot(db, clinic):
    _slot, offer = await opened_slot(db, clinic)
    (david,) = await sched.patients_by_phone(db.pool, clinic[0], DAVID_PHONE)
    entry = await sched.add_to_waitlist(db.pool, patient_id=david.id,
                                        appointment_type_id=offer["appointment_type_id"],
                                        note="", call_id=None)
    async with db.pool.acquire() as conn, conn.transaction():
        waiting = await outbound.create_task(conn, outbound.TaskSpec(
            workspace_id=clinic[0], service_id=clinic[1], kind="waitlist_offer",
            reason="a physiotherapy time opened up", goal="offer the slot",
            timezone="America/Chicago", not_before=sched.datetime.now().astimezone(),
            patient_id=david.id, waitlist_entry_id=entry, offer=offer))
    priya = await confirmed_for_the_offer(db, clinic, PRIYA_PHONE, PRIYAS_BIRTH_DATE, offer)

    booked = await priya.says("Yes please, book it.")

    assert booked.startswith("You're booked.")
    other = await outbound.get_task(db.pool, clinic[0], waiting)
    assert (other.status, other.outcome) == ("cancelled", "slot_gone")
    (settled,) = priya.writer.events("waitlist_offer_settled")
    assert settled.data["others_called_off"] == 1
    still_waiting = await db.pool.fetch(
        "SELECT patient_id FROM waitlist_entries w JOIN patients p ON p.id = w.patient_id "
        "WHERE p.workspace_id = $1", uuid.UUID(clinic[0]))
    assert [str(r["patient_id"]) for r in still_waiting] == [david.id]  # Priya has left it
