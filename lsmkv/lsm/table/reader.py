"""TableReader: point lookups and ordered iteration over one table file.

Opening a table reads its footer, index, filter and properties once and
keeps them resident (decoded) for as long as the table is open; data blocks
are read on demand.

Point lookups read a data block with one ``pread`` of exactly its bytes,
verify its checksum, and search it where it lies: a binary search over the
block's key offsets with slice compares (block.search_block), no decoding,
the value returned as a slice. The block's verified bytes go into the DB's
BlockCache (cache.py), raw: a later lookup in it costs no read and no
checksum. A cached block that keeps being used (``PROMOTE_AFTER`` lookups)
is worth decoding: it is replaced in the cache by its decoded form and its
keys join ``key_slots``, a dict from key to where its newest version sits
(block index << 32 | entry index), so that a hot lookup is one dict probe,
with no bloom filter, index or block search. Promotions are spaced by
``PROMOTION_SPACING`` searches, so that blocks coming due together are
decoded a few at a time between gets. Tables written before format 2
(whose blocks store lengths, not offsets) are decoded on every load instead.

Cursors and scans (lsmkv/lsm/cursor.py) read a block's owned entries at a
time (``owned_entries``), decoded: a cached block is used, an uncached one
is read and not admitted, so a scan does not flood the cache (RocksDB's
fill_cache=False for iterators). ``entries()`` (checks, repairs) reads
uncached blocks 256 KiB at a time (read-ahead).

Every block's checksum is verified when it is read from the file; a
mismatch raises CorruptionError naming the file and offset, so damaged
bytes never reach a caller. The reader reads through the descriptor it
opened, so it keeps reading a file that was unlinked meanwhile (the DB
deletes a table only once no Version uses it, see version.py).

Versions: a table may hold several versions of a user key (newest first).
``get`` and the ``visible*`` iterators return, per user key, the newest
version whose sequence is <= the read sequence.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
import sys
from collections import deque
from itertools import repeat
from typing import TYPE_CHECKING, Iterator

try:
    import cython
except ImportError:
    from lsmkv.base.compile_hints import cython

from lsmkv.base.errors import CorruptionError
from lsmkv.base.fs import FileSystem
from lsmkv.base.key_search import keys_bisect_left

from .block import (_LITTLE, CODEC_LENGTHS, CODEC_OFFSETS, CONTINUE, RAW_BLOCK_OVERHEAD, Block, check_block,
                    decode_block, entries_after, fixed_widths, search_block, with_sequence)
from .bloom import BloomFilter, _hash64, bloom_hash
from .builder import HANDLE_VALUE
from .format import FOOTER_SIZE, TRAILER_SIZE, Footer, decode_stored_block, decode_stored_blocks
from .properties import TableProperties
from .range_del_block import decode_range_dels

if TYPE_CHECKING:  # (the cache reaches into readers: it imports this module)
    from ..cache import BlockCache

#: Lookups in a raw cached block after which it is decoded and its keys
#: indexed: decoding costs about as much as a dozen raw searches, so only
#: blocks that keep being used pay it back.
PROMOTE_AFTER = 8
#: Table searches (lookups past the key index) between two promotions, at
#: least: a promotion costs about five gets' work in a running database
#: (making the key objects, growing the key index), so when many blocks
#: come due at once -- uniform gets over a fresh cache -- their decoding is
#: spread over the gets instead of doubling their cost while it lasts.
PROMOTION_SPACING = 16
#: Bytes a scan reads ahead in one read when it needs an uncached block.
SCAN_READAHEAD = 256 * 1024
#: ``in_place_from`` of a table cursors never read in place: beyond any
#: sequence number (they are below 2**56).
_NEVER_IN_PLACE = 1 << 62
#: A block whose fixed widths are not known yet (block_widths).
_UNKNOWN = object()
#: A bloom hash's low word (a C integer, compiled: reader.pxd; a literal
#: above 2**31 would be a Python int there).
_LOW32 = 0xFFFFFFFF


class IOStats:
    """Counters of table reads, shared by a DB's readers."""

    __slots__ = ("block_reads", "bytes_read", "searches", "get_block_reads", "next_promotion")

    def __init__(self) -> None:
        #: Blocks read from files (cache misses included, cache hits not).
        self.block_reads = 0
        self.bytes_read = 0
        #: Point lookups that passed a table's bloom filter and searched its blocks.
        self.searches = 0
        #: Blocks point lookups had to read from files (block cache misses).
        self.get_block_reads = 0
        #: ``searches`` at which a reader may promote a block next (PROMOTION_SPACING).
        self.next_promotion = 0


class TableReader:
    __slots__ = ("path", "number", "file", "file_size", "format_version", "codec", "filter", "properties",
                 "index_keys", "index_seq_kinds", "index_offsets", "index_sizes", "blocks", "refs", "uses", "charges",
                 "block_widths", "indexed", "key_slots", "global_seq", "admit_on_read", "range_dels", "_cache", "_io",
                 "_bloom_bits", "_bloom_m", "_bloom_probes", "_bloom_view", "_bloom_k",
                 "in_place_from", "__weakref__")

    def __init__(self, fs: FileSystem, path: str, number: int, cache: BlockCache | None,
                 io: IOStats | None = None, global_seq: int = 0) -> None:
        self.path = path
        #: For an ingested table (version.py): the sequence number every entry
        #: reads as; its blocks store 0 and are rewritten in memory as read.
        self.global_seq = global_seq
        #: Whether block(i) keeps what it reads in the cache (cursors' seeks).
        self.admit_on_read = True
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
            #: 3 when the table may hold values with a ttl (kind 2).
            self.format_version = footer.version
            #: The block codec (block.py): format 1's lengths, or the end
            #: offsets of formats 2 and 3.
            self.codec = CODEC_LENGTHS if footer.version == 1 else CODEC_OFFSETS
            self.properties = TableProperties.decode(self._read_raw(*footer.properties), path,
                                                     footer.properties[0], self.codec)
            if global_seq:
                if self.codec == CODEC_LENGTHS:
                    raise CorruptionError("an ingested table must be of format 2 or later", path=path, offset=0)
                self.properties.smallest_seq = self.properties.largest_seq = global_seq
            self.filter = BloomFilter(self._read_raw(*footer.filter), path, footer.filter[0])
            index = decode_block(self._read_raw(*footer.index), path, footer.index[0], self.codec)
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
            n = len(offsets)
            #: What the cache holds of each block: None, its verified raw
            #: bytes, or its decoded Block; and the cache's CLOCK bits,
            #: lookups since admission, and charges (cache.py).
            self.blocks: list = [None] * n
            self.refs = bytearray(n)
            self.uses = bytearray(n)
            self.charges = [0] * n
            #: Each data block's block.fixed_widths (its keys' and values'
            #: widths if each is one, else None), found the first time a
            #: cursor reads the block in place (_UNKNOWN until then); None
            #: until a cursor reads one.
            self.block_widths: list | None = None
            props = self.properties
            #: The lowest read sequence at which cursors may read this
            #: table's blocks in place (:meth:`reads_in_place`): its largest
            #: sequence if it is of format 2 or later with one version per
            #: key, else beyond any sequence.
            self.in_place_from = (props.largest_seq if _LITTLE and self.codec == CODEC_OFFSETS
                                  and props.distinct_keys == props.entries else _NEVER_IN_PLACE)
            #: Which cached blocks have their keys in key_slots.
            self.indexed = bytearray(n)
            self.key_slots: dict[bytes, int] = {}
            self._bloom_bits = self.filter.bits
            self._bloom_m = self.filter.num_bits
            self._bloom_probes = range(self.filter.k)
            #: What the compiled build's probes read (get): a byte view of
            #: the same bits, and the probe count as a C integer; the pure
            #: build probes the bitarray over ``_bloom_probes``.
            self._bloom_view = memoryview(self._bloom_bits) if self._bloom_bits is not None else None
            self._bloom_k = self.filter.k
            #: The table's range tombstones, fragmented (range_tombstones.py);
            #: None for a table without any (reads then skip every check).
            self.range_dels = self._read_range_dels(footer)
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

    def _read_range_dels(self, footer: Footer):
        """The range-tombstone block (range_del_block.py), verified, or None."""
        props = self.properties
        if not props.range_tombstones:
            if props.range_del_offset or props.range_del_size:
                raise CorruptionError("table properties locate a range-tombstone block but count none",
                                      path=self.path, offset=footer.properties[0])
            return None
        offset, size = props.range_del_offset, props.range_del_size
        if self.format_version < 4 or offset + size + TRAILER_SIZE > footer.filter[0]:
            raise CorruptionError("range-tombstone block handle points outside the table's blocks",
                                  path=self.path, offset=footer.properties[0])
        fragments = decode_range_dels(self._read_raw(offset, size), self.path, offset)
        if fragments.count() != props.range_tombstones:
            raise CorruptionError(f"range-tombstone block holds {fragments.count()} records, the properties "
                                  f"say {props.range_tombstones}", path=self.path, offset=offset)
        if self.global_seq:
            raise CorruptionError("an ingested table cannot hold range tombstones", path=self.path, offset=offset)
        return fragments if fragments else None

    def get_with_seq(self, key: bytes, read_seq: int) -> tuple[int, int, bytes] | None:
        """(seq, kind, value) of the newest version of ``key`` with seq <=
        read_seq, or None: for the reads that weigh a version against a
        range tombstone of the same table (decodes the block; not the hot path)."""
        return next(self._visible_versions(key, read_seq), None)

    @property
    def num_blocks(self) -> int:
        return len(self.index_keys)

    def approximate_offset(self, key: bytes) -> int:
        """Where in the file the data for ``key`` begins (LevelDB's
        ApproximateOffsetOf): the offset of the block that holds or would
        hold it, the file's size past its last key. Monotone in the key."""
        i = bisect_left(self.index_keys, key)
        return self.index_offsets[i] if i < len(self.index_offsets) else self.file_size

    # -- reading blocks -------------------------------------------------------

    def _read_raw(self, offset: int, size: int) -> bytes:
        """The verified, uncompressed bytes of the block stored at ``offset``."""
        stored = self.file.read_at(offset, size + TRAILER_SIZE)
        io = self._io
        io.block_reads += 1
        io.bytes_read += len(stored)
        if len(stored) != size + TRAILER_SIZE:
            raise CorruptionError("block runs past the end of the file (truncated table)",
                                  path=self.path, offset=offset)
        return decode_stored_block(stored, self.path, offset)

    def _read_block(self, i: int) -> bytes:
        """Data block ``i`` from the file: verified, uncompressed, and (for a
        format-2 table) structurally checked for searching in place."""
        offset = self.index_offsets[i]
        raw = self._read_raw(offset, self.index_sizes[i])
        if self.codec != CODEC_LENGTHS:
            check_block(raw, self.path, offset)
        if self.global_seq:
            raw = with_sequence(raw, self.global_seq, self.path, offset)
        return raw

    def _decode(self, i: int, raw: bytes, checked: bool = True) -> Block:
        """Decode data block ``i``; its raw bytes passed check_block when they
        were read (``_read_block``), unless ``checked`` says otherwise."""
        return decode_block(raw, self.path, self.index_offsets[i], self.codec, checked)

    def block(self, i: int) -> Block:
        """Data block ``i`` decoded, from the cache or the file. A block read
        from the file is kept in the cache (``admit_on_read``), as LevelDB's
        and RocksDB's iterators fill their block cache by default: cursors
        that seek again and again (paging, short range reads) then find the
        blocks they read decoded; long scans read ahead through
        ``_scan_blocks``, which keeps nothing."""
        held = self.blocks[i]
        if held is None:
            block = self._decode(i, self._read_block(i))
            if self._cache is not None and self.admit_on_read:
                self._cache.admit(self, i, block, block.charge)
            return block
        self.refs[i] = 1
        return held if type(held) is Block else self._decode(i, held)

    def raw_blocks(self, first: int, last: int) -> list[bytes]:
        """Data blocks [first, last) verified and uncompressed but not
        decoded, read from the file with one read (compaction decodes many
        at once, table/columns.py; scans read ahead with it)."""
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
        offsets = self.index_offsets[first:last]
        sizes = self.index_sizes
        stored = [view[offset - start: offset - start + sizes[i] + TRAILER_SIZE]
                  for i, offset in enumerate(offsets, first)]
        out = decode_stored_blocks(stored, self.path, offsets)
        global_seq = self.global_seq
        if global_seq:
            out = [with_sequence(raw, global_seq, self.path, offset) for raw, offset in zip(out, offsets)]
        return out

    def _scan_blocks(self, first: int, step: int) -> Iterator[Block]:
        """Decoded blocks from ``first`` on, ascending (step 1) or descending
        (step -1); cached ones from the cache, the others read ahead in runs
        of up to SCAN_READAHEAD bytes and not admitted."""
        n = len(self.index_offsets)
        i = first
        blocks = self.blocks
        sizes = self.index_sizes
        while 0 <= i < n:
            held = blocks[i]
            if held is not None:
                self.refs[i] = 1
                yield held if type(held) is Block else self._decode(i, held)
                i += step
                continue
            # A run of uncached blocks in the scan's direction, read at once.
            j, budget = i, SCAN_READAHEAD
            while 0 <= j < n and blocks[j] is None and budget > 0:
                budget -= sizes[j]
                j += step
            lo, hi = (i, j) if step > 0 else (j + 1, i + 1)
            raws = self.raw_blocks(lo, hi)
            if step < 0:
                raws.reverse()
            for k, raw in enumerate(raws):
                yield self._decode(i + k * step, raw, checked=False)
            i = j

    # -- the cache's side (called by BlockCache under its lock) ----------------

    def release(self, i: int) -> None:
        """The cache lets block ``i`` go: drop its keys, then the block."""
        held = self.blocks[i]
        if held is None:
            return
        if self.indexed[i]:
            keys = held.keys
            # The keys index_block() added point into this block: drop them in one C loop.
            deque(map(self.key_slots.pop, keys[self._own_keys_start(i, keys):], repeat(None)), maxlen=0)
            self.indexed[i] = 0
        self.blocks[i] = None
        self.uses[i] = 0

    def index_block(self, i: int, block: Block) -> None:
        """Put the keys of cached decoded block ``i`` into the key index.
        Block first, keys second: a reader that finds a slot finds its block,
        unless it raced an eviction, which get() allows for."""
        if self.indexed[i] or self.blocks[i] is not block:
            return
        keys = block.keys
        start = self._own_keys_start(i, keys)
        base = i << 32
        n = len(keys)
        # Assigning in reverse keeps each key's first (newest) entry.
        self.key_slots.update(zip(reversed(keys[start:]), range(base + n - 1, base + start - 1, -1)))
        self.indexed[i] = 1

    def _own_keys_start(self, i: int, keys: list[bytes]) -> int:
        """Where the keys whose newest version is in block i begin: a block
        can open with older versions of the previous block's last key."""
        start = 0
        if i and keys and self.index_keys[i - 1] == keys[0]:
            n = len(keys)
            while start < n and keys[start] == keys[0]:
                start += 1
        return start

    def resident_bytes(self) -> tuple[int, int]:
        """(index bytes, filter bytes): the memory this open table keeps
        whatever the block cache holds -- its index (keys, handles and the
        per-block bookkeeping) and its bloom filter. Python object sizes
        (sys.getsizeof), so an estimate of what the process holds for it;
        the key index of promoted blocks is charged to the cache instead."""
        index = sum(map(sys.getsizeof, self.index_keys))
        for column in (self.index_keys, self.index_seq_kinds, self.index_offsets, self.index_sizes,
                       self.blocks, self.refs, self.uses, self.charges, self.indexed, self.block_widths):
            index += sys.getsizeof(column)
        return index, sys.getsizeof(self._bloom_bits) if self._bloom_bits is not None else 0

    def _promote(self, i: int) -> None:
        """Block ``i`` is cached and keeps being used: decode it (if held
        raw) and index its keys."""
        held = self.blocks[i]
        if held is None or self.indexed[i]:
            return
        block = held if type(held) is Block else self._decode(i, held)
        self._cache.promote(self, i, held, block)

    # -- point lookup ---------------------------------------------------------

    def get(self, key: bytes, h: int | None, read_seq: int) -> tuple[int, bytes] | None:
        """(kind, value) of the newest version of ``key`` with seq <= read_seq,
        or None if this table has none. ``h`` is the key's bloom_hash, or None
        to compute it here only if the key index misses (a hot hit never
        needs it).

        The whole lookup is this one function (each Python call is a
        measurable share of a get): the key index of promoted blocks
        (``key_slots``); else the bloom filter; then the table's index
        (bisect for the block) and the block, raw (``search_block``) or
        decoded, read from the file and cached if it is not held."""
        slot = self.key_slots.get(key)
        if slot is not None:
            b = slot >> 32
            block = self.blocks[b]
            if type(block) is Block:
                self.refs[b] = 1
                j = slot & 0xFFFFFFFF
                sk = block.seq_kinds[j]
                if sk >> 8 <= read_seq:
                    ends = block.value_ends
                    return sk & 0xFF, block.data[ends[j]:ends[j + 1]]
            # An older version, or a racing eviction: the search below (the
            # key is in this table, so the filter is not asked).
        else:
            bits = self._bloom_bits
            if bits is not None:
                if h is None:
                    # bloom.bloom_hash: compiled, a C call; as Python, mmh3's, inlined
                    h = bloom_hash(key) if cython.compiled else _hash64(key, 0)[0]
                # BloomFilter.may_contain, inlined: this is the hottest loop of a miss.
                if cython.compiled:
                    # The same probes in C integers, each bit read from the
                    # filter's bytes (little-endian bit order, bloom.py):
                    # no Python call or integer object per probe.
                    view = self._bloom_view
                    hc = h
                    bit_count = self._bloom_m
                    at = hc & _LOW32
                    step = hc >> 32
                    for probe in range(self._bloom_k):
                        bit = at % bit_count
                        if not (view[bit >> 3] >> (bit & 7)) & 1:
                            return None
                        at += step
                else:
                    m = self._bloom_m
                    h1 = h & 0xFFFFFFFF
                    h2 = h >> 32
                    for _ in self._bloom_probes:
                        if not bits[h1 % m]:
                            return None
                        h1 += h2
        io = self._io
        io.searches += 1
        index_keys = self.index_keys
        i = keys_bisect_left(index_keys, key)
        n = len(index_keys)
        blocks = self.blocks
        while i < n:
            held = blocks[i]
            if held is None:
                io.get_block_reads += 1
                raw = self._read_block(i)
                cache = self._cache
                if self.codec == CODEC_LENGTHS:
                    held = self._decode(i, raw)
                    if cache is not None:
                        cache.admit(self, i, held, held.charge)
                else:
                    held = raw
                    if cache is not None:
                        cache.admit(self, i, raw, len(raw) + RAW_BLOCK_OVERHEAD)
            else:
                self.refs[i] = 1
                uses = self.uses[i] + 1
                if uses < 255:
                    self.uses[i] = uses
                if uses >= PROMOTE_AFTER and io.searches >= io.next_promotion and not self.indexed[i] \
                        and self._cache is not None:
                    io.next_promotion = io.searches + PROMOTION_SPACING
                    self._promote(i)
            if type(held) is bytes:
                found = search_block(held, key, read_seq)
                if found is not CONTINUE:
                    return found
            else:
                keys = held.keys
                j = bisect_left(keys, key)
                m = len(keys)
                sks = held.seq_kinds
                while j < m:
                    if keys[j] != key:
                        return None
                    sk = sks[j]
                    if sk >> 8 <= read_seq:
                        return sk & 0xFF, held.value(j)
                    j += 1
            i += 1  # the key's older versions continue at the start of the next block
        return None

    def versions(self, key: bytes, read_seq: int) -> list[tuple[int, int, bytes]]:
        """(seq, kind, value) of every version of ``key`` with seq <= read_seq,
        newest first (a read folding merge operands needs them all, and
        their sequences to weigh them against range tombstones; any other
        read wants only the newest, :meth:`get`)."""
        return list(self._visible_versions(key, read_seq))

    def _visible_versions(self, key: bytes, read_seq: int) -> Iterator[tuple[int, int, bytes]]:
        """Yields (seq, kind, value) of the versions of ``key`` with seq <=
        read_seq, newest first, decoding the blocks they are in."""
        index_keys = self.index_keys
        i = bisect_left(index_keys, key)
        while i < len(index_keys):
            block = self.block(i)
            keys = block.keys
            sks = block.seq_kinds
            j = bisect_left(keys, key)
            while j < len(keys):
                if keys[j] != key:
                    return
                sk = sks[j]
                if sk >> 8 <= read_seq:
                    yield sk >> 8, sk & 0xFF, block.value(j)
                j += 1
            i += 1  # the key's older versions continue at the start of the next block

    def get_many(self, keys: list[bytes], read_seq: int,
                 found: dict[bytes, tuple[int, bytes]]) -> list[bytes]:
        """:meth:`get` of each of ``keys`` (ascending, distinct) in one pass:
        the (kind, value) of each key this table holds a version of goes into
        ``found``; returns the keys it has none of (ascending), for the next
        source. A block is fetched (from the cache or with one read) once for
        the run of keys it holds -- RocksDB's MultiGet on one table.

        Each key takes get()'s path, with the table's state in local
        variables for the whole batch: first the key index (``key_slots``)
        for every key; then the bloom filter for all the keys it did not
        answer at once (BloomFilter.may_contain_many); then, for those that
        pass, the index (bisected from the previous key's block on, as the
        keys ascend) and the block, raw or decoded."""
        key_slots = self.key_slots
        blocks = self.blocks
        refs = self.refs
        if key_slots:
            rest: list[bytes] = []  # the keys the key index does not answer, ascending
            for key in keys:
                slot = key_slots.get(key)
                if slot is not None:
                    sb = slot >> 32
                    block = blocks[sb]
                    if type(block) is Block:
                        refs[sb] = 1
                        j = slot & 0xFFFFFFFF
                        sk = block.seq_kinds[j]
                        if sk >> 8 <= read_seq:
                            ends = block.value_ends
                            found[key] = sk & 0xFF, block.data[ends[j]:ends[j + 1]]
                            continue
                    # An older version, or a racing eviction: searched below (the
                    # filter, asked too, holds a key the table holds).
                rest.append(key)
        else:
            rest = keys  # no block of this table is indexed
        if not rest:
            return rest
        if self._bloom_bits is None:
            maybe = repeat(True)
        else:
            maybe = self.filter.may_contain_many([_hash64(key, 0)[0] for key in rest])
        still: list[bytes] = []
        index_keys = self.index_keys
        n_blocks = len(index_keys)
        uses_of = self.uses
        cache = self._cache
        io = self._io
        searches = 0
        b = 0
        for key, may_hold in zip(rest, maybe):
            if not may_hold:
                still.append(key)
                continue
            b = bisect_left(index_keys, key, b)  # the keys ascend, so do their blocks
            if b == n_blocks:
                still.append(key)
                continue
            searches += 1
            held = blocks[b]
            if held is None:
                self._io.get_block_reads += 1
                raw = self._read_block(b)
                if self.codec == CODEC_LENGTHS:
                    held = self._decode(b, raw)
                    if cache is not None:
                        cache.admit(self, b, held, held.charge)
                else:
                    held = raw
                    if cache is not None:
                        cache.admit(self, b, raw, len(raw) + RAW_BLOCK_OVERHEAD)
            else:
                refs[b] = 1
                uses = uses_of[b] + 1
                if uses < 255:
                    uses_of[b] = uses
                if uses >= PROMOTE_AFTER and io.searches + searches >= io.next_promotion \
                        and not self.indexed[b] and cache is not None:
                    io.next_promotion = io.searches + searches + PROMOTION_SPACING
                    self._promote(b)
            if type(held) is bytes:
                answer = search_block(held, key, read_seq)
                if answer is CONTINUE:
                    # The key's older versions go on in the next block (rare): the one-key path.
                    answer = self.get(key, None, read_seq)
            else:
                bkeys = held.keys
                j = bisect_left(bkeys, key)
                nk = len(bkeys)
                sks = held.seq_kinds
                answer = None
                while j < nk and bkeys[j] == key:
                    sk = sks[j]
                    if sk >> 8 <= read_seq:
                        answer = sk & 0xFF, held.value(j)
                        break
                    j += 1
                else:
                    if j == nk:
                        answer = self.get(key, None, read_seq)
            if answer is None:
                still.append(key)
            else:
                found[key] = answer
        self._io.searches += searches
        return still

    # -- iteration --------------------------------------------------------------

    def reads_in_place(self, read_seq: int) -> bool:
        """Whether a cursor at ``read_seq`` may read this table's blocks in
        place (:meth:`entries_after`): format 2, one version per key and
        every version visible, so each entry stands for its key as stored."""
        return read_seq >= self.in_place_from

    def entries_after(self, i: int, key: bytes | None, inclusive: bool,
                      limit: int | None) -> tuple[list[bytes], bytes, list[bytes]] | None:
        """Up to ``limit`` entries of block ``i`` after ``key`` (see
        block.entries_after), read from the block's raw bytes, cached or
        read from the file (and then cached raw, as a get caches it), without
        decoding the rest of the block (or sliced from the block cached
        decoded). Only for a table that :meth:`reads_in_place`. Reads here
        do not count towards promoting a block (``uses``): decoding and
        indexing a block pays off for point lookups, and a scan passing
        through would otherwise promote every block it touches."""
        held = self.blocks[i]
        if held is None:
            held = self._read_block(i)
            cache = self._cache
            if cache is not None and self.admit_on_read:
                cache.admit(self, i, held, len(held) + RAW_BLOCK_OVERHEAD)
        elif type(held) is Block:
            self.refs[i] = 1
            keys = held.keys
            if key is None:
                j = 0
            else:
                j = bisect_left(keys, key) if inclusive else bisect_right(keys, key)
            return held.entries(j, len(keys) if limit is None else min(len(keys), j + limit))
        else:
            self.refs[i] = 1
        known = self.block_widths
        if known is None:
            known = self.block_widths = [_UNKNOWN] * len(self.blocks)
        widths = known[i]
        if widths is _UNKNOWN:
            widths = known[i] = fixed_widths(held)
        return entries_after(held, key, inclusive, limit, widths)

    def owned_entries(self, i: int, read_seq: int) -> tuple[list[bytes], bytes | list[int], list[bytes]]:
        """(keys, kinds, values) of the keys block ``i`` *owns* (those whose
        newest version is in it: all but a leading run continuing the
        previous block's last key), each with its newest version <= read_seq,
        tombstones included; keys with no such version are left out. A
        cursor moves through a table a block's owned keys at a time, in
        either direction, and every key belongs to exactly one block.
        ``kinds`` is a sequence of ints (bytes or a list)."""
        block = self.block(i)
        keys = block.keys
        props = self.properties
        if read_seq >= props.largest_seq and props.distinct_keys == props.entries:
            # One version per key, all visible (a table written by a bottommost
            # compaction or a flush without overwrites): no resolution at all.
            return keys, block.kinds(), block.values()
        start = self._own_keys_start(i, keys)
        sks = block.seq_kinds
        n = len(keys)
        if start == 0 and n and max(sks) >> 8 <= read_seq and not any(map(bytes.__eq__, keys, keys[1:])):
            # Every entry is a visible, distinct key (most blocks): C-level copies.
            return keys, block.kinds(), block.values()
        out_keys: list[bytes] = []
        kinds: list[int] = []
        values: list[bytes] = []
        j = start
        while j < n:
            key = keys[j]
            found = False
            while j < n and keys[j] == key:
                sk = sks[j]
                if not found and sk >> 8 <= read_seq:
                    out_keys.append(key)
                    kinds.append(sk & 0xFF)
                    values.append(block.value(j))
                    found = True
                j += 1
            if not found and j == n:
                # The last key's versions may go on in the next blocks.
                hit = self._continued_version(i + 1, key, read_seq)
                if hit is not None:
                    out_keys.append(key)
                    kinds.append(hit[0])
                    values.append(hit[1])
        return out_keys, kinds, values

    def _continued_version(self, i: int, key: bytes, read_seq: int) -> tuple[int, bytes] | None:
        """The newest version <= read_seq of ``key`` among the versions that
        continue from block i - 1 into blocks i, i + 1, ..."""
        while i < len(self.index_keys):
            block = self.block(i)
            keys = block.keys
            for j in range(len(keys)):
                if keys[j] != key:
                    return None
                sk = block.seq_kinds[j]
                if sk >> 8 <= read_seq:
                    return sk & 0xFF, block.value(j)
            i += 1
        return None

    def _first_block(self, start: bytes | None) -> int:
        return 0 if start is None else bisect_left(self.index_keys, start)

    def entries(self, start: bytes | None = None) -> Iterator[tuple[bytes, int, bytes]]:
        """Every entry (key, seq_kind, value) in internal order from the first
        key >= start: all versions, tombstones included (for compaction and
        checks)."""
        for block in self._scan_blocks(self._first_block(start), 1):
            keys = block.keys
            j = 0 if start is None else bisect_left(keys, start)
            start = None  # only the first block is entered part-way
            sks = block.seq_kinds
            data = block.data
            ends = block.value_ends
            for j in range(j, len(keys)):
                yield keys[j], sks[j], data[ends[j]:ends[j + 1]]
