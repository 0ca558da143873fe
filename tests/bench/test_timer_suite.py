"""The timer bench suite (bench/suites/timer.py) and its heapq reference timer:
what they record (through the real Recorder), not how fast anything is."""

from __future__ import annotations

import argparse
import importlib
import threading

from bench.heap_timer import HeapTimer
from bench.suites import Recorder

suite = importlib.import_module("bench.suites.timer")


def test_heap_timer_fires_and_cancels():
    timer = HeapTimer()
    try:
        fired = []
        done = threading.Event()
        keep = timer.schedule(0.01, lambda: (fired.append("keep"), done.set()))
        drop = timer.schedule(0.005, lambda: fired.append("drop"))
        assert drop.cancel() is True and drop.cancel() is False
        assert done.wait(10)
        assert fired == ["keep"] and keep.done and keep.cancel() is False
    finally:
        timer.close()


def test_the_suite_measures_both_timers_and_tabulates_them(tmp_path):
    parser = argparse.ArgumentParser()
    suite.add_arguments(parser)
    args = parser.parse_args(["--timers", "2000", "--fire-timers", "200", "--fire-span", "0.05",
                              "--max-delay", "30"])
    rec = Recorder(suite.NAME, str(tmp_path))
    suite.run(args, rec)
    runs = {(r["engine"], r["workload"]): r for r in rec.runs}
    assert set(runs) == {(e, w) for e in (suite.WHEEL, suite.HEAP) for w in ("schedule", "cancel", "fire")}
    for engine in (suite.WHEEL, suite.HEAP):
        assert runs[engine, "schedule"]["operations"] == 2000 and runs[engine, "schedule"]["pending"] == 2000
        fire = runs[engine, "fire"]
        assert fire["operations"] == 200 and fire["all_ran"] and fire["early"] == 0
        assert fire["latency_us"]["p50"] >= 0
    # The wheel frees cancelled entries at once; the heap keeps them until due.
    assert runs[suite.WHEEL, "cancel"]["entries_left"] == 0
    assert runs[suite.HEAP, "cancel"]["entries_left"] == 2000
    table, = rec.tables
    assert table.columns[1:3] == [suite.WHEEL, suite.HEAP]
    assert [r[0] for r in table.rows][:2] == ["schedule (timers/s)", "cancel (timers/s)"]
