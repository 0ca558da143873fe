"""``lsmkv bench compare OLD NEW``: what changed between two results folders.

Runs are matched by (engine, workload); a bench suite's runs by (engine,
suite/workload), so they never pair with another suite's. For each pair the comparison gives
throughput, p99 latency, write and space amplification side by side with the
relative change, and flags a regression when throughput fell, or p99 latency
or an amplification rose, by more than the threshold (10% by default).
Settings that differ between the two runs (records, value size, sync, seed,
machine...) are listed, since they make the comparison questionable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .results import run_label

__all__ = ["RunDiff", "Comparison", "compare", "DEFAULT_THRESHOLD"]

DEFAULT_THRESHOLD = 10.0

#: metric -> (how to read it from a run, True if higher is better)
METRICS: dict[str, tuple[tuple[str, ...], bool]] = {
    "ops_per_sec": (("ops_per_sec",), True),
    "p99_us": (("latency_us", "p99"), False),
    "write_amp": (("write_amp",), False),
    "space_amp": (("space_amp",), False),
}

_SETTINGS = ["records", "operations", "key_size", "value_size", "value_compressibility", "threads", "sync",
             "cache_size", "seed", "rate", "duration", "workloads", "engine_options"]


def _get(run: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = run
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass
class RunDiff:
    engine: str
    workload: str
    old: dict[str, float | None]
    new: dict[str, float | None]
    change_pct: dict[str, float | None]
    regressions: list[str] = field(default_factory=list)
    improvements: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    diffs: list[RunDiff]
    only_old: list[tuple[str, str]]
    only_new: list[tuple[str, str]]
    setting_changes: list[str]
    threshold: float

    @property
    def regressions(self) -> int:
        return sum(1 for d in self.diffs if d.regressions)


def compare(old: dict[str, Any], new: dict[str, Any], threshold: float = DEFAULT_THRESHOLD) -> Comparison:
    old_runs = {(r["engine"], run_label(r)): r for r in old["runs"]}
    new_runs = {(r["engine"], run_label(r)): r for r in new["runs"]}
    diffs = []
    for key, new_run in new_runs.items():
        old_run = old_runs.get(key)
        if old_run is None:
            continue
        d = RunDiff(key[0], key[1], {}, {}, {})
        for name, (path, higher_better) in METRICS.items():
            a, b = _get(old_run, path), _get(new_run, path)
            d.old[name], d.new[name] = a, b
            change = None if a is None or b is None or a == 0 else (b - a) / a * 100.0
            d.change_pct[name] = change
            if change is None:
                continue
            worse = -change if higher_better else change
            if worse > threshold:
                d.regressions.append(name)
            elif worse < -threshold:
                d.improvements.append(name)
        diffs.append(d)
    settings = []
    oc, nc = old.get("config", {}), new.get("config", {})
    for s in _SETTINGS:
        if oc.get(s) != nc.get(s):
            settings.append(f"{s}: {oc.get(s)!r} -> {nc.get(s)!r}")
    om, nm = old.get("machine", {}), new.get("machine", {})
    for s in ("cpu", "cores", "os", "python"):
        if om.get(s) != nm.get(s):
            settings.append(f"machine {s}: {om.get(s)!r} -> {nm.get(s)!r}")
    return Comparison(
        diffs=diffs,
        only_old=[k for k in old_runs if k not in new_runs],
        only_new=[k for k in new_runs if k not in old_runs],
        setting_changes=settings,
        threshold=threshold,
    )
