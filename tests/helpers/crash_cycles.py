"""SIGKILL cycles of the crash-test driver (lsmkv.crashtest) run for an
engine's crash test, and the checks every engine's run must pass: no
failure, every cycle run, and every kind of write the engine has
acknowledged (and some in flight at a kill)."""

from __future__ import annotations

from lsmkv.crashtest.driver import CrashTestConfig, run_crashtest
from lsmkv.crashtest.engines import engine


def run_cycles(tmp_path, engine_name: str, cycles: int, seed: int):
    """The figures of ``cycles`` kill-and-recover cycles of ``engine_name``
    (workdir under ``tmp_path``), which must all have passed."""
    figures = run_crashtest(CrashTestConfig(engine=engine_name, workdir=str(tmp_path / engine_name), cycles=cycles,
                                            seed=seed))
    assert figures.failure is None, "\n".join(figures.failure.lines())
    assert figures.cycles == cycles
    return figures


def check_every_kind_of_write_was_tested(figures, engine_name: str) -> None:
    """The child acknowledged enough writes to test anything, some writes
    were in flight at a kill, and transactions (committed and rolled back),
    merges and range deletes were acknowledged, as far as the engine has
    them."""
    assert figures.acked_writes > figures.cycles * 50, "the child acknowledged too few writes to test anything"
    assert sum(figures.in_flight.values()) > 0
    assert figures.acked_kinds["txn"] > 0 and figures.acked_kinds["rollback"] > 0
    features = engine(engine_name).features
    assert ("merge" in features) == (figures.acked_items["merge"] > 0)
    assert ("delete_range" in features) == (figures.acked_items["range delete"] > 0)
