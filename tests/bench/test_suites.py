"""The bench suite framework (bench/suites/__init__.py and `lsmkv bench --suite`):
discovery, the recorder, results files, report and compare. Not how fast anything is."""

from __future__ import annotations

import csv
import json
import os

import pytest

from bench import cli
from bench.compare import compare
from bench.results import load_results, run_label
from bench.suites import Recorder, SuiteError, discover, get_suite


def test_discovery_finds_suites_by_name_with_the_whole_contract():
    suites = discover()
    assert "timer" in suites
    for name, module in suites.items():
        assert module.NAME == name
        assert isinstance(module.DESCRIPTION, str) and module.DESCRIPTION
        assert callable(module.add_arguments) and callable(module.run)


def test_an_unknown_suite_is_one_clear_error():
    with pytest.raises(SuiteError, match="unknown suite 'nope'.*timer"):
        get_suite("nope")
    assert cli.main(["--suite", "nope"]) == 2
    assert cli.main(["--suite"]) == 2


def test_recorder_computes_rates_and_refuses_malformed_runs(tmp_path):
    seen = []
    rec = Recorder("demo", str(tmp_path), on_run=seen.append)
    run = rec.run("lsm", "get", 1000, 0.5, latency_us=rec.latency_us([1000, 2000, 3000, 4000]), found=1000)
    assert run["ops_per_sec"] == 2000.0 and run["family"] == "demo" and run["found"] == 1000
    assert run["latency_us"]["p50"] == pytest.approx(2.0, rel=0.05)
    assert run["latency_us"]["max"] == pytest.approx(4.0, rel=0.05)
    assert seen == [run] and rec.runs == [run]
    assert rec.latency_us([]) is None
    for bad in [("", "get", 1, 1.0), ("lsm", "get", -1, 1.0), ("lsm", "get", 1, -2.0), ("lsm", "get", 1.5, 1.0)]:
        with pytest.raises(SuiteError):
            rec.run(*bad)
    with pytest.raises(SuiteError, match="set by the recorder"):
        rec.run("lsm", "get", 1, 1.0, ops_per_sec=5)
    with pytest.raises(SuiteError, match="3 cells"):
        rec.table("t", ["a", "b", "c"], [[1, 2]])
    assert len(rec.runs) == 1


def _timer_suite(out, *extra):
    return cli.main(["--suite", "timer", "--timers", "2000", "--fire-timers", "100", "--fire-span", "0.05",
                     "--max-delay", "30", "--quiet", "--out", str(out), *extra])


def test_a_suite_run_writes_the_same_results_files_as_the_workloads(tmp_path):
    out = tmp_path / "run"
    assert _timer_suite(out) == 0
    doc = load_results(str(out))
    assert doc["config"]["suite"] == "timer" and doc["config"]["options"]["timers"] == 2000
    assert "--suite timer" in doc["config"]["command"]
    assert doc["error"] is None
    runs = {(r["engine"], r["workload"]) for r in doc["runs"]}
    assert ("wheel", "schedule") in runs and ("heapq", "fire") in runs
    assert all(r["family"] == "timer" for r in doc["runs"])
    assert doc["tables"] and doc["tables"][0]["rows"]
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(doc["runs"]) and {r["engine"] for r in rows} == {"wheel", "heapq"}
    report = (out / "report.md").read_text()
    assert "suite `timer`" in report and doc["tables"][0]["title"] in report and "Every run" in report


def test_compare_pairs_suite_runs_with_the_same_suite_only(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert _timer_suite(a) == 0 and _timer_suite(b) == 0
    old, new = load_results(str(a)), load_results(str(b))
    cmp = compare(old, new)
    assert {(d.engine, d.workload) for d in cmp.diffs} == {(r["engine"], run_label(r)) for r in new["runs"]}
    assert all(d.workload.startswith("timer/") for d in cmp.diffs)
    # A default-workload run named like a suite's workload is a different run.
    plain = dict(new["runs"][0], family="db_bench")
    assert run_label(plain) == plain["workload"] != run_label(new["runs"][0])
    assert cli.main(["compare", str(a), str(b)]) == 0


def test_a_failing_suite_keeps_what_it_recorded_and_exits_1(tmp_path, monkeypatch):
    module = get_suite("timer")

    def run_then_fail(args, rec):
        rec.run("wheel", "partial", 10, 1.0)
        raise RuntimeError("disk gone")
    monkeypatch.setattr(module, "run", run_then_fail)
    out = tmp_path / "failed"
    assert _timer_suite(out) == 1
    doc = json.loads((out / "results.json").read_text())
    assert doc["error"] == "RuntimeError: disk gone"
    assert [r["workload"] for r in doc["runs"]] == ["partial"]
    assert "failed: RuntimeError: disk gone" in (out / "report.md").read_text()
    assert os.path.exists(out / "results.csv")


def test_a_suite_plot_lands_in_the_results_folder_and_the_report(tmp_path, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    module = get_suite("timer")

    def draw():
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        return fig

    def run_with_plot(args, rec):
        rec.run("wheel", "schedule", 10, 1.0)
        with pytest.raises(SuiteError, match="png file name"):
            rec.plot("../escape.png", "no", draw)
        with pytest.raises(SuiteError, match="png file name"):
            rec.plot("plot.svg", "no", draw)
        assert rec.plot("line.png", "A falling line", draw) == os.path.join(rec.out_dir, "line.png")
        with pytest.raises(SuiteError, match="two plots"):
            rec.plot("line.png", "again", draw)
    monkeypatch.setattr(module, "run", run_with_plot)
    out = tmp_path / "plotted"
    (out).mkdir()
    (out / "stale.png").write_bytes(b"not ours")  # a PNG the suite did not record is not listed
    assert _timer_suite(out) == 0
    doc = load_results(str(out))
    assert doc["plots"] == ["line.png"] and doc["plot_titles"] == {"line.png": "A falling line"}
    assert os.path.getsize(out / "line.png") > 1000
    report = (out / "report.md").read_text()
    assert "## A falling line" in report and "](line.png)" in report and "stale.png" not in report
