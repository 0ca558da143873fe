"""ReadState: what a reader of the LSM engine sees, replaced as a whole.

The DB (db.py) publishes a new one whenever the memtables or the Version
change (a memtable switch, a flush, a compaction, an ingest, resume(), a
read-only handle's refresh); a reader takes the one of the moment and works
on it without a lock. Nothing here ever changes a published state.
"""

from __future__ import annotations

from .memtable import MemTable
from .version import Version


class ReadState:
    """What a reader sees: the memtable, the immutable memtables (newest
    first) and the Version. Replaced as a whole, never mutated.

    ``floor``: the lowest read sequence the state answers correctly. 0 on a
    writable handle (its compactions keep what its snapshots need); on a
    read-only handle, the sequence it was caught up to (the writer's
    compactions may have dropped versions older reads would need), so a
    read that took the DB's last sequence before a refresh published this
    state reads at the floor instead.

    ``range_dels``: whether reads must honour range tombstones of the
    immutable memtables or the tables (range_del_reads.py).

    ``meta``: on a read-only handle, the metadata entries of the manifest
    the Version came from (a refresh reads newer ones before it publishes
    their state); None on a writable handle, whose VersionSet holds them.
    """

    __slots__ = ("mem", "imms", "memtables", "version", "floor", "meta", "range_dels")

    def __init__(self, mem: MemTable, imms: tuple[MemTable, ...], version: Version, floor: int = 0,
                 meta: dict[bytes, bytes] | None = None) -> None:
        self.mem = mem
        self.imms = imms
        #: The memtable and the immutable ones, newest first: the order a get reads them in.
        self.memtables = (mem, *imms)
        self.version = version
        self.floor = floor
        self.meta = meta
        #: Whether an immutable memtable or a table holds range tombstones
        #: (the memtable, still written, is asked itself: ``mem.range_dels``).
        self.range_dels = version.range_tombstones or any(imm.range_dels is not None for imm in imms)
