"""One process dials at a steady rate: a burst of due tasks is spread over turns, each
task keeps its turn while it waits, and a quiet spell earns no burst."""

from datetime import UTC, datetime, timedelta

from runner.outbound.pace import DialPace

NOW = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)


def seconds(delta: timedelta) -> float:
    return delta.total_seconds()


def test_a_burst_of_due_tasks_is_spread_over_turns():
    pace = DialPace(per_second=2)

    waits = [seconds(pace.wait(f"task-{n}", NOW)) for n in range(5)]

    assert waits == [0.0, 0.5, 1.0, 1.5, 2.0]


def test_a_task_back_at_its_turn_dials_and_one_back_early_keeps_its_place():
    pace = DialPace(per_second=1)
    pace.wait("first", NOW)
    pace.wait("second", NOW)
    pace.wait("third", NOW)

    assert seconds(pace.wait("third", NOW + timedelta(seconds=0.5))) == 1.5  # early
    assert pace.wait("second", NOW + timedelta(seconds=1.2)) == timedelta(0)
    assert pace.wait("third", NOW + timedelta(seconds=2)) == timedelta(0)
    # A newcomer goes after every turn given out.
    assert seconds(pace.wait("fourth", NOW + timedelta(seconds=2))) == 1.0


def test_a_quiet_spell_earns_no_burst():
    pace = DialPace(per_second=1)
    pace.wait("morning", NOW)

    later = NOW + timedelta(hours=1)
    assert pace.wait("afternoon", later) == timedelta(0)
    assert seconds(pace.wait("next", later)) == 1.0


def test_a_turn_nobody_comes_back_for_lapses():
    pace = DialPace(per_second=1)
    pace.wait("here", NOW)
    pace.wait("went elsewhere", NOW)  # its job ran in another process
    assert pace.waiting == 1

    pace.wait("much later", NOW + timedelta(minutes=5))

    assert pace.waiting == 0
