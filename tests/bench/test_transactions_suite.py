"""The transactions bench suite (bench/suites/transactions.py): what it
records and that it checks every engine's counters, not how fast anything is."""

from __future__ import annotations

import argparse
import importlib

import pytest

from bench import cli
from bench.engines import availability
from bench.suites import Recorder

suite = importlib.import_module("bench.suites.transactions")


def _args(tmp_path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    suite.add_arguments(parser)
    (tmp_path / "dbs").mkdir(exist_ok=True)
    return parser.parse_args(["--seconds", "0.3", "--threads", "1,3", "--hot-keys", "2",
                              "--dir", str(tmp_path / "dbs"), *extra])


@pytest.mark.slow
def test_every_engine_runs_each_thread_count_and_its_counters_add_up(tmp_path):
    engines = ["lsm", "btree", "lsm-merge", "btree-merge", "sqlite3"] + ([] if availability("lmdb") else ["lmdb"])
    rec = Recorder(suite.NAME, str(tmp_path / "results"))
    suite.run(_args(tmp_path, "--engines", ",".join(engines)), rec)
    runs = {(r["engine"], r["threads"]): r for r in rec.runs}
    assert set(runs) == {(engine, threads) for engine in engines for threads in (1, 3)}
    for (engine, threads), run in runs.items():
        assert run["operations"] > 0 and run["hot_keys"] == 2
        assert run["retries"] >= 0
        if threads == 1 or engine in ("sqlite3", "lmdb", "lsm-merge", "btree-merge"):
            assert run["retries"] == 0, (engine, threads)  # no one to conflict with, or writers queue
    table, = rec.tables
    assert [row[:2] for row in table.rows] == [[e, str(t)] for e in engines for t in (1, 3)]
    assert all(row[-1] == "1.00x" for row in table.rows if row[0] == "sqlite3")
    assert list((tmp_path / "dbs").iterdir()) == []  # the databases are removed


def test_lost_increments_fail_the_run(tmp_path):
    class Losing(suite._Counters):
        """Counters that drop every other increment."""
        def open(self) -> None:
            self.n, self.calls = 0, 0

        def increment(self, key: bytes) -> int:
            self.calls += 1
            self.n += self.calls % 2
            return 0

        def total(self) -> int:
            return self.n

        def close(self) -> None:
            pass

    counters = Losing("losing", str(tmp_path), [b"k"])
    counters.open()
    with pytest.raises(RuntimeError, match="increments were lost"):
        suite.contend(counters, 1, 0.05)


@pytest.mark.parametrize("option, value, message", [
    ("--engines", "sqlite3,nosuch", "argument --engines: unknown engine 'nosuch'"),
    ("--threads", "1,x", "argument --threads: thread counts separated by commas"),
    ("--threads", "0", "argument --threads: counts of at least 1"),
    ("--hot-keys", "0", "argument --hot-keys: must be at least 1"),
])
def test_bad_options_are_one_clear_error(tmp_path, capsys, option, value, message):
    out = tmp_path / "results"
    assert cli.main(["--suite", suite.NAME, "--quiet", "--out", str(out), option, value]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not out.exists()  # nothing ran, nothing was written
