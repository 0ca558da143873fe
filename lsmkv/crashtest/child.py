"""The crash test's child process: several threads writing to one database
until the driver kills it.

Run as ``python -m lsmkv.crashtest.child CONFIG_JSON`` (the driver builds the
configuration, :class:`ChildConfig`). The child reports on stdout, one line
at a time: ``opening`` before it opens the database (recovery runs then),
``ready`` once open, and ``phase KIND OP`` just before a thread calls a
maintenance operation (flush, compact_range, checkpoint), so the driver can
aim a kill at it. Each thread logs every operation to its own oracle log
before and after the call (:class:`~lsmkv.crashtest.oracle.OpLog`).

Threads log the wall-clock time (ms) with each intent and ack: puts with a
ttl expire a ttl after the call, which lies between the two. A
transaction's reads are checked against what the thread knows its keys
hold (the expected state the cycle starts from, ``ChildConfig.state``, plus
its own acknowledged operations); a read that differs is logged
(:meth:`~lsmkv.crashtest.oracle.OpLog.bad_read`) and fails the cycle. A
commit that raises ConflictError is a failure too (each thread writes only
its own keys), unless another thread's ingest overlapped the transaction
and its file's key range holds the key the error names (an ingest
conflicts over its files' whole key ranges): then it is logged as refused. The last
``sync_threads`` threads write with sync=True nearly always, so several
sync writers meet in group commit all the time.

The child never stops by itself: it runs until SIGKILL. It exits on its own
only if an operation raises (code 3, traceback on stderr: the driver reports
it), when its stdin closes (the driver is gone), or after ``lifetime``
seconds (code 4), so it cannot outlive a driver that failed.

``sabotage`` makes the child break the contract on purpose, so that tests can
show the check catches it: ``drop-acked-write`` acknowledges a put it never
hands to the database; ``partial-inflight`` writes half of a batch and then
stalls with the batch in flight; ``unlogged-write`` puts a key without
logging it, then reads it in a transaction (the read check must report it);
``child-error`` raises in a thread, as a failing engine call would.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field, replace

import lsmkv
from lsmkv.base.merge_operators import UInt64Add

from .engines import engine
from .keyspace import KeySpace, content, describe, value
from .oracle import (MERGE, RANGE, VOID_KINDS, WRITE_KINDS, BadRead, ExpectedState, Intent, OpLog, has_ttl,
                     meta_name, thread_of)
from .workload import Mix, Planned, ThreadWorkload

SABOTAGE = ("drop-acked-write", "partial-inflight", "unlogged-write", "child-error")
#: The operation of thread 0 that sabotage replaces (its first, so that any kill after it counts).
SABOTAGED_OP = 1


@dataclass
class ChildConfig:
    engine: str
    db: str
    log_dir: str
    cycle: int
    seed: int
    threads: int
    keys: int
    options: dict = field(default_factory=dict)
    sabotage: str | None = None
    lifetime: float = 300.0
    #: Threads (the last ones) that write with sync=True nearly always.
    sync_threads: int = 0
    #: The expected state the cycle starts from (oracle.ExpectedState's
    #: file; "" for an empty database): what transactions' reads are checked
    #: against.
    state: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "ChildConfig":
        return cls(**json.loads(text))


def log_path(log_dir: str, thread: int) -> str:
    return os.path.join(log_dir, f"thread-{thread}.log")


def _report(line: str) -> None:
    os.write(1, (line + "\n").encode())


def _ttl(item: tuple) -> float | None:
    """The ttl of a put item in seconds (None: no ttl)."""
    return item[2] / 1000.0 if has_ttl(item) else None


def _write_items(writer, space: KeySpace, op: str, items: tuple[tuple, ...]) -> None:
    """Hand ``items`` to a write batch or a transaction, in order."""
    for item in items:
        index, what = item[0], item[1]
        if what is None:
            writer.delete(space.key(index))
        elif what == MERGE:
            writer.merge(space.key(index), UInt64Add.operand(item[2]))
        elif what == RANGE:
            writer.delete_range(*space.range_bounds(index, item[2]))
        else:
            writer.put(space.key(index), content(op, index, what), ttl=_ttl(item))


class _Ingests:
    """The key ranges of the child's ingests: an ingest conflicts with the
    transactions open meanwhile over its file's whole key range, which
    covers other threads' keys."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ranges: list[tuple[bytes, bytes]] = []  # (smallest, largest) of each ingest, in start order
        self._running: set[int] = set()

    def start(self, smallest: bytes, largest: bytes) -> int:
        with self._lock:
            self._ranges.append((smallest, largest))
            self._running.add(len(self._ranges) - 1)
            return len(self._ranges) - 1

    def finish(self, number: int) -> None:
        with self._lock:
            self._running.discard(number)

    def mark(self) -> tuple[int, frozenset[int]]:
        """Taken when a transaction begins: the ingests that may overlap it
        are those running now and those started later."""
        with self._lock:
            return len(self._ranges), frozenset(self._running)

    def explain(self, mark: tuple[int, frozenset[int]], error: Exception) -> bool:
        """Whether an ingest that overlapped the transaction covers the key
        (or range) its ConflictError names."""
        started, running = mark
        with self._lock:
            ranges = [self._ranges[i] for i in running] + self._ranges[started:]
        key, span = getattr(error, "key", None), getattr(error, "range", None)
        for smallest, largest in ranges:
            if key is not None and smallest <= key <= largest:
                return True
            if key is None and span is not None and (span[0] is None or span[0] <= largest) \
                    and (span[1] is None or smallest < span[1]):
                return True
        return False


def _transaction(db, space: KeySpace, planned: Planned, intent: Intent, known: ExpectedState, log: OpLog,
                 ingests: _Ingests) -> bool:
    """Run a transaction: check its reads against ``known``, write its
    items, commit or roll back. True if the commit was refused by a
    conflict an overlapping ingest explains."""
    mark = ingests.mark()
    txn = db.transaction(sync=intent.sync)
    try:
        for index in planned.reads:
            found = txn.get(space.key(index))
            if found not in known.candidates(index, intent.at_ms, _now_ms() + 1):
                log.bad_read(BadRead(intent.op, index, known.explain(index), describe(found, index)))
        _write_items(txn, space, intent.op, intent.items)
        if intent.kind in VOID_KINDS:
            txn.rollback()
            return False
        try:
            txn.commit()
        except lsmkv.ConflictError as exc:
            if ingests.explain(mark, exc):
                return True
            raise
        return False
    finally:
        txn.rollback()  # nothing once it ended; a transaction left open by an error ends here


def _write(db, space: KeySpace, intent: Intent, ingest_dir: str, ingests: _Ingests) -> None:
    if intent.kind == "put":
        item, = intent.items
        index, length = item[0], item[1]
        db.put(space.key(index), content(intent.op, index, length), sync=intent.sync, ttl=_ttl(item))
    elif intent.kind == "delete":
        (index, _), = intent.items
        db.delete(space.key(index), sync=intent.sync)
    elif intent.kind == "merge":
        (index, _, amount), = intent.items
        db.merge(space.key(index), UInt64Add.operand(amount), sync=intent.sync)
    elif intent.kind == "delete_range":
        (first, _, last), = intent.items
        start, end = space.range_bounds(first, last)
        db.delete_range(start, end, sync=intent.sync)
    elif intent.kind == "batch":
        with db.write_batch(sync=intent.sync) as batch:
            _write_items(batch, space, intent.op, intent.items)
            # The thread's metadata entry names its last batch, atomically with the data.
            batch.set_meta(meta_name(thread_of(intent.op)), intent.op.encode())
    elif intent.kind == "ingest":
        # A table file beside the database (never inside it: the driver
        # fails a cycle when a file appears there after the kill).
        os.makedirs(ingest_dir, exist_ok=True)
        path = os.path.join(ingest_dir, f"{intent.op}.sst")
        rows = sorted((space.key(index), None if length is None else content(intent.op, index, length))
                      for index, length in intent.items)
        with lsmkv.TableWriter(path) as table:
            for key, data in rows:
                if data is None:
                    table.delete(key)
                else:
                    table.put(key, data)
        number = ingests.start(rows[0][0], rows[-1][0])
        try:
            db.ingest([path], move=True)
        finally:
            ingests.finish(number)
    else:
        raise ValueError(f"no way to execute {intent.kind!r}")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _sabotage(db, space: KeySpace, work: ThreadWorkload, log: OpLog, how: str, keys: list[int],
              known: ExpectedState, ingests: _Ingests) -> None:
    """Break the contract once, in a way the check must notice."""
    if how == "child-error":
        raise RuntimeError("deliberate failure in a writer thread (sabotage child-error)")
    if how == "unlogged-write":
        db.put(space.key(keys[0]), value("c0.t0.n0", keys[0], 16), sync=True)  # in no log
        intent = Intent(work.next_id(), "txn", ((keys[1], 8),), True, _now_ms())
        log.intent(intent)
        refused = _transaction(db, space, Planned(intent, reads=(keys[0],)), intent, known, log, ingests)
        log.ack(intent.op, _now_ms() + 1, refused=refused)
        return
    if how == "drop-acked-write":
        intent = Intent(work.next_id(), "put", ((keys[0], 64),), True)
        log.intent(intent)
        log.ack(intent.op)  # acknowledged, never written
        return
    intent = Intent(work.next_id(), "batch", ((keys[0], 64), (keys[1], 64)), True)
    log.intent(intent)
    db.put(space.key(keys[0]), value(intent.op, keys[0], 64), sync=True)  # half of the batch
    threading.Event().wait()  # in flight until the kill


def _thread_main(db, eng, space: KeySpace, config: ChildConfig, thread: int, known: ExpectedState,
                 ingests: _Ingests) -> None:
    log = OpLog(log_path(config.log_dir, thread))
    # The last ``sync_threads`` threads write with sync=True nearly always.
    mix = Mix(sync=0.9) if thread >= config.threads - config.sync_threads else Mix()
    work = ThreadWorkload(space, config.cycle, thread, config.seed * 1009 + thread, maintenance=eng.maintenance,
                          features=eng.features, mix=mix)
    ingest_dir = os.path.join(os.path.dirname(os.path.abspath(config.db)), "ingest")
    sabotage_keys: list[int] = []
    if config.sabotage and thread == 0:
        sabotage_keys = work.keys[:2]
        for index in sabotage_keys:
            work.exclude(index)
    while True:
        if sabotage_keys and work.started + 1 == SABOTAGED_OP:
            _sabotage(db, space, work, log, config.sabotage, sabotage_keys, known, ingests)
            sabotage_keys = []
            continue
        planned = work.next()
        intent = replace(planned.intent, at_ms=_now_ms())
        log.intent(intent)
        refused = False
        if intent.kind in ("txn", "rollback"):
            refused = _transaction(db, space, planned, intent, known, log, ingests)
        elif intent.kind in WRITE_KINDS:
            _write(db, space, intent, ingest_dir, ingests)
        else:
            _report(f"phase {intent.kind} {intent.op}")
            low, high = planned.compact_range
            bounds = sorted(space.key(i) for i in (low, high) if i is not None) or [None, None]
            eng.run_maintenance(db, intent.kind, bounds[0], bounds[1])
        acked = _now_ms() + 1
        log.ack(intent.op, acked, refused=refused)
        known.apply(replace(intent, acked_ms=acked, refused=refused))


def _run_thread(*args) -> None:
    try:
        _thread_main(*args)
    except BaseException:  # noqa: BLE001 - any failure ends the child at once, loudly
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(3)


def _exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    config = ChildConfig.from_json(argv[0])
    if config.sabotage is not None and config.sabotage not in SABOTAGE:
        raise ValueError(f"unknown sabotage {config.sabotage!r}")
    space = KeySpace(config.keys, config.threads)
    eng = engine(config.engine)
    known = ExpectedState.load(config.state) if config.state else ExpectedState()
    ingests = _Ingests()
    threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    _report("opening")
    db = eng.open(config.db, config.options)
    _report("ready")
    for thread in range(config.threads):
        threading.Thread(target=_run_thread, args=(db, eng, space, config, thread, known.copy(), ingests),
                         daemon=True).start()
    time.sleep(config.lifetime)
    os._exit(4)


if __name__ == "__main__":
    sys.exit(main())
