"""The engines as fault scenarios drive them, and a workload with its oracle.

A workload is a seeded list of operations (puts, deletes, write batches,
some with sync=True, flushes and, for lsmkv, compactions) over a small key
space, so that keys are overwritten and deleted often. Its oracle is the
state after every prefix of the list: a database hit by a fault must hold
the state after some prefix (batches whole, no deleted key back), and that
prefix must include everything the fault model promises to keep.

Engine profiles use small sizes so that a short workload flushes, compacts
and checkpoints; lsmkv's profile flushes and compacts only when asked (no
background work of its own), so a workload makes the same file-system calls
in the same order every time it runs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import btree
from lsmkv.base.check_report import CheckReport
from lsmkv.base.fs import FileSystem
from lsmkv.stores import open_store

#: Options per engine: small enough that ~150 operations flush, compact,
#: split pages, spill values to overflow pages and checkpoint.
PROFILES = {
    "lsm": dict(write_buffer_size=64 * 1024, block_size=256, disable_auto_compactions=True,
                compaction_executor="thread"),
    "btree": dict(page_size=512, cache_size=16 * 512, checkpoint_log_bytes=4096),
}


@dataclass(frozen=True)
class Engine:
    """One engine with the options scenarios open it with."""

    name: str
    options: dict = field(default_factory=dict)

    def open(self, path: str, fs: FileSystem | None = None, **extra):
        opts = {**self.options, **extra}
        if fs is not None:
            opts["fs"] = fs
        return open_store(path, engine=self.name, **opts)

    def check(self, path: str) -> CheckReport:
        if self.name == "lsm":
            from lsmkv.lsm.check import check_db
            return check_db(path)
        return btree.check(path)


def engine(name: str) -> Engine:
    return Engine(name, PROFILES[name])


@dataclass(frozen=True)
class Op:
    """One operation: kind "put", "delete", "batch", "flush" or "compact".
    ``items`` holds (key, value or None for a delete)."""

    kind: str
    items: tuple = ()
    sync: bool = False

    @property
    def is_write(self) -> bool:
        return self.kind in ("put", "delete", "batch")


def make_ops(seed: int, count: int = 150, keys: int = 24) -> list[Op]:
    """A seeded workload. Values name the operation that wrote them and are
    random bytes otherwise (never zero-padded); some are large enough to go
    to btree overflow pages."""
    rng = random.Random(seed)
    ops: list[Op] = []

    def value(i: int) -> bytes:
        size = rng.choice((4, 12, 30, 60)) if rng.random() < 0.85 else rng.randrange(150, 700)
        return b"op%d:" % i + bytes(rng.randrange(1, 256) for _ in range(size))

    def key() -> bytes:
        return b"key%02d" % rng.randrange(keys)

    for i in range(count):
        r = rng.random()
        sync = rng.random() < 0.3
        if r < 0.55:
            ops.append(Op("put", ((key(), value(i)),), sync))
        elif r < 0.72:
            ops.append(Op("delete", ((key(), None),), sync))
        elif r < 0.9:
            items = tuple((key(), None if rng.random() < 0.25 else value(i)) for _ in range(rng.randrange(2, 6)))
            ops.append(Op("batch", items, sync))
        elif r < 0.96:
            ops.append(Op("flush"))
        else:
            ops.append(Op("compact"))
    return ops


def apply_to_model(model: dict, op: Op) -> None:
    for key, value in op.items:
        if value is None:
            model.pop(key, None)
        else:
            model[key] = value


def oracle(ops: list[Op], start: dict | None = None) -> list[dict]:
    """states[i]: the database after ops[:i] (states[0] is ``start``)."""
    model = dict(start or {})
    states = [dict(model)]
    for op in ops:
        apply_to_model(model, op)
        states.append(dict(model))
    return states


def apply_to_db(db, op: Op) -> None:
    if op.kind == "put":
        (key, value), = op.items
        db.put(key, value, sync=op.sync)
    elif op.kind == "delete":
        (key, _), = op.items
        db.delete(key, sync=op.sync)
    elif op.kind == "batch":
        with db.write_batch(sync=op.sync) as batch:
            for key, value in op.items:
                if value is None:
                    batch.delete(key)
                else:
                    batch.put(key, value)
    elif op.kind == "flush":
        db.flush()
    elif op.kind == "compact":
        if hasattr(db, "compact_range"):
            db.compact_range()
        else:
            db.flush()
    else:
        raise ValueError(f"unknown operation {op.kind!r}")


@dataclass
class RunResult:
    """How far a workload got: ``acked`` operations returned, ``durable``
    is the length of the prefix the engines promise to keep through a power
    loss (up to the last acknowledged sync=True write, flush or compaction),
    ``error`` what stopped it (None if every operation returned)."""

    acked: int = 0
    durable: int = 0
    error: BaseException | None = None


def run_ops(db, ops: list[Op]) -> RunResult:
    result = RunResult()
    for i, op in enumerate(ops):
        try:
            apply_to_db(db, op)
        except Exception as exc:  # noqa: BLE001 - the scenario judges it
            result.error = exc
            return result
        result.acked = i + 1
        if op.sync or not op.is_write:
            result.durable = i + 1
    return result


def keys_of(ops: list[Op]) -> list[bytes]:
    return sorted({key for op in ops for key, _ in op.items})


def read_state(db, keys: list[bytes] = ()) -> dict:
    """The whole database, read by a scan; every key it finds, and every key
    of ``keys``, is read again with get, which must agree."""
    state = dict(db.scan())
    for key in set(state) | set(keys):
        if db.get(key) != state.get(key):
            raise AssertionError(f"get({key!r}) disagrees with scan")
    return state


def first_matching_prefix(states: list[dict], state: dict, lo: int, hi: int) -> int | None:
    """The p in [lo, hi] with states[p] == state, or None."""
    for p in range(max(lo, 0), min(hi, len(states) - 1) + 1):
        if states[p] == state:
            return p
    return None
