#!/usr/bin/env python3
"""Leveled compaction benchmark: lsmkv against RocksDB (rocksdict) in one run.

1. fillrandom of --keys keys (16-byte keys, 100-byte values) into lsmkv with
   compaction turned off: the rate compaction is measured against.
2. the same into lsmkv with its default options, recording throughput every
   second, the most level-0 tables seen, stalls, and the final level shape.
3. the same into RocksDB with the same write buffer, level sizes, file size
   and level-0 triggers (static level sizes, zstd, 10-bit bloom filters).
4. on both: overwrite every key with an incompressible value, delete 20% of
   the keys, compact the whole range; report space amplification (bytes on
   disk / live key+value bytes; incompressible values make that ratio
   mean what it says rather than reward compression).

CPU is reported per put, to judge compaction where wall-clock time is noisy:
the writing process's CPU (writer and flush threads, the compaction
thread that installs results) and the compaction worker's CPU, with the
entries compactions read per put and the worker's CPU per entry. The load
average at the start and the end of each fill is printed with the table.

Write amplification is reported two ways for both engines: all bytes written
(log + flushes + compactions) per user byte, and RocksDB's own "W-Amp" of its
compaction stats (flush + compaction bytes per flushed byte).

Not a test: prints a markdown table for docs/performance.md and writes a
throughput-over-time plot.

usage: scripts/bench_compaction.py [--keys 5000000] [--plot docs/img/compaction-fillrandom.png]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import lsmkv  # noqa: E402
from lsmkv.options import parse_option_text  # noqa: E402

MiB = 1024 * 1024
KEY_SIZE = 16


def dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def key_stream(n: int, seed: int):
    rng = random.Random(seed)
    return [rng.randbytes(KEY_SIZE) for _ in range(n)]


def process_cpu() -> float:
    """CPU seconds of this process so far (all its threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def timed_fill(put, keys, values, probe=None, interval=1.0):
    """Put every key; returns (ops/s overall, [(t, ops/s in interval, probe value)],
    probe maximum, CPU seconds of this process)."""
    series = []
    probe_max = 0
    cpu = process_cpu()
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
    return len(keys) / elapsed, series, probe_max, process_cpu() - cpu


def rocks_options(rocksdict, args):
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_write_buffer_size(args.write_buffer)
    opts.set_max_write_buffer_number(3)  # lsmkv: one memtable + 2 immutable
    opts.set_level_compaction_dynamic_level_bytes(False)
    opts.set_max_bytes_for_level_base(args.level1)
    opts.set_max_bytes_for_level_multiplier(10.0)
    opts.set_target_file_size_base(args.file_size)
    opts.set_level_zero_file_num_compaction_trigger(4)
    opts.set_level_zero_slowdown_writes_trigger(8)
    opts.set_level_zero_stop_writes_trigger(12)
    opts.set_compression_type(rocksdict.DBCompressionType.zstd())
    table = rocksdict.BlockBasedOptions()
    table.set_bloom_filter(10, False)
    opts.set_block_based_table_factory(table)
    return opts


def rocks_write_amp(stats_text: str, user_bytes: int) -> tuple[float, float, dict]:
    """(all bytes written per user byte, RocksDB's W-Amp, parsed figures)."""
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=5_000_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--write-buffer", type=int, default=4 * MiB)
    ap.add_argument("--level1", type=int, default=16 * MiB)
    ap.add_argument("--file-size", type=int, default=2 * MiB)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--plot", default=None, help="write the throughput-over-time plot here (PNG)")
    ap.add_argument("--skip-rocksdb", action="store_true")
    ap.add_argument("--executor", choices=["process", "thread"], default="process",
                    help="where lsmkv runs its merges (the option compaction_executor)")
    ap.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                    help="another lsmkv option for both lsmkv runs (VALUE a Python literal), e.g. "
                         "upper_compression_level=3")
    args = ap.parse_args()

    keys = key_stream(args.keys, args.seed)
    rng = random.Random(args.seed + 1)
    # 4096 distinct values, each half random bytes repeated (about 2:1
    # compressible, like db_bench's default), cycled through.
    value = [(rng.randbytes(args.value_size // 2) * 2)[: args.value_size] for _ in range(4096)]

    def overwrite(put):
        fresh = random.Random(args.seed + 2)
        size = args.value_size
        for k in keys:
            put(k, fresh.randbytes(size))
    user_bytes = args.keys * (KEY_SIZE + args.value_size)
    work = tempfile.mkdtemp(prefix="lsmkv-compaction-bench-")
    lsm_opts = dict(write_buffer_size=args.write_buffer, level1_max_bytes=args.level1,
                    target_file_size=args.file_size, compaction_executor=args.executor)
    lsm_opts.update(parse_option_text(option) for option in args.option)
    rows = {}
    loads = {}

    # 1. lsmkv without compaction.
    path = os.path.join(work, "lsm-off")
    db = lsmkv.open(path, disable_auto_compactions=True, **lsm_opts)
    loads["lsmkv, compaction off"] = [load()]
    rate_off, series_off, _, cpu_off = timed_fill(db.put, keys, value)
    loads["lsmkv, compaction off"].append(load())
    db.close()
    shutil.rmtree(path)
    print(f"lsmkv, compaction off: {rate_off:,.0f} puts/s", file=sys.stderr, flush=True)

    # 2. lsmkv with compaction.
    path = os.path.join(work, "lsm")
    db = lsmkv.open(path, **lsm_opts)
    loads["lsmkv"] = [load()]
    rate, series, max_l0, cpu = timed_fill(db.put, keys, value, probe=lambda: len(db._state.version.levels[0]))
    loads["lsmkv"].append(load())
    db.flush()
    at_end = db.stats()
    db._compactor.wait_idle()
    settled = db.stats()
    print(f"lsmkv: {rate:,.0f} puts/s, most L0 tables {max_l0}", file=sys.stderr, flush=True)
    rows["lsmkv"] = {
        "rate": rate, "series": series, "max_l0": max(max_l0, at_end["level0_max_tables"]),
        "levels": settled["files_per_level"], "bytes_per_level": settled["bytes_per_level"],
        "write_amp": at_end["write_amp"],
        "own_wamp": (settled["flush_bytes_written"] + settled["compaction_bytes_written"])
        / max(1, settled["flush_bytes_written"]),
        "stall_s": at_end["stall_seconds"], "slowdown_s": at_end["slowdown_seconds"],
        "compaction_s": settled["compaction_cpu_seconds"],
        "writer_cpu_us": 1e6 * cpu / args.keys,
        # The worker's CPU per put and entries compacted per put, over the
        # fill and the settling after it (the compaction the fill caused).
        "worker_cpu_us": 1e6 * settled["compaction_cpu_seconds"] / args.keys,
        "entries_per_put": settled["compaction_entries_read"] / args.keys,
        "us_per_entry": 1e6 * settled["compaction_cpu_seconds"] / max(1, settled["compaction_entries_read"]),
        "trivial_moves": settled["trivial_moves"],
        "delayed_rate": at_end["delayed_write_rate"],
        # Level 0 is written by flushes, deeper levels by compactions into them.
        "written_mib": [settled["flush_bytes_written"] / MiB]
        + [lv["compaction_bytes_written_into"] / MiB for lv in settled["levels"][1:]],
        "moved_mib": [lv["bytes_moved_into"] / MiB for lv in settled["levels"]],
    }
    # 4 (lsmkv). Overwrite, delete 20%, compact.
    overwrite(db.put)
    for k in keys[: len(keys) // 5]:
        db.delete(k)
    started = time.perf_counter()
    db.compact_range()
    rows["lsmkv"]["compact_range_s"] = time.perf_counter() - started
    live = (len(keys) - len(keys) // 5) * (KEY_SIZE + args.value_size)
    db.close()
    rows["lsmkv"]["space_amp"] = dir_bytes(path) / live
    shutil.rmtree(path)

    # 3. RocksDB.
    if not args.skip_rocksdb:
        try:
            import rocksdict
        except ImportError:
            print("rocksdb: not installed; pip install 'lsmkv[references]'", file=sys.stderr)
        else:
            path = os.path.join(work, "rocks")
            rdb = rocksdict.Rdict(path, rocks_options(rocksdict, args))
            wo = rocksdict.WriteOptions()

            def rput(k, v, put=rdb.put, wo=wo):
                put(k, v, wo)
            loads["rocksdb"] = [load()]
            rrate, rseries, rmax_l0, rcpu = timed_fill(
                rput, keys, value, probe=lambda: rdb.property_int_value("rocksdb.num-files-at-level0") or 0)
            loads["rocksdb"].append(load())
            rdb.flush(True)
            while (rdb.property_int_value("rocksdb.compaction-pending")
                   or rdb.property_int_value("rocksdb.num-running-compactions")):
                time.sleep(0.1)
            wa, own, parsed = rocks_write_amp(rdb.property_value("rocksdb.stats"), user_bytes)
            print(f"rocksdb: {rrate:,.0f} puts/s", file=sys.stderr, flush=True)
            rows["rocksdb"] = {"rate": rrate, "series": rseries, "max_l0": rmax_l0, "write_amp": wa,
                               "own_wamp": own,
                               "levels": [parsed["levels"].get(i, (0, "0"))[0] for i in range(7)],
                               "stall_s": float("nan"), "slowdown_s": float("nan"), "compaction_s": float("nan"),
                               "writer_cpu_us": 1e6 * rcpu / args.keys,
                               "written_mib": [parsed["written"].get(i, 0.0) / MiB for i in range(7)],
                               "moved_mib": [parsed["moved"].get(i, 0.0) / MiB for i in range(7)]}
            overwrite(rput)
            for k in keys[: len(keys) // 5]:
                rdb.delete(k)
            started = time.perf_counter()
            rdb.compact_range(None, None)
            rows["rocksdb"]["compact_range_s"] = time.perf_counter() - started
            rdb.close()
            rows["rocksdb"]["space_amp"] = dir_bytes(path) / live
            shutil.rmtree(path)
    shutil.rmtree(work, ignore_errors=True)

    print("\nload average (1/5/15 min) at the start and end of each fill: "
          + "; ".join(f"{name} {a} -> {b}" for name, (a, b) in loads.items()))
    print(f"\nfillrandom, {args.keys:,} keys of {KEY_SIZE} bytes, {args.value_size}-byte values; write buffer "
          f"{args.write_buffer // MiB} MiB, level 1 {args.level1 // MiB} MiB x10, files {args.file_size // MiB} MiB, "
          f"level-0 triggers 4/8/12\n")
    names = list(rows)
    print("| | lsmkv, compaction off | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))

    def line(label, fmt, key, off=""):
        cells = [fmt(rows[n][key]) if key in rows[n] else "" for n in names]
        print(f"| {label} | {off} | " + " | ".join(cells) + " |")
    line("puts/s (whole run)", lambda v: f"{v:,.0f}", "rate", f"{rate_off:,.0f}")
    print(f"| throughput vs lsmkv with compaction off | 1.00 | "
          + " | ".join(f"{rows[n]['rate'] / rate_off:.2f}" for n in names) + " |")
    line("most level-0 tables seen (stop trigger 12)", str, "max_l0", "")
    line("files per level after settling", lambda v: str(v), "levels")
    line("write amp: all bytes written / user bytes", lambda v: f"{v:.2f}", "write_amp", "")
    line("write amp: (flush + compaction) / flush", lambda v: f"{v:.2f}", "own_wamp", "")
    line("stall seconds", lambda v: f"{v:.1f}", "stall_s")
    line("slowdown seconds", lambda v: f"{v:.1f}", "slowdown_s")
    line("compaction CPU seconds (worker)", lambda v: f"{v:.1f}", "compaction_s")
    line("CPU µs per put, writing process (all its threads)", lambda v: f"{v:.1f}", "writer_cpu_us",
         f"{1e6 * cpu_off / args.keys:.1f}")
    line("CPU µs per put, compaction worker", lambda v: f"{v:.1f}", "worker_cpu_us")
    line("entries compacted per put", lambda v: f"{v:.2f}", "entries_per_put")
    line("worker CPU µs per entry compacted", lambda v: f"{v:.2f}", "us_per_entry")
    line("trivial moves", lambda v: f"{v}", "trivial_moves")
    line("MiB written into each level (level 0: flushes)", lambda v: str([round(x) for x in v]), "written_mib")
    line("MiB moved into each level by trivial moves (RocksDB: 0.1 GB steps)", lambda v: str([round(x) for x in v]), "moved_mib")
    line("delayed write rate at the end (bytes/s)", lambda v: f"{v:,}", "delayed_rate")
    line("overwrite + delete 20% + compact_range: space amp", lambda v: f"{v:.3f}", "space_amp")
    line("compact_range seconds", lambda v: f"{v:.1f}", "compact_range_s")

    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (ax, ax0) = plt.subplots(2, 1, figsize=(9, 7), sharex=True, height_ratios=[2, 1])
        ax.plot([t for t, _, _ in series_off], [r / 1000 for _, r, _ in series_off],
                label="lsmkv, compaction off", color="0.6", linestyle="--")
        for name, color in (("lsmkv", "tab:blue"), ("rocksdb", "tab:orange")):
            if name in rows:
                s = rows[name]["series"]
                ax.plot([t for t, _, _ in s], [r / 1000 for _, r, _ in s], label=name, color=color)
                ax0.plot([t for t, _, _ in s], [n for _, _, n in s], label=name, color=color)
        ax.set_ylabel("thousand puts per second (1 s windows)")
        ax.set_title(f"fillrandom {args.keys:,} keys: throughput over time")
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
        os.makedirs(os.path.dirname(os.path.abspath(args.plot)), exist_ok=True)
        fig.savefig(args.plot, dpi=110)
        print(f"\nplot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
