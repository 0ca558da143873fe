"""Ingest: table files written by ``lsmkv.TableWriter`` taken into the tree
as a bulk load (``db.ingest``).

This module owns the ingest's order of steps: the files are read and
checked (btree/bulk.py's ``ingest_tables``: no two overlap) before the
store changes; keys above this page size's limit are refused; a
checkpoint; the tree's live entries and the files' entries merged in key
order (a file's value replaces the tree's, its tombstone deletes the key)
and built bottom up into a new page file that replaces the old one as a
vacuum's does (btree/vacuum.py): all of the ingest or none of it survives
a crash. While a transaction is open, each file's key range
[smallest, largest] is recorded in the DB's ConflictTracker as written
(the rewrite ends the open transactions' snapshots anyway). With
``move=True`` the source files are removed once the ingest is durable. It
never changes the store on bad input.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from lsmkv.base.errors import SizeLimitError
from lsmkv.base.key_ranges import successor

from .bulk import ingest_tables, merge_ingested
from .vacuum import rewrite_page_file

if TYPE_CHECKING:
    from .db import DB


def ingest_files(db: DB, paths, *, move: bool, fill_factor: float) -> None:
    """``db.ingest(paths, move=move, fill_factor=fill_factor)`` (see DB.ingest)."""
    db._check_open()
    if type(move) is not bool:
        raise TypeError(f"move must be True or False, not {move!r}")
    if not isinstance(fill_factor, (int, float)) or not 0.5 <= fill_factor <= 1.0:
        raise ValueError(f"fill_factor must be a number from 0.5 to 1.0, not {fill_factor!r}")
    fs = db._fs
    tables, read_table = ingest_tables(fs, paths)
    if not tables:
        return
    with db._lock:
        db._check_writable()
        tree = db._tree
        too_long = [t.path for t in tables if len(t.smallest) > tree.max_key or len(t.largest) > tree.max_key]
        if too_long:
            raise SizeLimitError(f"{too_long[0]} holds keys longer than this btree's key limit "
                                 f"({tree.max_key} bytes at page size {db._pager.page_size})")
        db._checkpoint()
        merged = merge_ingested(db._tree.live_entries(), tables, db._tree.max_key, read_table)
        rewrite_page_file(db, merged, "an ingest", fill_factor)
        db._ingests += 1
        conflicts = db._conflicts
        if conflicts.active:
            conflicts.record((), [(t.smallest, successor(t.largest)) for t in tables])
    if move:
        for t in tables:
            fs.remove(t.path)
        for directory in sorted({os.path.dirname(t.path) for t in tables}):
            fs.sync_dir(directory)
