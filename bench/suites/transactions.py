"""Transactions under contention: read-modify-write counters on a hot set
of keys, lsmkv and btree against sqlite3 and LMDB, in the same run.

Each engine, in a fresh database, runs 1, 2, 4 and 8 threads (``--threads``)
for ``--seconds`` each. A thread picks one of ``--hot-keys`` counters at
random, reads it, and writes it back plus one, in one transaction:

* ``lsm``, ``btree``: ``run_in_transaction(db, increment)`` -- optimistic,
  serializable; a commit that meets another's write raises ConflictError and
  is run again (the retries are counted);
* ``sqlite3``: ``BEGIN IMMEDIATE``, SELECT, UPDATE, COMMIT, one connection
  per thread, WAL and synchronous=NORMAL (the bench's sqlite3 settings);
  writers queue on the database's lock (``busy_timeout`` 60 s);
* ``lmdb``: one write transaction per increment (``env.begin(write=True)``),
  sync=False; LMDB lets one writer in at a time;
* ``lsm-merge``, ``btree-merge``: the same counters without a transaction:
  ``db.merge(key, UInt64Add.operand(1))`` on a database opened with
  ``merge_operator=UInt64Add()`` -- no read, nothing to validate, never a
  retry (lsm stores the operand and folds it on reads and in compaction;
  btree folds it at write).

No engine fsyncs at commit (lsmkv and btree: ``sync=False``, the default):
what is measured is the transactions themselves. The table gives commits
per second, retries per commit (the optimistic engines' wasted work) and
the p99 of an increment, from its first attempt to its commit. Every run
ends by checking that the counters add up to the commits: an engine that
lost an increment fails the run.

"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import struct
import tempfile
import threading

from ..timed_threads import run_timed_threads
from ..report import fmt_ratio
from . import engine_list, int_option

NAME = "transactions"
DESCRIPTION = ("read-modify-write counters on hot keys, 1-8 threads: lsm, btree, sqlite3 BEGIN IMMEDIATE, LMDB; "
               "and counters by merge")

ENGINES = ("lsm", "btree", "lsm-merge", "btree-merge", "sqlite3", "lmdb")
_COUNTER = struct.Struct("<Q")


def _thread_counts(text: str) -> list[int]:
    """``--threads``: thread counts separated by commas, each at least 1."""
    try:
        counts = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"thread counts separated by commas, not {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"counts of at least 1, not {text!r}")
    return counts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engines", type=engine_list(ENGINES), default=",".join(ENGINES), help=f"engines to run ({','.join(ENGINES)})")
    parser.add_argument("--threads", type=_thread_counts, default="1,2,4,8", help="thread counts, comma-separated (1,2,4,8)")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per engine and thread count (3)")
    parser.add_argument("--hot-keys", type=int_option(1), default=16, help="counters the threads share (16)")
    parser.add_argument("--dir", default=None, help="where the databases go (a temporary directory)")


# -- one engine's increment -------------------------------------------------------------------

class _Counters:
    """One engine's counters: ``open()``, then ``increment(key, rng)`` from
    any thread (returns the retries it took), ``total()``, ``close()``."""

    def __init__(self, engine: str, path: str, hot_keys: list[bytes]) -> None:
        self.engine, self.path, self.keys = engine, path, hot_keys

    def open(self) -> None:
        raise NotImplementedError

    def thread_start(self) -> None:
        """Called once in each thread before its first increment."""

    def increment(self, key: bytes) -> int:
        raise NotImplementedError

    def total(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _ProjectCounters(_Counters):
    def open(self) -> None:
        if self.engine == "lsm":
            import lsmkv as module
        else:
            import btree as module
        self.db = module.open(self.path)
        self.run_in_transaction = module.run_in_transaction
        with self.db.write_batch() as batch:
            for key in self.keys:
                batch.put(key, _COUNTER.pack(0))

    def increment(self, key: bytes) -> int:
        attempts = 0

        def add_one(txn) -> None:
            nonlocal attempts
            attempts += 1
            txn.put(key, _COUNTER.pack(_COUNTER.unpack(txn.get(key))[0] + 1))

        self.run_in_transaction(self.db, add_one, attempts=1000)
        return attempts - 1

    def total(self) -> int:
        return sum(_COUNTER.unpack(self.db.get(key))[0] for key in self.keys)

    def close(self) -> None:
        self.db.close()


class _MergeCounters(_ProjectCounters):
    """Counters by ``db.merge`` (UInt64Add, little-endian u64 like _COUNTER)."""

    def open(self) -> None:
        from lsmkv.base.merge_operators import UInt64Add
        module = __import__("lsmkv" if self.engine == "lsm-merge" else "btree")
        self.db = module.open(self.path, merge_operator=UInt64Add())
        self.one = UInt64Add.operand(1)
        with self.db.write_batch() as batch:
            for key in self.keys:
                batch.put(key, _COUNTER.pack(0))

    def increment(self, key: bytes) -> int:
        self.db.merge(key, self.one)
        return 0


class _SqliteCounters(_Counters):
    def open(self) -> None:
        import sqlite3
        self.sqlite3 = sqlite3
        self.file = os.path.join(self.path, "counters.sqlite")
        os.makedirs(self.path, exist_ok=True)
        conn = self._connect()
        conn.execute("CREATE TABLE counters (k BLOB PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID")
        conn.executemany("INSERT INTO counters VALUES (?, 0)", [(k,) for k in self.keys])
        conn.commit()
        self.local = threading.local()
        self.connections = [conn]

    def _connect(self):
        conn = self.sqlite3.connect(self.file, isolation_level=None, check_same_thread=False, timeout=60)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def thread_start(self) -> None:
        self.local.conn = conn = self._connect()
        self.connections.append(conn)

    def increment(self, key: bytes) -> int:
        conn = self.local.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            (n,) = conn.execute("SELECT n FROM counters WHERE k = ?", (key,)).fetchone()
            conn.execute("UPDATE counters SET n = ? WHERE k = ?", (n + 1, key))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return 0

    def total(self) -> int:
        return self.connections[0].execute("SELECT sum(n) FROM counters").fetchone()[0]

    def close(self) -> None:
        for conn in self.connections:
            conn.close()


class _LmdbCounters(_Counters):
    def open(self) -> None:
        import lmdb
        self.env = lmdb.open(self.path, map_size=1 << 30, sync=False, metasync=False, max_spare_txns=16)
        with self.env.begin(write=True) as txn:
            for key in self.keys:
                txn.put(key, _COUNTER.pack(0))

    def increment(self, key: bytes) -> int:
        with self.env.begin(write=True) as txn:
            txn.put(key, _COUNTER.pack(_COUNTER.unpack(txn.get(key))[0] + 1))
        return 0

    def total(self) -> int:
        with self.env.begin() as txn:
            return sum(_COUNTER.unpack(txn.get(key))[0] for key in self.keys)

    def close(self) -> None:
        self.env.close()


def counters_for(engine: str, path: str, keys: list[bytes]) -> _Counters:
    if engine in ("lsm", "btree"):
        return _ProjectCounters(engine, path, keys)
    if engine in ("lsm-merge", "btree-merge"):
        return _MergeCounters(engine, path, keys)
    if engine == "sqlite3":
        return _SqliteCounters(engine, path, keys)
    if engine == "lmdb":
        return _LmdbCounters(engine, path, keys)
    raise ValueError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")


# -- a run ----------------------------------------------------------------------------------------

def contend(counters: _Counters, threads: int, seconds: float) -> dict:
    """``threads`` threads incrementing random hot counters for ``seconds``;
    the commits, retries, elapsed time and each increment's latency in ns.
    Raises if the counters do not add up to the commits."""
    retries = [0] * threads

    def make_increment(t: int):
        rng, keys = random.Random(t), counters.keys
        counters.thread_start()

        def increment() -> None:
            retries[t] += counters.increment(keys[rng.randrange(len(keys))])
        return increment

    samples, elapsed = run_timed_threads(make_increment, threads, seconds, "txn-worker")
    total = counters.total()
    if total != len(samples):
        raise RuntimeError(f"{counters.engine}: the counters add up to {total:,} after {len(samples):,} "
                           "committed increments: increments were lost")
    return {"commits": len(samples), "retries": sum(retries), "elapsed_s": elapsed, "latency_ns": samples}


def _available(engine: str) -> str | None:
    """Why ``engine`` cannot run here, or None."""
    if engine == "lmdb":
        from ..engines import availability
        return availability("lmdb")
    return None


def run(args: argparse.Namespace, rec) -> None:
    engines = args.engines
    thread_counts = args.threads
    keys = [b"counter:%04d" % i for i in range(args.hot_keys)]
    workdir = tempfile.mkdtemp(prefix="lsmkv-transactions-", dir=args.dir)
    rates: dict[tuple[str, int], float] = {}
    rows = []
    notes = []
    try:
        for engine in engines:
            label = engine
            missing = _available(engine)
            if missing:
                notes.append(f"{label} skipped: {missing}")
                continue
            for threads in thread_counts:
                rec.progress(f"{label}: {threads} thread(s) incrementing {len(keys)} counters for {args.seconds} s")
                path = os.path.join(workdir, f"{label.replace(' ', '-')}-{threads}")
                counters = counters_for(engine, path, keys)
                counters.open()
                try:
                    figures = contend(counters, threads, args.seconds)
                finally:
                    counters.close()
                    shutil.rmtree(path, ignore_errors=True)
                latency = rec.latency_us(figures["latency_ns"]) if figures["latency_ns"] else None
                rec.run(label, f"increment, {threads} thread{'s' if threads > 1 else ''}", figures["commits"], figures["elapsed_s"],
                        latency_us=latency, threads=threads, retries=figures["retries"], hot_keys=len(keys))
                rate = figures["commits"] / figures["elapsed_s"]
                rates[(label, threads)] = rate
                rows.append([label, str(threads), f"{rate:,.0f}",
                             f"{figures['retries'] / figures['commits']:.2f}" if figures["commits"] else "-",
                             f"{(latency or {}).get('p99', 0):,.0f}"])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for row in rows:
        label, threads = row[0], int(row[1])
        reference = rates.get(("sqlite3", threads))
        row.append(fmt_ratio(rates[(label, threads)], reference))
    rec.table(f"Transactions: read-modify-write increments on {len(keys)} hot counters",
              ["engine", "threads", "commits/s", "retries per commit", "p99 µs", "vs sqlite3"], rows,
              note=f"{args.seconds} s per row; no fsync at commit on any engine; the counters are checked to add up "
                   "to the commits" + ("; " + "; ".join(notes) if notes else "") + ".")
