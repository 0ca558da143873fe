"""btree engine micro-benchmark: btree vs LMDB (py-lmdb) vs sqlite3, side by
side, with lsmkv beside them.

Phase 1, warm cache (every engine holds the whole data set in memory):

* ``put``: random-order inserts of ``--keys`` keys (16 bytes) with 100-byte
  values, each put its own committed write without fsync: btree
  put(sync=False) (time includes the final checkpoint), LMDB one write
  transaction per put (sync=False), sqlite3 one autocommit upsert per put
  (WAL mode, synchronous=NORMAL, WITHOUT ROWID table), lsmkv put (time
  includes the final flush);
* ``get``: random gets of every key; LMDB with one read transaction per get
  (and, for reference, all gets in one transaction: ``get, one txn``);
* ``scan``: a full ascending scan.

Gets and scans run ``--rounds`` times with the engines interleaved and the
best round is kept (the machine may be shared with other work). Then btree
answers the same gets once more without its adaptive hash index
(``get, no hash index``: every get descends the tree).

Phase 2, small cache (5% of the user data), after reopening each engine
with it: random gets (``get, 5% cache``) and random overwrites
(``overwrite, 5% cache``), reporting page reads per get and bytes written
per put (btree from its own counters; sqlite3, LMDB and lsmkv from
/proc/self/io: read-syscall bytes / 4096 per get, write-syscall bytes per
put; LMDB maps its file, so its reads are not countable).

The engines are the harness's adapters (bench/engines.py): ``btree``,
``lmdb``, ``sqlite`` and ``lsm`` (``--engines`` also takes the names
``sqlite3`` and ``lsmkv``), each with a cache of 4x the user data plus
64 MiB in phase 1.

Reading the tables: "btree against LMDB and sqlite3" has a row per measure,
a column per engine, btree's ratio to LMDB and to sqlite3 where the issue
sets a target (above 1: btree is faster), and the target; "btree details"
the put rate without the final checkpoint, the gets in one LMDB read
transaction and without the hash index, and the tree's height and leaf fill.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from contextlib import suppress
from typing import Any, Callable

from ..report import fmt_ratio
from . import engine_list

NAME = "btree"
DESCRIPTION = "btree vs LMDB vs sqlite3 vs lsmkv: warm put/get/scan, 5%-cache gets and overwrites"

ENGINES = ["btree", "lmdb", "sqlite", "lsm"]
VALUE_SIZE = 100
KEY_SIZE = 16
#: Engines whose put phase ends with (and is timed with) a flush of their own.
FLUSHED_PUTS = ("btree", "lsm")
#: (row, label) of the main table.
MEASURES = [("put", "put ops/s (sync=False, one commit each)"), ("get", "random get ops/s (warm)"),
            ("scan", "full scan entries/s"), ("small_get", "random get ops/s (5% cache)"),
            ("reads_per_get", "page reads per get (5% cache)"),
            ("small_put", "random overwrite ops/s (5% cache)"),
            ("bytes_per_put", "bytes written per put (5% cache)")]
TARGETS = {"put": "≥1.0x lmdb, ≥3x sqlite3", "get": "≥0.6x lmdb", "scan": "≥0.5x lmdb"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys put (1,000,000)")
    parser.add_argument("--small-ops", type=int, default=100_000,
                        help="operations per small-cache phase (100,000)")
    parser.add_argument("--engines", type=engine_list(ENGINES), default="btree,lmdb,sqlite3,lsmkv",
                        help="comma-separated (btree, lmdb, sqlite3 or sqlite, lsmkv or lsm)")
    parser.add_argument("--dir", default=None, help="where the databases go (default: a temporary folder)")
    parser.add_argument("--seed", type=int, default=42, help="seed of the random data and choices (42)")
    parser.add_argument("--rounds", type=int, default=3, help="get/scan rounds, engines interleaved; best kept (3)")


def _open(name: str, path: str, cache_size: int, **options: Any):
    from ..engines import EngineSettings, get_adapter
    return get_adapter(name)(path, EngineSettings(cache_size=cache_size, options=options))


def _put_all(adapter, items: list[tuple[bytes, bytes]]) -> None:
    put = adapter.put
    for k, v in items:
        put(k, v)


def _get_all(get: Callable[[bytes], Any], keys: list[bytes]) -> None:
    for k in keys:
        get(k)


def _scan_all(name: str, adapter) -> int:
    """Entries of a full ascending scan (LMDB through its cursor, the others through their iterator)."""
    if name == "lmdb":
        return adapter.scan(b"", 1 << 62)
    n = 0
    for _ in adapter.iterate():
        n += 1
    return n


def run(args: argparse.Namespace, rec) -> None:
    from ..data import random_keys
    from ..metrics import read_process_io, timed
    from . import available_engines
    wanted = list(available_engines(args.engines, rec))
    rng = random.Random(args.seed)
    keys = list(dict.fromkeys(random_keys(rng, args.keys, KEY_SIZE)))
    items = [(k, rng.randbytes(VALUE_SIZE)) for k in keys]
    get_keys = keys[:]
    rng.shuffle(get_keys)
    small_keys = [rng.choice(keys) for _ in range(args.small_ops)]
    small_items = [(k, rng.randbytes(VALUE_SIZE)) for k in small_keys]
    user_bytes = len(keys) * (KEY_SIZE + VALUE_SIZE)
    small_cache = user_bytes // 20
    big_cache = 4 * user_bytes + (64 << 20)
    n, m = len(keys), len(small_keys)
    root = tempfile.mkdtemp(prefix="lsmkv-bench-btree-", dir=args.dir)
    results: dict[str, dict[str, Any]] = {}
    engines: dict[str, Any] = {}
    rec.progress(f"{n:,} keys of {KEY_SIZE} bytes, {VALUE_SIZE}-byte values; small cache {small_cache >> 10} KiB")
    try:
        for name in wanted:
            rec.progress(f"{name}: {n:,} puts")
            path = os.path.join(root, name)
            eng = engines[name] = _open(name, path, big_cache)
            r = results[name] = {}
            flush_s = [0.0]

            def put_phase(eng=eng, name=name, flush_s=flush_s) -> None:
                _put_all(eng, items)
                if name in FLUSHED_PUTS:
                    started = time.perf_counter()
                    eng.flush()
                    flush_s[0] = time.perf_counter() - started
            seconds = timed(put_phase)
            r["put"] = n / seconds
            fields: dict[str, Any] = {}
            if name == "btree":
                r["put_no_ckpt"] = n / (seconds - flush_s[0])
                fields["checkpoint_s"] = round(flush_s[0], 6)
            rec.run(name, "put", n, seconds, **fields)
            _get_all(eng.get, get_keys[: n // 10])  # warm-up
        # Gets and scans: engines interleaved, best of --rounds (the machine is shared).
        best: dict[tuple[str, str], float] = {}
        for rnd in range(args.rounds):
            for name, eng in engines.items():
                phases: list[tuple[str, Callable[[], Any]]] = [("get", lambda eng=eng: _get_all(eng.get, get_keys))]
                if name == "lmdb":
                    def one_txn(eng=eng) -> None:
                        with eng.env.begin() as txn:
                            _get_all(txn.get, get_keys)
                    phases.append(("get, one txn", one_txn))
                count = [0]
                phases.append(("scan", lambda eng=eng, name=name, count=count:
                               count.__setitem__(0, _scan_all(name, eng))))
                for workload, fn in phases:
                    seconds = timed(fn)
                    best[name, workload] = min(best.get((name, workload), float("inf")), seconds)
                if count[0] != n:
                    raise RuntimeError(f"{name}: the scan saw {count[0]} of {n} keys")
                rec.progress(f"{name}: round {rnd}: get {n / best[name, 'get']:,.0f}/s "
                             f"scan {n / best[name, 'scan']:,.0f}/s")
        for (name, workload), seconds in best.items():
            rec.run(name, workload, n, seconds, rounds=args.rounds)
            results[name][{"get": "get", "scan": "scan", "get, one txn": "get_one_txn"}[workload]] = n / seconds
        if "btree" in engines:
            # The same gets without the adaptive hash index (every get descends the tree).
            rec.progress("btree: gets without the adaptive hash index")
            eng = engines["btree"]
            eng.close()
            eng = engines["btree"] = _open("btree", os.path.join(root, "btree"), big_cache, hash_index=False)
            _scan_all("btree", eng)  # load every page
            seconds = min(timed(lambda: _get_all(eng.get, get_keys)) for _ in range(args.rounds))
            rec.run("btree", "get, no hash index", n, seconds, rounds=args.rounds)
            results["btree"]["get_no_ahi"] = n / seconds
        for name in list(engines):
            rec.progress(f"{name}: {m:,} gets and overwrites with a 5% cache")
            r = results[name]
            path = os.path.join(root, name)
            eng = engines[name]
            if name == "btree":
                s = eng.stats()
                r["height"] = s["height"]
                r["fill"] = s["fill_factor"][-1]
            # Small cache: reopen (LMDB has no cache of its own to size).
            if name != "lmdb":
                eng.close()
                eng = engines[name] = _open(name, path, small_cache)

            def overwrite(eng=eng, name=name) -> None:
                _put_all(eng, small_items)
                if name in FLUSHED_PUTS:
                    eng.flush()
            if name == "btree":
                s0 = eng.stats()
                get_s = timed(lambda: _get_all(eng.get, small_keys))
                s1 = eng.stats()
                r["reads_per_get"] = (s1["page_reads"] - s0["page_reads"]) / m
                put_s = timed(overwrite)
                s2 = eng.stats()
                r["bytes_per_put"] = (s2["bytes_written"] - s1["bytes_written"]) / m
            else:
                io0 = read_process_io()
                get_s = timed(lambda: _get_all(eng.get, small_keys))
                io1 = read_process_io()
                r["reads_per_get"] = "n/a (mmap)" if name == "lmdb" else (io1.rchar - io0.rchar) / 4096 / m
                put_s = timed(overwrite)
                if name == "sqlite":
                    eng.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                io2 = read_process_io()
                r["bytes_per_put"] = (io2.wchar - io1.wchar) / m
            r["small_get"], r["small_put"] = m / get_s, m / put_s
            reads = r["reads_per_get"]
            rec.run(name, "get, 5% cache", m, get_s, cache=small_cache,
                    read_amp=reads if isinstance(reads, float) else None)
            rec.run(name, "overwrite, 5% cache", m, put_s, cache=small_cache, bytes_per_put=r["bytes_per_put"])
            eng.close()
            del engines[name]
            shutil.rmtree(path, ignore_errors=True)
    finally:
        for eng in engines.values():
            with suppress(Exception):  # an error is on its way already
                eng.close()
        shutil.rmtree(root, ignore_errors=True)
    _tables(results, wanted, n, small_cache, rec)


def _tables(results: dict[str, dict[str, Any]], engines: list[str], n: int, small_cache: int, rec) -> None:
    def cell(v: Any) -> Any:
        if isinstance(v, float):
            return round(v) if v >= 100 else f"{v:.2f}"
        return "" if v is None else v

    rows = []
    b_row = results.get("btree", {})
    for row, label in MEASURES:
        b = b_row.get(row)
        ratio_l = ratio_s = ""
        if isinstance(b, float) and row in TARGETS:
            if isinstance(results.get("lmdb", {}).get(row), float):
                ratio_l = fmt_ratio(b, results['lmdb'][row])
            if isinstance(results.get("sqlite", {}).get(row), float):
                ratio_s = fmt_ratio(b, results['sqlite'][row])
        rows.append([label] + [cell(results[e].get(row)) for e in engines]
                    + [ratio_l, ratio_s, TARGETS.get(row, "")])
    rec.table("btree against LMDB and sqlite3", ["measure"] + engines + ["btree/lmdb", "btree/sqlite3", "target"],
              rows, note=f"{n:,} keys of {KEY_SIZE} bytes, {VALUE_SIZE}-byte values; warm: a cache of 4x the data "
                         f"plus 64 MiB; 5% cache: {small_cache >> 10} KiB. Gets and scans: best of the rounds. "
                         "Ratios above 1: btree is faster (bytes and reads: lower is better).")
    details = []
    lmdb = results.get("lmdb", {})
    if "get_one_txn" in lmdb:
        details.append(["lmdb get, all gets in one read transaction (ops/s)", round(lmdb["get_one_txn"]), ""])
    if "put_no_ckpt" in b_row:
        b = b_row["put_no_ckpt"]
        details.append(["btree put without its final checkpoint (flush) in the time (ops/s)", round(b),
                        fmt_ratio(b, lmdb['put']) if "put" in lmdb else ""])
    if "get_no_ahi" in b_row:
        b = b_row["get_no_ahi"]
        details.append(["btree get with hash_index=False, every get descends the tree (ops/s)", round(b),
                        fmt_ratio(b, lmdb['get']) if "get" in lmdb else ""])
    if "height" in b_row:
        details.append(["btree height", b_row["height"], ""])
        details.append(["btree leaf fill factor", b_row["fill"], ""])
    if details:
        rec.table("btree details", ["measure", "value", "vs lmdb"], details)
