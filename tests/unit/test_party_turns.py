"""The parties' turns during a hand-off are numbered past the agent's, in time order, and
the caller's and the person's forks never take the same number."""

from __future__ import annotations

import pytest

from processors.call_control.party_turns_processor import party_seq


def test_turns_are_numbered_past_the_base_in_time_order():
    assert party_seq(500, 0, "caller") == 500
    assert party_seq(500, 1200, "caller") < party_seq(500, 3400, "operator")


@pytest.mark.parametrize("elapsed_ms", [0, 1, 999, 60_000])
def test_the_two_parties_never_collide_even_at_the_same_moment(elapsed_ms):
    assert party_seq(7, elapsed_ms, "caller") != party_seq(7, elapsed_ms, "operator")


def test_a_clock_behind_the_hand_off_still_numbers_past_the_base():
    assert party_seq(100, -50, "operator") == 101
