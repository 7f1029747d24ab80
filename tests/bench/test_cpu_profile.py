"""The CPU profile charges each account only its own CPU, and adds up to the whole."""

import asyncio
import functools
import time

import pytest

from bench.cpu_profile import (
    HANDOFF,
    HARNESS,
    LOOP_GAPS,
    NATIVE_THREADS,
    OBSERVER_QUEUES,
    HookCost,
    HookCounts,
    Profiler,
    accounts,
    profile_rows,
    side_by_side,
    task_account,
    thread_account,
    timed_handler,
)

MS = 1_000_000


def burn(ms: float) -> None:
    """Use `ms` of this thread's CPU."""
    end = time.thread_time_ns() + ms * MS
    while time.thread_time_ns() < end:
        pass


async def test_a_handler_that_awaits_midway_is_charged_its_own_cpu_not_what_ran_meanwhile():
    async with Profiler() as profiler:
        async def handle() -> None:
            burn(20)
            await asyncio.sleep(0.05)  # meanwhile the other task burns 40 ms
            burn(20)

        async def work_for_the_caller() -> None:
            handler = timed_handler(profiler.ledger, "handler", handle)
            burn(5)
            await handler()

        async def meanwhile() -> None:
            await asyncio.sleep(0.01)
            burn(40)

        await asyncio.gather(asyncio.create_task(work_for_the_caller()),
                             asyncio.create_task(meanwhile()))
        await asyncio.to_thread(burn, 15)
    charged = {name: ns / MS for name, ns in profiler.accounts.items()}
    assert 40 <= charged["handler"] < 48
    caller = next(name for name in charged if name.endswith("work_for_the_caller"))
    other = next(name for name in charged if name.endswith("meanwhile"))
    assert 5 <= charged[caller] < 10 and 40 <= charged[other] < 48
    assert 15 <= charged["thread: burn"] < 20


def test_tasks_are_charged_to_their_owner_and_pipecats_queues_to_the_hand_off():
    async def run_call() -> None: ...

    async def hold_the_line() -> None: ...

    call, other = run_call(), hold_the_line()
    try:
        assert task_account("MemoryOutput#3::_audio_task_handler", call) == "MemoryOutput"
        assert task_account("Foo#0::FrameProcessor.__input_frame_task_handler", call) == HANDOFF
        assert task_account("WorkerObserver#1::_proxy_task_handler", call) == OBSERVER_QUEUES
        assert task_account("Task-7", call) == HARNESS
        assert task_account("Task-8", other).endswith("<locals>.hold_the_line")
    finally:
        call.close()
        other.close()


def test_thread_work_is_named_by_what_runs_through_to_threads_partial():
    import contextvars

    class Analyzer:
        def analyze(self) -> None: ...

    call = functools.partial(contextvars.copy_context().run, burn, 1)
    assert thread_account(call) == "thread: burn"
    assert thread_account(Analyzer().analyze) == "thread: Analyzer.analyze"


def test_the_remainders_make_the_accounts_add_up_to_the_process_and_its_children():
    found, hooks = accounts(
        loop_ns={"A": 40, "B": 20}, thread_ns={"thread: vad": 15}, loop_thread_total=80,
        process_total=100, children_ns={"PocketSphinx decoders": 50},
    )
    assert found[LOOP_GAPS] == 20 and found[NATIVE_THREADS] == 5
    assert sum(found.values()) == 150 and hooks == 0
    rows = profile_rows(found, audio_s=1e-6)  # 1 µs of audio: ns read as ms per second
    assert [r.account for r in rows][:2] == ["process: PocketSphinx decoders", "A"]
    assert rows[0].ms_per_audio_s == pytest.approx(50) and rows[0].share == pytest.approx(1 / 3)


def test_side_by_side_keeps_ours_order_then_what_only_bare_spends_and_drops_trifles():
    ours = profile_rows({"A": 30, "B": 10, "tiny": 0}, audio_s=1e-6)
    bare = profile_rows({"A": 20, "C": 5}, audio_s=1e-6)
    lines = side_by_side(ours, bare, floor_ms=1.0)
    assert [(name, bool(mine), bool(theirs)) for name, mine, theirs in lines] == [
        ("A", True, True), ("B", True, False), ("C", False, True)]


async def test_work_the_loop_runs_outside_any_task_is_charged_to_its_account():
    class Batcher:
        def flush(self) -> None:
            burn(20)

    batcher = Batcher()
    async with Profiler(callbacks=[(batcher, "flush", "batched scoring")]) as profiler:
        asyncio.get_running_loop().call_soon(batcher.flush)
        await asyncio.sleep(0.01)
    assert 20 <= profiler.accounts["batched scoring"] / MS < 25
    assert "flush" not in vars(batcher)  # the pass over, the method is the class's again


def test_the_hooks_own_cost_is_taken_out_of_the_accounts_it_landed_in():
    counts = HookCounts()
    counts.steps.update({"A": 10, "B": 5})
    counts.inside["B"] += 4  # B's handler ran 4 times, each called from A
    counts.outside["A"] += 4
    cost = HookCost(step_in=1.0, step_gap=2.0, section_in=3.0, section_out=0.5)
    found, hooks = accounts(
        loop_ns={"A": 100, "B": 10}, thread_ns={}, loop_thread_total=200, process_total=200,
        children_ns={}, hooks=counts, cost=cost,
    )
    assert found["A"] == 100 - 10 * 1.0 - 4 * 0.5
    assert found["B"] == 0  # 5 + 12 estimated, more than it got: never below nothing
    assert found[LOOP_GAPS] == 90 - 15 * 2.0
    assert hooks == 12 + 10 + 30 and sum(found.values()) + hooks == 200


async def test_the_calibrated_hooks_cost_microseconds_and_leave_an_idle_handler_near_nothing():
    async def idle() -> None:
        pass

    async def call_it_often(handler) -> None:
        for _ in range(2000):
            await handler()

    async with Profiler() as profiler:
        await asyncio.create_task(call_it_often(timed_handler(profiler.ledger, "idle handler", idle)))
    cost = profiler.cost
    assert 0 < cost.section_in < 20_000 and cost.step_gap < 20_000
    assert profiler.accounts["idle handler"] / 2000 < 0.25 * cost.section_in + 200
