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
ttl expire a ttl after the call, which lies between the two. The last
``sync_threads`` threads write with sync=True nearly always, so several
sync writers meet in group commit all the time.

The child never stops by itself: it runs until SIGKILL. It exits on its own
only if an operation raises (code 3, traceback on stderr: the driver reports
it), when its stdin closes (the driver is gone), or after ``lifetime``
seconds (code 4), so it cannot outlive a driver that failed.

``sabotage`` makes the child break the contract on purpose, so that tests can
show the check catches it: ``drop-acked-write`` acknowledges a put it never
hands to the database; ``partial-inflight`` writes half of a batch and then
stalls with the batch in flight; ``child-error`` raises in a thread, as a
failing engine call would.
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

from .engines import engine
from .keyspace import KeySpace, value
from .oracle import WRITE_KINDS, Intent, OpLog, meta_name, thread_of
from .workload import Mix, ThreadWorkload

SABOTAGE = ("drop-acked-write", "partial-inflight", "child-error")
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
    return item[2] / 1000.0 if len(item) > 2 else None


def _write(db, space: KeySpace, intent: Intent, ingest_dir: str) -> None:
    if intent.kind == "put":
        item, = intent.items
        index, length = item[0], item[1]
        db.put(space.key(index), value(intent.op, index, length), sync=intent.sync, ttl=_ttl(item))
    elif intent.kind == "delete":
        (index, _), = intent.items
        db.delete(space.key(index), sync=intent.sync)
    elif intent.kind == "batch":
        with db.write_batch(sync=intent.sync) as batch:
            for item in intent.items:
                index, length = item[0], item[1]
                if length is None:
                    batch.delete(space.key(index))
                else:
                    batch.put(space.key(index), value(intent.op, index, length), ttl=_ttl(item))
            # The thread's metadata entry names its last batch, atomically with the data.
            batch.set_meta(meta_name(thread_of(intent.op)), intent.op.encode())
    elif intent.kind == "ingest":
        # A table file beside the database (never inside it: the driver
        # fails a cycle when a file appears there after the kill).
        os.makedirs(ingest_dir, exist_ok=True)
        path = os.path.join(ingest_dir, f"{intent.op}.sst")
        rows = sorted((space.key(index), None if length is None else value(intent.op, index, length))
                      for index, length in intent.items)
        with lsmkv.TableWriter(path) as table:
            for key, data in rows:
                if data is None:
                    table.delete(key)
                else:
                    table.put(key, data)
        db.ingest([path], move=True)
    else:
        raise ValueError(f"no way to execute {intent.kind!r}")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _sabotage(db, space: KeySpace, work: ThreadWorkload, log: OpLog, how: str, keys: list[int]) -> None:
    """Break the contract once, in a way the check must notice."""
    if how == "child-error":
        raise RuntimeError("deliberate failure in a writer thread (sabotage child-error)")
    if how == "drop-acked-write":
        intent = Intent(work.next_id(), "put", ((keys[0], 64),), True)
        log.intent(intent)
        log.ack(intent.op)  # acknowledged, never written
        return
    intent = Intent(work.next_id(), "batch", ((keys[0], 64), (keys[1], 64)), True)
    log.intent(intent)
    db.put(space.key(keys[0]), value(intent.op, keys[0], 64), sync=True)  # half of the batch
    threading.Event().wait()  # in flight until the kill


def _thread_main(db, eng, space: KeySpace, config: ChildConfig, thread: int) -> None:
    log = OpLog(log_path(config.log_dir, thread))
    # The last ``sync_threads`` threads write with sync=True nearly always.
    mix = Mix(sync=0.9) if thread >= config.threads - config.sync_threads else Mix()
    work = ThreadWorkload(space, config.cycle, thread, config.seed * 1009 + thread, maintenance=eng.maintenance,
                          mix=mix)
    ingest_dir = os.path.join(os.path.dirname(os.path.abspath(config.db)), "ingest")
    sabotage_keys: list[int] = []
    if config.sabotage and thread == 0:
        sabotage_keys = work.keys[:2]
        for index in sabotage_keys:
            work.exclude(index)
    while True:
        if sabotage_keys and work.started + 1 == SABOTAGED_OP:
            _sabotage(db, space, work, log, config.sabotage, sabotage_keys)
            sabotage_keys = []
            continue
        planned = work.next()
        intent = replace(planned.intent, at_ms=_now_ms())
        log.intent(intent)
        if intent.kind in WRITE_KINDS:
            _write(db, space, intent, ingest_dir)
        else:
            _report(f"phase {intent.kind} {intent.op}")
            low, high = planned.compact_range
            bounds = sorted(space.key(i) for i in (low, high) if i is not None) or [None, None]
            eng.run_maintenance(db, intent.kind, bounds[0], bounds[1])
        log.ack(intent.op, _now_ms() + 1)


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
    threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    _report("opening")
    db = eng.open(config.db, config.options)
    _report("ready")
    for thread in range(config.threads):
        threading.Thread(target=_run_thread, args=(db, eng, space, config, thread), daemon=True).start()
    time.sleep(config.lifetime)
    os._exit(4)


if __name__ == "__main__":
    sys.exit(main())
