"""Crash test of the LSM engine with the crash-test driver (lsmkv.crashtest):
a child writing from four threads (puts, deletes, batches, range
deletes, merges where the engine has them, transactions committed and rolled
back, flushes, compact_range, with flushes and compactions running all the
time in the background) is SIGKILLed again and again; after every kill the
database must recover with every acknowledged write, each in-flight operation
all or nothing (a batch, a transaction, a range), nothing of a rolled-back
transaction, no resurrected delete, exactly the tables its manifest names, and a
clean ``check_db``. The soak variant runs the long mode (opt-in with --soak).
"""

from __future__ import annotations

import pytest

from helpers.crash_cycles import check_every_kind_of_write_was_tested, run_cycles


@pytest.mark.crash
@pytest.mark.slow
def test_sigkill_cycles_lose_no_acknowledged_write(tmp_path):
    figures = run_cycles(tmp_path, "lsm", 20, 2024)
    check_every_kind_of_write_was_tested(figures, "lsm")
    assert figures.killed_in_maintenance or figures.evidence, "no kill landed in a flush or a compaction"
    assert figures.facts["deepest_level"] >= 1, "no compaction output ever reached level 1"


@pytest.mark.crash
@pytest.mark.soak
def test_sigkill_soak(tmp_path):
    figures = run_cycles(tmp_path, "lsm", 300, 7)
    assert figures.facts["deepest_level"] >= 2
