"""Group commit: concurrent sync=True writers with one fsync per group
against one fsync per write, on both engines, in the same run.

For each engine (``--engines``, lsm and btree), in a fresh database each:

* ``1 thread``: one writer doing sync=True puts for ``--single-seconds``:
  the latency of a single writer's fsync'd put, the yardstick of the p99
  target (group commit on, as the engines run by default);
* ``fsync per write``: ``--threads`` (8) writers doing sync=True puts for
  ``--seconds`` (10) with ``group_commit=False``: each write fsyncs the
  log itself while holding the others off;
* ``group commit``: the same writers with group commit (the default).

Each put writes a 16-byte key (thread, counter) and a ``--value-size``
value. Latency is measured per put, from the call to its return. The table
gives group commit's throughput against one fsync per write (target: at
least 5x) and its p99 against the single writer's (target: at most 2x).
``--fsync-delay`` adds a fixed delay to every fsync of the log, through
the file-system layer, to show the same comparison on a slower disk.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from ..timed_threads import run_timed_threads
from ..report import fmt_ratio
from . import engine_list

NAME = "group_commit"
DESCRIPTION = "8 threads of sync=True puts: group commit vs one fsync per write, both engines"

ENGINES = ("lsm", "btree")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engines", type=engine_list(ENGINES), default="lsm,btree", help="engines to run (lsm,btree)")
    parser.add_argument("--threads", type=int, default=8, help="concurrent sync writers (8)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per multi-threaded run (10)")
    parser.add_argument("--single-seconds", type=float, default=5.0, help="seconds of the one-writer run (5)")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value (100)")
    parser.add_argument("--commit-delay", type=float, default=0.0, help="the engines' commit_delay (0)")
    parser.add_argument("--fsync-delay", type=float, default=0.0,
                        help="seconds added to every fsync of the write-ahead log through the file-system layer "
                             "(FaultInjectionFS.stall), to see a slower disk than this machine's (0: none)")
    parser.add_argument("--dir", default=None, help="where the databases go (a temporary directory)")


def open_engine(engine: str, path: str, **options):
    if engine == "lsm":
        import lsmkv
        return lsmkv.open(path, **options)
    if engine == "btree":
        import btree
        return btree.open(path, **options)
    raise ValueError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")


def sync_writers(db, threads: int, seconds: float, value: bytes) -> dict:
    """``threads`` threads doing sync=True puts for ``seconds``; the puts
    done, the elapsed time and every put's latency in ns."""
    def make_put(t: int):
        put, prefix, counter = db.put, b"%04d" % t, iter(range(1, 1 << 62))

        def sync_put() -> None:
            put(prefix + b"%012d" % next(counter), value, sync=True)
        return sync_put

    samples, elapsed = run_timed_threads(make_put, threads, seconds, "sync-writer")
    return {"ops": len(samples), "elapsed_s": elapsed, "latency_ns": samples}


#: The write-ahead log's file name (a substring of its path), per engine.
LOG_NAMES = {"lsm": ".log", "btree": "btree.log"}


def measure(engine: str, workdir: str, name: str, threads: int, seconds: float, value: bytes,
            fsync_delay: float = 0.0, **options) -> dict:
    path = os.path.join(workdir, f"{engine}-{name.replace(' ', '-')}")
    if fsync_delay:
        from lsmkv.base.fault_fs import FaultInjectionFS
        fs = FaultInjectionFS()
        fs.stall("sync", seconds=fsync_delay, path_contains=LOG_NAMES[engine])
        options["fs"] = fs
    db = open_engine(engine, path, **options)
    try:
        figures = sync_writers(db, threads, seconds, value)
        stats = db.stats()
    finally:
        db.close()
        shutil.rmtree(path, ignore_errors=True)
    figures["log_syncs"] = stats.get("log_syncs", 0)
    figures["largest_write_group"] = stats.get("largest_write_group", 0)
    return figures


def run(args: argparse.Namespace, rec) -> None:
    engines = args.engines
    value = os.urandom(args.value_size)
    workdir = tempfile.mkdtemp(prefix="lsmkv-group-commit-", dir=args.dir)
    rows = []
    try:
        for engine in engines:
            runs = {}
            plan = (("1 thread", 1, args.single_seconds, {}),
                    ("fsync per write", args.threads, args.seconds, {"group_commit": False}),
                    ("group commit", args.threads, args.seconds, {"commit_delay": args.commit_delay}))
            for name, threads, seconds, options in plan:
                rec.progress(f"{engine}: {name}, {threads} thread(s) of sync puts for {seconds} s")
                figures = measure(engine, workdir, name, threads, seconds, value, args.fsync_delay, **options)
                latency = rec.latency_us(figures["latency_ns"]) if figures["latency_ns"] else None
                rec.run(engine, f"sync put, {name}", figures["ops"], figures["elapsed_s"], latency_us=latency,
                        threads=threads, log_syncs=figures["log_syncs"], fsync_delay=args.fsync_delay,
                        largest_write_group=figures["largest_write_group"], **options)
                runs[name] = {**figures, "latency": latency or {}}
            single, per_write, group = runs["1 thread"], runs["fsync per write"], runs["group commit"]
            rate = {k: v["ops"] / v["elapsed_s"] for k, v in runs.items()}
            speedup = rate["group commit"] / rate["fsync per write"] if rate["fsync per write"] else 0.0
            p99_ratio = (group["latency"].get("p99", 0) / single["latency"]["p99"]
                         if single["latency"].get("p99") else 0.0)
            writes_per_sync = group["ops"] / group["log_syncs"] if group["log_syncs"] else 0.0
            rows.append([engine, f"{rate['1 thread']:,.0f}", f"{rate['fsync per write']:,.0f}",
                         f"{rate['group commit']:,.0f}", fmt_ratio(speedup, 1),
                         f"{single['latency'].get('p99', 0):,.0f}", f"{per_write['latency'].get('p99', 0):,.0f}",
                         f"{group['latency'].get('p99', 0):,.0f}", fmt_ratio(p99_ratio, 1), f"{writes_per_sync:.1f}"])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    rec.table(f"Group commit: {args.threads} threads of sync=True puts",
              ["engine", "1 thread ops/s", "fsync per write ops/s", "group commit ops/s",
               "group / per write (target >= 5x)", "1 thread p99 µs", "per write p99 µs", "group p99 µs",
               "group p99 / 1 thread p99 (target <= 2x)", "writes per fsync"], rows,
              note=f"{args.threads} threads for {args.seconds} s each; the single writer for {args.single_seconds} s; "
                   f"{args.value_size}-byte values; commit_delay {args.commit_delay}"
                   + (f"; every log fsync delayed {args.fsync_delay} s (an emulated slower disk)"
                      if args.fsync_delay else "") + ".")
