"""``lsmkv bench``: the command line and the terminal.

This module owns the terminal (the library modules only log): argument
parsing, the live progress bar of each phase, one line per finished phase,
the final comparison tables, and one-line errors (exit code 2 for usage
errors, 1 for a run that could not complete). Subcommands:

* ``lsmkv bench [OPTIONS]``: run (``lsmkv bench --help``);
* ``lsmkv bench --suite NAME [SUITE OPTIONS]``: run one bench suite
  (bench/suites/; ``lsmkv bench --suite NAME --help``);
* ``lsmkv bench compare OLD NEW``: compare two results folders;
* ``lsmkv bench list``: engines (and whether they can run here) and workloads.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import logging
import os
import shlex
import sys
import time
from typing import Any

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgressBar, ProgressColumn,
                           TextColumn, TimeElapsedColumn)
from rich.table import Table as RichTable
from rich.text import Text

from lsmkv.terminal.closed_pipe import exits_quietly_on_closed_stdout, is_closed_stdout, pipe_aware_console

from lsmkv.base.build import NO_EXTENSIONS

from . import engines as engines_mod
from .builds import pure_engines, run_pure
from .compare import DEFAULT_THRESHOLD, compare
from .config import (DEFAULT_CACHE_SIZE, DEFAULT_ENGINES, DEFAULT_OPERATIONS, DEFAULT_RECORDS, DEFAULT_WORKLOADS,
                     BenchConfig, ConfigError, format_size, parse_option, parse_size, parse_workloads)
from .report import (Table, amplification_table, build_table, fmt_rate, fmt_us, suite_tables, summary_table, write_report,
                     write_suite_report)
from .results import FORMAT, ResultsError, json_safe, load_results, write_csv, write_json
from .runner import EngineRun, Progress, Runner
from .suites import Recorder, SuiteError, discover, get_suite, int_option, suite_parser
from .workloads import DB_BENCH_PHASES, Workload, YcsbWorkload, make_workloads
from .ycsb import YcsbError

log = logging.getLogger("bench")

__all__ = ["main"]

_EPILOG = """\
workloads: fillseq fillrandom overwrite readrandom readmissing readseq readreverse seekrandom
deleterandom (db_bench-style) and ycsb-a ... ycsb-f (YCSB core workloads); NAME:N runs N
operations. Default: {default}.
engines: {engines}.

examples:
  lsmkv bench
  lsmkv bench --engines lsm,btree,sqlite,rocksdb,leveldb,lmdb
  lsmkv bench --workloads fillrandom,readrandom --records 1000000 --cache-size 64MiB
  lsmkv bench --ycsb-workload workloads/workloada --engines lsm,btree
  lsmkv bench --workloads ycsb-a --rate 2000 --duration 30
  lsmkv bench compare bench-results/OLD bench-results/NEW
  lsmkv bench --suite timer            (suites: lsmkv bench list)
"""


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit code 2
        raise _UsageError(message)


def _positive_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: Integer options of the workloads (``_`` separators allowed).
_int = int_option()


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="lsmkv bench", formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Compare storage engines on the same seeded work: db_bench-style phases and "
                            "YCSB workloads; throughput, latency percentiles, write/space/read "
                            "amplification, CPU and memory. Also: 'lsmkv bench compare OLD NEW', "
                            "'lsmkv bench list'.",
                epilog=_EPILOG.format(default=DEFAULT_WORKLOADS, engines=", ".join(engines_mod.ENGINES)))
    a = p.add_argument
    a("--engines", help=f"comma-separated engines (default: {','.join(DEFAULT_ENGINES)}, those available)")
    a("--workloads", help="comma-separated workloads, each optionally NAME:OPERATIONS")
    a("--ycsb-workload", action="append", metavar="FILE", dest="ycsb_files",
      help="run a YCSB workload properties file (repeatable)")
    a("--records", type=_int, help=f"records to load/fill (default {DEFAULT_RECORDS:,})")
    a("--operations", type=_int, help=f"operations per phase (default {DEFAULT_OPERATIONS:,}; "
                                      "scan phases a tenth)")
    a("--key-size", type=_int, help="db_bench key size in bytes (default 16)")
    a("--value-size", type=_int, help="value size in bytes (default 100; for YCSB: one field of this size "
                                      "instead of 10 x 100 bytes)")
    a("--value-compressibility", type=_positive_float,
      help="fraction of each value a compressor can remove, 0 <= x < 1 (default 0.5)")
    a("--threads", type=_int, help="client threads per phase (default 1)")
    a("--sync", action="store_true", default=None, help="fsync every write (default: writes reach the OS only)")
    a("--cache-size", type=_size, help=f"each engine's cache (e.g. 64MiB; default "
                                       f"{format_size(DEFAULT_CACHE_SIZE).replace(' ', '')}); lmdb has none")
    a("--seed", type=_int, help="seed of the data and operation sequences (default 42)")
    a("--duration", type=_positive_float, help="stop each phase after this many seconds (phases that could "
                                               "go on run until then, unless given a count)")
    a("--rate", type=_positive_float, help="target operations/s; latency is measured from each "
                                           "operation's due time (no coordinated omission)")
    a("--warmup", type=_int, help="untimed reads before each reading phase (default: 10%% of it, at most 5,000)")
    a("--scan-length", type=_int, help="entries read by each seekrandom operation (default 10)")
    a("--lsm-opt", action="append", default=[], metavar="K=V", help="option passed to lsmkv.open (repeatable)")
    a("--btree-opt", action="append", default=[], metavar="K=V", help="option passed to btree.open (repeatable)")
    a("--out", help="results folder (default bench-results/<timestamp>)")
    a("--db-dir", help="where the databases are created (default: <results folder>/db, deleted afterwards)")
    a("--keep-db", action="store_true", help="keep the databases after the run")
    a("--builds", choices=("both", "this"), default="both",
      help="both (default): when the compiled build runs, also run lsm and btree on the pure build "
           "(LSMKV_NO_EXTENSIONS=1, a child process) and report the two side by side; this: only "
           "the build that runs")
    a("--no-plots", action="store_true", help="skip the PNG plots")
    a("--quiet", action="store_true", help="no live progress bar")
    a("-v", "--verbose", action="store_true", help="log more")
    return p


def _config_from_args(args: argparse.Namespace, argv: list[str]) -> BenchConfig:
    cfg = BenchConfig()
    explicit = set()
    simple = ["records", "operations", "key_size", "value_size", "value_compressibility", "threads", "sync",
              "cache_size", "seed", "duration", "rate", "warmup", "scan_length"]
    for name in simple:
        value = getattr(args, name)
        if value is not None:
            setattr(cfg, name, value)
            explicit.add(name)
    if args.engines is not None:
        cfg.engines = [e.strip().lower() for e in args.engines.split(",") if e.strip()]
        explicit.add("engines")
    if args.workloads is not None:
        cfg.workloads = parse_workloads(args.workloads)
        explicit.add("workloads")
    elif args.ycsb_files:
        cfg.workloads = []
    cfg.ycsb_files = list(args.ycsb_files or [])
    for engine, opts in (("lsm", args.lsm_opt), ("btree", args.btree_opt)):
        if opts:
            cfg.engine_options[engine] = dict(parse_option(o) for o in opts)
    cfg.out = args.out
    cfg.db_dir = args.db_dir
    cfg.keep_db = args.keep_db
    cfg.plots = not args.no_plots
    cfg.explicit = explicit
    cfg.command = "lsmkv bench" + ("" if not argv else " " + shlex.join(argv))
    cfg.validate()
    return cfg


# --- terminal progress --------------------------------------------------------------------------

class _RateColumn(ProgressColumn):
    def render(self, task) -> Text:  # noqa: ANN001 - rich's Task
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:,.0f} ops/s", style="cyan")


class _TerminalProgress(Progress):
    """Shows the current stage as a live bar and prints one line per finished phase."""

    def __init__(self, console: Console, live: bool) -> None:
        self.console = console
        self.bar = RichProgressBar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                   _RateColumn(), TimeElapsedColumn(), console=console, transient=True,
                                   refresh_per_second=4, disable=not live)
        self.task = None

    def __enter__(self) -> _TerminalProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def stage(self, engine: str, workload: str, stage: str, total: int | None) -> None:
        if self.task is not None:
            self.bar.remove_task(self.task)
        self.task = self.bar.add_task(f"{engine:>8} {workload:<14} {stage:<8}", total=total)

    def advance(self, n: int) -> None:
        if self.task is not None:
            self.bar.advance(self.task, n)

    def phase_done(self, run: dict[str, Any]) -> None:
        if self.task is not None:
            self.bar.remove_task(self.task)
            self.task = None
        lat = run.get("latency_us") or {}
        extra = []
        if run.get("write_amp") is not None:
            extra.append(f"write amp {run['write_amp']:.2f}")
        if run.get("space_amp") is not None:
            extra.append(f"space amp {run['space_amp']:.2f}")
        self.console.print(
            f"{run['engine']:>8} {run['workload']:<14} {run['operations']:>9,} ops "
            f"{fmt_rate(run['ops_per_sec']):>10} ops/s  p50 {fmt_us(lat.get('p50')):>6} µs  "
            f"p99 {fmt_us(lat.get('p99')):>6} µs  " + "  ".join(extra), markup=False, soft_wrap=True)

    def engine_error(self, engine: str, message: str) -> None:
        self.console.print(f"{message} (its remaining phases are skipped)", style="red", markup=False,
                           soft_wrap=True)


def _rich_table(table: Table) -> RichTable:
    t = RichTable(title=table.title, title_justify="left", caption=table.caption or None,
                  caption_justify="left", min_width=len(table.title) + 2)
    for i, h in enumerate(table.headers):
        t.add_column(h, justify="left" if i == 0 or h in ("workload", "operation") else "right", no_wrap=i == 0)
    for r, row in enumerate(table.rows):
        t.add_row(*[Text(c, style="bold green") if (r, k) in table.best else Text(c)
                    for k, c in enumerate(row)])
    return t


# --- run ----------------------------------------------------------------------------------------

def _default_out() -> str:
    stamp = _dt.datetime.now().strftime("%Y-%m-%dT%H-%M-%S")
    base = os.path.join("bench-results", stamp)
    out, n = base, 1
    while os.path.exists(out):
        n += 1
        out = f"{base}-{n}"
    return out


def _workload_info(w: Workload) -> dict[str, Any]:
    info: dict[str, Any] = {"name": w.name, "family": w.family, "description": w.describe(),
                            "operations": w.operations or None}
    if isinstance(w, YcsbWorkload):
        s = w.spec
        info.update({"recordcount": s.recordcount, "proportions": s.proportions,
                     "requestdistribution": s.requestdistribution, "record_bytes": s.record_size,
                     "insertorder": "hashed" if s.hashed else "ordered",
                     "ycsb_ignored": s.ignored, "ycsb_unknown": s.unknown})
    return info


def _run(argv: list[str], console: Console) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(console, args.verbose)
    cfg = _config_from_args(args, argv)
    workloads = make_workloads(cfg)

    chosen, unavailable = [], {}
    for name in cfg.engines:
        engines_mod.get_adapter(name)  # unknown names are usage errors
        reason = engines_mod.availability(name)
        if reason is None:
            chosen.append(name)
        else:
            unavailable[name] = reason
            console.print(reason, style="yellow", markup=False, soft_wrap=True)
    if not chosen:
        raise ConfigError("none of the chosen engines can run here (see above)")

    out = cfg.out or _default_out()
    os.makedirs(out, exist_ok=True)
    db_root = cfg.db_dir or os.path.join(out, "db")
    os.makedirs(db_root, exist_ok=True)
    cfg.out = out

    for w in workloads:
        if isinstance(w, YcsbWorkload) and w.spec.unknown:
            console.print(f"{w.name}: unknown YCSB properties, not applied: {', '.join(w.spec.unknown)}",
                          style="yellow", markup=False, soft_wrap=True)
        if isinstance(w, YcsbWorkload) and w.spec.ignored and w.name.startswith("ycsb:"):
            console.print(f"{w.name}: YCSB properties without effect here: {', '.join(w.spec.ignored)}",
                          style="dim", markup=False, soft_wrap=True)
    console.print(f"engines: {', '.join(chosen)}; workloads: {', '.join(w.name for w in workloads)}; "
                  f"{cfg.records:,} records; results in {out}", highlight=False)

    started = _dt.datetime.now().astimezone()
    t0 = time.perf_counter()
    engine_runs: list[EngineRun] = []
    with _TerminalProgress(console, live=console.is_terminal and not args.quiet) as progress:
        runner = Runner(cfg, workloads, db_root, progress)
        for name in chosen:
            engine_runs.append(runner.run_engine(name))
    pure = pure_engines(chosen, args.builds)
    pure_doc: dict[str, Any] = {"engines": [], "runs": [], "loads": []}
    if pure:
        console.print(f"the pure build: {', '.join(pure)} again with {NO_EXTENSIONS}=1, in a child process",
                      highlight=False)
        pure_doc = run_pure(argv, pure, out, cfg.db_dir)
    wall = time.perf_counter() - t0
    if not cfg.keep_db and not cfg.db_dir:
        try:
            os.rmdir(db_root)
        except OSError:
            pass

    from .machine import machine_info
    doc = {
        "format": FORMAT,
        "started": started.isoformat(timespec="seconds"),
        "wall_s": round(wall, 1),
        "config": cfg.to_json(),
        "machine": machine_info(db_root if os.path.exists(db_root) else out,
                                {r.engine: r.version for r in engine_runs}),
        "engines": [{"engine": r.engine, "title": r.title, "version": r.version, "settings": r.settings,
                     "notes": r.notes, "error": r.error, "skipped": r.skipped} for r in engine_runs]
                   + pure_doc["engines"],
        "unavailable": unavailable,
        "workloads": [_workload_info(w) for w in workloads],
        "loads": [ld for r in engine_runs for ld in r.loads] + pure_doc["loads"],
        "runs": [run for r in engine_runs for run in r.runs] + pure_doc["runs"],
    }
    write_json(out, doc)
    write_csv(out, doc["runs"])
    plots: list[str] = []
    if cfg.plots and doc["runs"]:
        from .plots import write_plots
        plots = write_plots(doc, out)
    write_report(doc, out, plots)

    if doc["runs"]:
        console.print()
        console.print(_rich_table(summary_table(doc)))
        console.print(_rich_table(amplification_table(doc)))
        if pure:
            console.print(_rich_table(build_table(doc)))
    console.print(f"results: {out}/results.json, results.csv, report.md"
                  + (f", {len(plots)} plots" if plots else "") + f" ({wall:.0f} s)", highlight=False)
    return 1 if any(r.error for r in engine_runs) else 0


# --- suites -------------------------------------------------------------------------------------

def _suite_name(argv: list[str]) -> tuple[str | None, list[str]]:
    """The NAME of ``--suite NAME`` (or ``--suite=NAME``) and the other arguments."""
    for i, arg in enumerate(argv):
        if arg == "--suite":
            if i + 1 >= len(argv):
                raise _UsageError("--suite needs a suite name (see lsmkv bench list)")
            return argv[i + 1], argv[:i] + argv[i + 2:]
        if arg.startswith("--suite="):
            return arg.split("=", 1)[1], argv[:i] + argv[i + 1:]
    return None, argv


def _run_suite(name: str, argv: list[str], console: Console) -> int:
    module = get_suite(name)
    args = suite_parser(module, f"lsmkv bench --suite {name}", _Parser).parse_args(argv)
    check = getattr(module, "check_arguments", None)
    if check is not None:
        check(args)  # a bad combination of options: one error line, nothing run or written
    _setup_logging(console, False)
    out = args.out or _default_out()
    os.makedirs(out, exist_ok=True)

    def on_run(run: dict[str, Any]) -> None:
        lat = run.get("latency_us") or {}
        console.print(f"{run['engine']:>10} {run['workload']:<20} {run['operations']:>11,} ops "
                      f"{fmt_rate(run['ops_per_sec']):>12} ops/s"
                      + (f"  p50 {fmt_us(lat.get('p50'))} µs  p99 {fmt_us(lat.get('p99'))} µs" if lat else ""),
                      markup=False, soft_wrap=True)

    rec = Recorder(name, out, on_progress=(lambda text: None) if args.quiet else
                   (lambda text: console.print(text, style="dim", markup=False, soft_wrap=True)), on_run=on_run)
    options = {k: v for k, v in vars(args).items() if k not in ("out", "quiet")}
    started = _dt.datetime.now().astimezone()
    console.print(f"suite {name}: {module.DESCRIPTION}; results in {out}", highlight=False)
    t0 = time.perf_counter()
    error = None
    try:
        module.run(args, rec)
    except KeyboardInterrupt:
        error = "interrupted"
    except Exception as exc:  # noqa: BLE001 - recorded, and the exit code says it failed
        log.exception("suite %s failed", name)
        error = f"{type(exc).__name__}: {exc}"
    wall = time.perf_counter() - t0

    from .machine import machine_info
    doc = {
        "format": FORMAT,
        "started": started.isoformat(timespec="seconds"),
        "wall_s": round(wall, 1),
        "config": {"command": "lsmkv bench " + shlex.join(["--suite", name] + argv), "suite": name,
                   "description": module.DESCRIPTION, "options": json_safe(options)},
        "machine": machine_info(out, {}),
        "engines": [], "unavailable": {}, "workloads": [], "loads": [],
        "runs": rec.runs,
        "tables": [t.to_json() for t in rec.tables],
        "plots": [p["file"] for p in rec.plots],
        "plot_titles": {p["file"]: p["title"] for p in rec.plots},
        "error": error,
    }
    write_json(out, doc)
    write_csv(out, doc["runs"])
    write_suite_report(doc, out)
    for table in suite_tables(doc):
        console.print()
        console.print(_rich_table(table))
    console.print(f"results: {out}/results.json, results.csv, report.md"
                  + (f", {len(rec.plots)} plots" if rec.plots else "") + f" ({wall:.0f} s)", highlight=False)
    if error:
        console.print(f"suite {name} failed: {error}", style="red", markup=False, soft_wrap=True)
        return 1
    return 0


# --- compare and list ---------------------------------------------------------------------------

def _compare_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="lsmkv bench compare",
                description="Side-by-side diff of two results folders; flags regressions beyond a threshold.")
    p.add_argument("old", help="results folder (or results.json) of the baseline")
    p.add_argument("new", help="results folder (or results.json) to compare with it")
    p.add_argument("--threshold", type=_positive_float, default=DEFAULT_THRESHOLD,
                   help="percent change that counts as a regression (default 10)")
    p.add_argument("--fail-on-regression", action="store_true", help="exit with status 1 if any regression")
    return p


def _compare(argv: list[str], console: Console) -> int:
    args = _compare_parser().parse_args(argv)
    old, new = load_results(args.old), load_results(args.new)
    cmp = compare(old, new, args.threshold)
    for line in cmp.setting_changes:
        console.print(f"settings differ: {line}", style="yellow", markup=False, soft_wrap=True)
    t = RichTable(title=f"{args.old} -> {args.new}", title_justify="left")
    for h in ("engine", "workload", "ops/s old", "ops/s new", "Δ", "p99 µs old", "p99 µs new", "Δ",
              "write amp", "space amp", "verdict"):
        t.add_column(h, justify="left" if h in ("engine", "workload", "verdict") else "right")

    def pct(v: float | None, higher_better: bool) -> Text:
        if v is None:
            return Text("-")
        worse = -v if higher_better else v
        style = "red" if worse > args.threshold else ("green" if worse < -args.threshold else "")
        return Text(f"{v:+.1f}%", style=style)

    def pair(d, name: str) -> str:  # noqa: ANN001
        a, b = d.old.get(name), d.new.get(name)
        return f"{'-' if a is None else f'{a:.3g}'} -> {'-' if b is None else f'{b:.3g}'}"

    for d in cmp.diffs:
        if d.regressions:
            verdict = Text("REGRESSION: " + ", ".join(d.regressions), style="bold red")
        elif d.improvements:
            verdict = Text("better: " + ", ".join(d.improvements), style="green")
        else:
            verdict = Text("same")
        t.add_row(d.engine, d.workload, fmt_rate(d.old["ops_per_sec"]), fmt_rate(d.new["ops_per_sec"]),
                  pct(d.change_pct["ops_per_sec"], True), fmt_us(d.old["p99_us"]), fmt_us(d.new["p99_us"]),
                  pct(d.change_pct["p99_us"], False), pair(d, "write_amp"), pair(d, "space_amp"), verdict)
    console.print(t)
    for e, w in cmp.only_old:
        console.print(f"only in {args.old}: {e} {w}", highlight=False)
    for e, w in cmp.only_new:
        console.print(f"only in {args.new}: {e} {w}", highlight=False)
    console.print(f"{cmp.regressions} regression(s) beyond {args.threshold:g}% in {len(cmp.diffs)} "
                  f"matched runs", highlight=False)
    return 1 if cmp.regressions and args.fail_on_regression else 0


def _list(argv: list[str], console: Console) -> int:
    if argv:
        raise _UsageError("'lsmkv bench list' takes no arguments")
    t = RichTable(title="engines", title_justify="left")
    t.add_column("engine")
    t.add_column("what")
    t.add_column("status")
    for name, cls in engines_mod.ENGINES.items():
        reason = engines_mod.availability(name)
        t.add_row(name, cls.title, Text("available", style="green") if reason is None
                  else Text(reason, style="yellow"))
    console.print(t)
    console.print("workloads: " + ", ".join(DB_BENCH_PHASES + [f"ycsb-{c}" for c in "abcdef"]), highlight=False)
    console.print(f"default: {DEFAULT_WORKLOADS}", highlight=False)
    t = RichTable(title="suites (lsmkv bench --suite NAME)", title_justify="left")
    t.add_column("suite")
    t.add_column("what")
    for name, module in discover().items():
        t.add_row(name, module.DESCRIPTION)
    console.print(t)
    return 0


def _setup_logging(console: Console, verbose: bool) -> None:
    root = logging.getLogger()
    if not any(isinstance(h, RichHandler) for h in root.handlers):
        handler = RichHandler(console=console, show_time=False, show_path=False)
        handler.setLevel(logging.DEBUG if verbose else logging.WARNING)
        logging.getLogger("bench").addHandler(handler)
        logging.getLogger("bench").setLevel(logging.DEBUG if verbose else logging.INFO)
        logging.getLogger("bench").propagate = False


@exits_quietly_on_closed_stdout
def main(argv: list[str]) -> int:
    """Entry point of ``lsmkv bench ARGS...``; returns the exit code."""
    # Not a terminal (a log, CI): wide lines rather than wrapped tables.
    console = pipe_aware_console(highlight=False, width=None if sys.stdout.isatty() else 160)

    def fail(message: str, code: int) -> int:
        print(f"lsmkv bench: {message}", file=sys.stderr)
        return code
    argv = list(argv)
    try:
        if argv and argv[0] == "compare":
            return _compare(argv[1:], console)
        if argv and argv[0] == "list":
            return _list(argv[1:], console)
        suite, rest = _suite_name(argv)
        if suite is not None:
            return _run_suite(suite, rest, console)
        return _run(argv, console)
    except _UsageError as exc:
        return fail(f"error: {exc} (see lsmkv bench --help)", 2)
    except (ConfigError, YcsbError, engines_mod.EngineUnavailable, SuiteError) as exc:
        return fail(f"error: {exc}", 2)
    except ResultsError as exc:
        return fail(f"error: {exc}", 1)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except OSError as exc:
        if is_closed_stdout(exc):
            raise
        where = f" ({exc.filename})" if exc.filename else ""
        return fail(f"error: {exc.strerror or exc}{where}", 1)
    except SystemExit as exc:  # argparse --help
        return int(exc.code or 0)
