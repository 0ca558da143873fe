#!/usr/bin/env python3
"""btree engine micro-benchmark: btree vs LMDB (py-lmdb) vs sqlite3, side by side.

Run: .venv/bin/python scripts/bench_btree.py [--keys 1000000]

Phase 1, warm cache (every engine holds the whole data set in memory):
  put   - random-order inserts of --keys keys (16 bytes) with 100-byte values,
          each put its own committed write without fsync: btree put(sync=False)
          (time includes the final checkpoint), LMDB one write transaction per
          put (sync=False), sqlite3 one autocommit INSERT per put (WAL mode,
          synchronous=NORMAL, WITHOUT ROWID table);
  get   - random gets of every key; LMDB with one read transaction per get
          (and, for reference, all gets in one transaction);
  scan  - a full ascending scan.
  Gets and scans run --rounds times with the engines interleaved and the best
  round is kept (the machine may be shared with other work).
Phase 2, small cache (5% of the user data): random gets and random overwrites,
  reporting page reads per get and bytes written per put (btree from its own
  counters; sqlite3 and LMDB from /proc/self/io: read syscalls / 4096 per get,
  write-syscall bytes per put; LMDB maps its file, so its reads are not
  countable). lsmkv joins when it offers lsmkv.open.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import btree  # noqa: E402

VALUE_SIZE = 100
KEY_SIZE = 16


def io_counters() -> dict[str, int]:
    try:
        with open("/proc/self/io") as f:
            return {k: int(v) for k, v in (line.split(": ") for line in f)}
    except OSError:
        return {"rchar": 0, "wchar": 0}


def timed(fn) -> float:
    gc.collect()
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


class Engine:
    name = ""

    def put_all(self, items): ...
    def get_all(self, keys): ...
    def scan_all(self) -> int: ...
    def close(self): ...


class BTreeEngine(Engine):
    name = "btree"

    def __init__(self, path, cache_size):
        self.path = path
        self.db = btree.open(path, cache_size=cache_size)

    def put_all(self, items):
        put = self.db.put
        for k, v in items:
            put(k, v)
        t = time.perf_counter()
        self.db.flush()
        self.flush_seconds = time.perf_counter() - t

    def get_all(self, keys):
        get = self.db.get
        for k in keys:
            get(k)

    def scan_all(self):
        n = 0
        for _ in self.db.scan():
            n += 1
        return n

    def reopen(self, cache_size):
        self.db.close()
        self.db = btree.open(self.path, cache_size=cache_size)

    def close(self):
        self.db.close()


class LmdbEngine(Engine):
    name = "lmdb"

    def __init__(self, path, cache_size):
        import lmdb
        self.env = lmdb.open(path, map_size=1 << 34, sync=False, metasync=False)

    def put_all(self, items):
        begin = self.env.begin
        for k, v in items:
            with begin(write=True) as txn:
                txn.put(k, v)

    def get_all(self, keys):
        begin = self.env.begin
        for k in keys:
            with begin() as txn:
                txn.get(k)

    def get_all_one_txn(self, keys):
        with self.env.begin() as txn:
            get = txn.get
            for k in keys:
                get(k)

    def scan_all(self):
        n = 0
        with self.env.begin() as txn:
            for _ in txn.cursor():
                n += 1
        return n

    def close(self):
        self.env.close()


class SqliteEngine(Engine):
    name = "sqlite3"

    def __init__(self, path, cache_size):
        os.makedirs(path, exist_ok=True)
        self.file = os.path.join(path, "db.sqlite")
        self.con = sqlite3.connect(self.file, isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("PRAGMA synchronous=NORMAL")
        self.con.execute(f"PRAGMA cache_size=-{max(cache_size // 1024, 64)}")
        self.con.execute("CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")

    def put_all(self, items):
        ex = self.con.execute
        for k, v in items:
            ex("INSERT OR REPLACE INTO kv VALUES (?, ?)", (k, v))

    def get_all(self, keys):
        ex = self.con.execute
        for k in keys:
            ex("SELECT v FROM kv WHERE k = ?", (k,)).fetchone()

    def scan_all(self):
        n = 0
        for _ in self.con.execute("SELECT k, v FROM kv ORDER BY k"):
            n += 1
        return n

    def reopen(self, cache_size):
        self.con.close()
        self.__init__(os.path.dirname(self.file), cache_size)

    def close(self):
        self.con.close()


def lsmkv_engine():
    try:
        import lsmkv
    except ImportError:
        return None
    if not hasattr(lsmkv, "open"):
        return None

    class LsmEngine(Engine):
        name = "lsmkv"

        def __init__(self, path, cache_size):
            self.path = path
            self.db = lsmkv.open(path, block_cache_size=cache_size)

        def put_all(self, items):
            put = self.db.put
            for k, v in items:
                put(k, v)
            self.db.flush()

        def get_all(self, keys):
            get = self.db.get
            for k in keys:
                get(k)

        def scan_all(self):
            return sum(1 for _ in self.db.scan())

        def reopen(self, cache_size):
            self.db.close()
            self.db = lsmkv.open(self.path, block_cache_size=cache_size)

        def close(self):
            self.db.close()
    return LsmEngine


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--small-ops", type=int, default=100_000, help="operations per small-cache phase")
    ap.add_argument("--engines", default="btree,lmdb,sqlite3,lsmkv")
    ap.add_argument("--dir", default=None, help="where to put the databases (default: a temp dir)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--rounds", type=int, default=3, help="get/scan rounds, engines interleaved; best kept")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    keys = [rng.randbytes(KEY_SIZE) for _ in range(args.keys)]
    keys = list(dict.fromkeys(keys))
    items = [(k, rng.randbytes(VALUE_SIZE)) for k in keys]
    get_keys = keys[:]
    rng.shuffle(get_keys)
    small_keys = [rng.choice(keys) for _ in range(args.small_ops)]
    small_items = [(k, rng.randbytes(VALUE_SIZE)) for k in small_keys]
    user_bytes = len(keys) * (KEY_SIZE + VALUE_SIZE)
    small_cache = user_bytes // 20
    big_cache = 4 * user_bytes + (64 << 20)

    classes = {"btree": BTreeEngine, "lmdb": LmdbEngine, "sqlite3": SqliteEngine}
    lsm = lsmkv_engine()
    if lsm is not None:
        classes["lsmkv"] = lsm
    wanted = [e for e in args.engines.split(",") if e in classes]
    root = args.dir or tempfile.mkdtemp(prefix="bench-btree-")
    results: dict[str, dict[str, float | str]] = {}
    n = len(keys)
    print(f"{n} keys of {KEY_SIZE} bytes, {VALUE_SIZE}-byte values; small cache {small_cache >> 10} KiB",
          file=sys.stderr)
    engines = {}
    for name in wanted:
        path = os.path.join(root, name)
        shutil.rmtree(path, ignore_errors=True)
        eng = engines[name] = classes[name](path, big_cache)
        r = results[name] = {}
        r["put"] = n / timed(lambda: eng.put_all(items))
        if name == "btree":
            r["put_no_ckpt"] = n / (n / r["put"] - eng.flush_seconds)
        print(f"{name}: put {r['put']:,.0f}/s", file=sys.stderr)
        eng.get_all(get_keys[: n // 10])  # warm-up
    # Gets and scans: engines interleaved, best of --rounds (the machine is shared).
    for rnd in range(args.rounds):
        for name, eng in engines.items():
            r = results[name]
            r["get"] = max(r.get("get", 0.0), n / timed(lambda: eng.get_all(get_keys)))
            if name == "lmdb":
                r["get_one_txn"] = max(r.get("get_one_txn", 0.0), n / timed(lambda: eng.get_all_one_txn(get_keys)))
            count = [0]
            r["scan"] = max(r.get("scan", 0.0), n / timed(lambda: count.__setitem__(0, eng.scan_all())))
            assert count[0] == n, (name, count[0])
            print(f"{name}: round {rnd}: get {r['get']:,.0f}/s scan {r['scan']:,.0f}/s", file=sys.stderr)
    if "btree" in engines:
        # The same gets without the adaptive hash index (every get descends the tree).
        eng = engines["btree"]
        eng.db.close()
        eng.db = btree.open(eng.path, cache_size=big_cache, hash_index=False)
        eng.scan_all()  # load every page
        results["btree"]["get_no_ahi"] = max(n / timed(lambda: eng.get_all(get_keys)) for _ in range(args.rounds))
    for name, eng in engines.items():
        r = results[name]
        path = os.path.join(root, name)
        if name == "btree":
            s = eng.db.stats()
            r["height"] = s["height"]
            r["fill"] = s["fill_factor"][-1]
        # Small cache.
        if hasattr(eng, "reopen"):
            eng.reopen(small_cache)
        m = len(small_keys)
        if name == "btree":
            s0 = eng.db.stats()
            r["small_get"] = m / timed(lambda: eng.get_all(small_keys))
            s1 = eng.db.stats()
            r["reads_per_get"] = (s1["page_reads"] - s0["page_reads"]) / m
            r["small_put"] = m / timed(lambda: eng.put_all(small_items))
            s2 = eng.db.stats()
            r["bytes_per_put"] = (s2["bytes_written"] - s1["bytes_written"]) / m
        else:
            io0 = io_counters()
            r["small_get"] = m / timed(lambda: eng.get_all(small_keys))
            io1 = io_counters()
            r["reads_per_get"] = "n/a (mmap)" if name == "lmdb" else (io1["rchar"] - io0["rchar"]) / 4096 / m
            r["small_put"] = m / timed(lambda: eng.put_all(small_items))
            if name == "sqlite3":
                eng.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            io2 = io_counters()
            r["bytes_per_put"] = (io2["wchar"] - io1["wchar"]) / m
        eng.close()
        shutil.rmtree(path, ignore_errors=True)

    def fmt(v):
        return f"{v:,.0f}" if isinstance(v, float) and v >= 100 else (f"{v:.2f}" if isinstance(v, float) else str(v))

    cols = wanted
    print()
    print("| measure | " + " | ".join(cols) + " | btree/lmdb | btree/sqlite3 | target |")
    print("|---|" + "---|" * (len(cols) + 3))
    targets = {"put": "≥1.0x lmdb, ≥3x sqlite3", "get": "≥0.6x lmdb", "scan": "≥0.5x lmdb"}
    for row, label in (("put", "put ops/s (sync=False, one commit each)"), ("get", "random get ops/s (warm)"),
                       ("scan", "full scan entries/s"), ("small_get", "random get ops/s (5% cache)"),
                       ("reads_per_get", "page reads per get (5% cache)"), ("small_put", "random overwrite ops/s (5% cache)"),
                       ("bytes_per_put", "bytes written per put (5% cache)")):
        vals = [results[c].get(row, "") for c in cols]
        b = results.get("btree", {}).get(row)
        ratio_l = ratio_s = ""
        if isinstance(b, float) and row in targets:
            if isinstance(results.get("lmdb", {}).get(row), float):
                ratio_l = f"{b / results['lmdb'][row]:.2f}x"
            if isinstance(results.get("sqlite3", {}).get(row), float):
                ratio_s = f"{b / results['sqlite3'][row]:.2f}x"
        print(f"| {label} | " + " | ".join(fmt(v) for v in vals) + f" | {ratio_l} | {ratio_s} | {targets.get(row, '')} |")
    if "lmdb" in results:
        print(f"\nlmdb get with all gets in one read transaction: {results['lmdb']['get_one_txn']:,.0f}/s")
    if "btree" in results and "put_no_ckpt" in results["btree"]:
        b = results["btree"]["put_no_ckpt"]
        extra = f" ({b / results['lmdb']['put']:.2f}x lmdb)" if "lmdb" in results else ""
        print(f"btree put rate without its final checkpoint (flush) in the time: {b:,.0f}/s{extra}")
    if "btree" in results and "get_no_ahi" in results["btree"]:
        b = results["btree"]["get_no_ahi"]
        extra = f" ({b / results['lmdb']['get']:.2f}x lmdb)" if "lmdb" in results else ""
        print(f"btree get with hash_index=False (every get descends the tree): {b:,.0f}/s{extra}")
    if "btree" in results:
        print(f"btree height {results['btree']['height']}, leaf fill factor {results['btree']['fill']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
