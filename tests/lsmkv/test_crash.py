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

from lsmkv.crashtest.driver import CrashTestConfig, run_crashtest
from lsmkv.crashtest.engines import engine


def _run(tmp_path, cycles: int, seed: int):
    figures = run_crashtest(CrashTestConfig(engine="lsm", workdir=str(tmp_path / "lsm"), cycles=cycles, seed=seed))
    assert figures.failure is None, "\n".join(figures.failure.lines())
    assert figures.cycles == cycles
    return figures


@pytest.mark.crash
@pytest.mark.slow
def test_sigkill_cycles_lose_no_acknowledged_write(tmp_path):
    figures = _run(tmp_path, 20, 2024)
    assert figures.acked_writes > 20 * 50, "the child acknowledged too few writes to test anything"
    assert figures.killed_in_maintenance or figures.evidence, "no kill landed in a flush or a compaction"
    assert figures.facts["deepest_level"] >= 1, "no compaction output ever reached level 1"
    assert sum(figures.in_flight.values()) > 0
    # Transactions (committed and rolled back), merges and range deletes, as far as the engine has them.
    assert figures.acked_kinds["txn"] > 0 and figures.acked_kinds["rollback"] > 0
    features = engine("lsm").features
    assert ("merge" in features) == (figures.acked_items["merge"] > 0)
    assert ("delete_range" in features) == (figures.acked_items["range delete"] > 0)


@pytest.mark.crash
@pytest.mark.soak
def test_sigkill_soak(tmp_path):
    figures = _run(tmp_path, 300, 7)
    assert figures.facts["deepest_level"] >= 2
