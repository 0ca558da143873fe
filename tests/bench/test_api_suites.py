"""The cursor, dbm and defaults bench suites run end to end at tiny sizes and
record what they say they measure (not how fast anything is)."""

from __future__ import annotations

import json

import pytest

from bench import cli
from bench.engines import availability


def _run(tmp_path, suite, *args):
    out = tmp_path / suite
    assert cli.main(["--suite", suite, "--quiet", "--out", str(out), *args]) == 0
    return json.loads((out / "results.json").read_text())


@pytest.mark.slow
def test_cursor_suite_reads_the_same_entries_on_every_engine(tmp_path):
    doc = _run(tmp_path, "cursor", "--keys", "3000", "--seeks", "50", "--steps", "20")
    runs = doc["runs"]
    engines = {r["engine"] for r in runs}
    assert {"lsm", "btree"} <= engines
    for label in ("seek+next", "seek_for_prev+prev"):
        counts = {r["engine"]: r["operations"] for r in runs if r["workload"] == label}
        assert len(set(counts.values())) == 1, counts  # every cursor read the same entries
        assert 0 < next(iter(counts.values())) <= 50 * 20
    assert doc["tables"][0]["rows"]


def test_dbm_suite_covers_both_engines_and_the_stdlib(tmp_path):
    doc = _run(tmp_path, "dbm", "--keys", "2000", "--reads", "500")
    names = {r["engine"] for r in doc["runs"]}
    assert {"lsmkv.dbm", "btree.dbm", "dbm.dumb"} <= names
    assert all(r["operations"] in (2000, 500) for r in doc["runs"])
    assert any(row[0] == "lsmkv.dbm" and row[1] == "dbm.dumb" for row in doc["tables"][0]["rows"])


@pytest.mark.slow
@pytest.mark.subprocess
def test_defaults_suite_measures_each_engine_in_its_own_process(tmp_path):
    engines = ["lsm", "btree"] + [e for e in ("leveldb", "lmdb", "dbm") if availability(e) is None]
    doc = _run(tmp_path, "defaults", "--keys", "3000", "--reads", "500", "--engines", ",".join(engines))
    by = {(r["engine"], r["workload"]): r for r in doc["runs"]}
    for e in engines:
        assert by[e, "put"]["operations"] == 3000
        assert by[e, "get"]["found"] == 500
        first = by[e, "get-first-pass"]  # the pass right after the load, on other keys
        assert first["found"] == 500 and first["operations"] == 500
        assert first["first_over_warm"] == pytest.approx(first["elapsed_s"] / by[e, "get"]["elapsed_s"], rel=0.02)
        assert by[e, "scan"]["operations"] == 3000
        assert by[e, "get"]["peak_rss_mb"] >= by[e, "get"]["baseline_rss_mb"] > 0
        assert by[e, "get"]["cpu_us_per_op"] > 0
        cached = by[e, "get"]["cached_before"]
        assert cached is None or 0.0 <= cached <= 1.0
    targets = {(row[1], row[2], row[0]) for row in doc["tables"][0]["rows"]}
    assert ("lsm", "leveldb", "random get") in targets or "leveldb" not in engines


@pytest.mark.slow
@pytest.mark.subprocess
def test_defaults_suite_runs_the_pure_build_beside_the_compiled_one(tmp_path):
    """lsm-pure and btree-pure: the same work in a child process with
    LSMKV_NO_EXTENSIONS=1; on the compiled build a table sets the two side by side."""
    from lsmkv.base.build import BUILD
    doc = _run(tmp_path, "defaults", "--keys", "2000", "--reads", "300", "--engines", "lsm,lsm-pure,btree-pure")
    by = {(r["engine"], r["workload"]): r for r in doc["runs"]}
    assert by["lsm", "put"]["build"] == BUILD.kind
    for e in ("lsm-pure", "btree-pure"):
        assert by[e, "put"]["build"] == "pure" and by[e, "get"]["found"] == 300 and by[e, "scan"]["operations"] == 2000
    builds = next(t for t in doc["tables"] if t["title"] == "The compiled build against the pure build")
    assert [row[:2] for row in builds["rows"]] == [["lsm", "put/s"], ["lsm", "get/s, first pass"],
                                                   ["lsm", "get/s, warm"], ["lsm", "scan entries/s"]]
    assert all(row[4].endswith("x") for row in builds["rows"])


def test_defaults_suite_refuses_more_reads_than_two_passes_of_distinct_keys_allow(tmp_path, capsys):
    out = tmp_path / "defaults"
    assert cli.main(["--suite", "defaults", "--quiet", "--out", str(out), "--keys", "1000", "--reads", "501",
                     "--engines", "lsm"]) != 0
    assert "--reads must be between 1 and half of --keys" in capsys.readouterr().err
    assert not out.exists()  # nothing ran, nothing was written


@pytest.mark.parametrize("args, message", [
    (["--engines", "lsm,rocks"], "argument --engines: unknown engine 'rocks'"),
    (["--records", "0"], "argument --records: must be at least 1, not 0"),
])
def test_kafka_end_to_end_suite_refuses_bad_options_before_starting_anything(tmp_path, capsys, args, message):
    out = tmp_path / "e2e"
    assert cli.main(["--suite", "kafka-e2e", "--quiet", "--out", str(out), *args]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
