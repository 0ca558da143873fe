"""The range_delete bench suite (bench/suites/range_delete.py): what it
records through the real Recorder, not how fast anything is."""

from __future__ import annotations

import argparse
import importlib

from bench.suites import Recorder

suite = importlib.import_module("bench.suites.range_delete")


def test_the_suite_deletes_the_same_keys_both_ways_warm_and_cold_and_tabulates_them(tmp_path):
    parser = argparse.ArgumentParser()
    suite.add_arguments(parser)
    args = parser.parse_args(["--keys", "300,1500", "--value-size", "50", "--cold-pages", "8"])
    rec = Recorder(suite.NAME, str(tmp_path))
    suite.run(args, rec)
    runs = {(r["workload"], r["keys"]): r for r in rec.runs}
    assert set(runs) == {(f"{kind}-{pool}", keys) for kind in suite.KINDS for pool in ("warm", "cold")
                         for keys in (300, 1500)}
    for run in rec.runs:
        assert run["entries_left"] == 2000 and run["problems"] == 0 and run["operations"] == run["keys"]
    # One record for the range, a delete per key for the other way.
    assert runs["delete_range-cold", 1500]["log_bytes"] < 100 < runs["deletes-cold", 1500]["log_bytes"]
    assert runs["delete_range-warm", 1500]["pages_freed"] > runs["delete_range-warm", 300]["pages_freed"] > 0
    table, = rec.tables
    assert [row[:2] for row in table.rows] == [["300", "warm"], ["300", "cold"], ["1,500", "warm"],
                                               ["1,500", "cold"]]
