"""Every engine as a new user gets it: default options, data larger than
the default cache would be in most engines, references side by side.

For each engine, in a child process of its own (so that its peak RSS is
its own): ``--keys`` random 16-byte keys with ``--value-size``-byte random
(incompressible) values are put one call per key; the store is flushed
(lsmkv, LevelDB and RocksDB are also compacted into one sorted run with
compact_range, so that each get probes one table); then ``--reads`` random
gets of present keys in two passes and one full scan. Engines open with their own
defaults: lsmkv.open(path), btree.open(path), plyvel and rocksdict with
their default options, LMDB with a 64 GiB map (it has no other way to
size), sqlite3 with WAL and synchronous=NORMAL and a commit per insert,
diskcache.Cache(path), and the standard library's dbm.

The table compares what issue-style targets name: lsmkv against LevelDB
(gets) and RocksDB (puts, scan); btree against LMDB (gets with one read
transaction, puts with a transaction each, cursor scan) and sqlite3
(puts); and both against diskcache and dbm, what Python programs use as a
persistent dict. With ``--keys 10000000`` it is the larger-than-cache
mode: each engine's peak RSS beside the cache it was given.

It measures as a program runs: the garbage collector stays on through
every phase, and every get asks for a key not asked for before. The gets
come in two passes of ``--reads`` distinct keys each, disjoint: the first
pass right after the load (what the first requests after a restart or a
bulk load see: caches empty of decoded blocks, pages and indexes not yet
touched), then the warm pass. The targets compare the warm passes; the
first pass is reported beside it, with its time over the warm pass's.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import resource
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from lsmkv.base.build import BUILD, NO_EXTENSIONS

from ..builds import PROJECT_ENGINES, PURE_SUFFIX
from ..config import ConfigError
from ..report import fmt_ratio
from . import engine_list

NAME = "defaults"
DESCRIPTION = "each engine with its default options: 1M random puts, random gets, a full scan; peak RSS"

#: The project's engines on the pure build (LSMKV_NO_EXTENSIONS=1 in their
#: child process), beside the compiled build: what compiling buys.
PURE_ENGINES = {name + PURE_SUFFIX: name for name in PROJECT_ENGINES}
ALL_ENGINES = ["lsm", "btree", "leveldb", "rocksdb", "lmdb", "sqlite", "diskcache", "dbm", *PURE_ENGINES]
#: The default engines: the pure build's rows only when the compiled build runs.
DEFAULT_ENGINES = [name for name in ALL_ENGINES if BUILD.compiled or name not in PURE_ENGINES]
#: (what is measured, ours, reference, workload, target ratio or None)
TARGETS = [
    ("random get", "lsm", "leveldb", "get", 0.5),
    ("full scan", "lsm", "rocksdb", "scan", 0.5),
    ("put, one call per key", "lsm", "rocksdb", "put", 1.0),
    ("random get", "lsm", "diskcache", "get", 1.0),
    ("random get", "lsm", "dbm", "get", 1.0),
    ("random get", "btree", "lmdb", "get", 0.6),
    ("put, one commit per key", "btree", "lmdb", "put", 1.0),
    ("put", "btree", "sqlite", "put", 3.0),
    ("full scan", "btree", "lmdb", "scan", 0.5),
    ("random get", "btree", "diskcache", "get", 1.0),
    ("random get", "btree", "dbm", "get", 1.0),
]
VALUE_POOL = 4096


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys put (1,000,000)")
    parser.add_argument("--reads", type=int, default=200_000,
                        help="random gets of present keys per pass, each key asked once (200,000); "
                             "two passes, so at most half of --keys")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value, random (100)")
    parser.add_argument("--engines", type=engine_list(ALL_ENGINES), default=",".join(DEFAULT_ENGINES),
                        help=f"comma-separated engines ({','.join(ALL_ENGINES)}; lsm-pure and btree-pure "
                             f"run on the pure build, by default when the compiled build runs)")
    parser.add_argument("--seed", type=int, default=42, help="seed of the random data and choices (42)")
    parser.add_argument("--dir", default=None, help="where the databases go (default: a temporary folder)")


def check_arguments(args: argparse.Namespace) -> None:
    """The two passes of gets ask for distinct keys: 2 x --reads of them."""
    if args.reads < 1 or 2 * args.reads > args.keys:
        raise ConfigError(f"--reads must be between 1 and half of --keys ({args.keys:,}): the two passes "
                          f"of gets ask for distinct keys, and {args.reads:,} twice is more than there are")


def run(args: argparse.Namespace, rec) -> None:
    from . import available_engines
    engines = args.engines
    root = tempfile.mkdtemp(prefix="lsmkv-defaults-", dir=args.dir)
    results: dict[str, dict[str, Any]] = {}
    try:
        bases = {PURE_ENGINES.get(name, name) for name in engines}
        runnable = set(available_engines([name for name in ALL_ENGINES if name in bases], rec))
        for name in engines:
            engine = PURE_ENGINES.get(name, name)
            if engine not in runnable:
                continue
            rec.progress(f"{name}: {args.keys:,} puts, {args.reads:,} gets, a full scan (child process)")
            with _build_of(name), ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
                res = pool.submit(measure, engine, os.path.join(root, name), args.keys, args.reads,
                                  args.value_size, args.seed).result()
            results[name] = res
            common = {"build": res["build"], "peak_rss_mb": res["peak_rss_mb"], "baseline_rss_mb": res["baseline_rss_mb"],
                      "disk_bytes": res["disk_bytes"], "cache": res["cache"], "resident_mb": res["resident_mb"]}
            rec.run(name, "put", args.keys, res["put_s"], prepare_s=res["prepare_s"], **common)
            rec.run(name, "get", args.reads, res["get_s"], found=res["found"], read_amp=res["read_amp"],
                    cpu_us_per_op=res["get_cpu_us"], cached_before=res["cached_before_gets"], **common)
            rec.run(name, "get-first-pass", args.reads, res["first_get_s"], found=res["first_found"],
                    cpu_us_per_op=res["first_get_cpu_us"], cached_before=res["cached_before_gets"],
                    first_over_warm=res["first_over_warm"], **common)
            rec.run(name, "scan", res["scanned"], res["scan_s"], **common)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rec.table("Default options: ours against the references", ["measure", "ours", "reference", "ours/s",
                                                                 "reference/s", "ratio", "target"],
              _target_rows(results),
              note=f"{args.keys:,} random 16-byte keys, {args.value_size}-byte random values; "
                   f"gets: the warm pass of {args.reads:,} random present keys not read before; one full "
                   "scan. Garbage collector on. Each engine in its own process with its own defaults "
                   "(module docstring of bench/suites/defaults.py).")
    rec.table("Per engine", ["engine", "put/s", "get/s first pass", "get/s warm", "first/warm time",
                             "get CPU µs first", "get CPU µs warm", "cached before gets", "scan entries/s",
                             "reads per get", "peak RSS MiB", "RSS before open MiB", "cache", "index+filter MiB",
                             "disk MiB"],
              [[name, r["put_rate"], r["first_get_rate"], r["get_rate"], r["first_over_warm"],
                r["first_get_cpu_us"], r["get_cpu_us"], _percent(r["cached_before_gets"]),
                r["scan_rate"], r["read_amp"], r["peak_rss_mb"], r["baseline_rss_mb"], r["cache"],
                r["resident_mb"], round(r["disk_bytes"] / 2**20, 1)]
               for name, r in results.items()],
              note="first pass: the first gets after the load, keys not read before; warm: as many more "
                   "keys, distinct from those; first/warm time: the first pass's time over the warm "
                   "pass's. get CPU µs: the process's CPU time (all threads) per get; beside 1/get/s it tells "
                   "computing from waiting for the disk. cached before gets: the share of the database's "
                   "file bytes in the OS page cache when the gets start (mincore). "
                   "reads per get: blocks or pages read from files per get, both passes (the engine's own counter; - "
                   "where it has none). RSS before open: the process with its keys and values generated, "
                   "before the engine is opened. index+filter: what lsmkv's open tables keep outside the "
                   "block cache (stats()['table_memory'], at the end of the scan).")


    builds = _build_rows(results)
    if builds:
        rec.table("The compiled build against the pure build", ["engine", "measure", "compiled", "pure",
                                                                 "compiled / pure"], builds,
                  note="The same work, each build in its own child process; the pure build's process has "
                       f"{NO_EXTENSIONS}=1 (docs/architecture.md, \"Builds\").")


@contextlib.contextmanager
def _build_of(name: str):
    """Children spawned inside run the pure build when ``name`` is a pure engine."""
    if name not in PURE_ENGINES:
        yield
        return
    before = os.environ.get(NO_EXTENSIONS)
    os.environ[NO_EXTENSIONS] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[NO_EXTENSIONS]
        else:
            os.environ[NO_EXTENSIONS] = before


def _build_rows(results: dict[str, dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for pure_name, engine in PURE_ENGINES.items():
        compiled, pure = results.get(engine), results.get(pure_name)
        if compiled is None or pure is None:
            continue
        for what, key in (("put/s", "put_rate"), ("get/s, first pass", "first_get_rate"),
                          ("get/s, warm", "get_rate"), ("scan entries/s", "scan_rate")):
            rows.append([engine, what, compiled[key], pure[key], fmt_ratio(compiled[key], pure[key])])
    return rows


def _target_rows(results: dict[str, dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for what, ours, ref, workload, target in TARGETS:
        if ours not in results or ref not in results:
            continue
        a = results[ours][f"{workload}_rate"]
        b = results[ref][f"{workload}_rate"]
        ratio = a / b if a and b else None
        rows.append([what, ours, ref, a, b, None if ratio is None else fmt_ratio(a, b),
                     None if target is None else f">= {target}x" + ("" if ratio is None else
                                                                   (" met" if ratio >= target else " missed"))])
    return rows


def _percent(share: float | None) -> str | None:
    return None if share is None else f"{share:.0%}"


def _prepare(name: str, adapter) -> None:
    """Flush; compact the LSM-trees into one sorted run."""
    adapter.flush()
    adapter.compact_all()


def _getter(name: str, adapter):
    """The get function of the read phase, and what to close after it
    (LMDB reads in one read transaction, as its users do)."""
    if name == "lmdb":
        txn = adapter.env.begin()
        return txn.get, txn.abort
    return adapter.get, None


def _get_pass(get, keys: list[bytes]) -> tuple[float, float, int]:
    """One pass of gets: its wall time, CPU µs per get (all threads), and
    how many keys were found."""
    found = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    for k in keys:
        if get(k) is not None:
            found += 1
    elapsed = time.perf_counter() - t0
    return elapsed, round((time.process_time() - c0) / max(len(keys), 1) * 1e6, 2), found


def measure(name: str, path: str, keys: int, reads: int, value_size: int, seed: int) -> dict[str, Any]:
    """One engine, start to end, in the calling (child) process."""
    import numpy as np

    from ..engines import EngineSettings, get_adapter
    from ..metrics import directory_bytes, page_cache_residency

    rng = np.random.default_rng(seed)
    blob = rng.bytes(16 * keys)
    values = [rng.bytes(value_size) for _ in range(VALUE_POOL)]
    picks = rng.choice(keys, 2 * reads, replace=False).tolist()  # distinct: no key is asked twice
    first_keys = [blob[16 * i: 16 * i + 16] for i in picks[:reads]]
    warm_keys = [blob[16 * i: 16 * i + 16] for i in picks[reads:]]
    del picks
    gc.collect()
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    adapter = get_adapter(name)(path, EngineSettings(cache_size=None))
    out: dict[str, Any] = {"build": BUILD.kind}
    try:
        put = adapter.put
        mask = VALUE_POOL - 1
        t0 = time.perf_counter()
        for i in range(keys):
            put(blob[16 * i: 16 * i + 16], values[i & mask])
        out["put_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        _prepare(name, adapter)
        out["prepare_s"] = time.perf_counter() - t0
        before = adapter.stats()
        out["cached_before_gets"] = page_cache_residency(path)
        get, done = _getter(name, adapter)
        out["first_get_s"], out["first_get_cpu_us"], out["first_found"] = _get_pass(get, first_keys)
        out["get_s"], out["get_cpu_us"], out["found"] = _get_pass(get, warm_keys)
        if done is not None:
            done()
        after = adapter.stats()
        out["first_over_warm"] = round(out["first_get_s"] / out["get_s"], 2) if out["get_s"] else None
        gets = (after.get("gets") or 0) - (before.get("gets") or 0)
        out["read_amp"] = (round(after["read_amp"], 3) if gets and after.get("read_amp") is not None
                           and before.get("gets", 0) == 0 else None)
        t0 = time.perf_counter()
        scanned = 0
        for _ in adapter.iterate():
            scanned += 1
        out["scan_s"] = time.perf_counter() - t0
        out["scanned"] = scanned
        stats = adapter.stats()
        cache = (stats.get("block_cache") or {}).get("capacity") or stats.get("cache_size")  # (configured)
        out["cache"] = f"{cache / 2**20:.0f} MiB" if cache else "engine default"
        resident = stats.get("table_memory")  # lsmkv: open tables' index and filter blocks
        out["resident_mb"] = (round((resident["index_bytes"] + resident["filter_bytes"]) / 2**20, 1)
                              if resident else None)
    finally:
        adapter.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out["peak_rss_mb"] = round(peak / 1024, 1)
    out["baseline_rss_mb"] = round(baseline / 1024, 1)
    out["disk_bytes"] = directory_bytes(path)
    out["put_rate"] = keys / out["put_s"] if out["put_s"] else None
    out["get_rate"] = reads / out["get_s"] if out["get_s"] else None
    out["first_get_rate"] = reads / out["first_get_s"] if out["first_get_s"] else None
    out["scan_rate"] = scanned / out["scan_s"] if out["scan_s"] else None
    return out
