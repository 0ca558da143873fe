"""What the end of a run shows: the comparison table says why a phase has no
figures (on the terminal as in report.md), and the timeline plot gives each
engine a panel whose time axis is that engine's own phase."""

from __future__ import annotations

import contextlib
import io
import json
from types import SimpleNamespace

import pytest

from bench.cli import main
from bench.engines import ENGINES
from bench.plots import timeline_figure
from bench.report import summary_table

pytestmark = pytest.mark.slow  # a bench run with plots


def _one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def run_with_a_skip(tmp_path_factory):
    """lsm and dbm on a writing phase, a phase dbm skips (it scans) and
    another writing phase: the terminal output and the results."""
    out = tmp_path_factory.mktemp("bench") / "results"
    terminal = io.StringIO()
    with contextlib.redirect_stdout(terminal):
        code = main(["--engines", "lsm,dbm", "--workloads", "fillrandom,seekrandom,overwrite", "--records", "400",
                     "--operations", "300", "--seed", "3", "--out", str(out), "--quiet", "--builds", "this"])
    assert code == 0
    return terminal.getvalue(), out, json.loads((out / "results.json").read_text())


def test_the_terminal_table_gives_the_reason_a_phase_was_skipped(run_with_a_skip):
    terminal, out, doc = run_with_a_skip
    reason = ENGINES["dbm"].skip_reason(SimpleNamespace(name="seekrandom", scans=True))
    assert reason and doc["engines"][1]["skipped"] == {"seekrandom": reason}
    row = next(line for line in terminal.splitlines() if "seekrandom" in line and "│" in line)
    assert row.rstrip(" │").endswith("- [1]")
    assert f"[1] skipped by dbm: {reason}" in _one_line(terminal)
    report = (out / "report.md").read_text()
    assert "| seekrandom |" in report and "| - [1] |" in report
    assert f"[1] skipped by dbm: {reason}" in report


def test_the_table_says_which_phases_a_failed_engine_did_not_run(run_with_a_skip):
    _, _, doc = run_with_a_skip
    failed = dict(doc, runs=[r for r in doc["runs"] if not (r["engine"] == "dbm" and r["workload"] == "overwrite")])
    failed["engines"] = [dict(e, error="dbm: overwrite: OSError: no space left") if e["engine"] == "dbm" else e
                         for e in doc["engines"]]
    table = summary_table(failed)
    rows = {row[0]: row for row in table.rows}
    assert rows["seekrandom"][2] == "- [1]" and rows["overwrite"][2] == "- [2]"
    assert table.caption.splitlines()[1:] == [
        "[1] skipped by dbm: " + doc["engines"][1]["skipped"]["seekrandom"],
        "[2] not run, the engine failed: dbm: overwrite: OSError: no space left"]


def test_the_timeline_has_a_panel_per_engine_spanning_its_own_phase(run_with_a_skip):
    _, out, doc = run_with_a_skip
    assert (out / "timeline.png").stat().st_size > 0
    fig = timeline_figure(doc)
    heavy, engines = ["fillrandom", "overwrite"], ["lsm", "dbm"]  # seekrandom only reads
    axes = fig.axes
    assert len(axes) == len(heavy) * len(engines)
    runs = {(r["engine"], r["workload"]): r for r in doc["runs"]}
    for r, workload in enumerate(heavy):
        for c, engine in enumerate(engines):
            ax = axes[r * len(engines) + c]
            timeline = runs[(engine, workload)]["timeline"]
            span = len(timeline["ops_per_sec"]) * timeline["interval_s"]
            assert ax.get_xlim() == pytest.approx((0, span))
            assert max(ax.lines[0].get_ydata()) == max(timeline["ops_per_sec"])
    assert [ax.get_title() for ax in axes[:len(engines)]] == engines


def test_a_ratio_keeps_two_significant_digits_however_small():
    from bench.report import fmt_ratio
    assert fmt_ratio(11_587, 3_158_400) == "0.0037x"  # not "0.00x", which reads as nothing
    assert fmt_ratio(1, 2) == "0.50x" and fmt_ratio(267, 10) == "26.7x" and fmt_ratio(0, 5) == "0.00x"
    assert fmt_ratio(None, 1) == fmt_ratio(1, 0) == fmt_ratio(1, None) == "-"
