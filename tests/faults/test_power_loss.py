"""Power loss (and process crashes) at any file-system call.

A seeded workload runs under the fault file system; at the Nth call (N
spread over every call of the workload, opening a new database included)
the power is cut: that call fails (a write may land torn) and so does every
later one. The database objects are abandoned, then the unsynced data is
lost (wholly, or a random part of it with the first lost page write torn),
or nothing is lost (a process kill). The reopened database must hold the
state after some prefix of the operations that includes every write
acknowledged with sync=True (and everything before a flush or compaction),
or after a kill every acknowledged write: so batches are all-or-nothing and
deleted keys never return. It must then pass its checker and take writes.

The default run takes a sample of N; ``--soak`` runs every N, and more seeds.
"""

from __future__ import annotations

import logging
import random

import pytest

from lsmkv.base.fault_fs import FaultInjectionFS
from lsmkv.faults import scenarios, workload

SEEDS = (3,)
SOAK_SEEDS = (3, 4, 5, 6)
SAMPLE = 60


def _sweep(engine, ops, fresh_dir, values, seed):
    rng = random.Random(seed)
    outcomes = []
    logging.disable(logging.CRITICAL)
    try:
        for n in values:
            for mode in scenarios.POWER_MODES:
                torn = rng.choice((None, 1, 3, 9, 40, 200))
                outcomes.append(scenarios.power_cut(engine, fresh_dir(), ops, n, torn=torn, mode=mode,
                                                    seed=rng.randrange(1 << 30)))
    finally:
        logging.disable(logging.NOTSET)
    failures = [f"{o.kind} {o.detail}" for o in outcomes if o.failed]
    assert not failures, "\n".join(failures[:20])
    return outcomes


@pytest.mark.slow
@pytest.mark.parametrize("engine_name", ["lsm", "btree"])
def test_power_cut_at_any_call_keeps_a_prefix_with_every_synced_write(engine_name, fresh_dir, request):
    engine = workload.engine(engine_name)
    soak = request.config.getoption("--soak")
    for seed in SOAK_SEEDS if soak else SEEDS:
        ops = workload.make_ops(seed, 100)
        total = scenarios.count_calls(engine, fresh_dir(), ops, with_open=True)["all"]
        values = range(1, total + 1) if soak else sorted(random.Random(seed).sample(range(1, total + 1), SAMPLE))
        outcomes = _sweep(engine, ops, fresh_dir, values, seed)
        assert all(o.result == scenarios.RECOVERED for o in outcomes)


@pytest.mark.slow
def test_lsm_with_background_flushes_and_compactions(fresh_dir, request):
    """lsmkv flushing and compacting on its own threads (small memtables,
    automatic compaction): the calls interleave differently from run to
    run, and every crash point must still recover a valid prefix."""
    engine = workload.Engine("lsm", dict(write_buffer_size=2048, block_size=256, l0_compaction_trigger=2,
                                         level1_max_bytes=8192, target_file_size=4096))
    ops = [op for op in workload.make_ops(7, 160) if op.is_write]
    total = scenarios.count_calls(engine, fresh_dir(), ops, with_open=True)["all"]
    count = 120 if request.config.getoption("--soak") else 15
    values = sorted(random.Random(7).sample(range(1, total + 1), count))
    outcomes = _sweep(engine, ops, fresh_dir, values, 7)
    assert {o.result for o in outcomes} <= {scenarios.RECOVERED, scenarios.NOT_REACHED}


class IgnoredSyncFS(FaultInjectionFS):
    """A disk that acknowledges fsync of appended files without making
    anything durable (what the check must catch)."""

    def power_loss(self, partial: bool = False) -> None:
        for state in self._files.values():
            if not state.paged:
                state.synced_size = 0
        super().power_loss(partial)


@pytest.mark.parametrize("engine_name", ["lsm", "btree"])
def test_the_check_catches_lost_synced_writes(engine_name, fresh_dir, monkeypatch):
    """The verdict can fail: on a disk that ignores fsync, a power loss
    after synced writes loses them, and the scenario says so."""
    monkeypatch.setattr(scenarios, "FaultInjectionFS", IgnoredSyncFS)
    engine = workload.engine(engine_name)
    ops = [workload.Op("put", ((b"key%02d" % i, b"value %d" % i),), sync=True) for i in range(20)]
    total = scenarios.count_calls(engine, fresh_dir(), ops, with_open=True)["all"]
    outcome = scenarios.power_cut(engine, fresh_dir(), ops, total - 3, mode="power-loss")
    assert outcome.failed, outcome
