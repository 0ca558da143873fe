"""Crash test of the B+tree with the crash-test driver (lsmkv.crashtest): a
child writing from four threads (puts, deletes, batches, merges into
counters, range deletes, transactions committed and rolled back, explicit
checkpoints, with dirty-page and log-size checkpoints all the time) is
SIGKILLed again and again; after every kill the database must recover with
every acknowledged write, each in-flight operation all or nothing (a batch,
a transaction, a range, a merge), nothing of a rolled-back transaction, no
resurrected delete, a whole tree (``check_invariants``, entry count) and a
clean ``btree.check`` both on the crashed directory and after recovery. The
soak variant runs the long mode (opt-in with --soak).
"""

from __future__ import annotations

import pytest

from lsmkv.crashtest.driver import CrashTestConfig, run_crashtest
from lsmkv.crashtest.engines import engine


def _run(tmp_path, cycles: int, seed: int):
    figures = run_crashtest(CrashTestConfig(engine="btree", workdir=str(tmp_path / "btree"), cycles=cycles,
                                            seed=seed))
    assert figures.failure is None, "\n".join(figures.failure.lines())
    assert figures.cycles == cycles
    return figures


@pytest.mark.crash
@pytest.mark.slow
def test_sigkill_cycles_lose_no_acknowledged_write(tmp_path):
    figures = _run(tmp_path, 25, 20240607)
    assert figures.acked_writes > 25 * 50, "the child acknowledged too few writes to test anything"
    assert figures.acked_maintenance > 0, "no explicit checkpoint ever completed"
    assert figures.facts["height"] >= 3, "the tree never grew past two levels"
    assert sum(figures.in_flight.values()) > 0
    # Transactions (committed and rolled back), merges and range deletes, as far as the engine has them.
    assert figures.acked_kinds["txn"] > 0 and figures.acked_kinds["rollback"] > 0
    features = engine("btree").features
    assert ("merge" in features) == (figures.acked_items["merge"] > 0)
    assert ("delete_range" in features) == (figures.acked_items["range delete"] > 0)


@pytest.mark.crash
@pytest.mark.soak
def test_sigkill_soak(tmp_path):
    figures = _run(tmp_path, 300, 777)
    assert figures.evidence["checkpoint journal present"] > 0, "no kill landed inside a checkpoint's writes"
