"""Salvaging a damaged table file: every data block that verifies, and the
key ranges of the ones that do not.

``lsmkv repair`` (lsmkv/lsm/repair.py) calls :func:`salvage_table` for a table
that fails verification. It never raises for damage: what it cannot read
becomes a :class:`DamagedSpan` (with the keys it may have held) or a note
(damage that cost no entries). What it keeps is only what verifies: a data
block's checksum matches, it decodes, its entries are in internal order with
known kinds, and it fits in order between the blocks kept around it.

How the data blocks are found (the layout is in docs/formats.md):

- **Footer and index block intact**: the index's handles locate every data
  block and its keys bound each one. A data block ``i`` that fails loses the
  keys in (last key of block ``i - 1``, last key of block ``i``]; for block
  0 the lower bound is the table's smallest key, when known.
- **Footer damaged**: the whole file is scanned for stored blocks (below).
  The index block is the one whose handles tile the file from offset 0,
  the properties block the one whose ``data_bytes`` and ``filter_bytes``
  place it where it is; if the index is among them, it is used as above.
- **Index block damaged or not found**: the data region (up to the filter
  block, where the footer or the properties say it begins) is scanned for
  stored blocks. A run of bytes between two kept blocks in which no block
  verifies loses the keys in (last key before it, first key after it] --
  the first key after it excluded when the table holds one version per key
  (its properties say so), since then that key has no version in the gap.
  If neither footer nor properties say where the data ends, the filter
  block is recognised after the last kept block by its own layout; failing
  that, the keys after the last kept block up to the table's largest key
  count as lost.
- **Filter or properties block damaged**: no entries are lost (repair
  writes new tables, with new filters and properties); a note says so.
- **Range-tombstone block** (format 4, docs/formats.md): located by the
  properties' handle and kept if it verifies (checksum and structure,
  range_del_block.py); the data blocks end where it begins. If it fails, or
  the properties that locate it are gone, ``range_dels_lost`` says why:
  keys its tombstones deleted may come back, which repair reports as a loss.

Finding a stored block without its handle: every stored block is
``payload | type | crc32``. A compressed block (type 1) is a zstandard frame,
which begins with the frame magic and whose length follows from its block
headers; the trailer right after it must match. A raw block (type 0) of the
format-2 codec is found from its end: its last 4 bytes are its entry count
``n`` and ``value_end[n - 1]`` (4 bytes, ``8 n + 4`` before the end) is
where its columns start, so the block's size, hence its start, follows from
its last bytes; its crc must match. Format-1 raw blocks (length columns, no
end offsets) cannot be found that way, nor can any block once the footer is
gone from a format-1 table (its codec is unknown then): such a table keeps
only what its index still locates. A value that itself holds a whole stored
block (table bytes stored as a value) could, inside a damaged block of a
table whose index is also damaged, be taken for a data block; it is kept
only if its keys fall in order between the blocks around it.

Library code: it never prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import zstandard

from lsmkv.base.errors import CorruptionError, InvalidDatabaseError

from .block import CODEC_LENGTHS, CODEC_OFFSETS, Block, decode_block, with_sequence
from .bloom import BloomFilter
from .builder import HANDLE_VALUE
from .format import FOOTER_SIZE, TRAILER_SIZE, ZSTD_COMPRESSION, Footer, decode_stored_block
from .properties import TableProperties
from .range_del_block import decode_range_dels
from ..range_tombstones import FragmentedTombstones

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: zstandard's largest block (RFC 8878, Block_Maximum_Size).
_ZSTD_MAX_BLOCK = 128 * 1024
#: The smallest raw block of the format-2 codec with one entry: empty key
#: and value, offsets, seq_kind and count.
_MIN_RAW_BLOCK = 4 + 16
#: Positions examined per step of the raw-block scan (bounds its memory).
_SCAN_CHUNK = 1 << 20
#: Largest kind each table format version allows (0 tombstone, 1 value, 2 value with a ttl).
_MAX_KIND = {1: 1, 2: 1, 3: 2}
#: A kind-2 value begins with its 8-byte deadline.
_DEADLINE_SIZE = 8


@dataclass
class DamagedSpan:
    """Bytes of a table in which no data block verified, and the keys whose
    newest version in this table may have been there: from ``first`` to
    ``last`` (None: unbounded), each bound in or out as its flag says."""

    offset: int
    #: Where the damaged bytes end (None: not known).
    end: int | None
    what: str
    first: bytes | None
    last: bytes | None
    first_inclusive: bool
    last_inclusive: bool


@dataclass
class SalvagedTable:
    """What :func:`salvage_table` recovered from one table file."""

    path: str
    #: The data blocks kept, decoded, in file order (entries in internal order across them).
    blocks: list[Block] = field(default_factory=list)
    lost: list[DamagedSpan] = field(default_factory=list)
    #: Damage that cost no entries (footer, index, filter, properties; blocks of older versions only).
    notes: list[str] = field(default_factory=list)
    #: The table's properties block, if it verified.
    properties: TableProperties | None = None
    #: How the data blocks were found: "index" or "scan".
    found_by: str = "index"
    #: The range tombstones kept (their block verified), or None.
    range_dels: FragmentedTombstones | None = None
    #: Why the table's range tombstones could not be kept, if it had some
    #: (or may have had: its properties are gone).
    range_dels_lost: str | None = None

    @property
    def entries_kept(self) -> int:
        return sum(len(b.keys) for b in self.blocks)

    @property
    def largest_seq(self) -> int:
        return max((sk >> 8 for b in self.blocks for sk in b.seq_kinds), default=0)

    def entries(self) -> Iterator[tuple[bytes, int, bytes]]:
        """Every kept entry (key, seq_kind, value) in internal order."""
        for block in self.blocks:
            data = block.data
            ends = block.value_ends
            sks = block.seq_kinds
            for j, key in enumerate(block.keys):
                yield key, sks[j], data[ends[j]:ends[j + 1]]


def salvage_table(data: bytes, path: str, *, global_seq: int = 0, smallest: bytes | None = None,
                  largest: bytes | None = None) -> SalvagedTable:
    """Recover the data blocks of the table file whose bytes are ``data``.

    ``global_seq``: the sequence an ingested table's entries read as (0 for
    other tables). ``smallest`` and ``largest``: the table's key range if
    known from elsewhere (the manifest); else the properties block's, if it
    verifies. Raises InvalidDatabaseError only for a footer that verifies
    and names a newer table format than this code reads."""
    return _Salvage(data, path, global_seq, smallest, largest).run()


class _Salvage:
    def __init__(self, data: bytes, path: str, global_seq: int, smallest: bytes | None,
                 largest: bytes | None) -> None:
        self.data = data
        self.path = path
        self.global_seq = global_seq
        self.smallest = smallest
        self.largest = largest
        self.out = SalvagedTable(path)
        self.codec = CODEC_OFFSETS
        self.max_kind = 2
        #: Where the data blocks end (the filter block's offset), if known.
        self.data_end: int | None = None
        #: The blocks that verify anywhere in the file, once scanned for (and by offset).
        self.found: list[tuple[int, int, bytes]] | None = None
        self._found_at: dict[int, tuple[int, int, bytes]] = {}

    def run(self) -> SalvagedTable:
        data, out = self.data, self.out
        footer = self._footer()
        index = None
        if footer is not None:
            self.codec = CODEC_LENGTHS if footer.version == 1 else CODEC_OFFSETS
            self.max_kind = _MAX_KIND.get(footer.version, 2)
            self.data_end = footer.filter[0]
            out.properties = self._properties(footer.properties)
            index = self._index(footer.index)
            self._check_filter(footer.filter)
        else:
            # Without the footer: find the properties and index blocks among
            # every block that verifies, by what they say of the file.
            found = self.found = find_stored_blocks(data, 0, len(data), self.path)
            self._found_at = {block[0]: block for block in found}
            out.properties = self._identify_properties(found)
            index = self._identify_index(found)
            if out.properties is not None:
                self.data_end = out.properties.data_bytes
            elif index is not None:
                off, size = index[1][-1]
                self.data_end = off + size + TRAILER_SIZE
            for what, found_it in (("properties", out.properties is not None), ("index", index is not None)):
                if found_it:
                    out.notes.append(f"{what} block found by scanning the file")
        props = out.properties
        if props is not None and props.range_tombstones:
            self._range_dels(props)
        elif props is None:
            out.range_dels_lost = "its properties block, which locates any range tombstones, did not verify"
        if props is not None:
            if self.smallest is None and props.entries:
                self.smallest = props.smallest_key
            if self.largest is None and props.entries:
                self.largest = props.largest_key
        if index is not None:
            self._blocks_by_index(*index)
        else:
            out.found_by = "scan"
            self._blocks_by_scan()
        return out

    # -- the footer and the metadata blocks ------------------------------------------

    def _range_dels(self, props: TableProperties) -> None:
        """Keep the range-tombstone block if it verifies; the data blocks end where it begins."""
        offset, size = props.range_del_offset, props.range_del_size
        if self.data_end is None or offset < self.data_end:
            self.data_end = offset
        try:
            if offset + size + TRAILER_SIZE > len(self.data):
                raise CorruptionError("range-tombstone block runs past the end of the file", path=self.path,
                                      offset=offset)
            raw = decode_stored_block(self.data[offset:offset + size + TRAILER_SIZE], self.path, offset)
            fragments = decode_range_dels(raw, self.path, offset)
            if fragments.count() != props.range_tombstones:
                raise CorruptionError(f"range-tombstone block holds {fragments.count()} records, the properties "
                                      f"say {props.range_tombstones}", path=self.path, offset=offset)
        except CorruptionError as exc:
            self.out.range_dels_lost = f"its range-tombstone block at offset {offset} is damaged ({_why(exc)})"
            return
        self.out.range_dels = fragments

    def _stored(self, offset: int, size: int) -> bytes:
        """The raw bytes of the stored block at ``offset`` (CorruptionError if it fails)."""
        if self.found is not None:
            # The scan verified (and decompressed) every block that verifies.
            hit = self._found_at.get(offset)
            if hit is not None and hit[1] == size:
                return hit[2]
        if offset < 0 or size < 0 or offset + size + TRAILER_SIZE > len(self.data):
            raise CorruptionError("block handle points past the end of the file", path=self.path, offset=offset)
        return decode_stored_block(memoryview(self.data)[offset:offset + size + TRAILER_SIZE], self.path, offset)

    def _footer(self) -> Footer | None:
        data = self.data
        if len(data) < FOOTER_SIZE:
            self.out.notes.append(f"file of {len(data)} bytes has no footer; its blocks are found by scanning")
            return None
        try:
            return Footer.decode(data[-FOOTER_SIZE:], self.path, len(data))
        except InvalidDatabaseError:
            raise
        except CorruptionError as exc:
            self.out.notes.append(f"footer damaged ({_why(exc)}); blocks found by scanning the file")
            return None

    def _properties(self, handle: tuple[int, int]) -> TableProperties | None:
        try:
            return TableProperties.decode(self._stored(*handle), self.path, handle[0], self.codec)
        except CorruptionError as exc:
            self.out.notes.append(f"properties block damaged ({_why(exc)}); rebuilt, no entries lost")
            return None

    def _check_filter(self, handle: tuple[int, int]) -> None:
        try:
            BloomFilter(self._stored(*handle), self.path, handle[0])
        except CorruptionError as exc:
            self.out.notes.append(f"filter block damaged ({_why(exc)}); rebuilt, no entries lost")

    def _index(self, handle: tuple[int, int]) -> tuple[Block, list[tuple[int, int]]] | None:
        try:
            raw = self._stored(*handle)
            found = self._index_from(raw, handle[0])
        except CorruptionError as exc:
            self.out.notes.append(f"index block damaged ({_why(exc)}); data blocks found by scanning")
            return None
        if found is None:
            self.out.notes.append(f"index block at offset {handle[0]} does not locate the data blocks; "
                                  "data blocks found by scanning")
        return found

    def _index_from(self, raw: bytes, offset: int) -> tuple[Block, list[tuple[int, int]]] | None:
        """The index block's entries and handles, if they tile the data
        region from offset 0 in key order (as every table's do); else None."""
        index = decode_block(raw, self.path, offset, self.codec)
        handles = []
        end = 0
        for i in range(len(index.keys)):
            value = index.value(i)
            if len(value) != HANDLE_VALUE.size:
                return None
            off, size = HANDLE_VALUE.unpack(value)
            if off != end or (i and index.keys[i] < index.keys[i - 1]):
                return None
            handles.append((off, size))
            end = off + size + TRAILER_SIZE
        limit = self.data_end if self.data_end is not None else offset
        if end > limit:
            return None
        return index, handles

    def _identify_properties(self, found: list[tuple[int, int, bytes]]) -> TableProperties | None:
        """The properties block among ``found``: the block whose data_bytes
        and filter_bytes place it exactly where it lies."""
        for offset, _, raw in reversed(found):
            try:
                props = TableProperties.decode(raw, self.path, offset, CODEC_OFFSETS)
            except CorruptionError:
                continue
            # A range-tombstone block, if any, lies between the data and the filter.
            range_dels = props.range_del_size + TRAILER_SIZE if props.range_tombstones else 0
            if props.data_blocks and props.data_bytes + range_dels + props.filter_bytes + TRAILER_SIZE == offset:
                return props
        return None

    def _identify_index(self, found: list[tuple[int, int, bytes]]) -> tuple[Block, list[tuple[int, int]]] | None:
        """The index block among ``found``: one whose handles tile the file from 0 up to before it."""
        for offset, _, raw in reversed(found):
            try:
                index = self._index_from(raw, offset)
            except CorruptionError:
                continue
            if index is not None and index[1]:
                return index
        return None

    # -- data blocks ---------------------------------------------------------------------

    def _data_block(self, raw: bytes, offset: int) -> Block:
        """A data block that decodes, holds entries in internal order and
        only kinds its format allows (CorruptionError otherwise)."""
        if self.global_seq and self.codec == CODEC_OFFSETS:
            raw = with_sequence(raw, self.global_seq, self.path, offset)
        block = decode_block(raw, self.path, offset, self.codec)
        keys, sks = block.keys, block.seq_kinds
        if not keys:
            raise CorruptionError("data block holds no entries", path=self.path, offset=offset)
        # C-level checks first (sorted keys, no repeated key, kinds); the
        # entry-by-entry loops only for the blocks that need them.
        if keys != sorted(keys):
            raise CorruptionError("data block keys out of order", path=self.path, offset=offset)
        if any(map(bytes.__eq__, keys, keys[1:])):
            for j in range(1, len(keys)):
                if keys[j] == keys[j - 1] and sks[j] >> 8 >= sks[j - 1] >> 8:
                    raise CorruptionError(f"data block entry {j} out of order", path=self.path, offset=offset)
        kinds = block.kinds()
        if max(kinds) > self.max_kind:
            raise CorruptionError(f"data block holds an entry of kind {max(kinds)}", path=self.path, offset=offset)
        if 2 in kinds:
            for j, kind in enumerate(kinds):
                if kind == 2 and len(block.value(j)) < _DEADLINE_SIZE:
                    raise CorruptionError(f"data block entry {j} has a ttl but no room for its deadline",
                                          path=self.path, offset=offset)
        return block

    def _follows(self, block: Block) -> bool:
        """Whether ``block`` continues the kept blocks in internal order."""
        kept = self.out.blocks
        if not kept:
            return True
        last = kept[-1]
        key, first = last.keys[-1], block.keys[0]
        return first > key or (first == key and block.seq_kinds[0] >> 8 < last.seq_kinds[-1] >> 8)

    def _blocks_by_index(self, index: Block, handles: list[tuple[int, int]]) -> None:
        out = self.out
        keys = index.keys
        for i, (off, size) in enumerate(handles):
            try:
                block = self._data_block(self._stored(off, size), off)
                if block.keys[-1] != keys[i]:
                    raise CorruptionError("data block's last key is not its index entry's", path=self.path,
                                          offset=off)
                if not self._follows(block):
                    raise CorruptionError("data block out of order with the block before it", path=self.path,
                                          offset=off)
            except CorruptionError as exc:
                what = f"data block {i} of {len(handles)} ({_why(exc)})"
                if i:
                    self._lose(off, off + size + TRAILER_SIZE, what, keys[i - 1], False, keys[i], True)
                else:
                    self._lose(off, off + size + TRAILER_SIZE, what, self.smallest, True, keys[i], True)
                continue
            out.blocks.append(block)

    def _blocks_by_scan(self) -> None:
        out = self.out
        end = self.data_end if self.data_end is not None else len(self.data)
        pos = 0
        prev_last: bytes | None = None
        one_version = (out.properties is not None and out.properties.entries > 0
                       and out.properties.distinct_keys == out.properties.entries)
        found = self.found if self.found is not None else find_stored_blocks(self.data, 0, end, self.path)
        for offset, size, raw in found:
            if offset < pos or offset + size + TRAILER_SIZE > end:
                continue  # inside a block already kept, or past the data blocks
            try:
                block = self._data_block(raw, offset)
            except CorruptionError:
                continue  # a metadata block, or not a block at all
            if not self._follows(block) or not self._in_range(block):
                continue
            if offset > pos:
                self._lose_gap(pos, offset, prev_last, block.keys[0], not one_version)
            out.blocks.append(block)
            prev_last = block.keys[-1]
            pos = offset + size + TRAILER_SIZE
        if self.data_end is None and self._filter_at(pos):
            self.data_end = pos
        if self.data_end is not None and pos >= self.data_end:
            return
        if self.data_end is None and prev_last is not None and prev_last == self.largest:
            return  # whatever follows holds only older versions of the largest key, or is not data
        why = "" if self.data_end is not None else " (where the data blocks end is not known)"
        self._lose_gap(pos, self.data_end, prev_last, self.largest, True, why)

    def _in_range(self, block: Block) -> bool:
        lo, hi = self.smallest, self.largest
        return (lo is None or block.keys[0] >= lo) and (hi is None or block.keys[-1] <= hi)

    def _filter_at(self, pos: int) -> bool:
        """Whether a filter block verifies at ``pos`` (the data region's end)."""
        data = self.data
        sizes = [0]  # an empty payload: a table written without a filter
        if pos + 4 <= len(data):
            sizes.append(5 + (int.from_bytes(data[pos:pos + 4], "little") + 7) // 8)
        for size in sizes:
            try:
                BloomFilter(self._stored(pos, size), self.path, pos)
                return True
            except CorruptionError:
                continue
        return False

    def _lose_gap(self, start: int, end: int | None, after: bytes | None, through: bytes | None,
                  through_inclusive: bool, why: str = "") -> None:
        span = f"bytes {start} to {end}" if end is not None else f"bytes from {start} on"
        what = f"{span}: no data block verifies{why}"
        if after is None:
            self._lose(start, end, what, self.smallest, True, through, through_inclusive)
        else:
            self._lose(start, end, what, after, False, through, through_inclusive)

    def _lose(self, start: int, end: int | None, what: str, first: bytes | None, first_inclusive: bool,
              last: bytes | None, last_inclusive: bool) -> None:
        if first is not None and last is not None and (last < first or (
                last == first and not (first_inclusive and last_inclusive))):
            # Only older versions of a key whose newest version is kept.
            self.out.notes.append(f"{what}: held only older versions of {first!r}, whose newest version is kept")
            return
        self.out.lost.append(DamagedSpan(start, end, what, first, last, first_inclusive, last_inclusive))


def _why(exc: CorruptionError) -> str:
    """What a CorruptionError says, with its offset (the file is named by the caller)."""
    return exc.reason if exc.offset is None else f"{exc.reason}, offset {exc.offset}"


def find_stored_blocks(data: bytes, start: int, end: int, path: str = "") -> list[tuple[int, int, bytes]]:
    """Every stored block lying within ``data[start:end]`` whose trailer
    verifies, found without handles: (offset, payload size, raw bytes), by
    offset. Compressed blocks are found by their zstandard frame, raw blocks
    of the format-2 codec from their last bytes (see the module docstring).
    Blocks may overlap (a block's bytes can hold another whole block)."""
    found: dict[int, tuple[int, int, bytes]] = {}
    view = memoryview(data)
    for offset, size in _compressed_candidates(data, start, end):
        _verify_candidate(view, offset, size, path, found)
    for offset, size in _raw_candidates(data, start, end):
        _verify_candidate(view, offset, size, path, found)
    return [found[k] for k in sorted(found)]


def _verify_candidate(view: memoryview, offset: int, size: int, path: str,
                      found: dict[int, tuple[int, int, bytes]]) -> None:
    if offset in found:
        return
    try:
        raw = decode_stored_block(view[offset:offset + size + TRAILER_SIZE], path, offset)
    except CorruptionError:
        return
    found[offset] = (offset, size, raw)


def _compressed_candidates(data: bytes, start: int, end: int) -> Iterator[tuple[int, int]]:
    """(offset, payload size) of each zstandard frame in data[start:end]
    followed by a trailer of type 1 (its crc not yet checked)."""
    pos = data.find(_ZSTD_MAGIC, start, end)
    while pos >= 0:
        length = _zstd_frame_length(data, pos, end - TRAILER_SIZE)
        if length is not None and data[pos + length] == ZSTD_COMPRESSION:
            yield pos, length
        pos = data.find(_ZSTD_MAGIC, pos + 1, end)


def _zstd_frame_length(data: bytes, start: int, end: int) -> int | None:
    """The length of the zstandard frame at ``start`` if it ends by ``end``
    (RFC 8878: header, blocks each with a 3-byte header, optional checksum)."""
    if start + 6 > end:
        return None
    try:
        pos = start + zstandard.frame_header_size(data[start:start + 18])
    except zstandard.ZstdError:
        return None
    checksum = 4 if data[start + 4] & 4 else 0
    while True:
        if pos + 3 > end:
            return None
        header = int.from_bytes(data[pos:pos + 3], "little")
        pos += 3
        kind, size = (header >> 1) & 3, header >> 3
        if kind == 3 or size > _ZSTD_MAX_BLOCK:
            return None
        pos += 1 if kind == 1 else size
        if header & 1:
            break
    pos += checksum
    return pos - start if pos <= end else None


def _u32_at(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The little-endian u32 at each of ``pos`` (int64)."""
    return (buf[pos].astype(np.int64) | buf[pos + 1].astype(np.int64) << 8
            | buf[pos + 2].astype(np.int64) << 16 | buf[pos + 3].astype(np.int64) << 24)


def _ascending_u32(data: bytes) -> bool:
    """Whether the little-endian u32s of ``data`` never decrease."""
    values = np.frombuffer(data, dtype="<u4")
    return bool(np.all(values[1:] >= values[:-1]))


def _raw_candidates(data: bytes, start: int, end: int) -> Iterator[tuple[int, int]]:
    """(offset, payload size) of each place in data[start:end] where a raw
    format-2 block could end: a type-0 byte whose preceding count ``n`` and
    last value end give a block that starts at or after ``start``, whose
    offset columns ascend and whose first and last kinds are known (crc not
    yet checked). Vectorized, ``_SCAN_CHUNK`` positions at a time; the
    column checks come first because they reject almost every position
    that is no block's end, for far less than a crc over what it claims."""
    buf = np.frombuffer(data, dtype=np.uint8)
    lo = start + _MIN_RAW_BLOCK
    hi = end - TRAILER_SIZE + 1  # a trailer starting before hi fits
    for a in range(lo, hi, _SCAN_CHUNK):
        b = min(a + _SCAN_CHUNK, hi)
        t = np.flatnonzero(buf[a:b] == 0).astype(np.int64) + a
        if not len(t):
            continue
        n = _u32_at(buf, t - 4)
        ok = (n >= 1) & (16 * n + 4 <= t - start)
        t, n = t[ok], n[ok]
        if not len(t):
            continue
        value_end = _u32_at(buf, t - 8 * n - 8)
        size = value_end + 4 + 16 * n
        ok = t - size >= start
        t, n, value_end, size = t[ok], n[ok], value_end[ok], size[ok]
        if not len(t):
            continue
        # The column layout (block.py): key_end[0] <= key_end[n-1] <=
        # value_end[0] <= value_end[n-1], and the first and last entries'
        # kinds (each seq_kind's low byte) at most 2.
        key_end_last = _u32_at(buf, t - 12 * n - 8)
        value_end_first = _u32_at(buf, t - 12 * n - 4)
        ok = ((_u32_at(buf, t - 16 * n - 4) <= key_end_last) & (key_end_last <= value_end_first)
              & (value_end_first <= value_end) & (buf[t - 8 * n - 4] <= 2) & (buf[t - 12] <= 2))
        t, n, size = t[ok], n[ok], size[ok]
        for offset, count, length in zip((t - size).tolist(), n.tolist(), size.tolist()):
            ends = data[offset + length - 4 - 16 * count: offset + length - 4 - 8 * count]
            if _ascending_u32(ends):
                yield offset, length


__all__ = ["DamagedSpan", "SalvagedTable", "find_stored_blocks", "salvage_table"]
