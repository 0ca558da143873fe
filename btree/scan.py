"""The chunks of a scan: how DB.scan (and a snapshot's scan) reads the tree.

This module owns :func:`scan_chunks`, the generator behind a scan
iterator: it reads the tree (or a snapshot's view) a chunk at a time under
the DB's lock, each chunk one consistent read (Tree.chunk_forward and
Tree.chunk_backward), and sizes the next chunk by what the last one cost
(:data:`SCAN_FIRST_CHUNK` entries first, at most :data:`SCAN_MAX_CHUNK`).
Each chunk is a LeafRuns (btree/leaf_runs.py: the pairs made as the
iterator takes them). The chunks being yielded are registered in the DB's
``_chunks``, which close() of the DB or of the snapshot empties: the next
item then asks for the next chunk, which raises.
"""

from __future__ import annotations

from math import isqrt
from typing import TYPE_CHECKING, Iterator

from .leaf_runs import LeafRuns
from .snapshot_reads import check_snapshot
from .tree import Tree

if TYPE_CHECKING:
    from .db import DB
    from .snapshot import Snapshot

#: Entries (cells read) in a scan's first chunk and the most in one chunk
#: (see scan_chunks for how chunks grow).
SCAN_FIRST_CHUNK = 16
SCAN_MAX_CHUNK = 4096


def scan_chunks(db: DB, lo: bytes | None, hi: bytes | None, reverse: bool,
                snap: Snapshot | None) -> Iterator[LeafRuns]:
    """The chunks of a scan: iterables of (key, value), each read under the
    lock as one consistent read of the tree (or of ``snap``). A chunk
    goes on where the last one stopped (Tree.chunk_forward's RangePos)
    if no write came in between, and otherwise seeks again past the last
    key returned, so writes ahead of the scan's position are seen."""
    # The first chunk is small (a short range read, a seek and a few
    # next()s, touches one leaf or two), later ones grow up to 4,096.
    limit = SCAN_FIRST_CHUNK
    returned = 0
    inclusive = True
    view = None
    pos = None
    lock = db._lock
    live = db._chunks
    while True:
        with lock:
            if snap is None:
                if not db._usable:
                    db._check_open()
            else:
                check_snapshot(db, snap)
                view = snap._view
            if reverse:
                items, pos = db._read(Tree.chunk_backward, hi, lo, limit, view, pos, snap=snap)
            else:
                items, pos = db._read(Tree.chunk_forward, lo, inclusive, hi, limit, view, pos, snap=snap)
            db._trim_after_read()
        # close() of the DB or the snapshot empties the chunks being
        # yielded, so the next item asks for the next chunk: an error.
        key = id(items)
        live[key] = (items, snap)
        try:
            yield items
        finally:
            live.pop(key, None)
        if db._closed:
            db._check_open()
        if snap is not None and snap._closed:
            check_snapshot(db, snap)
        if pos is None:
            return
        if reverse:
            hi = items.last_key()
        else:
            lo = items.last_key()
            inclusive = False
        # The next chunk's size weighs what a chunk costs in itself
        # (the lock, a call into the tree: a few µs) against what it
        # reads in vain if the caller stops early (most short range
        # reads stop within a chunk or two). A chunk read from memory
        # is cheap next to its fixed cost: the next takes twice as many
        # entries. One that read leaves outside the pool paid a page
        # read and check per leaf: the next takes sqrt(4 x the entries
        # returned so far) (at least 16), so what a scan reads in vain
        # stays about the square root of what it returns, and so does
        # its number of chunks. (Measured on 1 KB values, 2-3 to a
        # leaf: doubling read 1.3 times the leaves of YCSB-E's scans.)
        returned += len(items)
        if not pos.images:
            limit = min(2 * limit, SCAN_MAX_CHUNK)
        else:
            limit = min(max(SCAN_FIRST_CHUNK, isqrt(4 * returned)), SCAN_MAX_CHUNK)
