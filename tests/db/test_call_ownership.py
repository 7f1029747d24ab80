"""Which calls a start (or a sweeper) may close: only those of a process that is gone.

Several pods share one database, so the owner of every open call is judged: on this
machine by its PID (and that PID's start time), elsewhere by its heartbeat; a clean stop
or a reboot since means gone. A gone owner's calls are closed `server_crash`, once, with
an end, an event and what reached the disk of their recording.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import uuid
import wave
from pathlib import Path

from call.wav_file import GrowingWav, partial_path
from db import instances, jobs
from db import repositories as repo
from db.instances import ProcessIdentity, owner_is_gone, process_start
from runner.call_analysis import analysis_key
from runner.orphaned_calls import close_orphaned_calls

STALE_S = 60.0
UNOWNED_S = 1860.0


def row_of(identity: ProcessIdentity, **changes) -> dict:
    row = {"id": identity.instance_id, "hostname": identity.hostname,
           "boot_id": identity.boot_id, "pid_namespace": identity.pid_namespace,
           "pid": identity.pid, "process_start": identity.process_start, "stopped_at": None}
    return row | changes


def ended_pid() -> int:
    """The PID of a process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def me() -> ProcessIdentity:
    return ProcessIdentity.current(f"test-me-{uuid.uuid4().hex[:8]}")


# --- Judging an owner -------------------------------------------------------------


def test_a_process_on_this_machine_is_gone_when_its_pid_no_longer_runs():
    here = me()
    dead = row_of(here, id="other", pid=ended_pid())

    assert owner_is_gone(here, dead, stale=False)


def test_a_running_process_on_this_machine_is_alive_even_with_a_stale_heartbeat():
    here = me()
    parent = os.getppid()
    alive = row_of(here, id="other", pid=parent, process_start=process_start(parent) or "")

    assert not owner_is_gone(here, alive, stale=True)


def test_a_reused_pid_is_not_the_process_that_owned_the_call():
    here = me()
    parent = os.getppid()
    reused = row_of(here, id="other", pid=parent, process_start="1")  # started long ago

    assert owner_is_gone(here, reused, stale=False)


def test_an_earlier_process_that_had_this_very_pid_is_gone():
    here = me()
    earlier = row_of(here, id="earlier-incarnation", process_start="1")

    assert owner_is_gone(here, earlier, stale=False)
    assert not owner_is_gone(here, row_of(here), stale=False)  # this process itself


def test_a_process_on_another_machine_is_judged_by_its_heartbeat():
    here = me()
    elsewhere = row_of(here, id="pod-b", hostname="another-host", pid=1)

    assert not owner_is_gone(here, elsewhere, stale=False)
    assert owner_is_gone(here, elsewhere, stale=True)


def test_a_process_in_another_pid_namespace_on_this_host_is_judged_by_its_heartbeat():
    here = me()
    container = row_of(here, id="pod-c", pid_namespace="pid:[1]", pid=ended_pid())

    assert not owner_is_gone(here, container, stale=False)


def test_this_host_name_before_a_reboot_a_clean_stop_or_no_row_at_all_means_gone():
    here = dataclasses.replace(me(), boot_id="boot-now")
    rebooted = row_of(here, id="before", boot_id="boot-before", pid_namespace="x")

    assert owner_is_gone(here, rebooted, stale=False)
    assert owner_is_gone(here, row_of(here, id="done", stopped_at="2026-01-01"), stale=False)
    assert owner_is_gone(here, None, stale=False)


def test_a_process_start_time_is_read_after_the_command_name_whatever_it_holds(tmp_path):
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    rest = " ".join(["S", *[str(n) for n in range(4, 22)], "987654", "0"])
    (proc / "42" / "stat").write_text(f"42 (odd) name (x)) {rest}\n")
    (proc / "43").mkdir()
    (proc / "43" / "stat").write_text(f"43 (zombie) {rest.replace('S', 'Z', 1)}\n")

    assert process_start(42, proc) == "987654"
    assert process_start(43, proc) is None  # a zombie has exited
    assert process_start(44, proc) is None  # no such process


# --- Closing a gone owner's calls --------------------------------------------------


async def new_call(db, workspace_id: str, owner: str | None, status: str = "in_progress",
                   connected: bool = True) -> str:
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
        direction="inbound", from_number=None, to_number=None, status=status,
        owner_instance=owner)
    if connected:
        now = await db.pool.fetchval("SELECT now()")
        await repo.update_call(db.pool, call_id, connected_at=now)
    return call_id


async def register(db, identity: ProcessIdentity) -> ProcessIdentity:
    await instances.register(db.pool, identity)
    return identity


async def events_of(db, call_id: str) -> list[tuple[str, dict]]:
    rows = await db.pool.fetch(
        "SELECT type, data FROM call_events WHERE call_id = $1 ORDER BY seq", uuid.UUID(call_id))
    return [(row["type"], row["data"]) for row in rows]


async def test_a_start_closes_the_calls_of_a_dead_process_and_leaves_live_pods_alone(
        db, workspace_id, tmp_path):
    here = await register(db, me())
    crashed = await register(db, dataclasses.replace(
        here, instance_id=f"crashed-{uuid.uuid4().hex[:6]}", pid=ended_pid()))
    pod_b = await register(db, dataclasses.replace(
        here, instance_id=f"pod-b-{uuid.uuid4().hex[:6]}", hostname="pod-b-host"))
    talking = await new_call(db, workspace_id, crashed.instance_id)
    answered = await new_call(db, workspace_id, crashed.instance_id, status="ringing",
                              connected=False)
    await repo.create_call(db.pool, workspace_id=workspace_id, service_id=None, call_sid=None,
                           direction="inbound", from_number=None, to_number=None,
                           status="completed", owner_instance=crashed.instance_id)
    live_elsewhere = await new_call(db, workspace_id, pod_b.instance_id)
    mine = await new_call(db, workspace_id, here.instance_id)

    closed = await close_orphaned_calls(db.pool, here, tmp_path, stale_after_s=STALE_S,
                                        unowned_after_s=UNOWNED_S)

    assert {talking, answered} <= set(closed)
    assert not {live_elsewhere, mine} & set(closed)
    for call_id, status_was in ((talking, "in_progress"), (answered, "ringing")):
        call = await repo.get_call(db.pool, call_id)
        assert call["status"] == "completed" and call["completion_reason"] == "server_crash"
        assert call["ended_at"] is not None
        ended = [data for kind, data in await events_of(db, call_id) if kind == "call_ended"]
        assert ended == [{"reason": "server_crash", "status_was": status_was,
                          "owner": crashed.instance_id, "closed_by": here.instance_id}]
    assert (await repo.get_call(db.pool, talking))["duration_s"] is not None
    for call_id in (talking, answered):  # what each got to is still summarised
        assert await jobs.job_for(db.pool, analysis_key(call_id)) is not None
    for call_id in (live_elsewhere, mine):
        assert (await repo.get_call(db.pool, call_id))["ended_at"] is None
        assert await jobs.job_for(db.pool, analysis_key(call_id)) is None
    # Closed once: a second pass (or another pod's) finds nothing more of it.
    again = await close_orphaned_calls(db.pool, here, tmp_path, stale_after_s=STALE_S,
                                       unowned_after_s=UNOWNED_S)
    assert not {talking, answered} & set(again)
    assert len(await events_of(db, talking)) == 2  # call_ended + the recording's note


async def test_two_pods_sweeping_at_once_close_each_orphan_once(db, workspace_id, tmp_path):
    crashed = await register(db, dataclasses.replace(
        me(), instance_id=f"crashed-{uuid.uuid4().hex[:6]}", pid=ended_pid()))
    calls = [await new_call(db, workspace_id, crashed.instance_id) for _ in range(5)]
    pod_a, pod_b = await register(db, me()), await register(db, me())

    first, second = await asyncio.gather(*(
        close_orphaned_calls(db.pool, pod, tmp_path, stale_after_s=STALE_S,
                             unowned_after_s=UNOWNED_S) for pod in (pod_a, pod_b)))

    assert sorted(c for c in first + second if c in calls) == sorted(calls)
    for call_id in calls:
        assert [kind for kind, _ in await events_of(db, call_id)].count("call_ended") == 1


async def test_a_pod_whose_heartbeat_stopped_has_its_calls_closed_by_a_survivor(
        db, workspace_id, tmp_path):
    here = await register(db, me())
    lost = await register(db, dataclasses.replace(
        here, instance_id=f"lost-{uuid.uuid4().hex[:6]}", hostname="lost-host"))
    call_id = await new_call(db, workspace_id, lost.instance_id)

    fresh = await close_orphaned_calls(db.pool, here, tmp_path, stale_after_s=STALE_S,
                                       unowned_after_s=UNOWNED_S)
    await db.pool.execute(
        "UPDATE service_instances SET heartbeat_at = now() - interval '2 minutes' WHERE id = $1",
        lost.instance_id)
    stale = await close_orphaned_calls(db.pool, here, tmp_path, stale_after_s=STALE_S,
                                       unowned_after_s=UNOWNED_S)

    assert call_id not in fresh and call_id in stale


async def test_an_unowned_call_is_closed_only_once_no_live_call_could_be_that_old(
        db, workspace_id, tmp_path):
    here = await register(db, me())
    old = await new_call(db, workspace_id, None)
    await db.pool.execute(
        "UPDATE calls SET created_at = now() - interval '2 hours' WHERE id = $1", uuid.UUID(old))
    imported = await new_call(db, workspace_id, None)  # its start given, its row made now
    await db.pool.execute(
        "UPDATE calls SET started_at = now() - interval '2 days' WHERE id = $1",
        uuid.UUID(imported))
    recent = await new_call(db, workspace_id, None)

    closed = await close_orphaned_calls(db.pool, here, tmp_path, stale_after_s=STALE_S,
                                        unowned_after_s=UNOWNED_S)

    assert old in closed and recent not in closed and imported not in closed


async def test_a_crashed_calls_unfinished_recording_is_repaired_and_attached(
        db, workspace_id, tmp_path):
    here = await register(db, me())
    crashed = await register(db, dataclasses.replace(
        here, instance_id=f"crashed-{uuid.uuid4().hex[:6]}", pid=ended_pid()))
    call_id = await new_call(db, workspace_id, crashed.instance_id)
    unfinished = GrowingWav(tmp_path / f"{call_id}.wav", 8000, 2)
    unfinished.append(b"\x01\x00\x02\x00" * 8000 * 3)  # 3 s that reached the disk
    unfinished.abandon()  # the process died: the header still says 0 bytes
    lost = await new_call(db, workspace_id, crashed.instance_id)  # nothing reached the disk

    await close_orphaned_calls(db.pool, here, tmp_path, stale_after_s=STALE_S,
                               unowned_after_s=UNOWNED_S)

    call = await repo.get_call(db.pool, call_id)
    assert call["recording_path"] == str(tmp_path / f"{call_id}.wav")
    assert not partial_path(Path(call["recording_path"])).exists()
    with wave.open(call["recording_path"]) as wav:
        assert (wav.getnchannels(), wav.getnframes()) == (2, 24000)
    assert ("recording_salvaged", {"seconds": 3.0, "header_repaired": True}) in \
        await events_of(db, call_id)
    assert (await repo.get_call(db.pool, lost))["recording_path"] is None
    assert ("recording_not_salvaged", {"why": "not_on_this_pod"}) in await events_of(db, lost)


async def test_a_stream_claims_its_call_for_the_process_carrying_it(db, workspace_id):
    call_id = await new_call(db, workspace_id, "answering-pod", status="ringing", connected=False)

    claimed = await repo.claim_call_for_stream(db.pool, call_id, "streaming-pod")

    assert claimed["owner_instance"] == "streaming-pod" and claimed["connected_at"] is not None


async def test_a_clean_stop_and_a_missing_row_are_recorded_and_recovered(db):
    here = await register(db, me())
    await instances.stopped(db.pool, here)
    assert await db.pool.fetchval(
        "SELECT stopped_at IS NOT NULL FROM service_instances WHERE id = $1", here.instance_id)
    await db.pool.execute("DELETE FROM service_instances WHERE id = $1", here.instance_id)

    await instances.heartbeat(db.pool, here)  # pruned meanwhile: registered again

    assert await db.pool.fetchval(
        "SELECT stopped_at IS NULL FROM service_instances WHERE id = $1", here.instance_id)


async def test_a_process_silent_for_long_is_forgotten_unless_it_left_a_call_open(
        db, workspace_id):
    here = me()
    quiet = await register(db, dataclasses.replace(here, instance_id=f"q-{uuid.uuid4().hex[:6]}"))
    holding = await register(db, dataclasses.replace(here, instance_id=f"h-{uuid.uuid4().hex[:6]}"))
    await new_call(db, workspace_id, holding.instance_id)
    await db.pool.execute(
        "UPDATE service_instances SET heartbeat_at = now() - interval '8 days' WHERE id = ANY($1)",
        [quiet.instance_id, holding.instance_id])

    await instances.prune(db.pool, older_than_s=7 * 24 * 3600)

    left = {r["id"] for r in await db.pool.fetch("SELECT id FROM service_instances")}
    assert quiet.instance_id not in left and holding.instance_id in left


async def test_the_heartbeat_outlives_a_database_outage(pg_dsn):
    from runner.heartbeat import beat_forever
    from tests.db.pools import closed_pool

    beating = asyncio.create_task(beat_forever(await closed_pool(pg_dsn), me(), 0.01))
    await asyncio.sleep(0.1)

    assert not beating.done()  # failed beats are logged and retried, never raised
    beating.cancel()
