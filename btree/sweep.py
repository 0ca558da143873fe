"""The sweep of expired keys: values whose ttl has passed, deleted in the
background so that their pages go back to the free list.

This module owns when a sweep runs and what it does. :func:`schedule_sweep`
puts one on the DB's timing wheel ``ttl_sweep_interval`` seconds ahead
while the tree holds values with a ttl (the DB's ``_sweep`` is the handle
of the one scheduled); :func:`run_sweep`, on the timer's executor, walks
the tree a chunk (:data:`SWEEP_CHUNK` entries) at a time: each chunk holds
the writers off while it finds expired keys (Tree.expired_keys) and logs
and applies their deletes as one batch through the DB's log writer, so
recovery replays a sweep like any write. Reads never wait for a sweep: a
value whose ttl has passed is not returned whether swept or not.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from lsmkv.base.errors import ClosedError, LsmkvError
from lsmkv.base.write_queue import Writer

from .wal import encode_batch
from .write_batch import QueuedWrite

if TYPE_CHECKING:
    from .db import DB

#: Entries a sweep chunk looks at while holding the writers off.
SWEEP_CHUNK = 4096


def schedule_sweep(db: DB) -> None:
    """Sweep expired keys ``ttl_sweep_interval`` seconds from now, on the
    timing wheel, while the tree holds values with a ttl."""
    if db._read_only or db._sweep is not None or not db._tree.ttl_entries:
        return
    try:
        timer = db._get_timer()
    except ClosedError:
        return
    with db._timer_lock:
        if db._sweep is None and not db._closing:
            db._sweep = timer.schedule(db._ttl_sweep_interval, partial(run_sweep, db))


def run_sweep(db: DB) -> None:
    """Delete every key whose ttl has expired (their pages go back to the
    free list), a chunk at a time: each chunk holds writers off while it
    finds expired keys and logs and applies their deletes, as one batch
    (so recovery replays it like any write). Runs on the timer's executor."""
    cursor = None
    while True:
        with db._writes.exclusive():
            with db._lock:
                if db._closing or not db._writable:
                    return
                keys, cursor = db._tree.expired_keys(cursor, SWEEP_CHUNK)
                if keys:
                    ops = [(k, None) for k in keys]
                    writer = Writer(QueuedWrite("sweep", ops, encode_batch(ops), 0), False)
                    try:
                        db._append_and_apply([writer], False)
                    except LsmkvError:
                        return  # writes are stopped; the error is logged and reported by stats()
                    db._ttl_swept += len(keys)
        if cursor is None:
            break
    with db._timer_lock:
        db._sweep = None
    schedule_sweep(db)
