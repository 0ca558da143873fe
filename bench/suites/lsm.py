"""lsmkv engine micro-benchmark, side by side with dict, SortedDict, RocksDB
(rocksdict) and LevelDB (plyvel) in one process and one run.

Phases, each on the same keys (16 bytes, random order) and values:

* ``put``: one put per call (lsmkv: WAL on, sync=False);
* ``batch put``: batches of 1000 into a fresh database;
* ``get hit``: random gets of present keys, data in tables, warm cache
  (the LSM-trees are first compacted into one sorted run, so a read probes
  one table, and every key is read once untimed);
* ``get miss``: random gets of absent keys;
* ``scan``: full forward scan;

and the memtable's random-insert rate against SortedDict at the same size
(``memtable insert``, best of 3 for each).

The data: ``--keys`` random 16-byte keys (``random.Random(--seed)``), the
4096 values cycled through each half random bytes repeated (about 2:1
compressible, like db_bench's default). lsmkv, RocksDB and LevelDB get a
``--write-buffer`` memtable, a ``--cache`` block cache and 10-bit bloom
filters (lsmkv and RocksDB with zstd, LevelDB without compression); dict
and sortedcontainers.SortedDict are the in-memory bounds. lsmkv runs first:
the in-memory Python baselines allocate and free millions of objects, and
a get that follows them in the same process runs on a fragmented heap.

Reading the tables: "lsmkv against the references" gives each phase's
ops/s per engine and lsmkv's ratio to each (above 1: lsmkv is faster);
"Memtable" the memtable's insert rate against SortedDict; "lsmkv after
the put phase" its level shape, write amplification, tables probed per get
and stalls (read when the database is closed, after the read phases).
Runs are recorded as engine ``lsm``, ``rocksdb``, ``leveldb``, ``dict``,
``SortedDict`` (``memtable`` for the memtable) and the phase as workload.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
from itertools import cycle
from typing import Any

from ..report import fmt_ratio
from . import engine_list

NAME = "lsm"
DESCRIPTION = "lsmkv vs dict, SortedDict, RocksDB, LevelDB: put, batch put, get hit/miss, scan, memtable insert"

MiB = 1024 * 1024
#: lsmkv first (see the module docstring).
ENGINES = ["lsm", "rocksdb", "leveldb", "dict", "SortedDict"]
PHASES = ["put", "batch put", "get hit", "get miss", "scan"]
BATCH = 1000
IN_MEMORY = ("dict", "SortedDict")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys put (1,000,000)")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value (100)")
    parser.add_argument("--reads", type=int, default=200_000, help="random gets, hits and misses each (200,000)")
    parser.add_argument("--write-buffer", type=int, default=64 * MiB,
                        help="memtable size for lsmkv, RocksDB and LevelDB (bytes; 64 MiB)")
    parser.add_argument("--cache", type=int, default=512 * MiB, help="block cache for each engine (bytes; 512 MiB)")
    parser.add_argument("--engines", type=engine_list(ENGINES), default="lsmkv,rocksdb,leveldb,dict,SortedDict",
                        help="comma-separated (lsmkv or lsm, rocksdb, leveldb, dict, SortedDict)")
    parser.add_argument("--seed", type=int, default=42, help="seed of the random data and choices (42)")
    parser.add_argument("--dir", default=None, help="where the databases go (default: a temporary folder)")


class _InMemory:
    """dict or SortedDict behind the calls the phases make of an engine adapter."""

    def __init__(self, sorted_: bool) -> None:
        if sorted_:
            from sortedcontainers import SortedDict
            self.d = SortedDict()
        else:
            self.d = {}
        self.get = self.d.get
        self.put = self.d.__setitem__

    def write_batch(self, pairs) -> None:
        put = self.put
        for k, v in pairs:
            put(k, v)

    def scan(self, start: bytes, limit: int) -> int:
        n = 0
        for _ in self.d.items():
            n += 1
        return n

    def compact_all(self) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self.d = {}


def _open(name: str, path: str, args: argparse.Namespace):
    """The engine as this suite configures it (see the module docstring)."""
    if name in IN_MEMORY:
        return _InMemory(sorted_=name == "SortedDict")
    from ..engines import EngineSettings, get_adapter
    options: dict[str, Any] = {"write_buffer_size": args.write_buffer}
    if name == "rocksdb":
        options.update(compression="zstd", statistics=False)
    elif name == "leveldb":
        options.update(compression=None)
    return get_adapter(name)(path, EngineSettings(cache_size=args.cache, options=options))


def _put_all(adapter, keys: list[bytes], values: list[bytes]) -> None:
    put = adapter.put
    for i, k in enumerate(keys):
        put(k, values[i & 4095])


def _batch_put_all(adapter, keys: list[bytes], values: list[bytes]) -> None:
    write_batch = adapter.write_batch
    for i in range(0, len(keys), BATCH):
        write_batch(zip(keys[i:i + BATCH], cycle(values)))


def _count_found(adapter, keys: list[bytes]) -> int:
    get = adapter.get
    n = 0
    for k in keys:
        if get(k) is not None:
            n += 1
    return n


def _measure(name: str, workdir: str, keys, misses, reads, values, args, rec) -> dict[str, Any]:
    """Every phase of one engine; its rates, and its stats when closed after the reads."""
    from ..metrics import timed
    path = os.path.join(workdir, name)
    rates: dict[str, float] = {}

    def record(phase: str, n: int, seconds: float, **fields: Any) -> None:
        rec.run(name, phase, n, seconds, **fields)
        rates[phase] = n / seconds if seconds > 0 else float("inf")

    adapter = _open(name, path, args)
    try:
        record("put", len(keys), timed(lambda: _put_all(adapter, keys, values), disable_gc=True))
        adapter.compact_all()  # one sorted run, so that a read probes one table
        found = _count_found(adapter, keys)  # warms the cache
        if found != len(keys):
            raise RuntimeError(f"{name}: {found} of {len(keys)} keys found")
        record("get hit", len(reads), timed(lambda: _count_found(adapter, reads), disable_gc=True))
        record("get miss", len(misses), timed(lambda: _count_found(adapter, misses), disable_gc=True))
        count = adapter.scan(b"", len(keys) + 1)
        if count != len(keys):
            raise RuntimeError(f"{name}: the scan saw {count} of {len(keys)} keys")
        record("scan", len(keys), timed(lambda: adapter.scan(b"", len(keys) + 1), disable_gc=True))
        stats = adapter.stats() if name == "lsm" else {}
    finally:
        adapter.close()
        shutil.rmtree(path, ignore_errors=True)
    adapter = _open(name, path + "-batch", args)
    try:
        record("batch put", len(keys), timed(lambda: _batch_put_all(adapter, keys, values), disable_gc=True),
               batch=BATCH)
    finally:
        adapter.close()
        shutil.rmtree(path + "-batch", ignore_errors=True)
    return {"rates": rates, "stats": stats}


def _memtable(keys: list[bytes], values: list[bytes], rec) -> dict[str, float]:
    """Random inserts into the memtable and into a SortedDict, best of 3 rounds each."""
    from sortedcontainers import SortedDict

    from lsmkv.lsm.memtable import MemTable

    from ..metrics import timed
    best = {"memtable": float("inf"), "SortedDict": float("inf")}
    for _ in range(3):
        sd = SortedDict()

        def fill_sd() -> None:
            for i, k in enumerate(keys):
                sd[k] = values[i & 4095]
        best["SortedDict"] = min(best["SortedDict"], timed(fill_sd, disable_gc=True))
        del sd
        mem = MemTable()

        def fill_mem() -> None:
            add = mem.add
            seq = 1
            for i, k in enumerate(keys):
                add(seq, 1, k, values[i & 4095])
                seq += 1
        best["memtable"] = min(best["memtable"], timed(fill_mem, disable_gc=True))
        del mem
    for name, seconds in best.items():
        rec.run(name, "memtable insert", len(keys), seconds, rounds=3)
    return {name: len(keys) / seconds for name, seconds in best.items()}


def run(args: argparse.Namespace, rec) -> None:
    from ..data import half_random_values, random_keys
    from . import available_engines
    engines = args.engines
    rng = random.Random(args.seed)
    keys = random_keys(rng, args.keys)
    key_set = set(keys)
    misses: list[bytes] = []
    while len(misses) < min(args.reads, args.keys):
        k = rng.randbytes(16)
        if k not in key_set:
            misses.append(k)
    del key_set
    reads = rng.sample(keys, min(args.reads, args.keys))
    values = half_random_values(rng, args.value_size)

    workdir = tempfile.mkdtemp(prefix="lsmkv-bench-lsm-", dir=args.dir)
    results: dict[str, dict[str, float]] = {}
    lsm_stats: dict[str, Any] = {}
    try:
        runnable = set(available_engines([e for e in engines if e not in IN_MEMORY], rec))
        for name in engines:
            if name not in IN_MEMORY and name not in runnable:
                continue
            rec.progress(f"{name}: {len(keys):,} puts, {len(reads):,} gets hit and miss, a scan, batch puts")
            measured = _measure(name, workdir, keys, misses, reads, values, args, rec)
            results[name] = measured["rates"]
            if name == "lsm":
                lsm_stats = measured["stats"]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    rec.progress(f"memtable and SortedDict: {len(keys):,} random inserts, best of 3")
    mem = _memtable(keys, values, rec)

    names = list(results)
    others = [n for n in names if n != "lsm"]
    rows = []
    for phase in PHASES:
        row: list[Any] = [phase] + [round(results[n][phase]) for n in names]
        if "lsm" in results:
            row += [fmt_ratio(results['lsm'][phase], results[n][phase]) for n in others]
        rows.append(row)
    ratio_columns = [f"lsm / {n}" for n in others] if "lsm" in results else []
    rec.table("lsmkv against the references (ops/s)", ["phase"] + names + ratio_columns, rows,
              note=f"{args.keys:,} keys of 16 bytes, {args.value_size}-byte values; {len(reads):,} random reads; "
                   f"write buffer {args.write_buffer // MiB} MiB, cache {args.cache // MiB} MiB. Ratios above 1: "
                   "lsmkv is faster.")
    rec.table("Memtable: random inserts", ["structure", "inserts/s", "memtable / SortedDict"],
              [["memtable", round(mem["memtable"]), fmt_ratio(mem['memtable'], mem['SortedDict'])],
               ["SortedDict", round(mem["SortedDict"]), ""]],
              note=f"{args.keys:,} entries, best of 3 rounds each.")
    if lsm_stats:
        rec.table("lsmkv after the put phase", ["files per level", "write amp", "tables probed per get",
                                                "stalls", "stall seconds"],
                  [[str(lsm_stats["files_per_level"]), float(lsm_stats["write_amp"]),
                    float(lsm_stats["tables_probed_per_get"]), lsm_stats["stall_count"],
                    float(lsm_stats["stall_seconds"])]],
                  note="db.stats() when the database is closed after the read phases.")
