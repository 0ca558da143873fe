"""TableReader: point lookups and ordered iteration over one table file.

Opening a table reads its footer, index, filter and properties once and keeps
them decoded; data blocks are read on demand and kept in ``blocks`` for as
long as the DB's BlockCache admits them (cache.py). Once a held block is
used a second time, its keys are in ``key_slots``, a dict from key to where
its newest version sits (block index << 32 | entry index): a warm point
lookup is one dict probe, with no bloom filter, index search or block
search. Every block's checksum is verified
when it is read from the file; a mismatch raises CorruptionError naming the
file and offset, so damaged bytes never reach a caller.

Versions: a table may hold several versions of a user key (newest first).
``get`` and the ``visible*`` iterators return, per user key, the newest
version whose sequence is <= the read sequence.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from itertools import repeat
from typing import Iterator

from ..cache import BlockCache
from ..errors import CorruptionError
from ..fs import FileSystem
from .block import Block, decode_block
from .bloom import BloomFilter, _hash64
from .builder import HANDLE_VALUE
from .format import FOOTER_SIZE, TRAILER_SIZE, Footer, decode_stored_block
from .properties import TableProperties


class IOStats:
    """Counters of table reads, shared by a DB's readers."""

    __slots__ = ("block_reads", "bytes_read", "searches", "get_block_reads")

    def __init__(self) -> None:
        #: Blocks read from files (cache misses included, cache hits not).
        self.block_reads = 0
        self.bytes_read = 0
        #: Point lookups that passed a table's bloom filter and searched its blocks.
        self.searches = 0
        #: Blocks point lookups had to read from files (block cache misses).
        self.get_block_reads = 0


class TableReader:
    __slots__ = ("path", "number", "file", "file_size", "format_version", "filter", "properties", "index_keys",
                 "index_seq_kinds", "index_offsets", "index_sizes", "blocks", "refs", "indexed", "key_slots", "_cache",
                 "_io", "_bloom_bits", "_bloom_m", "_bloom_probes", "__weakref__")

    def __init__(self, fs: FileSystem, path: str, number: int, cache: BlockCache | None,
                 io: IOStats | None = None) -> None:
        self.path = path
        self.number = number
        self._cache = cache
        self._io = io if io is not None else IOStats()
        self.file = fs.open_readable(path)
        try:
            self.file_size = self.file.size
            if self.file_size < FOOTER_SIZE:
                raise CorruptionError(f"file of {self.file_size} bytes is too short to be a table",
                                      path=path, offset=0)
            footer = Footer.decode(self.file.read_at(self.file_size - FOOTER_SIZE, FOOTER_SIZE), path,
                                   self.file_size)
            #: 2 when the table may hold values with a ttl (kind 2).
            self.format_version = footer.version
            self.properties = TableProperties.decode(self._read_raw(*footer.properties), path,
                                                     footer.properties[0])
            self.filter = BloomFilter(self._read_raw(*footer.filter), path, footer.filter[0])
            index = decode_block(self._read_raw(*footer.index), path, footer.index[0])
            self.index_keys = index.keys
            self.index_seq_kinds = list(index.seq_kinds)
            offsets, sizes = [], []
            for i in range(len(index)):
                value = index.value(i)
                if len(value) != HANDLE_VALUE.size:
                    raise CorruptionError("index entry malformed", path=path, offset=footer.index[0])
                off, size = HANDLE_VALUE.unpack(value)
                if off + size + TRAILER_SIZE > footer.filter[0]:
                    raise CorruptionError("index entry points outside the data blocks", path=path,
                                          offset=footer.index[0])
                offsets.append(off)
                sizes.append(size)
            self.index_offsets = offsets
            self.index_sizes = sizes
            #: Decoded blocks the cache holds (None where not cached) and their CLOCK bits.
            self.blocks: list = [None] * len(offsets)
            self.refs = bytearray(len(offsets))
            #: Which cached blocks have their keys in key_slots (a block's
            #: keys go in on its second use, see index_block()).
            self.indexed = bytearray(len(offsets))
            self.key_slots: dict[bytes, int] = {}
            self._bloom_bits = self.filter.bits
            self._bloom_m = self.filter.num_bits
            self._bloom_probes = range(self.filter.k)
        except BaseException:
            self.file.close()
            raise

    def close(self) -> None:
        self.file.close()

    def __del__(self) -> None:
        try:
            self.file.close()
        except Exception:
            pass

    # -- blocks ---------------------------------------------------------

    def _read_raw(self, offset: int, size: int) -> bytes:
        stored = self.file.read_at(offset, size + TRAILER_SIZE)
        io = self._io
        io.block_reads += 1
        io.bytes_read += len(stored)
        if len(stored) != size + TRAILER_SIZE:
            raise CorruptionError("block runs past the end of the file (truncated table)",
                                  path=self.path, offset=offset)
        return decode_stored_block(stored, self.path, offset)

    def block(self, i: int) -> Block:
        """Data block ``i``, from the cache or the file."""
        block = self.blocks[i]
        if block is None:
            return self._load(i)
        self.refs[i] = 1
        return block

    def _load(self, i: int) -> Block:
        offset = self.index_offsets[i]
        block = decode_block(self._read_raw(offset, self.index_sizes[i]), self.path, offset)
        if self._cache is not None:
            self._cache.admit(self, i, block)
        return block

    def raw_blocks(self, first: int, last: int) -> list[bytes]:
        """Data blocks [first, last) verified and uncompressed but not
        decoded, read from the file with one read (compaction decodes many at
        once, table/columns.py)."""
        if first >= last:
            return []
        start = self.index_offsets[first]
        end = self.index_offsets[last - 1] + self.index_sizes[last - 1] + TRAILER_SIZE
        data = self.file.read_at(start, end - start)
        io = self._io
        io.block_reads += last - first
        io.bytes_read += len(data)
        if len(data) != end - start:
            raise CorruptionError("blocks run past the end of the file (truncated table)",
                                  path=self.path, offset=start)
        view = memoryview(data)
        out = []
        for i in range(first, last):
            offset = self.index_offsets[i]
            stored = view[offset - start: offset - start + self.index_sizes[i] + TRAILER_SIZE]
            out.append(decode_stored_block(stored, self.path, offset))
        return out

    def hold(self, i: int, block: Block) -> None:
        """The cache keeps block ``i``: publish it. Its keys join the key
        index only if it is used again (index_block): a block read once,
        as most are when the data outgrows the cache, costs no indexing and
        no un-indexing."""
        self.blocks[i] = block
        self.refs[i] = 0

    def index_block(self, i: int, block: Block) -> None:
        """Put the keys of cached block ``i`` into the key index (called by
        the cache, under its lock, on the block's second use). Block first,
        keys second: a reader that finds a slot finds its block, unless it
        raced an eviction, which get() allows for."""
        if self.indexed[i] or self.blocks[i] is not block:
            return
        keys = block.keys
        start = self._own_keys_start(i, keys)
        base = i << 32
        n = len(keys)
        # Assigning in reverse keeps each key's first (newest) entry.
        self.key_slots.update(zip(reversed(keys[start:]), range(base + n - 1, base + start - 1, -1)))
        self.indexed[i] = 1

    def release(self, i: int) -> None:
        """The cache lets block ``i`` go: drop its keys, then the block."""
        block = self.blocks[i]
        if block is None:
            return
        if self.indexed[i]:
            keys = block.keys
            # The keys index_block() added point into this block: drop them in one C loop.
            deque(map(self.key_slots.pop, keys[self._own_keys_start(i, keys):], repeat(None)), maxlen=0)
            self.indexed[i] = 0
        self.blocks[i] = None

    def _own_keys_start(self, i: int, keys: list[bytes]) -> int:
        """Where the keys whose newest version is in block i begin: a block
        can open with older versions of the previous block's last key."""
        start = 0
        if i and keys and self.index_keys[i - 1] == keys[0]:
            n = len(keys)
            while start < n and keys[start] == keys[0]:
                start += 1
        return start

    @property
    def num_blocks(self) -> int:
        return len(self.index_keys)

    # -- point lookup ---------------------------------------------------

    def get(self, key: bytes, h: int | None, read_seq: int) -> tuple[int, bytes] | None:
        """(kind, value) of the newest version of ``key`` with seq <= read_seq,
        or None if this table has none. ``h`` is the key's bloom_hash, or None
        to compute it here only if the key index misses (a warm hit never
        needs it)."""
        slot = self.key_slots.get(key)
        if slot is not None:
            b = slot >> 32
            block = self.blocks[b]
            if block is not None:
                self.refs[b] = 1
                j = slot & 0xFFFFFFFF
                sk = block.seq_kinds[j]
                if sk >> 8 <= read_seq:
                    ends = block.value_ends
                    return sk & 0xFF, block.data[ends[j]:ends[j + 1]]
            return self._search(key, read_seq)  # an older version, or a racing eviction
        bits = self._bloom_bits
        if bits is not None:
            if h is None:
                h = _hash64(key, 0)[0]  # bloom.bloom_hash, inlined
            # BloomFilter.may_contain, inlined: this is the hottest loop of a miss.
            m = self._bloom_m
            h1 = h & 0xFFFFFFFF
            h2 = h >> 32
            for _ in self._bloom_probes:
                if not bits[h1 % m]:
                    return None
                h1 += h2
        return self._search(key, read_seq)

    def _search(self, key: bytes, read_seq: int) -> tuple[int, bytes] | None:
        """get() through the index: bisect for the block, bisect in it."""
        self._io.searches += 1
        index_keys = self.index_keys
        i = bisect_left(index_keys, key)
        n = len(index_keys)
        while i < n:
            block = self.blocks[i]
            if block is None:
                self._io.get_block_reads += 1
                block = self._load(i)
            else:
                self.refs[i] = 1
                if not self.indexed[i]:
                    self._cache.index(self, i, block)  # its second use: index its keys
            keys = block.keys
            j = bisect_left(keys, key)
            m = len(keys)
            sks = block.seq_kinds
            while j < m:
                if keys[j] != key:
                    return None
                sk = sks[j]
                if sk >> 8 <= read_seq:
                    return sk & 0xFF, block.value(j)
                j += 1
            i += 1  # the key's older versions continue at the start of the next block
        return None

    # -- iteration --------------------------------------------------------

    def _first_block(self, start: bytes | None) -> int:
        return 0 if start is None else bisect_left(self.index_keys, start)

    def entries(self, start: bytes | None = None) -> Iterator[tuple[bytes, int, bytes]]:
        """Every entry (key, seq_kind, value) in internal order from the first
        key >= start: all versions, tombstones included (for compaction and
        checks)."""
        for i in range(self._first_block(start), len(self.index_keys)):
            block = self.block(i)
            keys = block.keys
            j = 0 if start is None else bisect_left(keys, start)
            start = None  # only the first block is entered part-way
            sks = block.seq_kinds
            data = block.data
            ends = block.value_ends
            for j in range(j, len(keys)):
                yield keys[j], sks[j], data[ends[j]:ends[j + 1]]

    def visible(self, read_seq: int, start: bytes | None = None,
                end: bytes | None = None) -> Iterator[tuple[bytes, int, bytes]]:
        """(key, kind, value) of the newest version <= read_seq of every key in
        [start, end), ascending; tombstones included."""
        prev = None
        first = True
        for i in range(self._first_block(start), len(self.index_keys)):
            block = self.block(i)
            keys = block.keys
            sks = block.seq_kinds
            data = block.data
            ends = block.value_ends
            j = bisect_left(keys, start) if first and start is not None else 0
            first = False
            for j in range(j, len(keys)):
                k = keys[j]
                if k == prev:
                    continue
                if end is not None and k >= end:
                    return
                sk = sks[j]
                if sk >> 8 > read_seq:
                    continue
                prev = k
                yield k, sk & 0xFF, data[ends[j]:ends[j + 1]]

    def visible_reverse(self, read_seq: int, start: bytes | None = None,
                        end: bytes | None = None) -> Iterator[tuple[bytes, int, bytes]]:
        """Like ``visible`` but descending."""
        index_keys = self.index_keys
        if end is None:
            i = len(index_keys) - 1
        else:
            i = bisect_left(index_keys, end)
            if i == len(index_keys):
                i -= 1
        current = None
        candidate = None
        first = True
        while i >= 0:
            block = self.block(i)
            keys = block.keys
            sks = block.seq_kinds
            j = (bisect_left(keys, end) if first and end is not None else len(keys)) - 1
            first = False
            while j >= 0:
                k = keys[j]
                if k != current:
                    if candidate is not None:
                        yield candidate
                    if start is not None and k < start:
                        return
                    current = k
                    candidate = None
                sk = sks[j]
                if sk >> 8 <= read_seq:
                    candidate = (k, sk & 0xFF, block.value(j))
                j -= 1
            i -= 1
        if candidate is not None:
            yield candidate
