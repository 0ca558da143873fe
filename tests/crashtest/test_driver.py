"""The crash-test driver end to end: it catches a child that breaks the
contract on purpose, keeps the evidence, and ``lsmkv crashtest`` reports
figures, failures and bad arguments."""

from __future__ import annotations

import json
import os

import pytest

from lsmkv.cli import main
from lsmkv.crashtest.driver import CrashTestConfig, run_crashtest
from lsmkv.crashtest.keyspace import KeySpace


def run_cli(capsys, *args):
    code = main(["crashtest", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.crash
def test_an_acknowledged_write_the_child_dropped_is_caught(tmp_path):
    workdir = str(tmp_path / "btree")
    figures = run_crashtest(CrashTestConfig(engine="btree", workdir=workdir, cycles=6, seed=3,
                                            sabotage="drop-acked-write"))
    failure = figures.failure
    assert failure is not None and figures.failures == 1
    dropped = KeySpace(2000, 4).key(KeySpace(2000, 4).owned_by(0)[0])
    assert [(m.key, m.problem) for m in failure.mismatches] == [(dropped, "acknowledged write lost")]
    assert f"c{failure.cycle}.t0.n1" in failure.mismatches[0].expected
    # The evidence stays: the database, the oracle (state, this cycle's logs) and the report.
    assert os.path.exists(os.path.join(workdir, "db", "btree.pages"))
    assert os.path.exists(os.path.join(workdir, "oracle", f"cycle-{failure.cycle:06d}", "thread-0.log"))
    with open(os.path.join(workdir, "failure.txt")) as f:
        assert "acknowledged write lost" in f.read()


@pytest.mark.crash
def test_a_batch_left_half_applied_in_flight_is_caught(tmp_path):
    figures = run_crashtest(CrashTestConfig(engine="lsm", workdir=str(tmp_path / "lsm"), cycles=6, seed=3,
                                            sabotage="partial-inflight"))
    failure = figures.failure
    assert failure is not None
    assert {m.problem for m in failure.mismatches} == {f"in-flight batch c{failure.cycle}.t0.n1 partly applied"}
    assert len(failure.mismatches) == 2


@pytest.mark.crash
def test_a_transaction_reading_what_its_thread_never_wrote_is_caught(tmp_path):
    figures = run_crashtest(CrashTestConfig(engine="btree", workdir=str(tmp_path / "btree"), cycles=6, seed=3,
                                            sabotage="unlogged-write"))
    failure = figures.failure
    assert failure is not None
    key = KeySpace(2000, 4).key(0)
    assert sorted((m.key, m.problem) for m in failure.mismatches) == [
        (key, "key never written is present"), (key, f"transaction c{failure.cycle}.t0.n1 read a wrong value")]
    read = next(m for m in failure.mismatches if "read" in m.problem)
    assert (read.expected, read.found) == ("absent (never written)", "value of c0.t0.n0 (16 bytes)")


@pytest.mark.crash
def test_a_child_that_fails_by_itself_is_a_failure_with_its_stderr(tmp_path):
    figures = run_crashtest(CrashTestConfig(engine="btree", workdir=str(tmp_path / "btree"), cycles=6, seed=3,
                                            sabotage="child-error"))
    failure = figures.failure
    assert failure is not None and "the child exited by itself (code 3)" in failure.reason
    assert "deliberate failure in a writer thread" in failure.child_stderr


@pytest.mark.slow
@pytest.mark.crash
def test_cli_runs_cycles_and_prints_the_figures(tmp_path, capsys):
    workdir = str(tmp_path / "work")
    code, out, err = run_cli(capsys, "--engine", "btree", "--cycles", "3", "--seed", "5", "--workdir", workdir,
                             "--threads", "2", "--keys", "400", "-o", "btree.page_size=2048",
                             "-o", "lsm.write_buffer_size=1")
    assert code == 0, err
    assert "crashes survived             3 " in out and "failures                     0" in out
    assert "page_size=2048" in out and "3 SIGKILLs" in out
    with open(os.path.join(workdir, "btree", "oracle", "cycles.jsonl")) as f:
        cycles = [json.loads(line) for line in f]
    assert [c["cycle"] for c in cycles] == [1, 2, 3]
    assert all(c["height"] >= 1 for c in cycles)
    assert not [n for n in os.listdir(os.path.join(workdir, "btree", "oracle")) if n.startswith("cycle-")]


@pytest.mark.crash
def test_cli_failure_exits_1_with_the_difference(tmp_path, capsys):
    code, out, err = run_cli(capsys, "--engine", "btree", "--cycles", "6", "--seed", "3", "--workdir",
                             str(tmp_path / "w"), "--sabotage", "drop-acked-write")
    assert code == 1
    assert "FAILED" in err and "acknowledged write lost: expected value of c" in err
    assert f"kept in {tmp_path / 'w' / 'btree'}" in err


@pytest.mark.parametrize("args, message", [
    (["--cycles", "0"], "cycles must be at least 1"),
    (["--threads", "4", "--keys", "10"], "needs at least 80 keys"),
    (["--engine", "lsm", "-o", "no_such_option=1"], "no_such_option"),
    (["--engine", "btree", "-o", "page_size"], "not of the form name=value"),
])
def test_cli_bad_arguments_give_one_clear_error(tmp_path, capsys, args, message):
    code, out, err = run_cli(capsys, "--workdir", str(tmp_path / "w"), *args)
    assert code == 1 and message in err and len(err.strip().splitlines()) == 1
