"""Crash tests: a writer process is SIGKILLed mid-stream and mid-checkpoint;
after reopening, every operation it acknowledged (all with sync=True) is
there, batches are all-or-nothing, and the check finds nothing wrong."""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import threading

import pytest

import btree

sys.path.insert(0, os.path.dirname(__file__))
from crash_writer import apply, operations  # noqa: E402

WRITER = os.path.join(os.path.dirname(__file__), "crash_writer.py")


def _run_and_kill(path: str, seed: int, rng: random.Random) -> tuple[int, bool]:
    """Start the writer, SIGKILL it at a random moment; return (acked ops, journal seen)."""
    proc = subprocess.Popen([sys.executable, WRITER, path, str(seed)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n", proc.stderr.read()
        mode = rng.choice(("acks", "acks", "checkpoint"))
        target = rng.randint(1, 300)
        acked = 0
        checkpoints = 0
        timer = None
        for line in proc.stdout:
            if line.startswith("ack "):
                acked = int(line.split()[1]) + 1
                if mode == "acks" and acked >= target:
                    break
            elif line == "checkpoint\n":
                checkpoints += 1
                if mode == "checkpoint":
                    # Kill somewhere inside the checkpoint (journal write, in-place writes, log switch).
                    timer = threading.Timer(rng.uniform(0, 0.03), proc.send_signal, (signal.SIGKILL,))
                    timer.start()
                    break
        proc.send_signal(signal.SIGKILL)
        if timer is not None:
            timer.cancel()
        # Acks already in the pipe were given before the kill: count them too.
        for line in proc.stdout:
            if line.startswith("ack "):
                acked = int(line.split()[1]) + 1
        proc.wait()
        journal = os.path.exists(os.path.join(path, "btree.journal"))
        return acked, journal
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def _crash_cycles(path: str, cycles: int, seed: int) -> tuple[dict, int]:
    rng = random.Random(seed)
    model: dict[bytes, bytes] = {}
    journals = 0
    for cycle in range(cycles):
        op_seed = seed * 100_000 + cycle
        acked, journal = _run_and_kill(path, op_seed, rng)
        journals += journal
        ops = operations(op_seed, acked + 1)
        before = dict(model)
        for op in itertools.islice(ops, acked):
            apply(before, op)
        after = dict(before)
        inflight = next(ops, None)
        if inflight is not None:
            apply(after, inflight)
        report = btree.check(path)
        assert report.ok, report.problems
        with btree.open(path) as db:
            got = dict(db.scan())
            assert got == before or got == after, f"cycle {cycle}: state after {acked} acks is wrong"
            assert db.stats()["entries"] == len(got)
            assert db.check_invariants() == []
        model = got
    return model, journals


@pytest.mark.crash
@pytest.mark.slow
def test_sigkill_loses_no_acknowledged_write(tmp_path):
    model, journals = _crash_cycles(str(tmp_path / "db"), 14, 20240607)
    assert len(model) > 100
    print(f"{journals} of 14 kills left a checkpoint journal to re-apply")


@pytest.mark.crash
@pytest.mark.soak
def test_sigkill_soak(tmp_path):
    """The long mode: 300 kill/reopen/verify cycles (opt-in with --soak)."""
    model, journals = _crash_cycles(str(tmp_path / "db"), 300, 777)
    assert len(model) > 100
    print(f"{journals} of 300 kills left a checkpoint journal to re-apply")
