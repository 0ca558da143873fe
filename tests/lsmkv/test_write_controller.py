"""WriteController: the delayed write rate follows level 0's growth."""

from __future__ import annotations

import pytest

from lsmkv.lsm.write_controller import MIN_RATE, WriteController


def test_rate_drops_while_level0_grows_and_recovers_as_it_shrinks():
    c = WriteController(max_rate=1_000_000, slowdown_trigger=8, stop_trigger=12)
    for level0 in (3, 5, 7):
        c.update(level0)
        assert not c.slowdown and not c.stop and c.rate == 1_000_000
    c.update(8)  # entering the zone: the full delayed rate
    assert c.slowdown and not c.stop and c.rate == 1_000_000
    c.update(9)
    assert c.rate == pytest.approx(800_000)
    c.update(9)  # unchanged: no adjustment
    assert c.rate == pytest.approx(800_000)
    c.update(10)  # two tables from the stop trigger: a harder brake
    assert c.rate == pytest.approx(480_000)
    c.update(12)
    assert c.stop and c.slowdown and c.rate == pytest.approx(288_000) and c.max_level0 == 12
    c.update(9)  # shrinking
    assert not c.stop and c.rate == pytest.approx(360_000)
    for level0 in (8, 9, 8, 7, 9, 8, 7, 8, 7, 8):  # recovering steps never pass the configured rate
        c.update(level0)
        assert c.rate <= 1_000_000
    c.update(10)
    c.update(4)  # out of the zone: writers run, and the next slowdown starts afresh
    assert not c.slowdown and c.rate == 1_000_000
    c.update(8)
    assert c.slowdown and c.rate == 1_000_000


def test_a_growing_level0_slows_writers_below_the_rate_they_reached():
    c = WriteController(max_rate=16_000_000, slowdown_trigger=8, stop_trigger=12)
    c.update(7, bytes_written=0, now=0.0)
    c.update(8, bytes_written=4_000_000, now=1.0)  # entering: the configured rate
    assert c.slowdown and c.rate == 16_000_000
    # Writers reached 2 MB/s, far below 16: the brake works from what they reached.
    c.update(9, bytes_written=6_000_000, now=2.0)
    assert c.rate == pytest.approx(1_600_000)
    c.update(8, bytes_written=7_000_000, now=3.0)  # shrinking: back up by 1.25
    assert c.rate == pytest.approx(2_000_000)
    c.update(9, bytes_written=18_000_000, now=4.0)  # 6 MB/s since level 0 last grew: above the rate
    assert c.rate == pytest.approx(1_600_000)


def test_rate_has_a_floor():
    c = WriteController(max_rate=100_000, slowdown_trigger=2, stop_trigger=100)
    for level0 in range(2, 60):
        c.update(level0)
    assert c.rate == MIN_RATE


def test_writers_sleep_for_what_they_owe_in_quanta():
    c = WriteController(max_rate=1_000_000, slowdown_trigger=1, stop_trigger=10)
    c.update(1)
    c.delay(400)  # 0.4 ms owed: no sleep yet
    assert c.slowdowns == 0
    c.delay(700)  # 1.1 ms owed: one sleep of all of it
    assert c.slowdowns == 1 and c.slowdown_seconds == pytest.approx(0.0011)
    c.delay(100)
    assert c.slowdowns == 1
