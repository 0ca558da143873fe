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


@pytest.mark.crash
def test_sigkill_during_compactions_keeps_the_tree_whole(tmp_path):
    """Small levels so that flushes and compactions (in the worker process)
    run all the time; kill at random moments; after reopen every
    acknowledged write is there, no deleted key is back, and the directory
    holds exactly the tables the manifest names."""
    from lsmkv.check import check_db

    db_path = str(tmp_path / "db")
    oracle = str(tmp_path / "oracle.jsonl")
    rng = random.Random(7)
    options = ["write_buffer_size=8192", "block_size=512", "level1_max_bytes=32768", "target_file_size=8192",
               "l0_compaction_trigger=2", "level_size_multiplier=4"]
    compactions = 0
    for cycle in range(10):
        last_op = crash_oracle.load(oracle)[2] if os.path.exists(oracle) else 0
        run_until_killed("lsm", db_path, oracle, rng.randrange(1 << 30), last_op, rng.uniform(0.3, 1.5), options)
        with lsmkv.open(db_path, disable_auto_compactions=True) as db:
            crash_oracle.verify(db, oracle)
            tables = {int(n[:-4]) for n in os.listdir(db_path) if n.endswith(".sst")}
            assert tables == db._state.version.numbers(), "table files leaked or missing"
            assert not [n for n in os.listdir(db_path) if n.endswith(".tmp")]
            compactions = max(compactions, sum(db.stats()["files_per_level"][1:]))
        report = check_db(db_path)
        assert report.ok, report.problems
    assert compactions > 0, "no compaction output ever reached level 1"
