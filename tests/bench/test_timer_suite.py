"""The timer bench suite (bench/suites/timer.py) and its heapq reference timer:
what they record, not how fast anything is."""

from __future__ import annotations

import argparse
import importlib
import threading

from bench.heap_timer import HeapTimer

suite = importlib.import_module("bench.suites.timer")


class RecordingRecorder:
    """Stands in for bench.suites.Recorder: keeps what the suite hands it."""

    def __init__(self) -> None:
        self.runs: list[dict] = []
        self.tables: list[tuple] = []

    def run(self, engine, workload, operations, elapsed_s, *, latency_us=None, **fields):
        self.runs.append({"engine": engine, "workload": workload, "operations": operations,
                          "elapsed_s": elapsed_s, "latency_us": latency_us, **fields})

    def latency_us(self, samples_ns):
        ordered = sorted(samples_ns)
        pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000  # noqa: E731
        return {"p50": pick(0.5), "p99": pick(0.99), "max": ordered[-1] / 1000}

    def table(self, title, columns, rows, note=""):
        self.tables.append((title, columns, rows, note))

    def progress(self, text):
        pass


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


def test_the_suite_measures_both_timers_and_tabulates_them():
    parser = argparse.ArgumentParser()
    suite.add_arguments(parser)
    args = parser.parse_args(["--timers", "2000", "--fire-timers", "200", "--fire-span", "0.05",
                              "--max-delay", "30"])
    rec = RecordingRecorder()
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
    (title, columns, rows, note), = rec.tables
    assert columns[1:3] == [suite.WHEEL, suite.HEAP]
    assert [r[0] for r in rows][:2] == ["schedule (timers/s)", "cancel (timers/s)"]
