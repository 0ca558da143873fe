"""The group-commit bench suite (bench/suites/group_commit.py): what it
records for both engines, not how fast anything is."""

from __future__ import annotations

import argparse
import importlib

from bench.suites import Recorder

suite = importlib.import_module("bench.suites.group_commit")


def test_the_suite_runs_both_modes_on_both_engines(tmp_path):
    parser = argparse.ArgumentParser()
    suite.add_arguments(parser)
    args = parser.parse_args(["--threads", "3", "--seconds", "0.2", "--single-seconds", "0.1",
                              "--dir", str(tmp_path / "dbs"), "--fsync-delay", "0.001"])
    (tmp_path / "dbs").mkdir()
    rec = Recorder(suite.NAME, str(tmp_path / "results"))
    suite.run(args, rec)
    runs = {(r["engine"], r["workload"]): r for r in rec.runs}
    for engine in ("lsm", "btree"):
        single = runs[engine, "sync put, 1 thread"]
        per_write = runs[engine, "sync put, fsync per write"]
        group = runs[engine, "sync put, group commit"]
        assert single["threads"] == 1 and per_write["threads"] == group["threads"] == 3
        assert min(single["operations"], per_write["operations"], group["operations"]) > 0
        assert per_write["group_commit"] is False and per_write["log_syncs"] == 0
        # Group commit syncs through the log syncer, at most once per write.
        assert 0 < group["log_syncs"] <= group["operations"]
        assert group["latency_us"]["p99"] > 0
    table, = rec.tables
    assert [row[0] for row in table.rows] == ["lsm", "btree"]
    assert "emulated slower disk" in table.note
    assert list((tmp_path / "dbs").iterdir()) == []  # the databases are removed
