"""Leveled compaction benchmark: lsmkv against RocksDB (rocksdict) in one run.

1. fillrandom of ``--keys`` keys (16-byte keys, 100-byte values) into lsmkv
   with compaction turned off: the rate compaction is measured against
   (workload ``fillrandom, compaction off``).
2. the same into lsmkv with its default options (workload ``fillrandom``),
   recording throughput every second, the most level-0 tables seen,
   stalls, and the final level shape.
3. the same into RocksDB with the same write buffer, level sizes, file size
   and level-0 triggers (static level sizes, zstd, 10-bit bloom filters).
4. on both: overwrite every key with an incompressible value, delete 20% of
   the keys, compact the whole range (workloads ``overwrite``,
   ``delete 20%``, ``compact_range``); report space amplification (bytes on
   disk / live key+value bytes; incompressible values make that ratio
   mean what it says rather than reward compression).

CPU is reported per put, to judge compaction where wall-clock time is noisy:
the writing process's CPU (writer and flush threads, the compaction
thread that installs results) and the compaction worker's CPU, with the
entries compactions read per put and the worker's CPU per entry. The load
average at the start and the end of each fill is in the table's note.

Write amplification is reported two ways for both engines: all bytes written
(log + flushes + compactions) per user byte, and RocksDB's own "W-Amp" of its
compaction stats (flush + compaction bytes per flushed byte).

The engines are the harness's adapters (bench/engines.py): ``lsm`` with the
suite's sizes (``--write-buffer``, ``--level1``, ``--file-size``,
``--executor``, ``--option``), ``rocksdb`` given the same through its
options (statistics off, as RocksDB runs by default).

Reading the output: the table "fillrandom: lsmkv with compaction against
RocksDB" has a column for lsmkv with compaction off, lsmkv and RocksDB and
a row per figure ("throughput vs lsmkv with compaction off" is the cost of
compaction); the plot ``compaction_timeline.png`` (in the results folder and
report.md; ``--plot PATH`` also copies it to PATH) shows the puts per second
in 1 s windows and the level-0 tables over the fill, against the slowdown
(8) and stop (12) triggers.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import shutil
import tempfile
import time
from typing import Any, Callable

NAME = "compaction"
DESCRIPTION = ("fillrandom with compaction off/on vs RocksDB: throughput over time, L0 peak, stalls, CPU per put, "
               "write and space amp")

MiB = 1024 * 1024
KEY_SIZE = 16
PLOT = "compaction_timeline.png"
OFF = "lsmkv, compaction off"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keys", type=int, default=5_000_000, help="keys put (5,000,000)")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value (100)")
    parser.add_argument("--write-buffer", type=int, default=4 * MiB, help="memtable size, bytes (4 MiB)")
    parser.add_argument("--level1", type=int, default=16 * MiB, help="level 1 size, bytes (16 MiB; x10 per level)")
    parser.add_argument("--file-size", type=int, default=2 * MiB, help="table file size, bytes (2 MiB)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the random data and choices (7)")
    parser.add_argument("--plot", default=None,
                        help=f"also copy the throughput-over-time plot (always {PLOT} in the results folder) here")
    parser.add_argument("--skip-rocksdb", action="store_true", help="lsmkv only")
    parser.add_argument("--executor", choices=["process", "thread"], default="process",
                        help="where lsmkv runs its merges (the option compaction_executor)")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="another lsmkv option for both lsmkv runs (VALUE a Python literal), e.g. "
                             "upper_compression_level=3")
    parser.add_argument("--dir", default=None, help="where the databases go (default: a temporary folder)")


def _process_cpu() -> float:
    """CPU seconds of this process so far (all its threads; not the compaction worker)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def timed_fill(put: Callable[[bytes, bytes], Any], keys: list[bytes], values: list[bytes],
               probe: Callable[[], int] | None = None, interval: float = 1.0):
    """Put every key; returns (seconds, [(t, ops/s in the interval, probe value)], probe maximum,
    CPU seconds of this process)."""
    series = []
    probe_max = 0
    cpu = _process_cpu()
    start = last_t = time.perf_counter()
    last_n = 0
    mask = len(values) - 1
    for i, k in enumerate(keys):
        put(k, values[i & mask])
        if i & 1023 == 0:
            now = time.perf_counter()
            if now - last_t >= interval:
                seen = probe() if probe is not None else 0
                probe_max = max(probe_max, seen)
                series.append((now - start, (i - last_n) / (now - last_t), seen))
                last_t, last_n = now, i
    elapsed = time.perf_counter() - start
    return elapsed, series, probe_max, _process_cpu() - cpu


def rocks_options(args: argparse.Namespace) -> dict[str, Any]:
    """RocksDB given lsmkv's sizes (the adapter's ``settings.options``)."""
    return {"write_buffer_size": args.write_buffer,
            "max_write_buffer_number": 3,  # lsmkv: one memtable + 2 immutable
            "level_compaction_dynamic_level_bytes": False,
            "max_bytes_for_level_base": args.level1, "max_bytes_for_level_multiplier": 10.0,
            "target_file_size_base": args.file_size,
            "level_zero_file_num_compaction_trigger": 4, "level_zero_slowdown_writes_trigger": 8,
            "level_zero_stop_writes_trigger": 12,
            "compression": "zstd", "statistics": False, "bloom_bits_per_key": 10}


def rocks_write_amp(stats_text: str, user_bytes: int) -> tuple[float, float, dict]:
    """(all bytes written per user byte, RocksDB's W-Amp, parsed figures) from ``rocksdb.stats``."""
    def gb(pattern):
        m = re.search(pattern, stats_text)
        return float(m.group(1)) * 1024 ** 3 if m else 0.0
    wal = gb(r"Cumulative WAL:.*?written: ([\d.]+) GB")
    flush = gb(r"Flush\(GB\): cumulative ([\d.]+)")
    compaction = gb(r"Cumulative compaction: ([\d.]+) GB write")
    m = re.search(r"^\s*Sum\s+\S+\s+\S+\s+\S+\s+\S+(?:\s+\S+){6}\s+([\d.]+)", stats_text, re.M)
    own = float(m.group(1)) if m else float("nan")
    levels = {}
    written = {}
    moved = {}
    # Level rows: Lk, files, size (number and unit), then Score, Read(GB), Rn, Rnp1, Write(GB), Wnew, Moved(GB),
    # W-Amp, Rd(MB/s), Wr(MB/s), Comp(sec), CompMergeCPU(sec), Comp(cnt). Write(GB) prints in 0.1 GB steps, so the
    # bytes written are taken as Wr(MB/s) x Comp(sec), good to about 1%.
    for lm in re.finditer(r"^\s*L(\d)\s+(\d+)/\d+\s+([\d.]+ [KMG]B)\s+(\S+(?:\s+\S+){12})", stats_text, re.M):
        level = int(lm.group(1))
        levels[level] = (int(lm.group(2)), lm.group(3))
        cols = lm.group(4).split()
        written[level] = float(cols[9]) * float(cols[10]) * MiB
        moved[level] = float(cols[6]) * 1024 ** 3
    return (wal + flush + compaction) / user_bytes, own, {"wal": wal, "flush": flush, "compaction": compaction,
                                                          "levels": levels, "written": written, "moved": moved}


def _series(series: list[tuple[float, float, int]]) -> dict[str, list[float]]:
    return {"t_s": [round(t, 3) for t, _, _ in series], "ops_per_sec": [round(r, 1) for _, r, _ in series],
            "level0_tables": [n for _, _, n in series]}


def _after_fill(rec, engine: str, adapter, keys: list[bytes], args: argparse.Namespace, path: str,
                row: dict[str, Any], compact: Callable[[], None], close: Callable[[], None]) -> None:
    """Step 4 on a filled database: overwrite with incompressible values, delete 20%, compact, space amp."""
    from ..metrics import directory_bytes
    fresh = random.Random(args.seed + 2)
    size = args.value_size
    put = adapter.put
    started = time.perf_counter()
    for k in keys:
        put(k, fresh.randbytes(size))
    rec.run(engine, "overwrite", len(keys), time.perf_counter() - started, incompressible=True)
    deleted = len(keys) // 5
    delete = adapter.delete
    started = time.perf_counter()
    for k in keys[:deleted]:
        delete(k)
    rec.run(engine, "delete 20%", deleted, time.perf_counter() - started)
    started = time.perf_counter()
    compact()
    row["compact_range_s"] = time.perf_counter() - started
    live = (len(keys) - deleted) * (KEY_SIZE + args.value_size)
    close()
    row["space_amp"] = directory_bytes(path) / live
    rec.run(engine, "compact_range", 1, row["compact_range_s"], space_amp=row["space_amp"], live_bytes=live)


def _lsm_fills(rec, work: str, keys, values, args, rows, loads) -> tuple[float, list, float]:
    """Steps 1, 2 and 4 on lsmkv; returns (compaction-off rate, its series, its CPU seconds)."""
    from lsmkv.lsm.options import parse_option_text

    from ..engines import EngineSettings, get_adapter
    lsm_opts: dict[str, Any] = dict(write_buffer_size=args.write_buffer, level1_max_bytes=args.level1,
                                    target_file_size=args.file_size, compaction_executor=args.executor)
    lsm_opts.update(parse_option_text(option) for option in args.option)
    n = len(keys)

    # 1. lsmkv without compaction.
    rec.progress(f"lsm: fillrandom of {n:,} keys, compaction off")
    path = os.path.join(work, "lsm-off")
    adapter = get_adapter("lsm")(path, EngineSettings(options=dict(lsm_opts, disable_auto_compactions=True)))
    loads[OFF] = [_load()]
    seconds_off, series_off, _, cpu_off = timed_fill(adapter.put, keys, values)
    loads[OFF].append(_load())
    adapter.close()
    shutil.rmtree(path)
    rec.run("lsm", "fillrandom, compaction off", n, seconds_off, cpu_us_per_put=1e6 * cpu_off / n,
            timeline=_series(series_off), load_average=loads[OFF])

    # 2. lsmkv with compaction.
    rec.progress(f"lsm: fillrandom of {n:,} keys")
    path = os.path.join(work, "lsm")
    adapter = get_adapter("lsm")(path, EngineSettings(options=lsm_opts))
    db = adapter.db
    loads["lsmkv"] = [_load()]
    seconds, series, max_l0, cpu = timed_fill(adapter.put, keys, values,
                                              probe=lambda: len(db._state.version.levels[0]))
    loads["lsmkv"].append(_load())
    db.flush()
    at_end = db.stats()
    db._compactor.wait_idle()
    settled = db.stats()
    row = rows["lsmkv"] = {
        "rate": n / seconds, "series": series, "max_l0": max(max_l0, at_end["level0_max_tables"]),
        "levels": settled["files_per_level"], "bytes_per_level": settled["bytes_per_level"],
        "write_amp": at_end["write_amp"],
        "own_wamp": (settled["flush_bytes_written"] + settled["compaction_bytes_written"])
        / max(1, settled["flush_bytes_written"]),
        "stall_s": at_end["stall_seconds"], "slowdown_s": at_end["slowdown_seconds"],
        "compaction_s": settled["compaction_cpu_seconds"],
        "writer_cpu_us": 1e6 * cpu / n,
        # The worker's CPU per put and entries compacted per put, over the
        # fill and the settling after it (the compaction the fill caused).
        "worker_cpu_us": 1e6 * settled["compaction_cpu_seconds"] / n,
        "entries_per_put": settled["compaction_entries_read"] / n,
        "us_per_entry": 1e6 * settled["compaction_cpu_seconds"] / max(1, settled["compaction_entries_read"]),
        "trivial_moves": settled["trivial_moves"],
        "delayed_rate": at_end["delayed_write_rate"],
        # Level 0 is written by flushes, deeper levels by compactions into them.
        "written_mib": [settled["flush_bytes_written"] / MiB]
        + [lv["compaction_bytes_written_into"] / MiB for lv in settled["levels"][1:]],
        "moved_mib": [lv["bytes_moved_into"] / MiB for lv in settled["levels"]],
    }
    rec.run("lsm", "fillrandom", n, seconds, **_run_fields(row), load_average=loads["lsmkv"])
    # 4 (lsmkv). Overwrite, delete 20%, compact.
    _after_fill(rec, "lsm", adapter, keys, args, path, row, db.compact_range, adapter.close)
    shutil.rmtree(path)
    return n / seconds_off, series_off, cpu_off


def _run_fields(row: dict[str, Any]) -> dict[str, Any]:
    """A fill's figures as fields of its run."""
    fields = {k: v for k, v in row.items()
              if k not in ("rate", "series", "levels") and not (isinstance(v, float) and v != v)}  # no NaN
    fields["files_per_level"] = row["levels"]
    fields["timeline"] = _series(row["series"])
    return fields


def _rocksdb_fill(rec, work: str, keys, values, args, rows, loads) -> None:
    """Steps 3 and 4 on RocksDB."""
    from ..engines import EngineSettings, get_adapter
    n = len(keys)
    user_bytes = n * (KEY_SIZE + args.value_size)
    rec.progress(f"rocksdb: fillrandom of {n:,} keys")
    path = os.path.join(work, "rocks")
    adapter = get_adapter("rocksdb")(path, EngineSettings(options=rocks_options(args)))
    rdb = adapter.db
    loads["rocksdb"] = [_load()]
    seconds, series, max_l0, cpu = timed_fill(
        adapter.put, keys, values, probe=lambda: rdb.property_int_value("rocksdb.num-files-at-level0") or 0)
    loads["rocksdb"].append(_load())
    rdb.flush(True)
    while (rdb.property_int_value("rocksdb.compaction-pending")
           or rdb.property_int_value("rocksdb.num-running-compactions")):
        time.sleep(0.1)
    wa, own, parsed = rocks_write_amp(rdb.property_value("rocksdb.stats"), user_bytes)
    nan = float("nan")
    row = rows["rocksdb"] = {"rate": n / seconds, "series": series, "max_l0": max_l0, "write_amp": wa,
                             "own_wamp": own, "levels": [parsed["levels"].get(i, (0, "0"))[0] for i in range(7)],
                             "stall_s": nan, "slowdown_s": nan, "compaction_s": nan,
                             "writer_cpu_us": 1e6 * cpu / n,
                             "written_mib": [parsed["written"].get(i, 0.0) / MiB for i in range(7)],
                             "moved_mib": [parsed["moved"].get(i, 0.0) / MiB for i in range(7)]}
    rec.run("rocksdb", "fillrandom", n, seconds, **_run_fields(row), load_average=loads["rocksdb"])
    _after_fill(rec, "rocksdb", adapter, keys, args, path, row, lambda: rdb.compact_range(None, None), adapter.close)
    shutil.rmtree(path)


def run(args: argparse.Namespace, rec) -> None:
    from ..data import half_random_values, random_keys
    from . import available_engines
    keys = random_keys(random.Random(args.seed), args.keys, KEY_SIZE)
    values = half_random_values(random.Random(args.seed + 1), args.value_size)
    work = tempfile.mkdtemp(prefix="lsmkv-bench-compaction-", dir=args.dir)
    rows: dict[str, dict[str, Any]] = {}
    loads: dict[str, list[str]] = {}
    try:
        rate_off, series_off, cpu_off = _lsm_fills(rec, work, keys, values, args, rows, loads)
        if not args.skip_rocksdb and list(available_engines(["rocksdb"], rec)):
            _rocksdb_fill(rec, work, keys, values, args, rows, loads)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _table(rec, args, rows, rate_off, cpu_off, loads)
    path = rec.plot(PLOT, f"fillrandom {args.keys:,} keys: throughput and level-0 tables over time",
                    lambda: _figure(args.keys, series_off, rows))
    if args.plot:
        os.makedirs(os.path.dirname(os.path.abspath(args.plot)), exist_ok=True)
        shutil.copyfile(path, args.plot)


def _table(rec, args, rows, rate_off: float, cpu_off: float, loads) -> None:
    names = list(rows)
    table: list[list[Any]] = []

    def line(label: str, fmt: Callable[[Any], str], key: str, off: str = "") -> None:
        table.append([label, off] + [fmt(rows[n][key]) if key in rows[n] else "" for n in names])
    line("puts/s (whole run)", lambda v: f"{v:,.0f}", "rate", f"{rate_off:,.0f}")
    table.append(["throughput vs lsmkv with compaction off", "1.00"]
                 + [f"{rows[n]['rate'] / rate_off:.2f}" for n in names])
    line("most level-0 tables seen (stop trigger 12)", str, "max_l0")
    line("files per level after settling", str, "levels")
    line("write amp: all bytes written / user bytes", lambda v: f"{v:.2f}", "write_amp")
    line("write amp: (flush + compaction) / flush", lambda v: f"{v:.2f}", "own_wamp")
    line("stall seconds", lambda v: f"{v:.1f}", "stall_s")
    line("slowdown seconds", lambda v: f"{v:.1f}", "slowdown_s")
    line("compaction CPU seconds (worker)", lambda v: f"{v:.1f}", "compaction_s")
    line("CPU µs per put, writing process (all its threads)", lambda v: f"{v:.1f}", "writer_cpu_us",
         f"{1e6 * cpu_off / args.keys:.1f}")
    line("CPU µs per put, compaction worker", lambda v: f"{v:.1f}", "worker_cpu_us")
    line("entries compacted per put", lambda v: f"{v:.2f}", "entries_per_put")
    line("worker CPU µs per entry compacted", lambda v: f"{v:.2f}", "us_per_entry")
    line("trivial moves", str, "trivial_moves")
    line("MiB written into each level (level 0: flushes)", lambda v: str([round(x) for x in v]), "written_mib")
    line("MiB moved into each level by trivial moves (RocksDB: 0.1 GB steps)", lambda v: str([round(x) for x in v]),
         "moved_mib")
    line("delayed write rate at the end (bytes/s)", lambda v: f"{v:,}", "delayed_rate")
    line("overwrite + delete 20% + compact_range: space amp", lambda v: f"{v:.3f}", "space_amp")
    line("compact_range seconds", lambda v: f"{v:.1f}", "compact_range_s")
    rec.table("fillrandom: lsmkv with compaction against RocksDB", ["", OFF] + names, table,
              note=f"fillrandom, {args.keys:,} keys of {KEY_SIZE} bytes, {args.value_size}-byte values; write buffer "
                   f"{args.write_buffer // MiB} MiB, level 1 {args.level1 // MiB} MiB x10, files "
                   f"{args.file_size // MiB} MiB, level-0 triggers 4/8/12. Load average (1/5/15 min) at the start "
                   "and end of each fill: " + "; ".join(f"{name} {a} -> {b}" for name, (a, b) in loads.items()) + ".")


def _figure(keys: int, series_off, rows):
    """Puts per second (1 s windows) over the fill, and level-0 tables, per engine."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, ax0) = plt.subplots(2, 1, figsize=(9, 7), sharex=True, height_ratios=[2, 1])
    ax.plot([t for t, _, _ in series_off], [r / 1000 for _, r, _ in series_off],
            label=OFF, color="0.6", linestyle="--")
    for name, color in (("lsmkv", "tab:blue"), ("rocksdb", "tab:orange")):
        if name in rows:
            s = rows[name]["series"]
            ax.plot([t for t, _, _ in s], [r / 1000 for _, r, _ in s], label=name, color=color)
            ax0.plot([t for t, _, _ in s], [n for _, _, n in s], label=name, color=color)
    ax.set_ylabel("thousand puts per second (1 s windows)")
    ax.set_title(f"fillrandom {keys:,} keys: throughput over time")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    for level, text in ((8, "slowdown"), (12, "stop")):
        ax0.axhline(level, color="tab:red", linestyle=":", linewidth=1)
        ax0.text(0.005, level + 0.2, text, color="tab:red", fontsize=8, transform=ax0.get_yaxis_transform())
    ax0.set_xlabel("seconds into the fill")
    ax0.set_ylabel("level-0 tables")
    ax0.set_ylim(0, 13)
    ax0.grid(alpha=0.3)
    fig.tight_layout()
    return fig
