"""Cursors: seek, then 100 steps forward (YCSB-E's shape), and the same
stepping backward, for both engines beside the references' cursors.

Each engine gets the same ``--keys`` random 16-byte keys with 100-byte
values, loaded in batches and flushed (the LSM-trees also compacted); then
``--seeks`` random seeks, each followed by ``--steps`` next() calls reading
key and value (and, in the second run, seek_for_prev followed by prev()).
The cursors: ``db.iterator()`` for lsmkv and btree, plyvel's raw iterator
(LevelDB), rocksdict's iterator (RocksDB), an LMDB cursor in one read
transaction, and for sqlite3 ``WHERE k >= ? ORDER BY k LIMIT 100`` (and
``k <= ? ORDER BY k DESC``), which is how SQLite users page.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from typing import Any, Callable

from ..report import fmt_ratio
from . import engine_list

NAME = "cursor"
DESCRIPTION = "cursors: seek + 100 next() and seek_for_prev + 100 prev(), both engines and the references"

ENGINES = ["lsm", "btree", "leveldb", "rocksdb", "lmdb", "sqlite"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keys", type=int, default=200_000, help="keys loaded (200,000)")
    parser.add_argument("--seeks", type=int, default=5_000, help="seeks per direction (5,000)")
    parser.add_argument("--steps", type=int, default=100, help="steps after each seek (100)")
    parser.add_argument("--engines", type=engine_list(ENGINES), default=",".join(ENGINES), help=f"comma-separated ({','.join(ENGINES)})")
    parser.add_argument("--seed", type=int, default=42, help="seed of the random data and choices (42)")
    parser.add_argument("--dir", default=None, help="where the databases go (default: a temporary folder)")


def _iterator_walks(it, seek_for_prev: Callable[[bytes], None]) -> tuple[Callable, Callable]:
    """forward and backward walks over an iterator in RocksDB's vocabulary
    (seek, valid, key, value, next, prev: ours, RocksDB's, LevelDB's)."""
    def forward(key: bytes, steps: int) -> int:
        it.seek(key)
        n = 0
        while n < steps and it.valid():
            it.key()
            it.value()
            it.next()
            n += 1
        return n

    def backward(key: bytes, steps: int) -> int:
        seek_for_prev(key)
        n = 0
        while n < steps and it.valid():
            it.key()
            it.value()
            it.prev()
            n += 1
        return n
    return forward, backward


def _forward_backward(adapter, name: str) -> tuple[Callable, Callable, Callable[[], None]]:
    """(forward(key, steps) -> entries read, backward(key, steps), close)."""
    if name in ("lsm", "btree"):
        it = adapter.db.iterator()
        return (*_iterator_walks(it, it.seek_for_prev), it.close)
    if name == "rocksdb":
        it = adapter.db.iter()
        return (*_iterator_walks(it, it.seek_for_prev), lambda: None)
    if name == "leveldb":
        it = adapter.db.raw_iterator()

        def seek_for_prev(key: bytes) -> None:
            # plyvel's raw iterator has no seek_for_prev: seek, then one step back unless on the key.
            it.seek(key)
            if not it.valid():
                it.seek_to_last()
            elif it.key() != key:
                it.prev()
        return (*_iterator_walks(it, seek_for_prev), it.close)
    if name == "lmdb":
        txn = adapter.env.begin()
        cur = txn.cursor()

        def forward(key: bytes, steps: int) -> int:
            n = 0
            ok = cur.set_range(key)
            while n < steps and ok:
                cur.key()
                cur.value()
                ok = cur.next()
                n += 1
            return n

        def backward(key: bytes, steps: int) -> int:
            # LMDB has no seek_for_prev: set_range, then one step back unless on the key.
            ok = cur.set_range(key)
            if not ok:
                ok = cur.last()
            elif cur.key() != key:
                ok = cur.prev()
            n = 0
            while n < steps and ok:
                cur.key()
                cur.value()
                ok = cur.prev()
                n += 1
            return n
        return forward, backward, txn.abort
    if name == "sqlite":
        conn = adapter.conn

        def forward(key: bytes, steps: int) -> int:
            return len(conn.execute("SELECT k, v FROM kv WHERE k >= ? ORDER BY k LIMIT ?", (key, steps)).fetchall())

        def backward(key: bytes, steps: int) -> int:
            return len(conn.execute("SELECT k, v FROM kv WHERE k <= ? ORDER BY k DESC LIMIT ?",
                                    (key, steps)).fetchall())
        return forward, backward, lambda: None
    raise ValueError(f"no cursor for engine {name!r}")


def run(args: argparse.Namespace, rec) -> None:
    import numpy as np

    from ..engines import EngineSettings, get_adapter
    from . import available_engines
    engines = args.engines
    rng = np.random.default_rng(args.seed)
    blob = rng.bytes(16 * args.keys)
    keys = [blob[16 * i: 16 * i + 16] for i in range(args.keys)]
    values = [rng.bytes(100) for _ in range(1024)]
    seeks = [rng.bytes(16) for _ in range(args.seeks)]
    root = tempfile.mkdtemp(prefix="lsmkv-cursor-", dir=args.dir)
    rates: dict[str, dict[str, float]] = {}
    try:
        for name in available_engines(engines, rec):
            rec.progress(f"{name}: loading {args.keys:,} keys")
            adapter = get_adapter(name)(os.path.join(root, name), EngineSettings())
            try:
                for i in range(0, args.keys, 10_000):
                    adapter.write_batch(zip(keys[i:i + 10_000], (values[j & 1023] for j in range(i, i + 10_000))))
                adapter.flush()
                adapter.compact_all()
                forward, backward, done = _forward_backward(adapter, name)
                try:
                    for label, fn in (("seek+next", forward), ("seek_for_prev+prev", backward)):
                        t0 = time.perf_counter()
                        entries = sum(fn(k, args.steps) for k in seeks)
                        elapsed = time.perf_counter() - t0
                        rec.run(name, label, entries, elapsed, seeks=len(seeks), steps=args.steps,
                                seeks_per_sec=round(len(seeks) / elapsed, 1))
                        rates.setdefault(name, {})[label] = entries / elapsed
                finally:
                    done()
            finally:
                adapter.close()
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows: list[list[Any]] = []
    for label in ("seek+next", "seek_for_prev+prev"):
        for ours in ("lsm", "btree"):
            for ref in ("leveldb", "rocksdb", "lmdb", "sqlite"):
                a, b = rates.get(ours, {}).get(label), rates.get(ref, {}).get(label)
                if a and b:
                    rows.append([label, ours, ref, round(a), round(b), fmt_ratio(a, b)])
    rec.table("Cursors: entries read per second", ["move", "ours", "reference", "ours/s", "reference/s", "ratio"],
              rows, note=f"{args.keys:,} random 16-byte keys, 100-byte values; {args.seeks:,} random seeks, each "
                         f"followed by {args.steps} steps reading key and value.")
