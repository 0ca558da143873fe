"""Bench suites: named measurements that run inside ``lsmkv bench``.

A suite is a module ``bench/suites/<name>.py``, found here without a
registry, that defines::

    NAME = "timer"                 # lsmkv bench --suite timer
    DESCRIPTION = "one line for lsmkv bench list"
    def add_arguments(parser): ...  # the suite's own options
    def run(args, rec): ...         # everything measured goes through rec
    def check_arguments(args): ...  # optional: raise ConfigError on options
                                    # that cannot go together, before anything runs

This module owns the contract between a suite and the harness: discovery
(:func:`discover`) and the :class:`Recorder` a suite reports through. A
suite's runs land in the same results.json and results.csv as the default
workloads (each run carrying ``family`` = the suite's name), so
``lsmkv bench compare``, report.md and the plots read them alike; its
comparison tables go to the terminal and to report.md, its plots
(:meth:`Recorder.plot`) into the results folder and report.md. Suites never print:
the CLI (bench/cli.py) owns the terminal and renders what the recorder
hands it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Sequence

from ..results import json_safe

__all__ = ["Recorder", "SuiteTable", "SuiteError", "discover", "get_suite"]

_REQUIRED = ("NAME", "DESCRIPTION", "add_arguments", "run")


class SuiteError(ValueError):
    """An unknown suite, or a suite module that breaks the contract."""


def discover() -> dict[str, ModuleType]:
    """Every suite module in this package, by its NAME, in name order."""
    suites: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        missing = [attr for attr in _REQUIRED if not hasattr(module, attr)]
        if missing:
            raise SuiteError(f"bench suite module {module.__name__} lacks {', '.join(missing)}")
        if module.NAME in suites:
            raise SuiteError(f"two bench suites are named {module.NAME!r}")
        suites[module.NAME] = module
    return dict(sorted(suites.items()))


def get_suite(name: str) -> ModuleType:
    suites = discover()
    try:
        return suites[name]
    except KeyError:
        raise SuiteError(f"unknown suite {name!r} (suites: {', '.join(suites) or 'none'})") from None


@dataclass
class SuiteTable:
    """A comparison table a suite produced: cells are strings or numbers
    (numbers are formatted when rendered)."""

    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""

    def text_rows(self) -> list[list[str]]:
        return [[format_cell(c) for c in row] for row in self.rows]

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "columns": list(self.columns), "rows": self.text_rows(), "note": self.note}


def format_cell(value: Any) -> str:
    """A table cell as shown: integers with thousands separators, floats
    with three significant digits (more for large ones), the rest as str."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    return str(value)


@dataclass
class Recorder:
    """What a suite reports through: runs (results.json), tables
    (terminal and report.md), plots (results folder and report.md) and
    progress lines."""

    suite: str
    out_dir: str
    on_progress: Callable[[str], None] = lambda text: None
    on_run: Callable[[dict[str, Any]], None] = lambda run: None
    runs: list[dict[str, Any]] = field(default_factory=list)
    tables: list[SuiteTable] = field(default_factory=list)
    #: {"file": PNG file name in out_dir, "title": ...} per plot, in order.
    plots: list[dict[str, str]] = field(default_factory=list)

    def run(self, engine: str, workload: str, operations: int, elapsed_s: float, *,
            latency_us: dict[str, float] | None = None, **fields: Any) -> dict[str, Any]:
        """Record one run: ``operations`` done in ``elapsed_s`` seconds by
        ``engine`` on ``workload``; extra fields go into the run as they are
        (JSON-serializable values)."""
        if not isinstance(engine, str) or not engine or not isinstance(workload, str) or not workload:
            raise SuiteError(f"a run needs an engine and a workload name, not {engine!r}/{workload!r}")
        if isinstance(operations, bool) or not isinstance(operations, int) or operations < 0:
            raise SuiteError(f"operations must be a count, not {operations!r}")
        if not isinstance(elapsed_s, (int, float)) or elapsed_s < 0:
            raise SuiteError(f"elapsed_s must be a number of seconds, not {elapsed_s!r}")
        clash = set(fields) & {"engine", "workload", "family", "operations", "elapsed_s", "ops_per_sec"}
        if clash:
            raise SuiteError(f"run fields {sorted(clash)} are set by the recorder")
        run: dict[str, Any] = {
            "engine": engine, "workload": workload, "family": self.suite, "operations": operations,
            "elapsed_s": round(float(elapsed_s), 6),
            "ops_per_sec": round(operations / elapsed_s, 1) if elapsed_s > 0 else None,
            "latency_us": latency_us,
        }
        run.update(json_safe(fields))
        self.runs.append(run)
        self.on_run(run)
        return run

    def latency_us(self, samples_ns: Any) -> dict[str, float] | None:
        """p50/p95/p99/p999/max/mean in µs of latency samples in ns (a
        sequence or a numpy array); None for no samples."""
        import numpy as np

        from .. import metrics
        samples = np.asarray(samples_ns, dtype=np.int64)
        if samples.size == 0:
            return None
        return metrics.latency_summary(metrics.histogram_from_ns(samples), samples)

    def table(self, title: str, columns: list[str], rows: list[list[Any]], note: str = "") -> SuiteTable:
        """Record a comparison table (ratios belong here)."""
        if any(len(row) != len(columns) for row in rows):
            raise SuiteError(f"table {title!r}: every row needs {len(columns)} cells")
        table = SuiteTable(title, list(columns), [list(r) for r in rows], note)
        self.tables.append(table)
        return table

    def plot(self, name: str, title: str, draw: Callable[[], Any]) -> str:
        """Record a plot: ``draw()`` returns a matplotlib figure, saved as
        ``name`` (a .png file name) in the results folder, listed in
        results.json's ``plots`` and shown in report.md under ``title``.
        Returns the file's path."""
        if not name.endswith(".png") or os.path.basename(name) != name:
            raise SuiteError(f"a plot is a .png file name in the results folder, not {name!r}")
        if any(p["file"] == name for p in self.plots):
            raise SuiteError(f"two plots are named {name!r}")
        from ..plots import save_figure
        save_figure(draw(), self.out_dir, name)
        self.plots.append({"file": name, "title": title})
        return os.path.join(self.out_dir, name)

    def progress(self, text: str) -> None:
        """One status line (shown on the terminal, not recorded)."""
        self.on_progress(text)


#: Engine names the scripts that became suites used, and the harness's name for each.
ENGINE_ALIASES = {"lsmkv": "lsm", "sqlite3": "sqlite"}


def engine_names(text: str, allowed: Sequence[str]) -> list[str]:
    """The engines of a comma-separated ``--engines`` value, in order, with
    the aliases of :data:`ENGINE_ALIASES` mapped (where ``allowed`` does not
    hold the name itself); a name not in ``allowed``, or none at all, is an
    error (ValueError)."""
    names = [e.strip() for e in text.split(",") if e.strip()]
    names = [name if name in allowed else ENGINE_ALIASES.get(name, name) for name in names]
    for name in names:
        if name not in allowed:
            raise ValueError(f"unknown engine {name!r}; choose from {', '.join(allowed)}")
    if not names:
        raise ValueError(f"no engine named; choose from {', '.join(allowed)}")
    return names


def engine_list(allowed: Sequence[str]) -> Callable[[str], list[str]]:
    """The argparse type of a suite's ``--engines``: :func:`engine_names`
    of ``allowed``, so that an unknown name is a usage error (one line,
    exit 2) before anything runs."""
    def engines(text: str) -> list[str]:
        try:
            return engine_names(text, allowed)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return engines


def int_option(minimum: int | None = None) -> Callable[[str], int]:
    """The argparse type of an integer option (``_`` separators allowed),
    ``minimum`` or more if given: a bad value is a usage error."""
    def integer(text: str) -> int:
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value
    return integer


def available_engines(names: list[str], rec: "Recorder"):
    """The engines of ``names`` that can run here, in order; each one that
    cannot is named with its reason on the progress line."""
    from ..engines import availability
    for name in names:
        reason = availability(name)
        if reason is not None:
            rec.progress(f"{name}: not run ({reason})")
            continue
        yield name


def suite_parser(module: ModuleType, prog: str, parser_class: type[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The argument parser of one suite: its own options plus --out and --quiet."""
    p = parser_class(prog=prog, description=f"{module.NAME}: {module.DESCRIPTION}")
    module.add_arguments(p)
    p.add_argument("--out", help="results folder (default bench-results/<timestamp>)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p
