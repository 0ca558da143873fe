"""Crash test: SIGKILL a writer process at random moments, reopen, verify.

After every kill the database must open, hold every acknowledged write (a
process crash loses nothing handed to the OS; sync=True writes survive even
power loss, which the reliability suite covers), hold each batch entirely or
not at all, and never bring back a deleted key.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import lsmkv

SUPPORT = Path(__file__).resolve().parent.parent / "support"
sys.path.insert(0, str(SUPPORT))
import crash_oracle  # noqa: E402

WRITER = str(SUPPORT / "crash_writer.py")


def run_until_killed(engine: str, db_path: str, oracle: str, seed: int, first_op: int, delay: float,
                     options: list[str]) -> None:
    proc = subprocess.Popen([sys.executable, WRITER, engine, db_path, oracle, str(seed), str(first_op), *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline()
        assert line.strip() == b"ready", proc.stderr.read().decode()
        time.sleep(delay)
        assert proc.poll() is None, proc.stderr.read().decode()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.crash
def test_sigkill_loses_no_acknowledged_write(tmp_path):
    db_path = str(tmp_path / "db")
    oracle = str(tmp_path / "oracle.jsonl")
    rng = random.Random(2024)
    options = ["write_buffer_size=16384", "block_size=512"]
    verified = 0
    in_flight_seen = 0
    for cycle in range(12):
        _, _, last_op = crash_oracle.load(oracle) if os.path.exists(oracle) else ([], None, 0)
        run_until_killed("lsm", db_path, oracle, rng.randrange(1 << 30), last_op,
                         rng.uniform(0.05, 0.8), options)
        with lsmkv.open(db_path) as db:
            n, applied = crash_oracle.verify(db, oracle)
            verified = n
            in_flight_seen += applied
            stats = db.stats()
        assert stats["background_error"] is None
    assert verified > 500, f"only {verified} operations were acknowledged in 12 cycles"
    with lsmkv.open(db_path) as db:
        report_files = os.listdir(db_path)
    assert not [n for n in report_files if n.endswith(".tmp")]
