"""MemTable: the in-memory write buffer in front of the tables.

Holds every version of every key written since the last flush, each with its
sequence number and kind (a value, a tombstone, a value with a ttl, a merge
operand), so that snapshots and iterators opened earlier keep seeing the
versions they started on.

Layout, chosen for Python speed:
* ``_latest``: a dict from user key to its newest version. A version is a
  tuple ``(seq, kind, value, older)`` whose ``older`` links to the previous
  version of the same key (or None). A point lookup is one dict probe and
  never walks the ordered index.
* ``_index``: an UnrolledSkipList of the distinct user keys, for ordered
  iteration (scans and flushing). It is touched only when a key is new to the
  memtable; overwriting a key only replaces its dict entry.

Range tombstones (``delete_range``, kind 5) are kept beside the skiplist,
as a list and its fragments (range_tombstones.py): ``range_dels`` is None
until the first one, and is replaced (never changed) by each new one, so a
reader takes the one of the moment without a lock and filters by sequence.

Order of iteration is (user key ascending, sequence descending): exactly the
order a table is written in.

Concurrency: one writer at a time (the DB's write lock); any number of
readers without locks. A reader filters by its read sequence, so a batch that
is half applied is invisible to it.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Iterator

try:
    import cython
except ImportError:  # pragma: no cover - the pure build without Cython installed
    from lsmkv.base.compile_hints import cython

from lsmkv.base.key_search import keys_bisect_right, keys_insort

from .retention import retained
from .skiplist import NODE_LOAD, UnrolledSkipList
from .range_tombstones import EMPTY as EMPTY_FRAGMENTS, FragmentedTombstones
from .write_batch import META, RANGE_DELETE

_SPLIT_AT = 2 * NODE_LOAD

#: Bytes charged per version on top of key and value: what the version costs
#: in a table (sequence, kind, lengths), the same accounting RocksDB's
#: write_buffer_size uses, so that a memtable of a given size flushes to a
#: table of about that much data. (The Python objects behind a version take
#: roughly 150 bytes more; see Options.write_buffer_size.)
ENTRY_OVERHEAD = 16

#: Range tombstones a memtable takes before the next write switches it for a
#: new one (RocksDB's memtable_max_range_deletions): each one copies the
#: fragment list (with_tombstone), so the count is kept bounded.
MAX_RANGE_DELETES = 4096


class MemTable:
    __slots__ = ("_latest", "_index", "_nodes", "_maxes", "size", "log_number", "meta", "range_dels",
                 "_range_list", "__weakref__")

    def __init__(self, log_number: int = 0) -> None:
        self._latest: dict[bytes, tuple] = {}
        self._index = UnrolledSkipList()
        # The index's own lists (never rebound), bound here for the inlined insert.
        self._nodes = self._index._nodes
        self._maxes = self._index._maxes
        #: Bytes charged: key + value + ENTRY_OVERHEAD per version.
        self.size = 0
        #: Number of the log file that holds this memtable's writes.
        self.log_number = log_number
        #: Metadata entries written with this memtable's batches (name -> the
        #: latest value), carried into the manifest when it is flushed.
        self.meta: dict[bytes, bytes] = {}
        #: The range tombstones written here, fragmented; None while there are none.
        self.range_dels: FragmentedTombstones | None = None
        self._range_list: list[tuple[bytes, bytes, int]] = []

    def __len__(self) -> int:
        """Number of distinct user keys plus range tombstones: 0 when a
        flush would have nothing to write."""
        return len(self._latest) + len(self._range_list)

    @property
    def range_deletes_full(self) -> bool:
        """Whether the memtable holds MAX_RANGE_DELETES range tombstones."""
        return len(self._range_list) >= MAX_RANGE_DELETES

    def add_range_delete(self, seq: int, start: bytes, end: bytes) -> None:
        """Take the range tombstone [start, end) at ``seq``: a new fragment
        list (FragmentedTombstones.with_tombstone: the fragments it overlaps
        cut again, the rest copied), nothing per key it covers."""
        self._range_list.append((start, end, seq))
        self.range_dels = (self.range_dels or EMPTY_FRAGMENTS).with_tombstone(start, end, seq)
        self.size += len(start) + len(end) + ENTRY_OVERHEAD

    def add(self, seq: int, kind: int, key: bytes, value: bytes) -> None:
        latest = self._latest
        older = latest.get(key)
        if older is None:
            # New key: insert into the ordered index. This is
            # UnrolledSkipList.insert inlined (a method call per put is
            # measurable at these rates); keep the two in step.
            maxes = self._maxes
            if maxes:
                i = keys_bisect_right(maxes, key)
                if i == len(maxes):
                    i -= 1
                    node = self._nodes[i]
                    node.append(key)
                    maxes[i] = key
                else:
                    node = self._nodes[i]
                    keys_insort(node, key)
                split_at = _SPLIT_AT  # (C integers in the compiled build: typed locals, see memtable.pxd)
                if len(node) > split_at:
                    self._index._split(i)
            else:
                self._index.insert(key)
        latest[key] = (seq, kind, value, older)
        overhead = ENTRY_OVERHEAD
        self.size += len(key) + len(value) + overhead

    def add_batch(self, seq: int, ops: list[tuple[int, bytes, bytes]]) -> None:
        """Apply a batch's operations with consecutive sequence numbers
        (a metadata entry, kind 3, takes its number too but goes to ``meta``)."""
        add = self.add
        for kind, key, value in ops:
            if kind == META:
                self.meta[key] = value
                self.size += len(key) + len(value) + ENTRY_OVERHEAD
            elif kind == RANGE_DELETE:
                self.add_range_delete(seq, key, value)
            else:
                add(seq, kind, key, value)
            seq += 1

    def get(self, key: bytes, read_seq: int) -> tuple | None:
        """The newest version of ``key`` with seq <= read_seq, as
        ``(seq, kind, value, older)``, or None if this memtable has none."""
        version = self._latest.get(key)
        while version is not None and version[0] > read_seq:
            version = version[3]
        return version

    def newest(self, key: bytes) -> tuple | None:
        return self._latest.get(key)

    def has_key_in(self, smallest: bytes, largest: bytes) -> bool:
        """Whether some key k with smallest <= k <= largest has a version
        here, or a range tombstone here covers some of them."""
        range_dels = self.range_dels
        if range_dels is not None and any(start <= largest and end > smallest
                                          for start, end in zip(range_dels.starts, range_dels.ends)):
            return True
        first = next(self._index.iter_from(smallest), None)
        return first is not None and first <= largest

    def sorted_runs(self, snapshots: list[int]) -> Iterator[tuple[list[bytes], list[int], list[bytes]]]:
        """The memtable as runs of (keys, seq_kinds, values) in internal order,
        one skiplist node at a time, keeping only the versions some reader can
        still see (``snapshots``: live snapshot sequences, ascending). For
        flushing: the memtable must be immutable by then."""
        latest = self._latest
        for node in list(self._index._nodes):
            if cython.compiled:
                run = one_version_run(latest, node)
                if run is not None:
                    yield run
                    continue
                newest = [latest[k] for k in node]
            else:
                newest = [latest[k] for k in node]
                if not any(map(_older, newest)):
                    # One version per key: the common case, done with C-level maps.
                    yield (list(node), [v[0] << 8 | v[1] for v in newest], list(map(_value, newest)))
                    continue
            keys: list[bytes] = []
            seq_kinds: list[int] = []
            values: list[bytes] = []
            for key, version in zip(node, newest):
                chain = []
                while version is not None:
                    chain.append((version[0], version[1], version[2]))
                    version = version[3]
                if len(chain) > 1:
                    chain = retained(chain, snapshots)
                for seq, kind, value in chain:
                    keys.append(key)
                    seq_kinds.append(seq << 8 | kind)
                    values.append(value)
            yield keys, seq_kinds, values


def one_version_run(latest: dict, node: list[bytes]) -> tuple[list[bytes], list[int], list[bytes]] | None:
    """The run (keys, seq_kinds, values) of skiplist node ``node`` if each
    of its keys has one version in ``latest`` (a memtable's), else None:
    sorted_runs' common case, the compiled build's form (one C loop; the
    pure build's maps over the node are faster as Python)."""
    seq_kinds = []
    values = []
    for i in range(len(node)):
        version = latest[node[i]]
        if version[3] is not None:
            return None
        seq = version[0]
        kind = version[1]
        seq_kinds.append(seq << 8 | kind)
        values.append(version[2])
    return list(node), seq_kinds, values


_older = itemgetter(3)
_value = itemgetter(2)


__all__ = ["MemTable", "ENTRY_OVERHEAD", "NODE_LOAD"]
