"""approximate_size: the bytes of table files a key range takes, estimated
from the tables' key ranges and index blocks (RocksDB's
GetApproximateSizes), without reading a data block.

A table inside the range counts whole; one the range cuts counts from
the block holding the range's start to the block holding its end; the
memtables (not on disk yet) are not counted. Estimates of adjacent ranges
add up exactly. This module reads a Version and the tables' indexes and
never changes anything.
"""

from __future__ import annotations

from typing import Callable

from .table.reader import TableReader
from .version import NUM_LEVELS, FileMeta, Version


def approximate_size(version: Version, open_table: Callable[[FileMeta], TableReader], lo: bytes | None,
                     hi: bytes | None) -> int:
    """Bytes of ``version``'s table files that keys in [lo, hi) take (None: an open end)."""
    if lo is not None and hi is not None and lo >= hi:
        return 0
    total = 0
    for level in range(NUM_LEVELS):
        for meta in version.overlapping(level, lo, hi):
            a = 0 if lo is None or lo <= meta.smallest else open_table(meta).approximate_offset(lo)
            b = meta.size if hi is None or hi > meta.largest else open_table(meta).approximate_offset(hi)
            total += max(0, b - a)
    return total
