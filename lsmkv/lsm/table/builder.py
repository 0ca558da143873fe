"""TableBuilder: writes one table file from entries given in internal order.

Internal order is user key ascending, then sequence descending. The builder
cuts a data block when its encoded size reaches ``block_size``, then appends
the filter, properties and index blocks and the footer (format.py). It never
syncs or renames: the caller writes to a temporary name, calls ``finish``,
fsyncs, renames, and only then records the table in the manifest.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from itertools import accumulate, repeat
from operator import and_, rshift

import numpy as np
import zstandard

try:
    import cython
except ImportError:
    from lsmkv.base.compile_hints import cython

from lsmkv.base.fs import WritableFile
from lsmkv.base.key_search import new_key_flags

from .block import BlockBuilder, encode_block
from .block_compressor import BlockCompressor
from .columns import Columns
from .bloom import bloom_hash, bloom_hash_list, bloom_hashes, build_filter
from .format import FORMAT_VERSION, FORMAT_VERSION_WITH_TTL, FORMAT_VERSION_WITHOUT_TTL, Footer, compress_block
from .properties import TableProperties
from .range_del_block import encode_range_dels
from ..range_tombstones import FragmentedTombstones
from ..ttl_value import DEADLINE_SIZE, deadline_of

HANDLE_VALUE = struct.Struct("<QQ")
_WRITE_BUFFER = 64 * 1024
#: Data blocks add_sorted fills before it stores them together (BlockCompressor.store_many).
BATCH_BLOCKS = 64


def run_counts(seq_kinds: list[int]) -> tuple[int, int, int, int, int]:
    """What a table's properties count of a sorted run, from its entries'
    seq_kinds (at least one): (tombstones, merge operands, values with a
    ttl, smallest sequence, largest sequence). Compiled: one C loop; as
    Python: lists of the kinds and sequences (maps, C loops there)."""
    if cython.compiled:
        tombstones = merges = ttl = 0
        smallest = largest = seq_kinds[0] >> 8
        for i in range(len(seq_kinds)):
            seq_kind = seq_kinds[i]
            kind = seq_kind & 0xFF
            seq = seq_kind >> 8
            if kind == 0:
                tombstones += 1
            elif kind == 4:
                merges += 1
            elif kind == 2:
                ttl += 1
            if seq < smallest:
                smallest = seq
            elif seq > largest:
                largest = seq
        return tombstones, merges, ttl, smallest, largest
    kinds = list(map(and_, seq_kinds, repeat(0xFF)))
    seqs = list(map(rshift, seq_kinds, repeat(8)))
    return kinds.count(0), kinds.count(4), kinds.count(2), min(seqs), max(seqs)


class TableBuilder:
    def __init__(self, file: WritableFile, *, block_size: int = 4096, compression: str | None = "zstd",
                 compression_level: int = 3, bloom_bits_per_key: int = 10) -> None:
        self.file = file
        self.block_size = block_size
        self.bloom_bits_per_key = bloom_bits_per_key
        self._compressor = zstandard.ZstdCompressor(level=compression_level) if compression == "zstd" else None
        #: The data blocks' compression, backing off while blocks do not compress.
        self._data_blocks = BlockCompressor(self._compressor)
        self._block = BlockBuilder()
        self._index_keys: list[bytes] = []
        self._index_seq_kinds: list[int] = []
        self._index_values: list[bytes] = []
        self._hashes: list[int] = []
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._offset = 0
        self._last_key: bytes | None = None
        self._last_seq = 0
        #: Whether an entry is a merge operand (kind 4): the table is then
        #: written as format 3, as one with a ttl entry is.
        self._has_merges = False
        #: Entries given as columns that do not fill a block yet (add_columns).
        self._pending_cols: Columns | None = None
        #: Raw block size of the pending columns (4 bytes of count included).
        self._pending_raw = 0
        #: Bloom hashes computed in bulk (add_columns), beside _hashes.
        self._hash_arrays: list[np.ndarray] = []
        self.props = TableProperties(compression=compression.encode() if compression else b"none")
        self.props.smallest_seq = (1 << 56) - 1
        #: The range tombstones the table carries (set_range_tombstones).
        self.range_dels: FragmentedTombstones | None = None

    @property
    def file_size(self) -> int:
        """Bytes written so far plus the data block under construction."""
        return self._offset + self._pending_bytes + self._block.size + self._pending_raw

    @property
    def entries(self) -> int:
        return self.props.entries

    @property
    def last_key(self) -> bytes | None:
        """The last key added so far (None before any)."""
        return self._last_key

    @property
    def empty(self) -> bool:
        """Whether the table would hold nothing: no entry, no range tombstone."""
        return self.props.entries == 0 and not self.range_dels

    def set_range_tombstones(self, fragments: FragmentedTombstones) -> None:
        """Give the table ``fragments`` to keep in its range-tombstone block
        (written by finish; the table's key range is widened to cover them)."""
        self.range_dels = fragments if fragments else None

    def add(self, key: bytes, seq: int, kind: int, value: bytes) -> None:
        last = self._last_key
        props = self.props
        if last is None or key != last:
            if last is not None and key < last:
                raise ValueError(f"table entries out of order: {key!r} after {last!r}")
            self._hashes.append(bloom_hash(key))
            if last is None:
                props.smallest_key = key
            self._last_key = key
        elif seq >= self._last_seq:
            raise ValueError(f"table entries out of order: {key!r} seq {seq} after seq {self._last_seq}")
        self._last_seq = seq
        block = self._block
        block.add(key, seq << 8 | kind, value)
        props.entries += 1
        if kind == 0:
            props.tombstones += 1
        elif kind == 2:
            props.ttl_entries += 1
            self._note_deadline(deadline_of(value))
        elif kind == 4:
            self._has_merges = True
        props.raw_key_bytes += len(key)
        props.raw_value_bytes += len(value)
        if seq < props.smallest_seq:
            props.smallest_seq = seq
        if seq > props.largest_seq:
            props.largest_seq = seq
        if block.size >= self.block_size:
            self._finish_data_block()

    @cython.locals(n=cython.Py_ssize_t, i=cython.Py_ssize_t, start=cython.Py_ssize_t, size=cython.Py_ssize_t,
                   limit=cython.Py_ssize_t, entry=cython.Py_ssize_t, raw_keys=cython.Py_ssize_t,
                   raw_values=cython.Py_ssize_t)
    def add_sorted(self, keys: list[bytes], seq_kinds: list[int], values: list[bytes], unique: bool = False) -> None:
        """Append many entries at once, already in internal order.

        The same result as calling add() for each, computed with C-level
        list operations and one loop over the entries' sizes (compaction and
        flush write millions of entries this way). User-key order is
        checked, and with ``unique`` that every key is new (above the last
        added, none repeated: a TableWriter's keys); sequence order within
        a key is trusted. ValueError, with nothing added, otherwise.
        """
        n = len(keys)
        if not n:
            return
        last = self._last_key
        new_key = new_key_flags(keys, last if last is not None else b"")
        if new_key is None:
            raise ValueError("table entries out of order in a sorted run")
        if last is None:
            new_key[0] = True
        if unique and not all(new_key):
            raise ValueError("keys must be strictly ascending (got keys out of order or repeated)")
        props = self.props
        if last is None:
            props.smallest_key = keys[0]
        self._hashes.extend(bloom_hash_list(keys, new_key))
        tombstones, merges, ttl, smallest_seq, largest_seq = run_counts(seq_kinds)
        props.entries += n
        props.tombstones += tombstones
        if merges:
            self._has_merges = True
        if ttl:
            props.ttl_entries += ttl
            self._note_deadline(min(deadline_of(v) for sk, v in zip(seq_kinds, values) if sk & 0xFF == 2))
        props.smallest_seq = min(props.smallest_seq, smallest_seq)
        props.largest_seq = max(props.largest_seq, largest_seq)
        self._last_key = keys[-1]
        self._last_seq = seq_kinds[-1] >> 8
        # Cut blocks where the encoded size (key, value, and 16 bytes of
        # offsets and seq_kind per entry) reaches block_size, as add() does.
        block = self._block
        size = block.size
        limit = self.block_size
        start = 0
        raw_keys = raw_values = 0
        raws, ends = [], []  # the blocks filled and their last entries, stored BATCH_BLOCKS at a time
        for i in range(n):
            entry = len(keys[i])
            raw_keys += entry
            size += entry + 16
            entry = len(values[i])
            raw_values += entry
            size += entry
            if size >= limit:
                block.keys.extend(keys[start:i + 1])
                block.values.extend(values[start:i + 1])
                block.seq_kinds.extend(seq_kinds[start:i + 1])
                block.size = size
                raws.append(block.finish())
                ends.append(i)
                block.reset()
                if len(raws) >= BATCH_BLOCKS:
                    self._store_data_blocks(raws, [keys[e] for e in ends], [seq_kinds[e] for e in ends])
                    raws, ends = [], []
                size = block.size
                start = i + 1
        if raws:
            self._store_data_blocks(raws, [keys[e] for e in ends], [seq_kinds[e] for e in ends])
        if start < n:
            block.keys.extend(keys[start:])
            block.values.extend(values[start:])
            block.seq_kinds.extend(seq_kinds[start:])
            block.size = size
        props.raw_key_bytes += raw_keys
        props.raw_value_bytes += raw_values

    def add_columns(self, cols: "Columns") -> None:
        """Append a run of entries held as columns (table/columns.py), already
        in internal order: the same table as adding them one by one, built
        with vectorized steps. Used by compaction; not to be mixed with
        add()/add_sorted() in one table."""
        if not len(cols):
            return
        if len(self._block):
            raise ValueError("add_columns() cannot follow add() or add_sorted() in one table")
        if not cols.is_sorted() or (self._last_key is not None and cols.key(0) < self._last_key):
            raise ValueError("table entries out of order in a column run")
        self._count_columns(cols)
        sizes = (cols.klen + cols.vlen + 16).tolist()
        start = 0
        pending = self._pending_cols
        if pending is not None:
            # Complete the pending block with the head of this run; copy only
            # those bytes, not the run's whole buffer.
            room = self.block_size - self._pending_raw
            used = 0
            while start < len(sizes) and used < room:
                used += sizes[start]
                start += 1
            head = Columns.concat([pending, cols.slice(0, start).compacted()])
            self._pending_cols = None
            self._pending_raw = 0
            if used < room:
                self._pending_cols = head
                self._pending_raw = self.block_size - room + used
                return
            self._write_blocks(head, [0, len(head)])
        cum = list(accumulate(sizes, initial=0))
        room = self.block_size - 4
        cuts = [start]
        n = len(sizes)
        while start < n:
            end = bisect_left(cum, cum[start] + room, lo=start + 1)
            if end > n:
                break
            cuts.append(end)
            start = end
        if len(cuts) > 1:
            self._write_blocks(cols, cuts)
        if start < n:
            # The rest does not fill a block yet: keep it (with its own small buffer).
            self._pending_cols = cols.slice(start, n).compacted()
            self._pending_raw = cum[n] - cum[start] + 4

    def cut_block(self) -> None:
        """End the data block under construction here, whichever way its
        entries came (add/add_sorted, or add_columns), so that the next
        entries may come the other way."""
        pending = self._pending_cols
        if pending is not None:
            self._pending_cols = None
            self._pending_raw = 0
            self._write_blocks(pending, [0, len(pending)])
        else:
            self._finish_data_block()

    def _write_blocks(self, cols: "Columns", cuts: list[int]) -> None:
        """Encode, compress and queue the blocks [cuts[i], cuts[i+1]) of ``cols``."""
        if cuts[0]:
            cols = cols.slice(cuts[0], len(cols))
            cuts = [c - cuts[0] for c in cuts]
        last = np.array(cuts[1:], dtype=np.int64) - 1
        self._store_data_blocks(cols.encode_blocks(cuts), cols.keys_at(last), cols.seq_kinds[last].tolist())

    def _count_columns(self, cols: "Columns") -> None:
        """Properties and bloom hashes of entries added as columns."""
        props = self.props
        n = len(cols)
        last = self._last_key
        new_key = ~cols.same_as_previous()
        if last is None:
            props.smallest_key = cols.key(0)
        elif cols.key(0) == last:
            new_key[0] = False
        self._hash_arrays.append(bloom_hashes(cols.data, cols.koff[new_key], cols.klen[new_key]))
        kinds = cols.seq_kinds & np.uint64(0xFF)
        seqs = cols.seq_kinds >> np.uint64(8)
        props.entries += n
        props.tombstones += int(np.count_nonzero(kinds == 0))
        if not self._has_merges and np.any(kinds == 4):
            self._has_merges = True
        ttl = np.flatnonzero(kinds == 2)
        if len(ttl):
            props.ttl_entries += len(ttl)
            buf = np.frombuffer(cols.data, dtype=np.uint8)
            deadlines = buf[cols.voff[ttl][:, None] + np.arange(DEADLINE_SIZE)].copy().view("<u8")
            self._note_deadline(int(deadlines.min()))
        props.raw_key_bytes += int(cols.klen.sum())
        props.raw_value_bytes += int(cols.vlen.sum())
        props.smallest_seq = min(props.smallest_seq, int(seqs.min()))
        props.largest_seq = max(props.largest_seq, int(seqs.max()))
        self._last_key = cols.key(n - 1)
        self._last_seq = int(seqs[-1])

    def _note_deadline(self, deadline: int) -> None:
        props = self.props
        if not props.earliest_deadline or deadline < props.earliest_deadline:
            props.earliest_deadline = deadline

    def _finish_data_block(self) -> None:
        block = self._block
        if not len(block):
            return
        self._store_data_blocks([block.finish()], [block.keys[-1]], [block.seq_kinds[-1]])
        block.reset()

    def _store_data_blocks(self, raws: list[bytes], last_keys: list[bytes], last_seq_kinds: list[int]) -> None:
        """Store the data blocks ``raws`` (BlockCompressor.store_many), queue
        them for the file and index them by their last keys and seq_kinds."""
        self._index_keys.extend(last_keys)
        self._index_seq_kinds.extend(last_seq_kinds)
        append = self._append
        pack = HANDLE_VALUE.pack
        stored_bytes = 0
        handles = []
        for stored in self._data_blocks.store_many(raws):
            stored_bytes += len(stored)
            handles.append(pack(*append(stored)))
        self._index_values.extend(handles)
        self.props.data_blocks += len(raws)
        self.props.data_bytes += stored_bytes

    def _append(self, stored: bytes) -> tuple[int, int]:
        """Queue a stored block (payload + trailer); returns its handle."""
        handle = (self._offset + self._pending_bytes, len(stored) - 5)
        self._pending.append(stored)
        self._pending_bytes += len(stored)
        if self._pending_bytes >= _WRITE_BUFFER:
            self._flush_pending()
        return handle

    def _flush_pending(self) -> None:
        if self._pending:
            self.file.append(b"".join(self._pending))
            self._offset += self._pending_bytes
            self._pending = []
            self._pending_bytes = 0

    def finish(self) -> TableProperties:
        """Write the remaining blocks and the footer; returns the properties."""
        if self._pending_cols is not None:
            cols, self._pending_cols = self._pending_cols, None
            self._write_blocks(cols, [0, len(cols)])
            self._pending_raw = 0
        self._finish_data_block()
        props = self.props
        range_dels = self.range_dels
        if range_dels is not None:
            # The key range covers the tombstones: the end is exclusive,
            # so a table's largest key may be one no tombstone covers.
            tomb_seqs = [seq for seqs in range_dels.seqs for seq in seqs]
            if props.entries == 0 or range_dels.smallest < props.smallest_key:
                props.smallest_key = range_dels.smallest
            end = range_dels.largest_end
            # The largest key covered is just below the (exclusive) end:
            # exactly ``x`` when the end is ``x + b"\x00"``, else the end
            # itself stands for it (a bound one key too wide).
            covered = end[:-1] if end.endswith(b"\x00") else end
            if self._last_key is None or covered > self._last_key:
                self._last_key = covered
            props.smallest_seq = min(props.smallest_seq, min(tomb_seqs))
            props.largest_seq = max(props.largest_seq, max(tomb_seqs))
            props.range_tombstones = len(tomb_seqs)
            raw = encode_range_dels(range_dels)
            props.range_del_offset, props.range_del_size = self._append(compress_block(raw, self._compressor))
        elif props.entries == 0:
            props.smallest_seq = 0
        props.largest_key = self._last_key or b""
        hashes = self._hashes
        if self._hash_arrays:
            hashes = np.concatenate(self._hash_arrays + [np.array(self._hashes, dtype=np.uint64)])
        props.distinct_keys = len(hashes)
        filter_payload = build_filter(hashes, self.bloom_bits_per_key)
        filter_handle = self._append(compress_block(filter_payload, None))
        props.filter_bytes = len(filter_payload)
        index_raw = encode_block(self._index_keys, self._index_seq_kinds, self._index_values)
        props.index_bytes = len(index_raw)
        props_handle = self._append(compress_block(props.encode(), None))
        index_handle = self._append(compress_block(index_raw, self._compressor))
        if range_dels is not None:
            version = FORMAT_VERSION
        else:
            version = FORMAT_VERSION_WITH_TTL if props.ttl_entries or self._has_merges else FORMAT_VERSION_WITHOUT_TTL
        footer = Footer(index_handle, filter_handle, props_handle, version).encode()
        self._pending.append(footer)
        self._pending_bytes += len(footer)
        self._flush_pending()
        return props
