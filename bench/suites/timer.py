"""The timing wheel (lsmkv/base/timer.py) against a heapq timer (bench/heap_timer.py).

Three measurements, each taken for both timers in the same run:

* schedule: ``--timers`` timers (1,000,000) with delays spread uniformly
  over [``--min-delay``, ``--max-delay``] seconds (none fires meanwhile);
* cancel: every one of them cancelled again; the wheel unlinks each entry,
  the heap only marks it (its entries stay until due: reported as
  ``entries_left``);
* fire: ``--fire-timers`` timers due over the next ``--fire-span`` seconds
  of the real clock; each callback notes when it ran, and the lateness
  (run time minus deadline) is the latency reported. A wheel timer is filed
  by its deadline rounded up to a tick, so its lateness includes up to one
  tick (``--tick``) by design; ``early`` counts callbacks that ran before
  their deadline (always 0 for both).
"""

from __future__ import annotations

import argparse
import gc
import random
import threading
import time
from typing import Callable

from ..report import fmt_ratio

NAME = "timer"
DESCRIPTION = "timing wheel vs heapq timer: schedule and cancel 1M timers, firing accuracy"

WHEEL = "wheel"
HEAP = "heapq"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timers", type=int, default=1_000_000, help="timers scheduled and cancelled (1,000,000)")
    parser.add_argument("--min-delay", type=float, default=1.0, help="shortest delay of those, in seconds (1)")
    parser.add_argument("--max-delay", type=float, default=600.0, help="longest delay of those, in seconds (600)")
    parser.add_argument("--fire-timers", type=int, default=20_000, help="timers left to fire (20,000)")
    parser.add_argument("--fire-span", type=float, default=2.0, help="seconds over which they fall due (2)")
    parser.add_argument("--tick", type=float, default=0.001, help="the wheel's tick in seconds (0.001)")
    parser.add_argument("--wheel-size", type=int, default=512, help="buckets per wheel (512)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random data and choices (1)")


def timer_factories(args: argparse.Namespace) -> dict[str, Callable[[], object]]:
    """The two timers under test, each made fresh per measurement."""
    from lsmkv.base.timer import Timer

    from bench.heap_timer import HeapTimer
    return {WHEEL: lambda: Timer(tick=args.tick, wheel_size=args.wheel_size, name="bench-wheel"),
            HEAP: lambda: HeapTimer(name="bench-heap")}


def _noop() -> None:
    pass


def schedule_and_cancel(make: Callable[[], object], delays: list[float]) -> dict:
    """Schedule a timer per delay, then cancel them all; seconds of each
    phase and the entries the timer still holds after the cancels."""
    timer = make()
    try:
        schedule = timer.schedule
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            handles = [schedule(d, _noop) for d in delays]
            scheduled = time.perf_counter()
            pending = len(timer)
            for h in handles:
                h.cancel()
            cancelled = time.perf_counter()
        finally:
            gc.enable()
        return {"schedule_s": scheduled - start, "cancel_s": cancelled - scheduled, "pending": pending,
                "entries_left": len(timer), "cancelled": sum(1 for h in handles if h.cancelled)}
    finally:
        timer.close()


def firing_lateness(make: Callable[[], object], delays: list[float], wait_limit: float = 120.0) -> dict:
    """Schedule a timer per delay and wait for all to run; each one's
    lateness in ns (negative: it ran early), and the seconds it all took."""
    timer = make()
    n = len(delays)
    ran_at = [0] * n
    count = [0]
    lock = threading.Lock()
    all_ran = threading.Event()

    def callback(i: int) -> None:
        ran_at[i] = time.monotonic_ns()
        with lock:
            count[0] += 1
            if count[0] == n:
                all_ran.set()

    gc.collect()  # the garbage of an earlier measurement is not this one's pause
    try:
        start = time.perf_counter()
        handles = [timer.schedule(d, (lambda i=i: callback(i))) for i, d in enumerate(delays)]
        finished = all_ran.wait(max(delays, default=0) + wait_limit)
        elapsed = time.perf_counter() - start
    finally:
        timer.close()
    lateness = [ran_at[i] - h.deadline_ns for i, h in enumerate(handles) if ran_at[i]]
    return {"lateness_ns": lateness, "elapsed_s": elapsed, "ran": len(lateness), "finished": finished,
            "early": sum(1 for x in lateness if x < 0)}





def run(args: argparse.Namespace, rec) -> None:
    rng = random.Random(args.seed)
    delays = [rng.uniform(args.min_delay, args.max_delay) for _ in range(args.timers)]
    fire_delays = [rng.uniform(0, args.fire_span) for _ in range(args.fire_timers)]
    figures: dict[str, dict] = {}
    for name, make in timer_factories(args).items():
        rec.progress(f"{name}: scheduling and cancelling {args.timers:,} timers")
        sc = schedule_and_cancel(make, delays)
        rec.run(name, "schedule", args.timers, sc["schedule_s"], pending=sc["pending"])
        rec.run(name, "cancel", args.timers, sc["cancel_s"], entries_left=sc["entries_left"])
        rec.progress(f"{name}: firing {args.fire_timers:,} timers over {args.fire_span} s")
        fire = firing_lateness(make, fire_delays)
        latency = rec.latency_us(fire["lateness_ns"]) if fire["lateness_ns"] else None
        rec.run(name, "fire", fire["ran"], fire["elapsed_s"], latency_us=latency, early=fire["early"],
                all_ran=fire["finished"])
        figures[name] = {**sc, "fire": fire, "latency": latency or {}}
    w, h = figures[WHEEL], figures[HEAP]
    n = args.timers
    rows = [
        ["schedule (timers/s)", f"{n / w['schedule_s']:,.0f}", f"{n / h['schedule_s']:,.0f}",
         fmt_ratio(h["schedule_s"], w["schedule_s"])],
        ["cancel (timers/s)", f"{n / w['cancel_s']:,.0f}", f"{n / h['cancel_s']:,.0f}",
         fmt_ratio(h["cancel_s"], w["cancel_s"])],
        ["entries left after cancelling all", f"{w['entries_left']:,}", f"{h['entries_left']:,}", ""],
    ]
    for key in ("p50", "p99", "max"):
        wl, hl = w["latency"].get(key), h["latency"].get(key)
        rows.append([f"firing lateness {key} (µs)", "-" if wl is None else f"{wl:,.0f}",
                     "-" if hl is None else f"{hl:,.0f}", ""])
    rows.append(["fired early", str(w["fire"]["early"]), str(h["fire"]["early"]), ""])
    rec.table("Timers: hierarchical timing wheel vs heapq", ["measure", WHEEL, HEAP, "wheel speed vs heapq"], rows,
              note=f"{n:,} timers with delays of {args.min_delay}-{args.max_delay} s; {args.fire_timers:,} fired "
                   f"over {args.fire_span} s; wheel tick {args.tick} s x {args.wheel_size} buckets. Ratios above 1 "
                   "mean the wheel is faster. A wheel timer fires at the first tick boundary at or after its "
                   "deadline, so its lateness includes up to one tick.")
