"""The counts a machine's worker processes share: a hold taken in one process is seen and
let go in another, every process sees the others' counts, holds expire, and a full
table gives up the hold nearest its end rather than refuse."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

from lib.shared_slots import SharedSlots


def let_go_and_count(slots: SharedSlots, name: str, count: int, answer) -> None:
    """In another process: release `name`, set this process's count, say what it saw."""
    seen_before = slots.total(0)
    slots.release(name)
    slots.set_count(count)
    answer.send((seen_before, slots.total(count)))


def test_a_hold_taken_in_one_process_is_let_go_in_another_and_counts_are_shared(tmp_path):
    spawn = multiprocessing.get_context("spawn")
    slots = SharedSlots.shared(2, 16, spawn, lock_dir=tmp_path)
    here = slots.for_process(0)
    here.hold("answered:call-1", 30.0)
    here.set_count(2)
    reader, writer = spawn.Pipe(duplex=False)
    other = spawn.Process(target=let_go_and_count,
                          args=(slots.for_process(1), "answered:call-1", 3, writer))
    other.start()
    seen_before, seen_after = reader.recv()
    other.join(30)

    assert seen_before == 3  # the other process saw this one's two calls and its hold
    assert seen_after == 5  # its own three and this one's two; the hold is gone
    assert here.total(2) == 5 and here.held() == 0
    slots.clear_process(1)  # it died: its calls go with it
    assert here.total(2) == 2


def test_holds_expire_and_a_full_table_gives_up_the_one_nearest_its_end():
    now = [100.0]
    slots = SharedSlots.local(2)
    slots = SharedSlots(slots.holds_buffer, slots.counts_buffer, slots.lock,
                        clock=lambda: now[0])
    assert slots.hold("ringing:a", 10.0) and slots.hold("answered:b", 30.0)
    assert slots.hold("answered:b", 30.0)  # held again: still one hold
    assert slots.held() == 2
    assert not slots.hold("answered:c", 30.0)  # full: "a" (ends first) gave way
    assert not slots.release("ringing:a") and slots.held() == 2
    now[0] += 31.0
    assert slots.held() == 0 and not slots.release("answered:c")  # expired
    assert slots.hold("answered:d", 5.0) and slots.total(1) == 2


def die_holding_the_lock(slots: SharedSlots, answer) -> None:
    """In another process: take the lock, say so, then be killed holding it."""
    slots.lock.__enter__()
    answer.send("holding")
    time.sleep(60)


def test_a_process_killed_holding_the_lock_leaves_the_others_working(tmp_path):
    spawn = multiprocessing.get_context("spawn")
    slots = SharedSlots.shared(2, 16, spawn, lock_dir=tmp_path)
    reader, writer = spawn.Pipe(duplex=False)
    doomed = spawn.Process(target=die_holding_the_lock, args=(slots.for_process(1), writer))
    doomed.start()
    assert reader.recv() == "holding"
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.join(10)

    here = slots.for_process(0)
    started = time.monotonic()
    assert here.hold("answered:call-2", 30.0) and here.total(0) == 1
    assert time.monotonic() - started < 1.0
    slots.remove()
    assert list(tmp_path.iterdir()) == []
