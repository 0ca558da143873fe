#!/usr/bin/env python3
"""lsmkv engine micro-benchmark, side by side with dict, SortedDict, RocksDB
(rocksdict) and LevelDB (plyvel) in one process and one run.

Phases, each on the same keys (16 bytes, random order) and values:
  put         one put per call (lsmkv: WAL on, sync=False)
  batch put   batches of 1000 into a fresh database
  get hit     random gets of present keys, data in tables, warm cache
  get miss    random gets of absent keys
  scan        full forward scan
and the memtable's random-insert rate against SortedDict at the same size.

Prints a table of ops/s and lsmkv's ratio to each reference. Not a test: no
thresholds; the numbers go into docs/performance.md with this command.

usage: scripts/bench_lsm.py [--keys 1000000] [--value-size 100] [--reads 200000]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import lsmkv  # noqa: E402
from lsmkv.memtable import MemTable  # noqa: E402

MiB = 1024 * 1024


def timed(fn, n):
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    return n / elapsed if elapsed > 0 else float("inf")


class Engine:
    name = ""

    def open(self, path): ...
    def put(self, keys, value): ...
    def batch_put(self, keys, value, size): ...
    def prepare_reads(self): ...
    def get_all(self, keys): ...
    def scan(self): ...
    def close(self): ...


class Lsm(Engine):
    name = "lsmkv"

    def __init__(self, write_buffer, cache):
        self.opts = dict(write_buffer_size=write_buffer, block_cache_size=cache)

    def open(self, path):
        self.db = lsmkv.open(path, **self.opts)

    def put(self, keys, values):
        put = self.db.put
        for i, k in enumerate(keys):
            put(k, values[i & 4095])

    def batch_put(self, keys, values, size):
        db = self.db
        for i in range(0, len(keys), size):
            with db.write_batch() as b:
                p = b.put
                for j, k in enumerate(keys[i:i + size]):
                    p(k, values[j & 4095])

    def prepare_reads(self):
        # Like LevelDB's below: one sorted run, so a read probes one table.
        self.db.compact_range()

    def get_all(self, keys):
        get = self.db.get
        n = 0
        for k in keys:
            if get(k) is not None:
                n += 1
        return n

    def scan(self):
        n = 0
        for _ in self.db.scan():
            n += 1
        return n

    def close(self):
        stats = self.db.stats()
        self.db.close()
        return stats


class Rocks(Engine):
    name = "rocksdb"

    def __init__(self, write_buffer, cache):
        import rocksdict
        self.rocksdict = rocksdict
        opts = rocksdict.Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.set_write_buffer_size(write_buffer)
        table = rocksdict.BlockBasedOptions()
        table.set_block_cache(rocksdict.Cache(cache))
        table.set_bloom_filter(10, False)
        opts.set_block_based_table_factory(table)
        opts.set_compression_type(rocksdict.DBCompressionType.zstd())
        self.opts = opts

    def open(self, path):
        self.db = self.rocksdict.Rdict(path, self.opts)
        self.wo = self.rocksdict.WriteOptions()
        self.wo.sync = False

    def put(self, keys, values):
        put = self.db.put
        wo = self.wo
        for i, k in enumerate(keys):
            put(k, values[i & 4095], wo)

    def batch_put(self, keys, values, size):
        for i in range(0, len(keys), size):
            wb = self.rocksdict.WriteBatch(raw_mode=True)
            for j, k in enumerate(keys[i:i + size]):
                wb.put(k, values[j & 4095])
            self.db.write(wb, self.wo)

    def prepare_reads(self):
        self.db.flush(True)
        self.db.compact_range(None, None)

    def get_all(self, keys):
        get = self.db.get
        n = 0
        for k in keys:
            if get(k) is not None:
                n += 1
        return n

    def scan(self):
        n = 0
        it = self.db.iter()
        it.seek_to_first()
        while it.valid():
            it.key()
            it.value()
            n += 1
            it.next()
        return n

    def close(self):
        self.db.close()
        return {}


class Level(Engine):
    name = "leveldb"

    def __init__(self, write_buffer, cache):
        import plyvel
        self.plyvel = plyvel
        self.write_buffer = write_buffer
        self.cache = cache

    def open(self, path):
        self.db = self.plyvel.DB(path, create_if_missing=True, write_buffer_size=self.write_buffer,
                                 lru_cache_size=self.cache, bloom_filter_bits=10, compression=None)

    def put(self, keys, values):
        put = self.db.put
        for i, k in enumerate(keys):
            put(k, values[i & 4095])

    def batch_put(self, keys, values, size):
        for i in range(0, len(keys), size):
            with self.db.write_batch() as wb:
                p = wb.put
                for j, k in enumerate(keys[i:i + size]):
                    p(k, values[j & 4095])

    def prepare_reads(self):
        self.db.compact_range()

    def get_all(self, keys):
        get = self.db.get
        n = 0
        for k in keys:
            if get(k) is not None:
                n += 1
        return n

    def scan(self):
        n = 0
        for _ in self.db:
            n += 1
        return n

    def close(self):
        self.db.close()
        return {}


class DictEngine(Engine):
    name = "dict"

    def open(self, path):
        self.d = {}

    def put(self, keys, values):
        d = self.d
        for i, k in enumerate(keys):
            d[k] = values[i & 4095]

    def batch_put(self, keys, values, size):
        self.put(keys, values)

    def prepare_reads(self):
        pass

    def get_all(self, keys):
        get = self.d.get
        n = 0
        for k in keys:
            if get(k) is not None:
                n += 1
        return n

    def scan(self):
        n = 0
        for _ in self.d.items():
            n += 1
        return n

    def close(self):
        return {}


class SortedDictEngine(DictEngine):
    name = "SortedDict"

    def open(self, path):
        from sortedcontainers import SortedDict
        self.d = SortedDict()


def bench_engine(engine, keys, misses, reads, value, workdir):
    row = {}
    path = os.path.join(workdir, engine.name)
    engine.open(path)
    row["put"] = timed(lambda: engine.put(keys, value), len(keys))
    engine.prepare_reads()
    # Warm the cache: read every key once before timing reads.
    found = engine.get_all(keys)
    assert found == len(keys), f"{engine.name}: {found} of {len(keys)} keys found"
    row["get hit"] = timed(lambda: engine.get_all(reads), len(reads))
    row["get miss"] = timed(lambda: engine.get_all(misses), len(misses))
    count = engine.scan()
    assert count == len(keys), f"{engine.name}: scan saw {count}"
    row["scan"] = timed(engine.scan, len(keys))
    stats = engine.close()
    shutil.rmtree(path, ignore_errors=True)
    engine.open(path + "-batch")
    row["batch put"] = timed(lambda: engine.batch_put(keys, value, 1000), len(keys))
    engine.close()
    shutil.rmtree(path + "-batch", ignore_errors=True)
    return row, stats


def bench_memtable(keys, values):
    from sortedcontainers import SortedDict
    best = {"memtable": 0.0, "SortedDict": 0.0}
    for _ in range(3):
        sd = SortedDict()

        def fill_sd():
            for i, k in enumerate(keys):
                sd[k] = values[i & 4095]
        best["SortedDict"] = max(best["SortedDict"], timed(fill_sd, len(keys)))
        del sd
        mem = MemTable()

        def fill_mem():
            add = mem.add
            seq = 1
            for i, k in enumerate(keys):
                add(seq, 1, k, values[i & 4095])
                seq += 1
        best["memtable"] = max(best["memtable"], timed(fill_mem, len(keys)))
        del mem
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--reads", type=int, default=200_000)
    ap.add_argument("--write-buffer", type=int, default=64 * MiB,
                    help="memtable size for lsmkv, RocksDB and LevelDB (bytes)")
    ap.add_argument("--cache", type=int, default=512 * MiB, help="block cache for each engine (bytes)")
    # lsmkv first: the in-memory Python baselines allocate and free millions
    # of objects, and a get that follows them in the same process runs on a
    # fragmented heap.
    ap.add_argument("--engines", default="lsmkv,rocksdb,leveldb,dict,SortedDict")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--dir", default=None, help="working directory (default: a temporary one)")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    keys = [rng.randbytes(16) for _ in range(args.keys)]
    key_set = set(keys)
    misses = []
    while len(misses) < min(args.reads, args.keys):
        k = rng.randbytes(16)
        if k not in key_set:
            misses.append(k)
    reads = rng.sample(keys, min(args.reads, args.keys))
    # 4096 distinct values, each half random bytes repeated (about 2:1
    # compressible, like db_bench's default), cycled through.
    value = [(rng.randbytes(args.value_size // 2) * 2)[: args.value_size] for _ in range(4096)]

    factories = {
        "dict": DictEngine, "SortedDict": SortedDictEngine,
        "lsmkv": lambda: Lsm(args.write_buffer, args.cache),
        "rocksdb": lambda: Rocks(args.write_buffer, args.cache),
        "leveldb": lambda: Level(args.write_buffer, args.cache),
    }
    workdir = args.dir or tempfile.mkdtemp(prefix="lsmkv-bench-")
    os.makedirs(workdir, exist_ok=True)
    results = {}
    lsm_stats = {}
    for name in args.engines.split(","):
        try:
            engine = factories[name]()
        except ImportError as exc:
            print(f"{name}: not installed ({exc.name}); pip install 'lsmkv[references]'", file=sys.stderr)
            continue
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results[name], stats = bench_engine(engine, keys, misses, reads, value, workdir)
        if name == "lsmkv":
            lsm_stats = stats
    mem = bench_memtable(keys, value)

    phases = ["put", "batch put", "get hit", "get miss", "scan"]
    names = list(results)
    print(f"\n{args.keys:,} keys of 16 bytes, {args.value_size}-byte values; {len(reads):,} random reads; "
          f"write buffer {args.write_buffer // MiB} MiB, cache {args.cache // MiB} MiB\n")
    header = "| phase | " + " | ".join(names) + " | " + " | ".join(
        f"lsmkv / {n}" for n in names if n != "lsmkv") + " |"
    print(header)
    print("|" + "---|" * (1 + len(names) + len(names) - ("lsmkv" in names)))
    for phase in phases:
        cells = [f"{results[n][phase]:,.0f}" for n in names]
        ratios = [f"{results['lsmkv'][phase] / results[n][phase]:.2f}x" for n in names
                  if n != "lsmkv" and "lsmkv" in results]
        print(f"| {phase} (ops/s) | " + " | ".join(cells) + (" | " + " | ".join(ratios) if ratios else "") + " |")
    print(f"\nmemtable random insert at {args.keys:,} entries: {mem['memtable']:,.0f}/s vs SortedDict "
          f"{mem['SortedDict']:,.0f}/s = {mem['memtable'] / mem['SortedDict']:.2f}x")
    if lsm_stats:
        print(f"lsmkv after the put phase: files per level {lsm_stats['files_per_level']}, "
              f"write amp {lsm_stats['write_amp']:.2f}, tables probed per get "
              f"{lsm_stats['tables_probed_per_get']:.2f}, stalls {lsm_stats['stall_count']} "
              f"({lsm_stats['stall_seconds']:.2f}s)")
    if not args.dir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
