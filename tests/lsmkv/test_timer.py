"""The hierarchical timing wheel (lsmkv/base/timer.py), its clocks and its executor.

Most tests drive the timer with a ManualClock: time moves only when the test
says, so each assertion is about *which* timers have fired at a given clock
reading, never about how long anything took.
"""

from __future__ import annotations

import functools
import math
import random
import threading
import time

import pytest

from lsmkv.base.clock import ManualClock
from lsmkv.base.errors import ClosedError
from lsmkv.base.executor import TaskExecutor
from lsmkv.base.timer import Timer

MS = 1_000_000  # ns
SECOND = 1_000_000_000


@pytest.fixture
def clock():
    return ManualClock(start_ns=123 * SECOND)


def _recorder(clock, fired):
    """A callback factory: each callback records (its id, the clock reading it ran at)."""
    def make(i):
        return functools.partial(lambda i: fired.append((i, clock.now_ns())), i)
    return make


def test_expirations_ordered_across_wheel_levels(clock):
    """Small wheels (8 buckets of 1 ms) put these timers on six levels;
    advancing one tick at a time, every timer fires in the tick after its
    deadline (never before it), in deadline order."""
    fired: list[tuple[int, int]] = []
    make = _recorder(clock, fired)
    rng = random.Random(7)
    with Timer(tick=0.001, wheel_size=8, clock=clock, executor_threads=1) as timer:
        delays = [rng.uniform(0, 20.0) for _ in range(600)] + [0.0005, 0.001, 0.008, 0.064, 0.512, 4.096]
        handles = [timer.schedule(d, make(i)) for i, d in enumerate(delays)]
        assert timer.levels >= 5
        assert len(timer) == len(delays)
        end = max(h.deadline_ns for h in handles) + 2 * MS
        while clock.now_ns() < end:
            clock.advance_ns(MS)
            assert timer.wait_idle()
        assert len(fired) == len(delays)
        assert len(timer) == 0
        for i, at in fired:
            deadline = handles[i].deadline_ns
            assert deadline <= at <= deadline + MS, (delays[i], at - deadline)
        # One executor thread runs them in the order they came due.
        times = [at for _, at in fired]
        assert times == sorted(times)
        # Each timer was filed again at most once per level above the first.
        assert timer.reinserted <= len(delays) * (timer.levels - 1)


def test_delays_from_milliseconds_to_days(clock):
    """Timers from 1 ms to 30 days away: just before each deadline it has not
    fired, one tick after it it has. The clock jumps from deadline to
    deadline; the idle time between costs nothing (no tick is visited)."""
    fired: dict[int, int] = {}
    rng = random.Random(11)
    delays = sorted({10 ** rng.uniform(-3, math.log10(30 * 86400)) for _ in range(300)})
    with Timer(tick=0.001, wheel_size=64, clock=clock, executor_threads=1) as timer:
        handles = [timer.schedule(d, functools.partial(lambda i: fired.__setitem__(i, clock.now_ns()), i))
                   for i, d in enumerate(delays)]
        for i, h in enumerate(handles):
            before = h.deadline_ns - 1 - clock.now_ns()
            if before >= 0:
                clock.advance_ns(before)
                assert timer.wait_idle()
                assert i not in fired, f"timer of {delays[i]} s fired {h.deadline_ns - fired[i]} ns early"
            clock.advance_ns(max(0, h.deadline_ns + MS - clock.now_ns()))
            assert timer.wait_idle()
            assert i in fired, f"timer of {delays[i]} s had not fired one tick after its deadline"
            assert h.deadline_ns <= fired[i] <= h.deadline_ns + MS
        assert timer.levels >= 4
        # 300 timers over 30 days of clock: the work is per timer and level,
        # not per tick (2.6e9 ticks of 1 ms).
        assert timer.reinserted <= len(delays) * (timer.levels - 1)


def test_cancel_removes_the_entry_at_once(clock):
    fired = []
    with Timer(tick=0.01, wheel_size=16, clock=clock) as timer:
        handles = [timer.schedule(0.05 * (i + 1), functools.partial(fired.append, i)) for i in range(400)]
        cancelled = set(range(0, 400, 3))
        for i in cancelled:
            h = handles[i]
            assert h.cancel() is True
            assert h.cancelled and h.bucket is None and h.prev is None and h.next is None
            assert h.cancel() is False  # only once
        # Removed from its bucket at once, not by a later sweep.
        assert len(timer) == 400 - len(cancelled)
        assert timer.cancels == len(cancelled)
        clock.advance(25.0)
        assert timer.wait_idle()
        assert sorted(fired) == sorted(set(range(400)) - cancelled)
        assert all(h.done for i, h in enumerate(handles) if i not in cancelled)
        # Too late to cancel a timer that ran.
        assert handles[1].cancel() is False
        assert len(timer) == 0


def test_cancel_of_a_due_timer_waiting_for_the_executor(clock):
    """A timer handed to the executor but not yet started can still be
    cancelled; its callback then never runs."""
    gate = threading.Event()
    ran = []
    with Timer(tick=0.001, clock=clock, executor_threads=1) as timer:
        timer.schedule(0.001, gate.wait)          # occupies the one executor thread
        late = timer.schedule(0.001, functools.partial(ran.append, "late"))
        clock.advance(0.01)
        deadline = time.monotonic() + 10
        while timer.expired < 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert timer.expired == 2
        assert late.cancel() is True
        gate.set()
        assert timer.wait_idle()
        assert ran == []


@pytest.mark.slow
def test_a_million_timers(clock):
    """1,000,000 timers over 10 s of clock, every third cancelled: each
    remaining one fires exactly once, within a step (100 ms) and a tick of
    its deadline and never before it."""
    n = 1_000_000
    rng = random.Random(3)
    counts = bytearray(n)
    fired_at = [0] * n
    step = 100 * MS

    def fire(i):
        counts[i] += 1
        fired_at[i] = clock.now_ns()

    with Timer(tick=0.001, wheel_size=512, clock=clock, executor_threads=1) as timer:
        schedule = timer.schedule
        handles = [schedule(rng.random() * 10.0, functools.partial(fire, i)) for i in range(n)]
        assert len(timer) == n
        for h in handles[::3]:
            assert h.cancel()
        cancelled = len(handles[::3])
        assert len(timer) == n - cancelled
        while clock.now_ns() < handles[0].deadline_ns - handles[0].deadline_ns % SECOND + 11 * SECOND:
            clock.advance_ns(step)
            assert timer.wait_idle(timeout=120)
        assert len(timer) == 0
        assert timer.executor.failed == 0
        late = 0
        for i, h in enumerate(handles):
            if i % 3 == 0:
                assert counts[i] == 0
                continue
            assert counts[i] == 1
            assert h.deadline_ns <= fired_at[i] <= h.deadline_ns + step + MS
            late += fired_at[i] - h.deadline_ns
        assert sum(counts) == n - cancelled


def test_many_threads_scheduling_and_cancelling(clock):
    """Eight threads schedule and cancel while another moves the clock: every
    timer either was cancelled (cancel() returned True) and never ran, or
    ran exactly once."""
    threads = 8
    per_thread = 5_000
    counts: dict[tuple[int, int], int] = {}
    lock = threading.Lock()
    results: list[tuple[list, list]] = [None] * threads  # type: ignore[list-item]
    stop = threading.Event()

    def fire(key):
        with lock:
            counts[key] = counts.get(key, 0) + 1

    with Timer(tick=0.001, wheel_size=32, clock=clock, executor_threads=2) as timer:
        def worker(t):
            rng = random.Random(t)
            handles = []
            cancelled = []
            for i in range(per_thread):
                handles.append(timer.schedule(rng.uniform(0, 2.0), functools.partial(fire, (t, i))))
                if rng.random() < 0.5:
                    victim = rng.randrange(len(handles))
                    if handles[victim].cancel():
                        cancelled.append(victim)
            results[t] = (handles, cancelled)

        def ticker():
            while not stop.is_set():
                clock.advance(0.0005)
                time.sleep(0.0001)

        mover = threading.Thread(target=ticker)
        mover.start()
        workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        stop.set()
        mover.join()
        clock.advance(5.0)
        assert timer.wait_idle(timeout=60)
        assert len(timer) == 0
        total_cancelled = 0
        for t, (handles, cancelled) in enumerate(results):
            cancelled_set = set(cancelled)
            assert len(cancelled_set) == len(cancelled)  # cancel() said True once per timer
            total_cancelled += len(cancelled)
            for i, h in enumerate(handles):
                if i in cancelled_set:
                    assert (t, i) not in counts and h.cancelled
                else:
                    assert counts.get((t, i)) == 1 and h.done
        assert sum(counts.values()) == threads * per_thread - total_cancelled
        assert timer.cancels == total_cancelled


def test_callbacks_run_on_the_executor_not_the_clock_thread(clock):
    names = []
    with Timer(tick=0.001, clock=clock, name="wheel-under-test") as timer:
        timer.schedule(0.002, lambda: names.append(threading.current_thread().name))
        clock.advance(0.01)
        assert timer.wait_idle()
    assert len(names) == 1 and names[0].startswith("wheel-under-test-exec")


def test_a_slow_callback_does_not_hold_up_other_timers(clock):
    """With two executor threads, a callback stuck waiting does not keep a
    later timer from running."""
    gate = threading.Event()
    ran = threading.Event()
    with Timer(tick=0.001, clock=clock, executor_threads=2) as timer:
        timer.schedule(0.001, gate.wait)
        timer.schedule(0.002, ran.set)
        clock.advance(0.01)
        assert ran.wait(10), "the second timer waited for the stuck callback"
        gate.set()
        assert timer.wait_idle()


def test_a_raising_callback_is_logged_and_the_executor_goes_on(clock, caplog):
    after = []
    with Timer(tick=0.001, clock=clock, executor_threads=1) as timer:
        timer.schedule(0.001, lambda: 1 / 0)
        timer.schedule(0.002, functools.partial(after.append, "ran"))
        clock.advance(0.01)
        assert timer.wait_idle()
        assert after == ["ran"]
        assert timer.executor.failed == 1
    assert any("raised" in r.getMessage() for r in caplog.records)


def test_zero_delay_runs_at_once_and_the_system_clock_never_fires_early():
    with Timer(tick=0.005) as timer:
        done = threading.Event()
        timer.schedule(0, done.set)
        assert done.wait(10)
        seen = []
        handles = [timer.schedule(d, functools.partial(lambda i: seen.append((i, time.monotonic_ns())), i))
                   for i, d in enumerate((0.01, 0.02, 0.05))]
        deadline = time.monotonic() + 10
        while len(seen) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(seen) == 3
        for i, at in seen:
            assert at >= handles[i].deadline_ns


def test_bad_arguments_and_use_after_close(clock):
    timer = Timer(clock=clock)
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="delay"):
            timer.schedule(bad, lambda: None)
    for bad in ("1", None, True):
        with pytest.raises(TypeError, match="delay"):
            timer.schedule(bad, lambda: None)
    with pytest.raises(TypeError, match="callable"):
        timer.schedule(1, "not callable")
    assert len(timer) == 0 and timer.scheduled == 0
    pending = timer.schedule(1.0, lambda: None)
    timer.close()
    timer.close()
    with pytest.raises(ClosedError):
        timer.schedule(1, lambda: None)
    assert not pending.done
    with pytest.raises(ValueError, match="tick"):
        Timer(tick=0)
    with pytest.raises(ValueError, match="wheel_size"):
        Timer(wheel_size=1)


def test_manual_clock_refuses_to_go_back():
    c = ManualClock()
    with pytest.raises(ValueError):
        c.advance(-1)


def test_executor_runs_everything_accepted_before_close():
    ex = TaskExecutor(threads=2, name="ex-test")
    out = []
    lock = threading.Lock()

    def task(i):
        with lock:
            out.append(i)

    for i in range(1000):
        ex.submit(functools.partial(task, i))
    ex.close()
    assert sorted(out) == list(range(1000))
    assert ex.completed == 1000 and ex.pending == 0
    with pytest.raises(ClosedError):
        ex.submit(lambda: None)
    with pytest.raises(ValueError):
        TaskExecutor(threads=0)
