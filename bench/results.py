"""The results folder's machine-readable files: results.json and results.csv.

results.json holds everything: ``config``, ``machine``, ``engines`` (title,
version, applied settings, notes, error, ``skipped`` workloads with the
reason), ``unavailable`` engines with the reason, ``workloads`` (with a
YCSB file's ignored and unknown properties), ``loads`` (untimed loads) and
``runs``: one object per engine x phase. Every
run holds at least ``engine``, ``workload``, ``operations``, ``ops_per_sec``,
``latency_us`` (p50/p95/p99/p999/max/mean), ``write_amp``, ``space_amp``;
docs/benchmarking.md defines each field.

results.csv is one row per run with the scalar fields, for spreadsheets.
"""

from __future__ import annotations

import csv
import json
import os
from typing import Any

__all__ = ["FORMAT", "CSV_COLUMNS", "write_json", "write_csv", "load_results", "ResultsError", "json_safe",
           "run_label"]

FORMAT = "lsmkv-bench-results/1"


class ResultsError(ValueError):
    """A results folder or file that cannot be read."""


#: results.csv columns: (column, how to get it from a run).
CSV_COLUMNS: list[tuple[str, Any]] = [
    ("engine", "engine"), ("workload", "workload"), ("family", "family"),
    ("operations", "operations"), ("elapsed_s", "elapsed_s"), ("ops_per_sec", "ops_per_sec"),
    ("p50_us", ("latency_us", "p50")), ("p95_us", ("latency_us", "p95")), ("p99_us", ("latency_us", "p99")),
    ("p999_us", ("latency_us", "p999")), ("max_us", ("latency_us", "max")), ("mean_us", ("latency_us", "mean")),
    ("write_amp", "write_amp"), ("write_amp_engine", "write_amp_engine"), ("write_amp_wchar", "write_amp_wchar"),
    ("write_amp_dirty", "write_amp_dirty"), ("bytes_written", "bytes_written"),
    ("space_amp", "space_amp"), ("read_amp", "read_amp"),
    ("user_bytes_written", "user_bytes_written"), ("io_write_bytes", "io_write_bytes"),
    ("engine_bytes_written", "engine_bytes_written"), ("disk_bytes", "disk_bytes"), ("live_bytes", "live_bytes"),
    ("live_records", "live_records"), ("cpu_s", "cpu_s"), ("cpu_us_per_op", "cpu_us_per_op"),
    ("peak_rss_mb", "peak_rss_mb"), ("stall_s", "stall_s"), ("compaction_bytes_written", "compaction_bytes_written"),
    ("found", "found"), ("reads", "reads"), ("scan_entries", "scan_entries"), ("warmup_ops", "warmup_ops"),
    ("threads", "threads"), ("target_rate", "target_rate"), ("flush_s", "flush_s"),
]


#: Families of the default workloads; runs of a bench suite carry the suite's name.
WORKLOAD_FAMILIES = ("db_bench", "ycsb")


def run_label(run: dict[str, Any]) -> str:
    """A run's workload as tables and comparisons name it: suite runs are
    prefixed with their suite (``timer/schedule``), so two suites (or a
    suite and the default workloads) can use the same workload names."""
    family = run.get("family")
    if family is None or family in WORKLOAD_FAMILIES:
        return run["workload"]
    return f"{family}/{run['workload']}"


def json_safe(value: Any) -> Any:
    """``value`` with numpy scalars and other objects turned into JSON types."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        return item()
    return str(value)


def _field(run: dict[str, Any], path: Any) -> Any:
    if isinstance(path, tuple):
        value: Any = run
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        return value
    return run.get(path)


def write_json(out_dir: str, document: dict[str, Any]) -> str:
    path = os.path.join(out_dir, "results.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=1, sort_keys=False)
        f.write("\n")
    return path


def write_csv(out_dir: str, runs: list[dict[str, Any]]) -> str:
    path = os.path.join(out_dir, "results.csv")
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([name for name, _ in CSV_COLUMNS])
        for run in runs:
            writer.writerow(["" if (v := _field(run, p)) is None else v for _, p in CSV_COLUMNS])
    return path


def load_results(path: str) -> dict[str, Any]:
    """results.json from a results folder (or the file itself)."""
    file = os.path.join(path, "results.json") if os.path.isdir(path) else path
    try:
        with open(file, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise ResultsError(f"{path}: no results.json there") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{file}: cannot read results ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise ResultsError(f"{file}: not an lsmkv bench results file (no 'runs' list)")
    return doc
