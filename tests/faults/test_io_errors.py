"""EIO and a full disk at the Nth call of each file-system operation.

For each engine and operation kind, a short deterministic workload (puts,
deletes, batches, sync writes, flushes or checkpoints, and compactions for
lsmkv) runs with the Nth call of that operation failing. After each: the
failing call raised BackgroundError carrying the errno, reads returned
exactly the acknowledged writes, writes stayed stopped (and resume() kept
failing while a full disk stayed full), resume() -- or in some runs a plain
reopen -- brought writes back, nothing acknowledged was lost, no deleted
key returned, and the engine's checker found the database healthy.

The default run takes a sample of N spread over every call of the
workload; ``--soak`` runs every N.
"""

from __future__ import annotations

import errno
import logging

import pytest

from lsmkv.faults import scenarios, workload

OPERATIONS = ("open", "write", "sync", "rename", "remove", "read", "dirsync", "fallocate")
#: A full disk fails creating files, writing and preallocating.
FULL_DISK_OPERATIONS = ("open", "write", "fallocate")
SEED = 11
SAMPLE = 10
#: The one (engine, operation) pair the workload never calls: the B-tree
#: preallocates nothing. A failure of a call that is never made is nothing to
#: test, but the pair must stay the only one (else its faults go untested).
#: (btree: no preallocation, and since format 4 no checkpoint journal to remove.)
NEVER_CALLED = {("btree", "fallocate"), ("btree", "remove")}


def sample(n: int, k: int) -> list[int]:
    """About k values of 1..n, spread evenly, first and last included."""
    if n <= k:
        return list(range(1, n + 1))
    return sorted({1 + round(i * (n - 1) / (k - 1)) for i in range(k)})


@pytest.fixture(scope="module")
def ops():
    return workload.make_ops(SEED, 120)


@pytest.fixture(scope="module", params=["lsm", "btree"])
def calls(request, ops, tmp_path_factory):
    engine = workload.engine(request.param)
    return engine, scenarios.count_calls(engine, str(tmp_path_factory.mktemp("count")), ops)


def _run_all(engine, ops, fresh_dir, operation, values, error, **kwargs):
    logging.disable(logging.CRITICAL)  # every failure logs an error on purpose
    try:
        outcomes = [scenarios.io_error(engine, fresh_dir(), ops, operation, nth, error, seed=nth, **kwargs)
                    for nth in values]
    finally:
        logging.disable(logging.NOTSET)
    failures = [f"{o.kind} {o.detail}" for o in outcomes if o.failed]
    assert not failures, "\n".join(failures)
    return outcomes


@pytest.mark.parametrize("operation", OPERATIONS)
def test_eio_then_resume(calls, ops, fresh_dir, operation, request):
    engine, counts = calls
    n = counts[operation]
    assert (n == 0) == ((engine.name, operation) in NEVER_CALLED), (engine.name, operation, n)
    if not n:
        return
    values = range(1, n + 1) if request.config.getoption("--soak") else sample(n, SAMPLE)
    outcomes = _run_all(engine, ops, fresh_dir, operation, values, errno.EIO)
    # A failed removal of an obsolete file is harmless to lsmkv; everything else must surface.
    expected = {scenarios.TOLERATED} if (engine.name, operation) == ("lsm", "remove") else {scenarios.RECOVERED}
    assert {o.result for o in outcomes} == expected


@pytest.mark.parametrize("operation", ("write", "sync", "read", "rename"))
def test_eio_then_reopen_without_resume(calls, ops, fresh_dir, operation, request):
    """Closing in the error state and reopening also recovers; the write
    that failed is either wholly there or not at all."""
    engine, counts = calls
    values = range(1, counts[operation] + 1) if request.config.getoption("--soak") else sample(counts[operation], 4)
    outcomes = _run_all(engine, ops, fresh_dir, operation, values, errno.EIO, resume=False)
    assert {o.result for o in outcomes} == {scenarios.RECOVERED}


@pytest.mark.slow
@pytest.mark.parametrize("resume", [True, False], ids=["resume", "reopen"])
def test_torn_write_then_resume_or_reopen(calls, ops, fresh_dir, resume, request):
    """A write of which only a prefix lands before EIO (a log record, a
    table block, a page, a journal, a manifest record...)."""
    engine, counts = calls
    n = counts["write"]
    values = range(1, n + 1) if request.config.getoption("--soak") else sample(n, SAMPLE)
    outcomes = []
    for size in (1, 9, 200):
        outcomes += _run_all(engine, ops, fresh_dir, "write", values, errno.EIO, torn=size, resume=resume)
    assert {o.result for o in outcomes} == {scenarios.RECOVERED}


@pytest.mark.parametrize("operation", FULL_DISK_OPERATIONS)
def test_full_disk_then_space_freed(calls, ops, fresh_dir, operation, request):
    """ENOSPC that stays until cleared: writes fail cleanly, resume() fails
    while the disk is full, everything stored stays readable, and once space
    is freed resume() brings writes back with nothing acknowledged lost."""
    engine, counts = calls
    n = counts["create"] if operation == "open" else counts[operation]  # a full disk fails creating, not opening
    assert (n == 0) == ((engine.name, operation) in NEVER_CALLED), (engine.name, operation, n)
    if not n:
        return
    values = range(1, n + 1) if request.config.getoption("--soak") else sample(n, SAMPLE // 2)
    outcomes = _run_all(engine, ops, fresh_dir, operation, values, errno.ENOSPC, sticky=True)
    assert {o.result for o in outcomes} == {scenarios.RECOVERED}
