#!/usr/bin/env python3
"""What FaultInjectionFS costs when it injects nothing, against OsFileSystem.

Run: .venv/bin/python scripts/bench_fault_fs.py [--keys 100000] [--rounds 5]

First the file-system calls on the engines' hot paths, alone (a put's log
append, a 4 KiB read), through each file system. Then, for each engine, in
the same run and alternating, opens a database once with
the default file system (OsFileSystem, what the engines use unless told
otherwise) and once through a FaultInjectionFS with no rule, and measures:
puts (16-byte keys, 100-byte values, sync=False) and random gets with a
small cache, so that most gets read their block or page from the file.
lsmkv compacts in a thread in both cases (with a custom file system it
cannot use its worker process). Rates are per second of this process's CPU
time (all its threads), which other load on a shared machine disturbs far
less than wall-clock time; wall-clock rates are shown too. The best of
--rounds is kept per case.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import btree  # noqa: E402
import lsmkv  # noqa: E402
from lsmkv.base.fault_fs import FaultInjectionFS  # noqa: E402
from lsmkv.base.fs import OsFileSystem  # noqa: E402

OPTIONS = {"lsm": dict(compaction_executor="thread", block_cache_size=256 * 1024),
           "btree": dict(cache_size=256 * 1024)}


def run(engine: str, fs, directory: str, keys: list[bytes], value: bytes) -> dict:
    """Rates of puts and gets: per CPU second and per wall-clock second."""
    path = os.path.join(directory, "db")
    shutil.rmtree(path, ignore_errors=True)
    opts = dict(OPTIONS[engine])
    if fs is not None:
        opts["fs"] = fs
    db = lsmkv.open(path, **opts) if engine == "lsm" else btree.open(path, **opts)
    rates = {}
    cpu, wall = time.process_time(), time.perf_counter()
    for key in keys:
        db.put(key, value)
    db.flush()
    if engine == "lsm":
        db._compactor.wait_idle()
    rates["put_cpu"] = len(keys) / (time.process_time() - cpu)
    rates["put_wall"] = len(keys) / (time.perf_counter() - wall)
    order = keys[:]
    random.Random(2).shuffle(order)
    get = db.get
    cpu, wall = time.process_time(), time.perf_counter()
    for key in order:
        get(key)
    rates["get_cpu"] = len(order) / (time.process_time() - cpu)
    rates["get_wall"] = len(order) / (time.perf_counter() - wall)
    db.close()
    return rates


def calls(fs, directory: str, count: int) -> dict:
    """Rates (per CPU second) of the file-system calls the engines' hot
    paths make: a log append of a put's record (the write-ahead log's
    preallocated, mapped file) and a 4 KiB read at an offset."""
    path = os.path.join(directory, "calls.log")
    record = bytes(116)
    log = fs.create_log(path, count * len(record) + 4096)
    append = log.append
    cpu = time.process_time()
    for _ in range(count):
        append(record)
    appends = count / (time.process_time() - cpu)
    log.close()
    f = fs.open_readable(path)
    read_at = f.read_at
    span = max(1, f.size - 4096)
    cpu = time.process_time()
    for i in range(count):
        read_at((i * 4096) % span, 4096)
    reads = count / (time.process_time() - cpu)
    f.close()
    os.remove(path)
    return {"append": appends, "read": reads}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where the databases go (default: a temporary directory)")
    args = parser.parse_args()
    rng = random.Random(1)
    keys = [rng.randbytes(16) for _ in range(args.keys)]
    value = rng.randbytes(100)
    print(f"{args.keys} puts (sync=False) then {args.keys} random gets; best of {args.rounds} rounds; "
          "rates per CPU second (per wall-clock second in brackets)\n")
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        best_calls: dict[str, dict] = {"OsFileSystem": {}, "FaultInjectionFS": {}}
        for _ in range(args.rounds):
            for name in best_calls:
                rates = calls(OsFileSystem() if name == "OsFileSystem" else FaultInjectionFS(), directory,
                              args.keys * 5)
                best_calls[name] = {k: max(v, best_calls[name].get(k, 0.0)) for k, v in rates.items()}
        print(f"| calls | file system | log appends/s (116 B) | reads/s (4 KiB pread) |")
        print("|---|---|---|---|")
        for name, r in best_calls.items():
            print(f"| calls | {name} | {r['append']:,.0f} | {r['read']:,.0f} |")
        base, faulty = best_calls["OsFileSystem"], best_calls["FaultInjectionFS"]
        print(f"| calls | extra cost per call | {1e6 / faulty['append'] - 1e6 / base['append']:.2f} µs | "
              f"{1e6 / faulty['read'] - 1e6 / base['read']:.2f} µs |\n")
        print("| engine | file system | puts/s | gets/s |")
        print("|---|---|---|---|")
        for engine in ("lsm", "btree"):
            best: dict[str, dict] = {"OsFileSystem": {}, "FaultInjectionFS": {}}
            for _ in range(args.rounds):
                for name in best:
                    rates = run(engine, None if name == "OsFileSystem" else FaultInjectionFS(), directory, keys,
                                value)
                    best[name] = {k: max(v, best[name].get(k, 0.0)) for k, v in rates.items()}
            for name, r in best.items():
                print(f"| {engine} | {name} | {r['put_cpu']:,.0f} ({r['put_wall']:,.0f}) | "
                      f"{r['get_cpu']:,.0f} ({r['get_wall']:,.0f}) |")
            base, faulty = best["OsFileSystem"], best["FaultInjectionFS"]
            print(f"| {engine} | FaultInjectionFS / OsFileSystem | {faulty['put_cpu'] / base['put_cpu']:.3f} "
                  f"({faulty['put_wall'] / base['put_wall']:.3f}) | {faulty['get_cpu'] / base['get_cpu']:.3f} "
                  f"({faulty['get_wall'] / base['get_wall']:.3f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
