"""What a Snapshot does: the reads a DB hands each of its snapshots.

A :class:`~btree.snapshot.Snapshot` knows nothing of the database; ``DB.snapshot()``
gives it these functions, bound to the DB (and a transaction's snapshot
the same, btree/transactions.py). Each takes the DB's lock, checks the
snapshot first (:func:`check_snapshot`: closed, the database closed, or
ended by a rebuild of the handle's tree after a failed write) and reads
the tree the snapshot was taken on through ``DB._read`` (which serves a
snapshot from its own view: btree/snapshot_views.py).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Iterator

from lsmkv.base.cursor import Cursor
from lsmkv.base.errors import ClosedError, SnapshotEndedError

from .cursor import snapshot_source
from .tree import Tree

if TYPE_CHECKING:
    from .db import DB
    from .snapshot import Snapshot


def check_snapshot(db: DB, snap: Snapshot) -> None:
    """Raise unless ``snap`` can be read: ClosedError for a closed snapshot
    or database, SnapshotEndedError for one the handle's reload ended."""
    if snap._closed:
        raise ClosedError("the snapshot is closed")
    db._check_open()
    if db._view_gen != snap._gen:
        # (Not marked closed: every later use says this again, and close() stays harmless.)
        raise SnapshotEndedError(f"the snapshot ended (a cursor reads through one): this handle of "
                                 f"{db.path} reloaded its view ({db._view_reason}), which ends every "
                                 f"snapshot and cursor taken before; take a new one")


def snapshot_get(db: DB, snap: Snapshot, key: bytes) -> bytes | None:
    """The value of ``key`` in the snapshot's view, or None."""
    with db._lock:
        check_snapshot(db, snap)
        value = db._read(Tree.get_in, snap._view, key, snap=snap)
        db._trim_after_read()
    return value


def snapshot_multi_get(db: DB, snap: Snapshot, keys: list[bytes]) -> list[bytes | None]:
    """The values of ``keys`` (ascending, distinct) in the snapshot's view."""
    with db._lock:
        check_snapshot(db, snap)
        values = db._read(Tree.get_many, keys, snap._view, snap=snap)
        db._trim_after_read()
    return values


def snapshot_scan(db: DB, snap: Snapshot, lo: bytes | None, hi: bytes | None,
                  reverse: bool) -> Iterator[tuple[bytes, bytes]]:
    """A scan of [lo, hi) in the snapshot's view (btree/scan.py)."""
    with db._lock:
        check_snapshot(db, snap)
    return db._scan(lo, hi, reverse, snap)


def snapshot_iterator(db: DB, snap: Snapshot, lower_bound: object, upper_bound: object) -> Cursor:
    """A cursor over the snapshot's view (btree/cursor.py)."""
    with db._lock:
        check_snapshot(db, snap)
    return Cursor([snapshot_source(chunk_reader(db, snap))], lower_bound, upper_bound,
                  check=partial(check_snapshot, db, snap))


def chunk_reader(db: DB, snap: Snapshot):
    """What a cursor over ``snap`` reads the tree with (btree/cursor.py's
    ChunkReader): ``fn`` over the snapshot's view from ``resume``, under
    the lock, the snapshot checked first."""
    def read_chunk(fn, resume, *args):
        with db._lock:
            check_snapshot(db, snap)
            result = db._read(fn, *args, snap._view, resume, snap=snap)
            db._trim_after_read()
        return result
    return read_chunk
