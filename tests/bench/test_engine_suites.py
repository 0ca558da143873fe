"""The engine suites that replaced scripts/bench_lsm.py, bench_btree.py and
bench_compaction.py (bench/suites/lsm.py, btree.py, compaction.py), run
tiny through ``lsmkv bench --suite``, and the scripts that now wrap them:
what they record, not how fast anything is."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench import cli
from bench.engines import availability
from bench.results import load_results

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _available(names):
    return [n for n in names if availability(n) is None]


def _runs(doc):
    return {(r["engine"], r["workload"]): r for r in doc["runs"]}


def _table(doc, title_start):
    tables = [t for t in doc["tables"] if t["title"].startswith(title_start)]
    assert len(tables) == 1, [t["title"] for t in doc["tables"]]
    return tables[0]


def _is_ratio(cell):
    return cell.endswith("x") and float(cell[:-1]) > 0


@pytest.mark.slow
def test_lsm_suite_runs_every_phase_on_every_engine_with_ratios(tmp_path):
    out = tmp_path / "lsm"
    assert cli.main(["--suite", "lsm", "--keys", "3000", "--reads", "500", "--quiet", "--out", str(out)]) == 0
    doc = load_results(str(out))
    assert doc["error"] is None and doc["config"]["suite"] == "lsm"
    engines = ["lsm"] + _available(["rocksdb", "leveldb"]) + ["dict", "SortedDict"]
    runs = _runs(doc)
    phases = ["put", "batch put", "get hit", "get miss", "scan"]
    assert {(e, p) for e in engines for p in phases} <= set(runs)
    assert {("memtable", "memtable insert"), ("SortedDict", "memtable insert")} <= set(runs)
    assert len(runs) == len(engines) * len(phases) + 2
    assert all(r["family"] == "lsm" and r["ops_per_sec"] > 0 for r in doc["runs"])
    assert runs["lsm", "get hit"]["operations"] == 500 and runs["lsm", "put"]["operations"] == 3000
    main = _table(doc, "lsmkv against the references")
    assert main["columns"][:1 + len(engines)] == ["phase"] + engines
    assert main["columns"][1 + len(engines):] == [f"lsm / {e}" for e in engines if e != "lsm"]
    assert [row[0] for row in main["rows"]] == phases
    for row in main["rows"]:
        assert all(_is_ratio(c) for c in row[1 + len(engines):])
    assert _is_ratio(_table(doc, "Memtable")["rows"][0][2])
    assert _table(doc, "lsmkv after the put phase")["rows"]


@pytest.mark.slow
def test_btree_suite_records_warm_and_small_cache_phases_with_ratios(tmp_path):
    out = tmp_path / "btree"
    # The scripts' engine names (sqlite3, lsmkv) are still accepted.
    assert cli.main(["--suite", "btree", "--keys", "3000", "--small-ops", "300", "--rounds", "1",
                     "--engines", "btree,lmdb,sqlite3,lsmkv", "--quiet", "--out", str(out)]) == 0
    doc = load_results(str(out))
    assert doc["error"] is None
    engines = ["btree"] + _available(["lmdb"]) + ["sqlite", "lsm"]
    runs = _runs(doc)
    for engine in engines:
        for workload in ("put", "get", "scan", "get, 5% cache", "overwrite, 5% cache"):
            assert (engine, workload) in runs, (engine, workload)
    assert ("btree", "get, no hash index") in runs
    assert runs["btree", "get, 5% cache"]["read_amp"] >= 0
    assert runs["btree", "overwrite, 5% cache"]["bytes_per_put"] > 0
    assert runs["btree", "scan"]["operations"] == 3000 and runs["btree", "get, 5% cache"]["operations"] == 300
    main = _table(doc, "btree against LMDB and sqlite3")
    assert main["columns"] == ["measure"] + engines + ["btree/lmdb", "btree/sqlite3", "target"]
    by_label = {row[0]: row for row in main["rows"]}
    put = by_label["put ops/s (sync=False, one commit each)"]
    assert _is_ratio(put[-2]) and put[-1].startswith("≥")
    if "lmdb" in engines:
        assert ("lmdb", "get, one txn") in runs
        assert _is_ratio(put[-3])
        assert by_label["page reads per get (5% cache)"][1 + engines.index("lmdb")] == "n/a (mmap)"
    details = {row[0] for row in _table(doc, "btree details")["rows"]}
    assert "btree height" in details


@pytest.mark.slow
def test_compaction_suite_records_fills_amplification_and_its_plot(tmp_path):
    out = tmp_path / "compaction"
    copy = tmp_path / "img" / "fill.png"
    assert cli.main(["--suite", "compaction", "--keys", "4000", "--write-buffer", "65536", "--level1", "262144",
                     "--file-size", "32768", "--executor", "thread", "--plot", str(copy), "--quiet",
                     "--out", str(out)]) == 0
    doc = load_results(str(out))
    assert doc["error"] is None
    engines = ["lsm"] + _available(["rocksdb"])
    runs = _runs(doc)
    assert ("lsm", "fillrandom, compaction off") in runs
    for engine in engines:
        for workload in ("fillrandom", "overwrite", "delete 20%", "compact_range"):
            assert (engine, workload) in runs, (engine, workload)
        assert runs[engine, "compact_range"]["space_amp"] > 0
        # RocksDB's figures come from its stats text in GB with two decimals: 0 at this size.
        assert runs[engine, "fillrandom"]["write_amp"] >= 0
        assert runs[engine, "delete 20%"]["operations"] == 800
    assert runs["lsm", "fillrandom"]["max_l0"] >= 1 and runs["lsm", "fillrandom"]["write_amp"] > 1
    assert runs["lsm", "fillrandom"]["entries_per_put"] > 0  # compaction ran
    table = _table(doc, "fillrandom: lsmkv with compaction against RocksDB")
    assert table["columns"] == ["", "lsmkv, compaction off", "lsmkv"] + (["rocksdb"] if "rocksdb" in engines else [])
    rows = {row[0]: row for row in table["rows"]}
    assert rows["throughput vs lsmkv with compaction off"][1] == "1.00"
    assert all(float(c) > 0 for c in rows["throughput vs lsmkv with compaction off"][2:])
    assert all(float(c) > 0 for c in rows["overwrite + delete 20% + compact_range: space amp"][2:])
    # The plot went through the harness: in the results folder, results.json and report.md.
    assert doc["plots"] == ["compaction_timeline.png"]
    assert os.path.getsize(out / "compaction_timeline.png") > 1000
    assert "](compaction_timeline.png)" in (out / "report.md").read_text()
    assert copy.read_bytes() == (out / "compaction_timeline.png").read_bytes()


def test_an_unknown_engine_fails_before_anything_runs(tmp_path):
    out = tmp_path / "bad"
    assert cli.main(["--suite", "lsm", "--keys", "100", "--engines", "lsm,oracle", "--quiet", "--out", str(out)]) == 2
    assert not out.exists()  # a usage error: nothing ran, nothing was written


@pytest.mark.parametrize("script,args,engines", [
    pytest.param("bench_lsm.py", ["--keys", "2000", "--reads", "200", "--engines", "lsmkv,dict"], {"lsm", "dict"},
                 marks=pytest.mark.slow),
    ("bench_btree.py", ["--keys", "2000", "--small-ops", "200", "--rounds", "1", "--engines", "btree,sqlite3"],
     {"btree", "sqlite"}),
    ("bench_compaction.py", ["--keys", "2000", "--skip-rocksdb", "--executor", "thread"], {"lsm"}),
])
@pytest.mark.subprocess
def test_the_scripts_are_wrappers_that_keep_their_options(tmp_path, script, args, engines):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", script), *args, "--quiet", "--out", str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = load_results(str(out))
    assert doc["config"]["suite"] == script[len("bench_"):-len(".py")]
    assert {r["engine"] for r in doc["runs"]} - {"memtable", "SortedDict"} == engines
