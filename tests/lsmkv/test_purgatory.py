"""The purgatory (lsmkv/base/purgatory.py): delayed operations watched by key,
completed by their condition or expired by the timing wheel."""

from __future__ import annotations

import random
import threading

import pytest

from lsmkv.base.clock import ManualClock
from lsmkv.base.purgatory import DelayedOperation, Purgatory
from lsmkv.base.timer import Timer


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def timer(clock):
    t = Timer(tick=0.001, wheel_size=64, clock=clock)
    yield t
    t.close()


class Counted(DelayedOperation):
    """Completes when ``state['level'] >= target``; counts its completions."""

    __slots__ = ("target", "state", "completions")

    def __init__(self, timeout, target, state):
        super().__init__(timeout)
        self.target = target
        self.state = state
        self.completions = 0

    def condition(self):
        return self.state["level"] >= self.target

    def on_complete(self):
        self.completions += 1


def test_completes_when_its_condition_holds(timer):
    purgatory = Purgatory(timer)
    state = {"level": 0}
    op = Counted(60, 5, state)
    assert purgatory.try_complete_else_watch(op, ["log"]) is False
    assert purgatory.pending == 1 and purgatory.watched() == 1
    assert purgatory.check_and_complete("log") == 0
    state["level"] = 4
    assert purgatory.check_and_complete("log") == 0
    assert not op.completed and op.wait(0) is False
    state["level"] = 5
    assert purgatory.check_and_complete("log") == 1
    assert op.completed and not op.expired and op.error is None
    assert op.wait(0) is True
    assert op.completions == 1
    assert purgatory.pending == 0 and purgatory.watched() == 0 and purgatory.keys() == []
    # Its timeout was cancelled with it: nothing left on the wheel.
    assert len(timer) == 0
    assert purgatory.check_and_complete("log") == 0 and op.completions == 1


def test_completes_at_once_when_the_condition_already_holds(timer):
    purgatory = Purgatory(timer)
    op = Counted(60, 1, {"level": 1})
    assert purgatory.try_complete_else_watch(op, ["a", "b"]) is True
    assert op.completed and op.completions == 1
    assert purgatory.watched() == 0 and len(timer) == 0 and purgatory.pending == 0


def test_expires_at_its_timeout(timer, clock):
    purgatory = Purgatory(timer)
    op = Counted(5.0, 1, {"level": 0})
    purgatory.try_complete_else_watch(op, ["k1", "k2"])
    clock.advance(4.99)
    assert timer.wait_idle()
    assert not op.completed
    clock.advance(0.02)
    assert timer.wait_idle()
    assert op.completed and op.expired and op.completions == 1
    assert op.wait(0)
    assert purgatory.expired == 1 and purgatory.completed == 0
    assert purgatory.watched() == 0 and purgatory.keys() == [] and purgatory.pending == 0


def test_completion_through_one_key_removes_it_from_every_watch_list(timer):
    purgatory = Purgatory(timer)
    state = {"level": 0}
    op = Counted(60, 1, state)
    other = Counted(60, 2, state)
    purgatory.try_complete_else_watch(op, ["a", "b", "c"])
    purgatory.try_complete_else_watch(other, ["c"])
    assert purgatory.watched() == 4
    state["level"] = 1
    assert purgatory.check_and_complete("b") == 1
    # Gone from a and c too, at once; c stays for the other operation.
    assert purgatory.watched() == 1
    assert purgatory.keys() == ["c"]
    assert purgatory.check_and_complete("a") == 0
    assert op.completions == 1 and not other.completed


def test_completed_operations_never_pile_up(timer, clock):
    """10,000 operations, each on its own key and a shared one: those
    completed by condition and those that expire all leave every watch list
    and the wheel."""
    purgatory = Purgatory(timer)
    state = {"level": 0}
    ops = []
    for i in range(10_000):
        op = Counted(1.0 if i % 2 else 1000.0, i % 2 + 1 if i % 2 == 0 else 10**9, state)
        purgatory.try_complete_else_watch(op, [("own", i), "shared"])
        ops.append(op)
    assert purgatory.watched() == 20_000 and purgatory.pending == 10_000
    assert len(timer) == 10_000
    state["level"] = 1
    for i in range(0, 10_000, 2):
        purgatory.check_and_complete(("own", i))
    assert purgatory.watched() == 10_000  # only the odd ones are left
    assert len(timer) == 5_000
    clock.advance(1.01)
    assert timer.wait_idle()
    assert all(op.completed for op in ops)
    assert all(op.expired == bool(i % 2) for i, op in enumerate(ops))
    assert all(op.completions == 1 for op in ops)
    assert purgatory.watched() == 0 and purgatory.keys() == [] and purgatory.pending == 0
    assert len(timer) == 0
    assert purgatory.completed == 5_000 and purgatory.expired == 5_000


def test_force_complete_with_an_error(timer):
    purgatory = Purgatory(timer)
    op = Counted(60, 1, {"level": 0})
    purgatory.try_complete_else_watch(op, ["x"])
    boom = OSError(5, "log sync failed")
    assert op.force_complete(error=boom) is True
    assert op.completed and op.error is boom and not op.expired
    assert op.force_complete() is False
    assert purgatory.watched() == 0 and len(timer) == 0


def test_cancel_key_completes_everything_watched_there(timer):
    purgatory = Purgatory(timer)
    ops = [Counted(60, 1, {"level": 0}) for _ in range(5)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["closing", ("own", id(op))])
    err = RuntimeError("closed")
    assert purgatory.cancel_key("closing", err) == 5
    assert all(op.error is err and op.completions == 1 for op in ops)
    assert purgatory.watched() == 0


def test_each_operation_completes_exactly_once_under_races():
    """Threads raise the level and call check_and_complete on shared and own
    keys while the real clock expires some operations: every operation
    completes once, and nothing stays watched."""
    timer = Timer(tick=0.001, executor_threads=2)
    try:
        purgatory = Purgatory(timer)
        state = {"level": 0}
        ops = []
        lock = threading.Lock()
        stop = threading.Event()

        def waiter(seed):
            rng = random.Random(seed)
            for _ in range(500):
                op = Counted(rng.choice((0.001, 0.005, 30.0)), state["level"] + rng.randint(1, 3), state)
                purgatory.try_complete_else_watch(op, ["shared", ("t", seed)])
                with lock:
                    ops.append(op)

        def completer():
            while not stop.is_set():
                state["level"] += 1
                purgatory.check_and_complete("shared")

        threads = [threading.Thread(target=waiter, args=(s,)) for s in range(6)]
        pushers = [threading.Thread(target=completer) for _ in range(2)]
        for t in threads + pushers:
            t.start()
        for t in threads:
            t.join()
        state["level"] += 10
        purgatory.check_and_complete("shared")
        stop.set()
        for t in pushers:
            t.join()
        for op in ops:
            assert op.wait(30)
        assert timer.wait_idle()
        assert len(ops) == 3000
        assert all(op.completions == 1 for op in ops)
        assert purgatory.watched() == 0 and purgatory.pending == 0
        assert purgatory.completed + purgatory.expired == 3000
        assert len(timer) == 0
    finally:
        timer.close()


def test_an_operation_is_handed_over_once(timer):
    purgatory = Purgatory(timer)
    op = Counted(60, 1, {"level": 0})
    with pytest.raises(ValueError, match="at least one key"):
        purgatory.try_complete_else_watch(op, [])
    purgatory.try_complete_else_watch(op, ["a"])
    with pytest.raises(ValueError, match="already"):
        purgatory.try_complete_else_watch(op, ["b"])
