"""``lsmkv bench`` end to end with tiny sizes, on every engine that can run here."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from bench.cli import main
from types import SimpleNamespace

from bench.engines import ENGINES, availability

AVAILABLE = [name for name in ENGINES if availability(name) is None]
WORKLOADS = ["fillseq", "fillrandom", "overwrite", "readrandom", "readmissing", "readseq", "readreverse",
             "seekrandom", "ycsb-a", "ycsb-b", "ycsb-c", "ycsb-d", "ycsb-e", "ycsb-f", "deleterandom"]
#: Workloads that scan key ranges: engines without key order skip them.
SCANNING = {"readseq", "readreverse", "seekrandom", "ycsb-e"}
RECORDS, OPERATIONS = 600, 300


def runs_of(engine):
    """The workloads ``engine`` runs (the others it skips, saying why)."""
    return [w for w in WORKLOADS
            if ENGINES[engine].skip_reason(SimpleNamespace(name=w, scans=w in SCANNING)) is None]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "results"
    code = main(["--engines", ",".join(AVAILABLE), "--workloads", ",".join(WORKLOADS),
                 "--records", str(RECORDS), "--operations", str(OPERATIONS), "--seed", "5",
                 "--out", str(out), "--quiet", "--builds", "this"])
    return code, out, json.loads((out / "results.json").read_text())


@pytest.mark.slow
def test_exit_code_and_files(full_run):
    code, out, _ = full_run
    assert code == 0
    for name in ("results.json", "results.csv", "report.md", "throughput.png", "latency_cdf.png",
                 "amplification.png", "timeline.png"):
        assert (out / name).stat().st_size > 0, name
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == PNG_MAGIC
    assert not (out / "db").exists()  # databases are removed after the run


@pytest.mark.slow
def test_results_structure(full_run):
    _, _, doc = full_run
    assert doc["format"] == "lsmkv-bench-results/1"
    assert doc["config"]["records"] == RECORDS and doc["config"]["engines"] == AVAILABLE
    assert doc["machine"]["cores"] >= 1 and "python" in doc["machine"]
    assert [e["engine"] for e in doc["engines"]] == AVAILABLE
    assert all(e["error"] is None for e in doc["engines"])
    runs = doc["runs"]
    assert [(r["engine"], r["workload"]) for r in runs] == [(e, w) for e in AVAILABLE for w in runs_of(e)]
    for e in doc["engines"]:
        skipped = [n for n in e["notes"] if "skipped" in n]
        assert len(skipped) == len(WORKLOADS) - len(runs_of(e["engine"]))
    for r in runs:
        lat = r["latency_us"]
        assert r["operations"] > 0 and r["ops_per_sec"] > 0 and r["elapsed_s"] > 0, r["workload"]
        assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["p999"] <= lat["max"]
        assert r["space_amp"] > 0 and r["disk_bytes"] > 0 and r["live_bytes"] > 0
        assert r["cpu_s"] >= 0 and r["peak_rss_mb"] > 0
        assert sum(op["operations"] for op in r["by_op"].values()) == r["operations"]
        assert r["latency_cdf"]["fraction"][-1] == 1.0
        if r["user_bytes_written"]:
            assert r["write_amp"] is not None and r["write_amp"] > 0, (r["engine"], r["workload"])
        else:
            assert r["write_amp"] is None


def by(doc, engine, workload):
    return next(r for r in doc["runs"] if r["engine"] == engine and r["workload"] == workload)


@pytest.mark.slow
@pytest.mark.parametrize("engine", AVAILABLE)
def test_phases_did_what_they_say(full_run, engine):
    _, _, doc = full_run
    for fill in ("fillseq", "fillrandom"):
        r = by(doc, engine, fill)
        assert r["operations"] == RECORDS and r["live_records"] == RECORDS
        assert r["user_bytes_written"] == RECORDS * (16 + 100)
        assert r["write_amp"] > 0.1
    r = by(doc, engine, "readrandom")
    assert r["operations"] == OPERATIONS and r["found"] == r["reads"] == OPERATIONS
    assert r["warmup_ops"] == OPERATIONS // 10
    assert by(doc, engine, "readmissing")["found"] == 0
    if not ENGINES[engine].ordered:
        return
    for scan in ("readseq", "readreverse"):
        r = by(doc, engine, scan)
        assert r["operations"] == r["entries_expected"] == RECORDS == r["scan_entries"]
    r = by(doc, engine, "seekrandom")
    assert r["operations"] == OPERATIONS // 10
    assert r["operations"] * 5 < r["scan_entries"] <= r["operations"] * 10
    a = by(doc, engine, "ycsb-a")
    assert set(a["by_op"]) == {"read", "update"} and a["found"] == a["reads"]
    assert by(doc, engine, "ycsb-e")["scan_entries"] > 0
    assert set(by(doc, engine, "ycsb-f")["by_op"]) == {"read", "readmodifywrite"}
    if "deleterandom" not in runs_of(engine):
        return
    d = by(doc, engine, "deleterandom")
    before = by(doc, engine, "ycsb-f")["live_records"]
    assert before > RECORDS  # ycsb-d and ycsb-e inserted records
    assert d["operations"] == OPERATIONS and d["live_records"] == before - OPERATIONS


@pytest.mark.slow
@pytest.mark.parametrize("ordered", [True, False])
def test_every_engine_got_the_same_operations(full_run, ordered):
    _, _, doc = full_run
    engines = [e for e in AVAILABLE if ENGINES[e].ordered == ordered]
    for w in WORKLOADS:
        runs = [by(doc, e, w) for e in engines if w in runs_of(e)]
        if not runs:
            assert not ordered and (w in SCANNING or w == "deleterandom")
            continue
        for field in ("operations", "found", "reads", "user_bytes_written", "live_records", "live_bytes"):
            assert len({r[field] for r in runs}) == 1, (w, field, [r[field] for r in runs])


@pytest.mark.slow
def test_ycsb_load_happens_once_per_engine(full_run):
    _, _, doc = full_run
    assert [ld["engine"] for ld in doc["loads"]] == AVAILABLE
    assert all(ld["records"] == RECORDS and ld["before"] == "ycsb-a" for ld in doc["loads"])


@pytest.mark.slow
def test_csv_and_report(full_run):
    _, out, doc = full_run
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(doc["runs"])
    assert float(rows[0]["ops_per_sec"]) == doc["runs"][0]["ops_per_sec"]
    assert rows[0]["p99_us"] and rows[0]["write_amp"]
    report = (out / "report.md").read_text()
    for png in ("throughput.png", "latency_cdf.png", "amplification.png", "timeline.png"):
        assert f"]({png})" in report
    for engine in AVAILABLE:
        assert f"| {engine} |" in report
    assert "| workload |" in report and "| fillrandom |" in report


@pytest.mark.subprocess
def test_console_script(tmp_path):
    """Once through the installed ``lsmkv`` command, as a user runs it."""
    script = os.path.join(os.path.dirname(sys.executable), "lsmkv")
    out = tmp_path / "r"
    proc = subprocess.run([script, "bench", "--engines", "sqlite", "--workloads", "fillrandom,readrandom",
                           "--records", "300", "--operations", "200", "--out", str(out), "--no-plots"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "results.json").read_text())
    assert [r["workload"] for r in doc["runs"]] == ["fillrandom", "readrandom"]
    assert "fillrandom" in proc.stdout and "Throughput" in proc.stdout
    assert not list(out.glob("*.png"))


def _small(tmp_path, name, *extra):
    out = tmp_path / name
    code = main(["--engines", "sqlite", "--workloads", "fillrandom,readrandom", "--records", "300",
                 "--operations", "200", "--out", str(out), "--no-plots", "--quiet", *extra])
    assert code == 0
    return out


@pytest.mark.slow
def test_compare_flags_regressions(tmp_path, capsys):
    old = _small(tmp_path, "old")
    new = _small(tmp_path, "new")
    capsys.readouterr()
    assert main(["compare", str(old), str(new)]) == 0
    text = capsys.readouterr().out
    assert "sqlite" in text and "readrandom" in text and "matched runs" in text
    # Make the new run much slower: a regression beyond the threshold.
    doc = json.loads((new / "results.json").read_text())
    for r in doc["runs"]:
        r["ops_per_sec"] /= 3
    (new / "results.json").write_text(json.dumps(doc))
    assert main(["compare", str(old), str(new), "--fail-on-regression"]) == 1
    assert "REGRESSION" in capsys.readouterr().out
    assert main(["compare", str(old), str(tmp_path / "missing")]) == 1


@pytest.mark.slow
def test_rate_threads_and_duration(tmp_path):
    out = _small(tmp_path, "rate", "--rate", "4000", "--threads", "2")
    doc = json.loads((out / "results.json").read_text())
    r = doc["runs"][1]
    assert r["threads"] == 2 and r["target_rate"] == 4000 and "due time" in r["latency_basis"]
    # Latency measured from the due time can never be below the service time.
    for p in ("p50", "p99", "max"):
        assert r["latency_us"][p] >= r["service_us"][p] * 0.999
    assert r["found"] == r["reads"] == r["operations"]
    out = _small(tmp_path, "dur", "--duration", "0.2")
    doc = json.loads((out / "results.json").read_text())
    assert doc["runs"][1]["duration_limit_s"] == 0.2 and doc["runs"][1]["operations"] > 0


def test_ycsb_workload_file(tmp_path, capsys):
    wl = tmp_path / "workloadb"
    wl.write_text("recordcount=200\noperationcount=300\nreadproportion=0.95\nupdateproportion=0.05\n"
                  "requestdistribution=hotspot\nreadallfields=true\nfancy.option=1\n")
    out = tmp_path / "y"
    assert main(["--engines", "sqlite", "--ycsb-workload", str(wl), "--out", str(out), "--no-plots",
                 "--quiet"]) == 0
    assert "unknown YCSB properties, not applied: fancy.option" in capsys.readouterr().out
    doc = json.loads((out / "results.json").read_text())
    (run,) = doc["runs"]
    assert run["workload"] == "ycsb:workloadb" and run["operations"] == 300
    assert doc["loads"][0]["records"] == 200
    (info,) = doc["workloads"]
    assert info["ycsb_unknown"] == ["fancy.option"] and "readallfields" in info["ycsb_ignored"]


@pytest.mark.parametrize("args,message", [
    (["--engines", "oracle"], "oracle: no such engine"),
    (["--workloads", "bogus"], "unknown workload 'bogus'"),
    (["--records", "many"], "'many' is not an integer"),
    (["--cache-size", "huge"], "is not a size"),
    (["--value-compressibility", "1.5"], "--value-compressibility must be in [0, 1)"),
    (["--ycsb-workload", "/nonexistent/workloada"], "cannot read YCSB workload file"),
])
def test_errors_are_one_line(tmp_path, capsys, args, message):
    assert main(args + ["--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def test_missing_library_run_gives_hint(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "plyvel", None)
    assert main(["--engines", "leveldb", "--out", str(tmp_path / "x")]) == 2
    captured = capsys.readouterr()
    assert "leveldb: not installed; pip install 'lsmkv[references]'" in captured.out
    assert "none of the chosen engines can run here" in captured.err


@pytest.mark.skipif("lsm" not in AVAILABLE, reason="lsm engine not available")
def test_engine_failure_is_reported_and_the_run_goes_on(tmp_path, capsys):
    out = tmp_path / "f"
    code = main(["--engines", "lsm,sqlite", "--workloads", "fillrandom", "--records", "200",
                 "--lsm-opt", "no_such_option=1", "--out", str(out), "--no-plots", "--quiet", "--builds", "this"])
    assert code == 1
    text = capsys.readouterr().out
    assert "lsm: open: OptionError" in text and "no_such_option" in text and "Traceback" not in text
    doc = json.loads((out / "results.json").read_text())
    assert [r["engine"] for r in doc["runs"]] == ["sqlite"]
    assert doc["engines"][0]["error"].startswith("lsm: open: OptionError")


@pytest.mark.subprocess
@pytest.mark.skipif(not {"lsm", "btree"} <= set(AVAILABLE), reason="the project's engines are not available")
def test_the_default_run_reports_the_pure_build_beside_the_compiled_one(tmp_path, capsys):
    """On the compiled build the project's engines run again on the pure
    build (a child process), on the same data, and the report sets the two
    side by side; on the pure build there is nothing to set beside it."""
    from lsmkv.base.build import BUILD
    out = tmp_path / "b"
    code = main(["--engines", "lsm,btree,sqlite", "--workloads", "fillrandom,readrandom", "--records", "300",
                 "--operations", "200", "--out", str(out), "--no-plots", "--quiet"])
    assert code == 0
    doc = json.loads((out / "results.json").read_text())
    report = (out / "report.md").read_text()
    terminal = capsys.readouterr().out
    engines = [e["engine"] for e in doc["engines"]]
    if not BUILD.compiled:
        assert engines == ["lsm", "btree", "sqlite"] and "pure build" not in report
        return
    assert engines == ["lsm", "btree", "sqlite", "lsm-pure", "btree-pure"]
    assert all(e["error"] is None for e in doc["engines"])
    assert "compiled (Cython" in doc["engines"][0]["version"]
    assert "pure Python (LSMKV_NO_EXTENSIONS=1)" in doc["engines"][3]["version"]
    for engine in ("lsm", "btree"):
        for workload in ("fillrandom", "readrandom"):
            compiled, pure = by(doc, engine, workload), by(doc, engine + "-pure", workload)
            for field in ("operations", "found", "user_bytes_written", "live_records"):
                assert compiled[field] == pure[field], (engine, workload, field)
            row = f"| {engine} | {workload} | "
            assert row in report and f"{compiled['ops_per_sec'] / pure['ops_per_sec']:.2f}x |" in report
    assert "## The compiled build against the pure build" in report
    assert "The compiled build against the pure build" in terminal
    assert (out / "pure" / "results.json").exists()
