#!/usr/bin/env python3
"""What FaultInjectionFS costs when it injects nothing, against OsFileSystem.

Run: .venv/bin/python scripts/bench_fault_fs.py [--keys 200000] [--rounds 3]

For each engine, in the same run and alternating, opens a database once with
the default file system (OsFileSystem, what the engines use unless told
otherwise) and once through a FaultInjectionFS with no rule, and measures:
puts (16-byte keys, 100-byte values, sync=False) and random gets with a
small cache, so that most gets read their block or page from the file.
lsmkv compacts in a thread in both cases (with a custom file system it
cannot use its worker process). The best of --rounds is kept per case.
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
from lsmkv.fault_fs import FaultInjectionFS  # noqa: E402

OPTIONS = {"lsm": dict(compaction_executor="thread", block_cache_size=256 * 1024),
           "btree": dict(cache_size=256 * 1024)}


def run(engine: str, fs, directory: str, keys: list[bytes], value: bytes) -> tuple[float, float]:
    path = os.path.join(directory, "db")
    shutil.rmtree(path, ignore_errors=True)
    opts = dict(OPTIONS[engine])
    if fs is not None:
        opts["fs"] = fs
    db = lsmkv.open(path, **opts) if engine == "lsm" else btree.open(path, **opts)
    started = time.perf_counter()
    for key in keys:
        db.put(key, value)
    db.flush()
    put_rate = len(keys) / (time.perf_counter() - started)
    if engine == "lsm":
        db._compactor.wait_idle()
    order = keys[:]
    random.Random(2).shuffle(order)
    get = db.get
    started = time.perf_counter()
    for key in order:
        get(key)
    get_rate = len(order) / (time.perf_counter() - started)
    db.close()
    return put_rate, get_rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where the databases go (default: a temporary directory)")
    args = parser.parse_args()
    rng = random.Random(1)
    keys = [rng.randbytes(16) for _ in range(args.keys)]
    value = rng.randbytes(100)
    print(f"{args.keys} puts (sync=False) then {args.keys} random gets; best of {args.rounds} rounds\n")
    print("| engine | file system | puts/s | gets/s |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        for engine in ("lsm", "btree"):
            best = {"OsFileSystem": [0.0, 0.0], "FaultInjectionFS": [0.0, 0.0]}
            for _ in range(args.rounds):
                for name in best:
                    put_rate, get_rate = run(engine, None if name == "OsFileSystem" else FaultInjectionFS(),
                                             directory, keys, value)
                    best[name] = [max(best[name][0], put_rate), max(best[name][1], get_rate)]
            for name, (put_rate, get_rate) in best.items():
                print(f"| {engine} | {name} | {put_rate:,.0f} | {get_rate:,.0f} |")
            base, faulty = best["OsFileSystem"], best["FaultInjectionFS"]
            print(f"| {engine} | FaultInjectionFS / OsFileSystem | {faulty[0] / base[0]:.3f} | "
                  f"{faulty[1] / base[1]:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
