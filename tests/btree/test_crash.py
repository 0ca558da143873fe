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

from helpers.crash_cycles import check_every_kind_of_write_was_tested, run_cycles


@pytest.mark.crash
@pytest.mark.slow
def test_sigkill_cycles_lose_no_acknowledged_write(tmp_path):
    figures = run_cycles(tmp_path, "btree", 25, 20240607)
    check_every_kind_of_write_was_tested(figures, "btree")
    assert figures.acked_maintenance > 0, "no explicit checkpoint ever completed"
    assert figures.facts["height"] >= 3, "the tree never grew past two levels"


@pytest.mark.crash
@pytest.mark.soak
def test_sigkill_soak(tmp_path):
    figures = run_cycles(tmp_path, "btree", 300, 777)
    assert figures.evidence["checkpoint journal present"] > 0, "no kill landed inside a checkpoint's writes"
