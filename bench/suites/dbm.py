"""The standard library's dbm interface: lsmkv.dbm and btree.dbm beside the
dbm modules this interpreter has (dbm.sqlite3 on Python 3.13+, dbm.gnu,
dbm.ndbm, dbm.dumb) and diskcache.

Each store is opened with flag 'c' (diskcache: ``Cache(path)``), gets
``--keys`` random 16-byte keys with 100-byte values one assignment each
(``d[key] = value``), is closed and reopened with flag 'r', and answers
``--reads`` random ``d[key]`` lookups of present keys. This is what a
program that keeps a persistent dict (or a shelve) does.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import tempfile
import time
from typing import Any, Callable

from ..report import fmt_ratio

NAME = "dbm"
DESCRIPTION = "dbm interface: lsmkv.dbm, btree.dbm, the stdlib's dbm modules and diskcache; puts and gets"

STDLIB = ["dbm.sqlite3", "dbm.gnu", "dbm.ndbm", "dbm.dumb"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keys", type=int, default=200_000, help="keys put (200,000)")
    parser.add_argument("--reads", type=int, default=50_000, help="random gets of present keys (50,000)")
    parser.add_argument("--seed", type=int, default=42, help="seed of the random data and choices (42)")
    parser.add_argument("--dir", default=None, help="where the stores go (default: a temporary folder)")


def stores() -> dict[str, Callable[[str, str], Any]]:
    """name -> open(path, flag) for every store that can run here."""
    out: dict[str, Callable[[str, str], Any]] = {}
    import btree.dbm
    import lsmkv.dbm
    out["lsmkv.dbm"] = lsmkv.dbm.open
    out["btree.dbm"] = btree.dbm.open
    for name in STDLIB:
        try:
            out[name] = importlib.import_module(name).open
        except ImportError:
            continue
    try:
        import diskcache

        class _Cache:  # the dbm calls the suite makes, on a diskcache.Cache
            def __init__(self, path: str, flag: str) -> None:
                self.cache = diskcache.Cache(path)
                self.__setitem__ = self.cache.__setitem__
                self.__getitem__ = self.cache.__getitem__

            def close(self) -> None:
                self.cache.close()
        out["diskcache"] = _Cache
    except ImportError:
        pass
    return out


def run(args: argparse.Namespace, rec) -> None:
    import numpy as np
    rng = np.random.default_rng(args.seed)
    blob = rng.bytes(16 * args.keys)
    keys = [blob[16 * i: 16 * i + 16] for i in range(args.keys)]
    values = [rng.bytes(100) for _ in range(1024)]
    reads = [keys[i] for i in rng.integers(0, args.keys, args.reads).tolist()]
    root = tempfile.mkdtemp(prefix="lsmkv-dbm-", dir=args.dir)
    rates: dict[str, tuple[float, float]] = {}
    try:
        for name, opener in stores().items():
            path = os.path.join(root, name, "db")
            os.makedirs(os.path.dirname(path))
            rec.progress(f"{name}: {args.keys:,} assignments, {args.reads:,} lookups")
            d = opener(path, "c")
            try:
                setitem = d.__setitem__
                t0 = time.perf_counter()
                for i, k in enumerate(keys):
                    setitem(k, values[i & 1023])
                put_s = time.perf_counter() - t0
            finally:
                d.close()
            d = opener(path, "r")
            try:
                getitem = d.__getitem__
                t0 = time.perf_counter()
                for k in reads:
                    getitem(k)
                get_s = time.perf_counter() - t0
            finally:
                d.close()
            rec.run(name, "put", args.keys, put_s)
            rec.run(name, "get", args.reads, get_s)
            rates[name] = (args.keys / put_s, args.reads / get_s)
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = []
    for ours in ("lsmkv.dbm", "btree.dbm"):
        for ref in rates:
            if ref in ("lsmkv.dbm", "btree.dbm") or ours not in rates:
                continue
            (op, og), (rp, rg) = rates[ours], rates[ref]
            rows.append([ours, ref, round(op), round(rp), fmt_ratio(op, rp), round(og), round(rg), fmt_ratio(og, rg)])
    rec.table("dbm interface: ours against the standard library's and diskcache",
              ["ours", "reference", "ours put/s", "ref put/s", "put ratio", "ours get/s", "ref get/s", "get ratio"],
              rows, note=f"{args.keys:,} random 16-byte keys, 100-byte values, one assignment each; then "
                         f"{args.reads:,} random lookups after a reopen with flag 'r'.")
