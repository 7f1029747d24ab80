"""Reminder campaigns per clinic: stored and replaced whole; only the clinic's own live
appointment types, only a clinic of the workspace; the sweep sees the campaigns that are on."""

from __future__ import annotations

import uuid

import pytest

from db import reminder_campaigns as campaigns
from db import repositories as repo
from db.pool import Database


async def clinic_with_types(db: Database, workspace_id: str, *names: str) -> tuple[str, list[str]]:
    service = await repo.create_service(db.pool, workspace_id, f"Clinic {uuid.uuid4().hex[:6]}")
    ids = [str(await db.pool.fetchval(
        "INSERT INTO appointment_types (service_id, name, duration_min, price_cents) "
        "VALUES ($1, $2, 20, 5000) RETURNING id", uuid.UUID(service["id"]), name))
        for name in names]
    return service["id"], ids


async def test_a_clinic_has_no_campaign_until_one_is_stored(db, workspace_id):
    service_id, _ = await clinic_with_types(db, workspace_id)
    assert await campaigns.get_campaign(db.pool, workspace_id, service_id) is None


async def test_a_campaign_is_stored_then_replaced_whole(db, workspace_id):
    service_id, (consult, jab) = await clinic_with_types(db, workspace_id, "Consult", "Jab")

    first = await campaigns.put_campaign(db.pool, workspace_id, service_id, enabled=True,
                                         lead_hours=48, appointment_type_ids=(consult, jab))
    second = await campaigns.put_campaign(db.pool, workspace_id, service_id, enabled=False,
                                          lead_hours=2, appointment_type_ids=[jab, jab])

    assert first == campaigns.Campaign(service_id, workspace_id, True, 48, (consult, jab))
    assert second == campaigns.Campaign(service_id, workspace_id, False, 2, (jab,))
    assert await campaigns.get_campaign(db.pool, workspace_id, service_id) == second


async def test_a_campaign_calls_unless_it_is_set_to_text(db, workspace_id):
    service_id, _ = await clinic_with_types(db, workspace_id, "Consult")

    texting = await campaigns.put_campaign(db.pool, workspace_id, service_id, enabled=True,
                                           lead_hours=24, appointment_type_ids=(),
                                           channel="text")
    assert texting.channel == "text"
    assert await campaigns.get_campaign(db.pool, workspace_id, service_id) == texting
    calling = await campaigns.put_campaign(db.pool, workspace_id, service_id, enabled=True,
                                           lead_hours=24, appointment_type_ids=())
    assert calling.channel == "call"

    with pytest.raises(campaigns.CampaignRefused, match="a call or a text, not 'sms'"):
        await campaigns.put_campaign(db.pool, workspace_id, service_id, enabled=True,
                                     lead_hours=24, appointment_type_ids=(), channel="sms")
    assert await campaigns.get_campaign(db.pool, workspace_id, service_id) == calling


async def test_types_of_another_clinic_or_retired_ones_are_refused_by_name(db, workspace_id):
    service_id, (consult, retired) = await clinic_with_types(db, workspace_id, "Consult", "Old")
    _, (elsewhere,) = await clinic_with_types(db, workspace_id, "Consult")
    await db.pool.execute("UPDATE appointment_types SET retired_at = now() WHERE id = $1",
                          uuid.UUID(retired))

    for wrong in (elsewhere, retired, "not-an-id"):
        with pytest.raises(campaigns.CampaignRefused) as refused:
            await campaigns.put_campaign(db.pool, workspace_id, service_id, enabled=True,
                                         lead_hours=24, appointment_type_ids=[consult, wrong])
        assert str(refused.value) == f"not appointment types of this clinic: {wrong}"
    assert await campaigns.get_campaign(db.pool, workspace_id, service_id) is None


async def test_a_clinic_of_another_workspace_is_not_found(db, workspace_id):
    other = (await repo.create_workspace(db.pool, f"ws-{uuid.uuid4().hex[:8]}"))["id"]
    theirs, _ = await clinic_with_types(db, other)

    for service_id in (theirs, str(uuid.uuid4()), "nonsense"):
        with pytest.raises(campaigns.ClinicNotFound, match="no such clinic in this workspace"):
            await campaigns.put_campaign(db.pool, workspace_id, service_id, enabled=True,
                                         lead_hours=24, appointment_type_ids=())
    await campaigns.put_campaign(db.pool, other, theirs, enabled=True, lead_hours=24,
                                 appointment_type_ids=())
    assert await campaigns.get_campaign(db.pool, workspace_id, theirs) is None


@pytest.mark.parametrize("hours", [0, 337])
async def test_a_lead_time_out_of_range_is_refused(db, workspace_id, hours):
    service_id, _ = await clinic_with_types(db, workspace_id)
    with pytest.raises(campaigns.CampaignRefused, match=f"1 to 336 hours, not {hours}"):
        await campaigns.put_campaign(db.pool, workspace_id, service_id, enabled=True,
                                     lead_hours=hours, appointment_type_ids=())


async def test_the_sweep_sees_only_campaigns_that_are_on(db, workspace_id):
    on, _ = await clinic_with_types(db, workspace_id)
    off, _ = await clinic_with_types(db, workspace_id)
    await campaigns.put_campaign(db.pool, workspace_id, on, enabled=True, lead_hours=24,
                                 appointment_type_ids=())
    await campaigns.put_campaign(db.pool, workspace_id, off, enabled=False, lead_hours=24,
                                 appointment_type_ids=())

    enabled = {c.service_id for c in await campaigns.enabled_campaigns(db.pool)}
    assert on in enabled and off not in enabled


async def test_a_campaign_written_on_a_connection_is_part_of_its_transaction(db, workspace_id):
    service_id, _ = await clinic_with_types(db, workspace_id)

    class Undo(Exception):
        pass

    with pytest.raises(Undo):
        async with db.pool.acquire() as conn, conn.transaction():
            await campaigns.put_campaign(conn, workspace_id, service_id, enabled=True,
                                         lead_hours=24, appointment_type_ids=())
            raise Undo
    assert await campaigns.get_campaign(db.pool, workspace_id, service_id) is None
