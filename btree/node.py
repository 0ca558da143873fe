"""Page images: the byte layout of every page type and the in-memory node.

This module owns the translation between the fixed-size page images in the
page file and the decoded objects the rest of the engine works on:

* :class:`Node`, a decoded leaf or internal node (sorted key list plus values
  or child page numbers), and its slotted-page encoding;
* :class:`Overflow`, the reference a leaf holds for a value stored in an
  overflow page chain, and the overflow page encoding;
* :class:`LeafImage`, a verified leaf page image that a range read decodes
  a few cells of (a run of fixed-size records by one struct call) instead
  of the whole page;
* the search of a leaf page image for one key without decoding it
  (:func:`search_leaf_page`, the checks one by one, and :func:`leaf_value`,
  the same search with the checks in one step, for gets);
* pages of page numbers: the free list (format 3), the page map and its
  directory (format 4).

Every page starts with the same 32-byte header (checksum, page number, type,
entry count, checkpoint epoch, two type-specific links); docs/formats.md has
the byte-by-byte layout. Decoding verifies the checksum and the page number
first and raises :class:`~lsmkv.base.errors.CorruptionError` naming file and page,
so a torn or misplaced page is never taken for data.
"""

from __future__ import annotations

import struct
from itertools import accumulate, chain, repeat
from operator import add, lt  # (operator.lt: about half the cost of bytes.__lt__ in a map)

from lsmkv.base.checksum import STORED_CRC, crc32, crc32_past_stored, single_bit_error
from lsmkv.base.errors import CorruptionError

try:
    import cython
except ImportError:  # pragma: no cover - Cython is not installed: the pure build
    from lsmkv.base.compile_hints import cython

#: crc u32, page number u32, type u8, flags u8, count u16, cell start u16,
#: reserved u16, epoch u64, link a u32, link b u32.
HEADER = struct.Struct("<IIBBHHHQII")
HEADER_SIZE = HEADER.size  # 32
_HDR_AFTER_CRC = struct.Struct("<IBBHHHQII")  # the header without its checksum
_U32 = struct.Struct("<I")
#: Where a leaf's header holds its links: the previous and the next leaf's page numbers.
PREV_AT = 24
NEXT_AT = 28

PAGE_META = 1
PAGE_INTERNAL = 2
PAGE_LEAF = 3
PAGE_OVERFLOW = 4
PAGE_FREELIST = 5
#: Format 4: the page map (which slot of the file holds each logical page)
#: and its directory (btree/pagemap.py).
PAGE_MAP = 6
PAGE_MAPDIR = 7
PAGE_TYPE_NAMES = {PAGE_META: "meta", PAGE_INTERNAL: "internal", PAGE_LEAF: "leaf",
                   PAGE_OVERFLOW: "overflow", PAGE_FREELIST: "free-list", PAGE_MAP: "page-map",
                   PAGE_MAPDIR: "map-directory"}

#: Leaf cell header: key length u16, kind u8 (0 inline, 1 overflow; +2 with a
#: deadline), value length u32.
LEAF_CELL = struct.Struct("<HBI")
LEAF_CELL_SIZE = LEAF_CELL.size  # 7
#: The deadline of a value with a ttl (kinds 2 and 3): u64 ms since the epoch,
#: right after the cell header.
DEADLINE = struct.Struct("<Q")
DEADLINE_SIZE = DEADLINE.size  # 8
#: Internal cell header: key length u16, child page u32 (the child right of the key).
INTERNAL_CELL = struct.Struct("<HI")
INTERNAL_CELL_SIZE = INTERNAL_CELL.size  # 6
SLOT_SIZE = 2
KIND_INLINE = 0
KIND_OVERFLOW = 1
#: Added to the kind of a value with a ttl (format version 2).
KIND_EXPIRING = 2

MIN_PAGE_SIZE = 512
MAX_PAGE_SIZE = 32768

_slot_structs: dict[int, struct.Struct] = {}


def _slots(count: int) -> struct.Struct:
    s = _slot_structs.get(count)
    if s is None:
        s = _slot_structs[count] = struct.Struct(f"<{count}H")
    return s


_NONE: tuple = ()
_PLAIN = frozenset((bytes,))


class Overflow:
    """A leaf's reference to a value stored in an overflow page chain."""

    __slots__ = ("page", "length")

    def __init__(self, page: int, length: int) -> None:
        self.page = page
        self.length = length

    def __repr__(self) -> str:
        return f"Overflow(page={self.page}, length={self.length})"


class Expiring:
    """A value with a ttl: its deadline (ms since the epoch; from then on
    the key reads as absent) and the value -- bytes, or in a leaf also an
    :class:`Overflow` reference. Operation lists (log records, batches)
    carry values with a ttl in this form too."""

    __slots__ = ("deadline", "value")

    def __init__(self, deadline: int, value) -> None:
        self.deadline = deadline
        self.value = value

    def __eq__(self, other) -> bool:
        return type(other) is Expiring and other.deadline == self.deadline and other.value == self.value

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Expiring(deadline={self.deadline}, value={self.value!r})"


def value_size(val) -> int:
    """Bytes a leaf value takes in its cell after the header and key: the
    value (or a 4-byte overflow page number), plus 8 for a deadline."""
    t = type(val)
    if t is bytes:
        return len(val)
    if t is Expiring:
        inner = val.value
        return DEADLINE_SIZE + (len(inner) if type(inner) is bytes else 4)
    return 4


class Node:
    """A decoded leaf or internal node, as held by the buffer pool.

    Leaves: ``keys[i]`` maps to ``vals[i]`` (bytes, an :class:`Overflow`, or
    an :class:`Expiring` wrapping either);
    ``prev``/``next`` are the neighbouring leaves' page numbers (0 = none).
    Internal nodes: ``kids`` has ``len(keys) + 1`` child page numbers;
    ``kids[i]`` holds keys < ``keys[i]`` and ``kids[i + 1]`` keys >= it.
    ``used`` is the encoded size in bytes; ``dirty`` says the node differs
    from its page image on disk; ``ref`` is the CLOCK reference bit.
    """

    __slots__ = ("pgno", "leaf", "keys", "vals", "kids", "prev", "next", "used", "dirty", "ref", "saved", "ovf",
                 "hits")

    def __init__(self, pgno: int, leaf: bool) -> None:
        self.pgno = pgno
        self.leaf = leaf
        self.keys: list[bytes] = []
        # A leaf has no children and an internal node no values: they share an
        # empty tuple (one object fewer for the garbage collector to track).
        self.vals: list = [] if leaf else _NONE
        self.kids: list[int] = _NONE if leaf else []
        self.prev = 0
        self.next = 0
        self.used = HEADER_SIZE
        self.dirty = False
        self.ref = True
        #: Reads served while in the pool (the pool's admission policy).
        self.hits = 0
        #: Id of the newest snapshot that already has this node's pre-image
        #: (see Tree.preserve); 0 = none.
        self.saved = 0
        #: False only if every value of this leaf is plain bytes (no
        #: Overflow, no Expiring: scans then skip looking at them); may stay
        #: True after such values are gone.
        self.ovf = False

    def clone(self) -> "Node":
        """A copy for a snapshot (lists copied, entries shared: they are immutable)."""
        c = Node(self.pgno, self.leaf)
        c.keys = self.keys[:]
        c.vals = self.vals[:]
        c.kids = self.kids[:]
        c.prev = self.prev
        c.next = self.next
        c.used = self.used
        c.ovf = self.ovf
        return c

    def __repr__(self) -> str:
        kind = "leaf" if self.leaf else "internal"
        return f"Node({kind}, page={self.pgno}, n={len(self.keys)}, used={self.used})"


def leaf_cell_size(key: bytes, val) -> int:
    """Bytes one leaf entry takes in its page, slot included."""
    return SLOT_SIZE + LEAF_CELL_SIZE + len(key) + value_size(val)


def internal_cell_size(key: bytes) -> int:
    return SLOT_SIZE + INTERNAL_CELL_SIZE + len(key)


def seal(page: bytearray, pgno: int, ptype: int, count: int, cell_start: int,
         epoch: int, a: int, b: int) -> bytearray:
    """Write the header of ``page`` (a full page image) and its checksum."""
    _HDR_AFTER_CRC.pack_into(page, 4, pgno, ptype, 0, count, cell_start, 0, epoch, a, b)
    _U32.pack_into(page, 0, crc32(memoryview(page)[4:]))
    return page


_ZEROS = memoryview(bytes(MAX_PAGE_SIZE))


def encode_node(node: Node, page_size: int, epoch: int) -> bytes:
    """The slotted page image of ``node``: header, slot array, cells at the end
    (in key order, so the cell area is one contiguous run)."""
    keys = node.keys
    count = len(keys)
    cell_start = page_size - (node.used - HEADER_SIZE - SLOT_SIZE * count)
    if cell_start < HEADER_SIZE + SLOT_SIZE * count or cell_start > page_size:
        raise AssertionError(f"node on page {node.pgno} does not fit its page ({node.used} bytes)")
    if node.leaf:
        vals = node.vals
        a, b, ptype = node.prev, node.next, PAGE_LEAF
        klens = list(map(len, keys))
        if set(map(type, vals)) <= _PLAIN:
            # The common case, done with C-level map/zip/accumulate: headers,
            # then key and value interleaved, offsets as running sums.
            vlens = list(map(len, vals))
            if count and klens.count(klens[0]) == count and vlens.count(vlens[0]) == count:
                # Fixed-size records (one key length, one value length): one
                # header for every cell, offsets a range (_uniform_cells reads
                # such a leaf back by struct calls).
                size = LEAF_CELL_SIZE + klens[0] + vlens[0]
                head = LEAF_CELL.pack(klens[0], KIND_INLINE, vlens[0])
                body = b"".join(chain.from_iterable(zip(repeat(head, count), keys, vals)))
                sizes = repeat(size, count)
            else:
                heads = map(LEAF_CELL.pack, klens, repeat(KIND_INLINE, count), vlens)
                body = b"".join(chain.from_iterable(zip(heads, keys, vals)))
                sizes = map(add, map(add, klens, vlens), repeat(LEAF_CELL_SIZE, count))
        else:
            parts: list = []
            sizes_list = []
            pack = LEAF_CELL.pack
            pack_deadline = DEADLINE.pack
            for key, val in zip(keys, vals):
                t = type(val)
                if t is bytes:
                    parts += (pack(len(key), KIND_INLINE, len(val)), key, val)
                    sizes_list.append(LEAF_CELL_SIZE + len(key) + len(val))
                elif t is Overflow:
                    parts += (pack(len(key), KIND_OVERFLOW, val.length), key, _U32.pack(val.page))
                    sizes_list.append(LEAF_CELL_SIZE + len(key) + 4)
                else:
                    inner = val.value
                    if type(inner) is bytes:
                        parts += (pack(len(key), KIND_EXPIRING | KIND_INLINE, len(inner)),
                                  pack_deadline(val.deadline), key, inner)
                        sizes_list.append(LEAF_CELL_SIZE + DEADLINE_SIZE + len(key) + len(inner))
                    else:
                        parts += (pack(len(key), KIND_EXPIRING | KIND_OVERFLOW, inner.length),
                                  pack_deadline(val.deadline), key, _U32.pack(inner.page))
                        sizes_list.append(LEAF_CELL_SIZE + DEADLINE_SIZE + len(key) + 4)
            body = b"".join(parts)
            sizes = sizes_list
    else:
        a, b, ptype = node.kids[0], 0, PAGE_INTERNAL
        klens = list(map(len, keys))
        heads = map(INTERNAL_CELL.pack, klens, node.kids[1:])
        body = b"".join(chain.from_iterable(zip(heads, keys)))
        sizes = map(INTERNAL_CELL_SIZE.__add__, klens)
    offsets = list(accumulate(sizes, initial=cell_start))
    off = offsets.pop()
    if off != page_size:
        raise AssertionError(f"node on page {node.pgno}: size bookkeeping is off ({off} != {page_size})")
    # One join of header, slots, zero gap and cells; the checksum is computed
    # over the parts as they are (no page-sized buffer to fill and re-read).
    rest = _HDR_AFTER_CRC.pack(node.pgno, ptype, 0, count, cell_start, 0, epoch, a, b)
    slots = _slots(count).pack(*offsets) if count else b""
    gap = _ZEROS[:cell_start - HEADER_SIZE - SLOT_SIZE * count]
    crc = crc32(body, crc32(gap, crc32(slots, crc32(rest))))
    return b"".join((_U32.pack(crc), rest, slots, gap, body))


def check_header(buf: bytes, pgno: int, page_size: int, path: str) -> tuple:
    """Verify checksum and page number; return the unpacked header."""
    if len(buf) != page_size:
        raise CorruptionError(f"short page: {len(buf)} of {page_size} bytes (file truncated?)",
                              path=path, page=pgno)
    hdr = HEADER.unpack_from(buf, 0)
    # (Compiled, the sum runs in place; as Python, the call would cost more than the slice.)
    if hdr[0] != (crc32_past_stored(buf) if cython.compiled else crc32(memoryview(buf)[4:])):
        raise CorruptionError("page checksum mismatch", path=path, page=pgno)
    if hdr[1] != pgno:
        raise CorruptionError(f"page holds the image of page {hdr[1]} (misplaced write)",
                              path=path, page=pgno)
    return hdr


def undo_single_bit_flip(buf: bytes) -> bytes | None:
    """The page image ``buf`` with one flipped bit undone, if that is what
    makes its checksum match; None if no single bit explains the mismatch
    (a torn or otherwise damaged page). Used to tell a damaged copy of a
    page that matters (report it) from a torn write (expected after a crash)."""
    where = single_bit_error(memoryview(buf)[4:], HEADER.unpack_from(buf, 0)[0])
    if where is None:
        return None
    fixed = bytearray(buf)
    if where == STORED_CRC:
        fixed[:4] = _U32.pack(crc32(memoryview(buf)[4:]))
    else:
        fixed[4 + where // 8] ^= 1 << (where % 8)
    return bytes(fixed)


#: Range reads of at least this many cells, and leaves decoded whole
#: (decode_node: a leaf a put changes or the pool keeps), try the
#: fixed-layout fast path (_uniform_cells); for fewer the per-cell loop
#: costs as much. A leaf of 31 cells of 100-byte values: 6.5 µs against
#: 13 µs cell by cell; a decoded leaf holds the same objects either way
#: (tracemalloc: 6,639 against 6,624 bytes).
UNIFORM_MIN = 6
#: A uniform run is unpacked in blocks of 16 cells, then of 8, 4, 2 and 1
#: (13 cells: 8 + 4 + 1), one struct per block size: five compiled layouts
#: per record size whatever the runs' lengths (a struct takes about 160
#: bytes per cell: one per run length took 22 KB per record size).
UNIFORM_BLOCK = 16
#: Compiled layouts of uniform runs: (key length, value length, cells) ->
#: struct; cleared when it reaches UNIFORM_CACHE entries (four record sizes).
_uniform_structs: dict[tuple[int, int, int], struct.Struct] = {}
UNIFORM_CACHE = 4 * 5


def _uniform_layout(klen: int, vlen: int, cells: int) -> struct.Struct:
    """Compile (and cache) the struct that unpacks ``cells`` plain inline
    cells with keys of ``klen`` bytes and values of ``vlen`` bytes."""
    if len(_uniform_structs) >= UNIFORM_CACHE:
        _uniform_structs.clear()
    layout = _uniform_structs[klen, vlen, cells] = struct.Struct(f"<{f'HBI{klen}s{vlen}s' * cells}")
    return layout


def _uniform_cells(buf: bytes, offsets) -> tuple[tuple, tuple, int] | None:
    """The keys and values of the leaf cells at ``offsets``, and the size of
    one cell, if they are plain inline cells of one key length and one value
    length laid end to end (how encode_node writes a page of fixed-size
    records), unpacked by C-level struct calls; None if they are not (the
    caller decodes them one by one). Every cell's header is compared with
    the first one's, so this never reads a cell differently from the loop."""
    n = len(offsets)
    first = offsets[0]
    klen, kind, vlen = LEAF_CELL.unpack_from(buf, first)
    if kind != KIND_INLINE:
        return None
    size = LEAF_CELL_SIZE + klen + vlen
    end = first + n * size
    # (The offsets fix where each cell starts, not where the last one ends:
    # a shorter last cell at the end of the page is left to the loop.)
    if offsets[1] != first + size or end > len(buf) or offsets != tuple(range(first, end, size)):
        return None
    fields: tuple = ()
    at = first
    while at < end:
        cells = min(UNIFORM_BLOCK, 1 << (((end - at) // size).bit_length() - 1))
        layout = _uniform_structs.get((klen, vlen, cells)) or _uniform_layout(klen, vlen, cells)
        fields += layout.unpack_from(buf, at)
        at += cells * size
    if fields[0::5].count(klen) != n or fields[1::5].count(KIND_INLINE) != n or fields[2::5].count(vlen) != n:
        return None
    return fields[3::5], fields[4::5], size


#: What :func:`_plain_cells_in_place` returns for a run it does not read
#: whole: a cell that is not plain (an Overflow or Expiring value), and a key
#: not above the one before it.
CELLS_NOT_PLAIN = -1
CELLS_OUT_OF_ORDER = -2


def _plain_cells_in_place(buf: bytes, first: int, last: int, keys: list, vals: list) -> int:
    """Append the keys and values of the leaf cells of slots ``first`` to
    ``last`` (exclusive) of the page image ``buf`` to ``keys`` and
    ``vals``, reading each slot and each cell's header (``LEAF_CELL``) byte
    by byte in place and checking that each key is above the one before it
    (compared in place). Returns the bytes the cells take with their slots
    if every cell is a plain inline one in ascending key order;
    CELLS_NOT_PLAIN at the first cell that is not plain (the caller then
    decodes them all with :func:`_decode_leaf_cells`); CELLS_OUT_OF_ORDER
    at the first key not above the one before it. Slots past the end of
    the image, or a cell past the end of the page, raise IndexError. The compiled build's form of a decoded
    leaf's and a range read's cells (a C loop with no struct call, no int
    object per field and no rich comparison); as Python this loop is slower
    than :func:`_uniform_cells`, which the pure build uses."""
    size = len(buf)
    header = LEAF_CELL_SIZE
    slot = SLOT_SIZE  # (these constants as C integers, compiled)
    inline = KIND_INLINE
    p = buf
    used = 0
    prev_ks = 0
    prev_klen = -1  # (no key before the first)
    base = HEADER_SIZE
    at = base + slot * first
    end = base + slot * last
    if first < 0 or end > size:
        raise IndexError(end)
    while at < end:
        off = p[at] | p[at + 1] << 8
        at += slot
        if off + header > size:
            raise IndexError(off)
        if p[off + 2] != inline:
            return CELLS_NOT_PLAIN
        klen = p[off] | p[off + 1] << 8
        vlen = p[off + 3] | p[off + 4] << 8 | p[off + 5] << 16 | p[off + 6] << 24
        ks = off + header
        ke = ks + klen
        ve = ke + vlen
        if ve > size or ve < ke:  # (compiled, a length with its top bit set comes out negative)
            raise IndexError(off)
        if prev_klen >= 0:
            stop = klen if klen < prev_klen else prev_klen
            j = 0
            while j < stop and p[prev_ks + j] == p[ks + j]:
                j += 1
            if (p[prev_ks + j] > p[ks + j]) if j < stop else prev_klen >= klen:
                return CELLS_OUT_OF_ORDER
        prev_ks = ks
        prev_klen = klen
        keys.append(p[ks:ke])  # (a slice of the C pointer: bytes made directly)
        vals.append(p[ke:ve])
        used += slot + header + klen + vlen
    return used


def _decode_leaf_cells(buf: bytes, offsets, keys: list, vals: list, page_size: int, path: str,
                             pgno: int) -> tuple[int, bool]:
    """Append the keys and values of the leaf cells at ``offsets`` to
    ``keys`` and ``vals``; return the bytes the cells take with their slots
    and whether any value is not plain bytes (an Overflow or an Expiring).
    A cell past the end of the page raises IndexError or struct.error."""
    used = 0
    ovf = False
    unpack = LEAF_CELL.unpack_from
    for off in offsets:
        klen, kind, vlen = unpack(buf, off)
        if kind == KIND_INLINE:  # (the common case first)
            ke = off + LEAF_CELL_SIZE + klen
            ve = ke + vlen
            if ve > page_size:
                raise IndexError
            keys.append(buf[off + LEAF_CELL_SIZE:ke])
            vals.append(buf[ke:ve])
            used += SLOT_SIZE + LEAF_CELL_SIZE + klen + vlen
            continue
        ks = off + LEAF_CELL_SIZE
        deadline = None
        if kind & KIND_EXPIRING:
            deadline = DEADLINE.unpack_from(buf, ks)[0]
            ks += DEADLINE_SIZE
            used += DEADLINE_SIZE
        ke = ks + klen
        keys.append(buf[ks:ke])
        if kind == KIND_EXPIRING | KIND_INLINE:
            ve = ke + vlen
            if ve > page_size:
                raise IndexError
            val = buf[ke:ve]
            used += SLOT_SIZE + LEAF_CELL_SIZE + klen + vlen
        elif kind & ~KIND_EXPIRING == KIND_OVERFLOW and kind <= KIND_EXPIRING | KIND_OVERFLOW:
            val = Overflow(_U32.unpack_from(buf, ke)[0], vlen)
            used += SLOT_SIZE + LEAF_CELL_SIZE + klen + 4
        else:
            raise CorruptionError(f"unknown value kind {kind}", path=path, page=pgno)
        vals.append(val if deadline is None else Expiring(deadline, val))
        ovf = True
        if ke > page_size:
            raise IndexError
    return used, ovf


def decode_node(buf: bytes, pgno: int, page_size: int, path: str) -> Node:
    """Decode a verified leaf or internal page into a :class:`Node`."""
    _crc, _pg, ptype, _flags, count, cell_start, _r, _epoch, a, b = check_header(buf, pgno, page_size, path)
    if ptype == PAGE_LEAF:
        leaf = True
    elif ptype == PAGE_INTERNAL:
        leaf = False
    else:
        raise CorruptionError(f"expected a tree page, found a {PAGE_TYPE_NAMES.get(ptype, f'type-{ptype}')} page",
                              path=path, page=pgno)
    node = Node(pgno, leaf)
    if cell_start == 0 and count == 0:
        cell_start = page_size
    if HEADER_SIZE + SLOT_SIZE * count > page_size:
        raise CorruptionError(f"slot count {count} does not fit the page", path=path, page=pgno)
    offsets = _slots(count).unpack_from(buf, HEADER_SIZE) if count else ()
    if count and min(offsets) < HEADER_SIZE + SLOT_SIZE * count:
        raise CorruptionError("a cell overlaps the slot array", path=path, page=pgno)
    keys = node.keys
    used = HEADER_SIZE
    ordered = False  # (whether the cells' loop already checked the key order)
    try:
        if leaf:
            cells = CELLS_NOT_PLAIN
            if cython.compiled:
                # A C loop over the cells read in place, key order included.
                cells = _plain_cells_in_place(buf, 0, count, keys, node.vals)
                if cells == CELLS_OUT_OF_ORDER:
                    raise CorruptionError("keys out of order in the page", path=path, page=pgno)
                if cells >= 0:
                    ordered = True
                else:  # (decoded below, from the first cell)
                    del keys[:]
                    del node.vals[:]
            elif count >= UNIFORM_MIN:
                uniform = _uniform_cells(buf, offsets)
                if uniform is not None:
                    keys.extend(uniform[0])
                    node.vals.extend(uniform[1])
                    cells = count * (SLOT_SIZE + uniform[2])
            if cells < 0:
                cells, node.ovf = _decode_leaf_cells(buf, offsets, keys, node.vals, page_size, path, pgno)
            used += cells
            node.prev = a
            node.next = b
        else:
            kids = node.kids
            kids.append(a)
            unpack = INTERNAL_CELL.unpack_from
            for off in offsets:
                klen, kid = unpack(buf, off)
                ks = off + INTERNAL_CELL_SIZE
                ke = ks + klen
                if ke > page_size:
                    raise IndexError
                keys.append(buf[ks:ke])
                kids.append(kid)
                used += SLOT_SIZE + INTERNAL_CELL_SIZE + klen
    except (IndexError, struct.error):
        raise CorruptionError("cell runs past the end of the page", path=path, page=pgno) from None
    if used > page_size:
        raise CorruptionError(f"cells of {used} bytes overlap in the page", path=path, page=pgno)
    if count > 1 and not ordered and not all(map(lt, keys, keys[1:])):
        raise CorruptionError("keys out of order in the page", path=path, page=pgno)
    node.used = used
    node.dirty = False
    return node


def _slot_lower_bound(buf: bytes, slots: tuple, key: bytes, inclusive: bool) -> int:
    """The first slot of a leaf image whose key is >= ``key`` (> ``key``
    if not ``inclusive``), by binary search over key slices in place."""
    unpack = LEAF_CELL.unpack_from
    lo, hi = 0, len(slots)
    while lo < hi:
        mid = (lo + hi) >> 1
        off = slots[mid]
        klen, kind, _vlen = unpack(buf, off)
        ks = off + (LEAF_CELL_SIZE + DEADLINE_SIZE if kind & KIND_EXPIRING else LEAF_CELL_SIZE)
        k = buf[ks:ks + klen]
        if k < key or (not inclusive and k == key):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _checked_leaf_slots(buf: bytes, pgno: int, page_size: int, path: str) -> tuple[tuple, int, int]:
    """The slot array of a leaf page image and its previous and next leaves'
    page numbers, after the checksum, page number, page type and slot count
    are verified."""
    hdr = check_header(buf, pgno, page_size, path)
    ptype, count = hdr[2], hdr[4]
    if ptype != PAGE_LEAF:
        raise CorruptionError(f"expected a leaf page in the tree, found a "
                              f"{PAGE_TYPE_NAMES.get(ptype, f'type-{ptype}')} page", path=path, page=pgno)
    if HEADER_SIZE + SLOT_SIZE * count > page_size:
        raise CorruptionError(f"slot count {count} does not fit the page", path=path, page=pgno)
    slots = _slots(count).unpack_from(buf, HEADER_SIZE) if count else ()
    return slots, hdr[8], hdr[9]


class LeafImage:
    """A leaf page read outside the buffer pool for a range read: its
    verified image (checksum, page number, page type and slot array
    checked by :func:`leaf_image`), not decoded. A range read finds where
    to start by binary search over the slots (:meth:`lower_bound`) and
    decodes only the cells it returns (:meth:`cells`); a read that stops
    inside the page keeps the image to go on from (Tree.chunk_forward), so
    the page is neither read nor verified again. ``prev`` and ``next`` are
    the neighbouring leaves' page numbers, as in a :class:`Node`."""

    __slots__ = ("pgno", "buf", "slots", "count", "prev", "next", "path")

    def __init__(self, pgno: int, buf: bytes, count: int, slots: tuple | None, prev: int, next_page: int,
                 path: str) -> None:
        self.pgno = pgno
        self.buf = buf
        self.count = count
        #: The ``count`` cell offsets of the slot array, or None until
        #: :meth:`offsets` unpacks them (the compiled build reads them in place).
        self.slots = slots
        self.prev = prev
        self.next = next_page
        self.path = path

    def lower_bound(self, key: bytes, inclusive: bool = True) -> int:
        """The index of the first cell whose key is >= ``key`` (> ``key`` if
        not ``inclusive``). The compiled build searches the image in
        place (:func:`_slot_at_or_above`: the slots and keys read where they
        lie, no struct call, no slice per probe)."""
        if cython.compiled:
            found = _slot_at_or_above(self.buf, self.count, key, not inclusive)
            if found < 0:
                raise CorruptionError("cell runs past the end of the page", path=self.path, page=self.pgno)
            return found
        try:
            return _slot_lower_bound(self.buf, self.slots, key, inclusive)
        except (IndexError, struct.error):
            raise CorruptionError("cell runs past the end of the page", path=self.path, page=self.pgno) from None

    def offsets(self) -> tuple:
        """The slot array: the cells' offsets, in key order (unpacked on
        first use where the image was made without them)."""
        slots = self.slots
        if slots is None:
            count = self.count
            slots = self.slots = (_slot_structs.get(count) or _slots(count)).unpack_from(self.buf, HEADER_SIZE) \
                if count else ()
        return slots

    def cells(self, i: int, j: int) -> tuple:
        """The keys and values of cells ``i`` to ``j`` (exclusive; two lists
        or tuples), decoded as decode_node decodes them, and whether any
        value is not plain bytes (an Overflow or an Expiring)."""
        buf = self.buf
        try:
            if cython.compiled:
                # A C loop over the slots and the cells' headers, read in
                # place (the pure build's struct calls cost more than the
                # bytes they make).
                keys, vals, ovf = [], [], False
                cells = _plain_cells_in_place(buf, i, j if j < self.count else self.count, keys, vals)
                if cells >= 0:
                    return keys, vals, ovf  # (in order: the loop compared each key with the one before)
                if cells == CELLS_OUT_OF_ORDER:
                    raise CorruptionError("keys out of order in the page", path=self.path, page=self.pgno)
                keys, vals = [], []
                ovf = _decode_leaf_cells(buf, self.offsets()[i:j], keys, vals, len(buf), self.path, self.pgno)[1]
            else:
                offsets = self.slots[i:j]
                run = _uniform_cells(buf, offsets) if j - i >= UNIFORM_MIN else None
                if run is not None:
                    keys, vals = run[0], run[1]
                    ovf = False
                else:
                    keys, vals = [], []
                    ovf = _decode_leaf_cells(buf, offsets, keys, vals, len(buf), self.path, self.pgno)[1]
        except (IndexError, struct.error):
            raise CorruptionError("cell runs past the end of the page", path=self.path, page=self.pgno) from None
        if len(keys) > 1 and not all(map(lt, keys, keys[1:])):
            raise CorruptionError("keys out of order in the page", path=self.path, page=self.pgno)
        return keys, vals, ovf


    def non_plain_values(self) -> list:
        """The values of the page that are not plain bytes (Overflow and
        Expiring ones), for a range delete that frees the page without
        decoding it: one byte (the cell's kind) is looked at per cell, and
        only a page that has such values is decoded."""
        buf = self.buf
        try:
            offsets = self.offsets()
            if not any([buf[off + 2] for off in offsets]):
                return []
            keys: list = []
            vals: list = []
            _decode_leaf_cells(buf, offsets, keys, vals, len(buf), self.path, self.pgno)
        except (IndexError, struct.error):
            raise CorruptionError("cell runs past the end of the page", path=self.path, page=self.pgno) from None
        return [v for v in vals if type(v) is not bytes]


def _leaf_header(buf: bytes, pgno: int, page_size: int, max_epoch: int) -> tuple | None:
    """The unpacked header of the leaf page image ``buf`` if its checksum,
    page number, page type and slot count pass and a checkpoint no newer
    than ``max_epoch`` wrote it; None otherwise (the caller finds out why
    through the checks one by one). The checks of check_header,
    _checked_leaf_slots and Pager._check_epoch with the header unpacked
    once: a range read (leaf_image) and a get (leaf_value) pay them for
    every leaf they read outside the pool."""
    if len(buf) != page_size:
        return None
    hdr = HEADER.unpack_from(buf, 0)
    if (hdr[0] != crc32(memoryview(buf)[4:]) or hdr[1] != pgno or hdr[2] != PAGE_LEAF
            or HEADER_SIZE + SLOT_SIZE * hdr[4] > page_size or hdr[7] > max_epoch):
        return None
    return hdr


def leaf_image(buf: bytes, pgno: int, page_size: int, path: str, max_epoch: int) -> LeafImage | None:
    """The leaf page image ``buf`` as a :class:`LeafImage` if it passes
    every check read_leaf_image makes and was written by a checkpoint no
    newer than ``max_epoch``; None otherwise (the caller finds out why).
    The header is checked by :func:`_leaf_header`, the slot array here;
    the compiled build reads both in place (:func:`_checked_leaf_count`,
    :func:`_slots_clear_of_array`: C integers, the checksum summed in
    place, no header tuple and no comparison of int objects)."""
    if cython.compiled:
        count = _checked_leaf_count(buf, pgno, page_size, max_epoch)
        if count < 0 or not _slots_clear_of_array(buf, count):
            return None
        return LeafImage(pgno, buf, count, None, _u32_at(buf, PREV_AT), _u32_at(buf, NEXT_AT), path)
    hdr = _leaf_header(buf, pgno, page_size, max_epoch)
    if hdr is None:
        return None
    count = hdr[4]
    if not count:
        return LeafImage(pgno, buf, 0, (), hdr[8], hdr[9], path)
    slots = (_slot_structs.get(count) or _slots(count)).unpack_from(buf, HEADER_SIZE)
    if min(slots) < HEADER_SIZE + SLOT_SIZE * count:
        return None
    return LeafImage(pgno, buf, count, slots, hdr[8], hdr[9], path)


#: What leaf_value returns for a page or cell that fails a check: the
#: caller reads the page again through the checks one by one, which raise.
UNCHECKED = object()


def leaf_value(buf: bytes, pgno: int, page_size: int, key: bytes, max_epoch: int):
    """The leaf value of ``key`` in the leaf page image ``buf`` (bytes,
    :class:`Overflow` or :class:`Expiring`, as search_leaf_page makes it),
    None if the page does not hold ``key``, or :data:`UNCHECKED` if the
    page fails a check of :func:`_leaf_header` (checksum, page number,
    page type, slot count, epoch) or the cell the search finds is
    malformed. search_leaf_page with the header unpacked once, for a get
    of a leaf outside the pool; on UNCHECKED the caller runs
    search_leaf_page (after Pager._check_epoch), so a damaged page raises
    exactly what it raises."""
    if cython.compiled:
        count = _checked_leaf_count(buf, pgno, page_size, max_epoch)  # (the header read in place)
        if count < 0:
            return UNCHECKED
    else:
        hdr = _leaf_header(buf, pgno, page_size, max_epoch)
        if hdr is None:
            return UNCHECKED
        count = hdr[4]
    found = _search_cells(buf, count, page_size, key)
    return UNCHECKED if type(found) is _Damage else found


def _checked_leaf_count(buf: bytes, pgno: int, page_size: int, max_epoch: int) -> int:
    """The slot count of the leaf page image ``buf`` if it passes the
    checks of :func:`_leaf_header` (size, page type, page number, slot
    count, epoch, checksum), -1 otherwise: the compiled build's form for a
    get, the header's fields read byte by byte in place (C integers, no
    tuple of int objects), the checksum last. As Python it answers what
    _leaf_header answers (the tests compare them), more slowly."""
    p = buf
    header = HEADER_SIZE  # (the constants as C integers, compiled)
    if len(buf) != page_size or page_size < header:
        return -1
    number = _u32_at(buf, 4)
    leaf = PAGE_LEAF
    if p[8] != leaf or number != pgno:
        return -1
    count = p[10] | p[11] << 8
    slot = SLOT_SIZE
    if header + slot * count > page_size:
        return -1
    epoch = 0
    for i in range(23, 15, -1):  # (the u64 at bytes 16-23, little-endian)
        epoch = epoch << 8 | p[i]
    if epoch > max_epoch:
        return -1
    stored = _u32_at(buf, 0)
    computed = crc32_past_stored(buf)
    if stored != computed:
        return -1
    return count


def _slots_clear_of_array(buf: bytes, count: int) -> bool:
    """Whether each of the first ``count`` slots of the page image ``buf``
    points past the slot array (no cell overlaps it: leaf_image's check of
    the smallest slot), each slot read in place. The caller has checked
    that the slot array fits the page."""
    p = buf
    at = HEADER_SIZE  # (the constants as C integers, compiled)
    end = at + SLOT_SIZE * count
    while at < end:
        if (p[at] | p[at + 1] << 8) < end:
            return False
        at += 2
    return True


def _u32_at(buf: bytes, at: int) -> int:
    """The little-endian u32 at offset ``at`` of ``buf`` (which holds it),
    read in place: a leaf page's number and checksum for _checked_leaf_count,
    its neighbours' page numbers for leaf_image."""
    p = buf
    value = p[at + 3]  # (its top byte first: compiled, a C unsigned long)
    return value << 24 | p[at + 2] << 16 | p[at + 1] << 8 | p[at]


class _Damage:
    """What _search_cells returns for a malformed cell: why, for the
    CorruptionError search_leaf_page raises."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _search_cells(buf: bytes, count: int, page_size: int, key: bytes):
    """The search of a leaf image whose header passed its checks: a binary
    search over its ``count`` slots, each probed slot read from the image
    (two byte reads) and its key compared in place; only the cell found is
    checked and turned into a value. Returns the value (bytes,
    :class:`Overflow` or :class:`Expiring`), None if the page does not
    hold ``key``, or a :class:`_Damage` if the cell found is malformed.
    The compiled build runs the same steps in C (_slot_at_or_above, then
    _cell_value_in_place)."""
    if not count:
        return None
    if cython.compiled:
        lo = _slot_at_or_above(buf, count, key)
        if lo < 0:
            return _PAST_END
        if lo == count:
            return None
        return _cell_value_in_place(buf, lo, count, page_size, key)
    unpack = LEAF_CELL.unpack_from
    lo, hi = 0, count
    try:
        while lo < hi:
            mid = (lo + hi) >> 1
            at = HEADER_SIZE + SLOT_SIZE * mid
            off = buf[at] | buf[at + 1] << 8
            klen, kind, _vlen = unpack(buf, off)
            ks = off + (LEAF_CELL_SIZE + DEADLINE_SIZE if kind & KIND_EXPIRING else LEAF_CELL_SIZE)
            if buf[ks:ks + klen] < key:
                lo = mid + 1
            else:
                hi = mid
        if lo == count:
            return None
        at = HEADER_SIZE + SLOT_SIZE * lo
        off = buf[at] | buf[at + 1] << 8
        # (The cell as _decode_leaf_cells reads it; inlined in both, as the
        # per-cell loop there cannot afford a call.)
        klen, kind, vlen = unpack(buf, off)
        ks = off + LEAF_CELL_SIZE
        deadline = None
        if kind & KIND_EXPIRING:
            deadline = DEADLINE.unpack_from(buf, ks)[0]
            ks += DEADLINE_SIZE
        ke = ks + klen
        if off < HEADER_SIZE + SLOT_SIZE * count or ke > page_size:
            return _PAST_END
        if buf[ks:ke] != key:
            return None
        if kind > KIND_EXPIRING | KIND_OVERFLOW:
            return _Damage(f"unknown value kind {kind}")
        if kind & ~KIND_EXPIRING == KIND_INLINE:
            if ke + vlen > page_size:
                return _PAST_END
            val = buf[ke:ke + vlen]
        else:
            val = Overflow(_U32.unpack_from(buf, ke)[0], vlen)
    except struct.error:
        return _PAST_END
    return val if deadline is None else Expiring(deadline, val)


def _cell_value_in_place(buf: bytes, i: int, count: int, page_size: int, key: bytes):
    """The tail of :func:`_search_cells` as the compiled build runs it:
    slot ``i``'s cell of the leaf image ``buf`` (of ``count`` slots) read
    byte by byte in place, its key compared with ``key`` byte by byte;
    the value if the key is ``key``, None if it is another, _PAST_END or
    a _Damage for a malformed cell, exactly as the pure build's tail
    answers (the tests compare them). As Python it is slower than that
    tail, which the pure build runs instead. Its callers have checked the
    page's size and slot count; the C reads are bounded by them anyway."""
    p = buf
    k = key
    size = len(buf)
    if size != page_size:
        return _PAST_END
    cell = LEAF_CELL_SIZE  # (the constants as C integers, compiled)
    expiring = KIND_EXPIRING
    at = HEADER_SIZE + SLOT_SIZE * i
    if at + 1 >= size:
        return _PAST_END
    off = p[at] | p[at + 1] << 8
    if off + cell > size:
        return _PAST_END
    klen = p[off] | p[off + 1] << 8
    kind = p[off + 2]
    vlen = p[off + 6]  # (its top byte first: compiled, a C integer of 64 bits)
    vlen = vlen << 24 | p[off + 5] << 16 | p[off + 4] << 8 | p[off + 3]
    ks = off + cell
    deadline = None
    if kind & expiring:
        if ks + DEADLINE_SIZE > size:
            return _PAST_END
        deadline = DEADLINE.unpack_from(buf, ks)[0]
        ks += DEADLINE_SIZE
    ke = ks + klen
    if off < HEADER_SIZE + SLOT_SIZE * count or ke > page_size:
        return _PAST_END
    if klen != len(key):
        return None
    j = 0
    while j < klen:
        if p[ks + j] != k[j]:
            return None
        j += 1
    if kind > expiring | KIND_OVERFLOW:
        return _Damage(f"unknown value kind {kind}")
    if not kind & ~expiring:  # (KIND_INLINE)
        if ke + vlen > page_size:
            return _PAST_END
        val = p[ke:ke + vlen]  # (a slice of the C pointer: bytes made directly)
    else:
        if ke + 4 > size:
            return _PAST_END
        val = Overflow(_U32.unpack_from(buf, ke)[0], vlen)
    return val if deadline is None else Expiring(deadline, val)


_PAST_END = _Damage("cell runs past the end of the page")


def _slot_at_or_above(buf: bytes, count: int, key: bytes, above: bool = False) -> int:
    """The first of the ``count`` slots of the leaf image ``buf`` whose key
    is not below ``key`` (with ``above``, above ``key``: LeafImage's
    lower_bound not inclusive) (``count`` if none), or -1 if a probed slot points
    at a cell whose header runs past the page: _search_cells's binary
    search as the compiled build runs it, each probed cell's header read
    byte by byte in place and its key compared with ``key`` byte by byte,
    as the slice ``buf[ks:ks + klen]`` compares (cut at the end of the
    page). As Python it returns what the pure build's loop finds (the
    tests compare them), more slowly."""
    p = buf
    k = key
    size = len(buf)
    nkey = len(key)
    slots = HEADER_SIZE  # (the constants as C integers, compiled)
    slot = SLOT_SIZE
    cell = LEAF_CELL_SIZE
    deadline = DEADLINE_SIZE
    expiring = KIND_EXPIRING
    lo = 0
    hi = count
    while lo < hi:
        mid = (lo + hi) >> 1
        at = slots + slot * mid
        if at + 1 >= size:
            return -1
        off = p[at] | p[at + 1] << 8
        if off + cell > size:
            return -1
        klen = p[off] | p[off + 1] << 8
        ks = off + cell
        if p[off + 2] & expiring:
            ks += deadline
        ke = ks + klen
        if ke > size:
            ke = size
        if ks > ke:
            ks = ke
        stop = ke - ks
        if stop > nkey:
            stop = nkey
        j = 0
        while j < stop and p[ks + j] == k[j]:
            j += 1
        if (p[ks + j] < k[j]) if j < stop else (ke - ks < nkey or (above and ke - ks == nkey)):
            lo = mid + 1
        else:
            hi = mid
    return lo


def read_leaf_image(buf: bytes, pgno: int, page_size: int, path: str) -> LeafImage:
    """The leaf page image ``buf`` as a :class:`LeafImage`, after its
    checksum, page number, page type and slot array are verified
    (CorruptionError, as for :func:`decode_node`)."""
    image = leaf_image(buf, pgno, page_size, path, (1 << 64) - 1)  # (no epoch is newer)
    if image is None:
        _checked_leaf_slots(buf, pgno, page_size, path)  # (raises what is wrong with the header)
        raise CorruptionError("a cell overlaps the slot array", path=path, page=pgno)
    return image


def search_leaf_page(buf: bytes, pgno: int, page_size: int, path: str, key: bytes):
    """The leaf value of ``key`` in the leaf page image ``buf``, or None if
    the page does not hold ``key``, found without decoding the page: the
    checksum and page number are verified first (CorruptionError, as for
    :func:`decode_node`), then a binary search runs over the slot array,
    comparing key slices in place; only the cell found is turned into a
    value (bytes, :class:`Overflow` or :class:`Expiring`, as decoding makes
    them). A get of a leaf outside the buffer pool costs this instead of a
    decode of every cell."""
    found = _search_cells(buf, len(_checked_leaf_slots(buf, pgno, page_size, path)[0]), page_size, key)
    if type(found) is _Damage:
        raise CorruptionError(found.reason, path=path, page=pgno)
    return found


def encode_overflow(pgno: int, data: bytes, next_page: int, page_size: int, epoch: int) -> bytearray:
    """An overflow page: header (a = next page of the chain, b = bytes here), data."""
    page = bytearray(page_size)
    page[HEADER_SIZE:HEADER_SIZE + len(data)] = data
    return seal(page, pgno, PAGE_OVERFLOW, 0, 0, epoch, next_page, len(data))


def decode_overflow(buf: bytes, pgno: int, page_size: int, path: str) -> tuple[bytes, int]:
    """(data, next page) of a verified overflow page."""
    hdr = check_header(buf, pgno, page_size, path)
    if hdr[2] != PAGE_OVERFLOW:
        raise CorruptionError(f"expected an overflow page, found type {hdr[2]}", path=path, page=pgno)
    n = hdr[9]
    if n > page_size - HEADER_SIZE:
        raise CorruptionError(f"overflow page claims {n} bytes", path=path, page=pgno)
    return buf[HEADER_SIZE:HEADER_SIZE + n], hdr[8]


def overflow_pages(ref: Overflow, page_data, page_count: int, page_size: int, path: str):
    """Yield (page, data) along the overflow chain of ``ref``, where
    ``page_data(pg)`` gives a page's (data, next page). CorruptionError
    before anything is read if the value is longer than ``page_count``
    pages can hold (a damaged length is not read towards), and along the
    way if the chain comes back to a page it passed, runs past the value's
    length, or ends short of it."""
    if ref.length > page_count * (page_size - HEADER_SIZE):
        raise CorruptionError(f"an overflow value of {ref.length} bytes is more than the file's {page_count} pages "
                              f"hold", path=path, page=ref.page)
    seen = set()
    total = 0
    pg = ref.page
    while pg:
        if pg in seen:
            raise CorruptionError("overflow chain comes back to a page it passed (a cycle)", path=path, page=pg)
        seen.add(pg)
        data, nxt = page_data(pg)
        total += len(data)
        if total > ref.length or (not data and nxt):
            raise CorruptionError(f"overflow chain is longer than its value's {ref.length} bytes", path=path, page=pg)
        yield pg, data
        pg = nxt
    if total != ref.length:
        raise CorruptionError(f"overflow chain holds {total} bytes, its leaf says {ref.length}", path=path,
                              page=ref.page)


def freelist_capacity(page_size: int) -> int:
    """Page numbers a free-list, page-map or map-directory page holds."""
    return (page_size - HEADER_SIZE) // 4


def encode_numbers(pgno: int, ptype: int, numbers, link: int, page_size: int, epoch: int) -> bytearray:
    """A page holding a list of u32 numbers: header (count, a = ``link``),
    then the numbers. Free-list pages (a = the next free-list page), page-map
    pages (a = the first logical page they describe) and map-directory pages
    (a = the next directory page) all take this shape."""
    page = bytearray(page_size)
    if numbers:
        struct.pack_into(f"<{len(numbers)}I", page, HEADER_SIZE, *numbers)
    return seal(page, pgno, ptype, len(numbers), 0, epoch, link, 0)


def decode_numbers(buf: bytes, pgno: int, ptype: int, page_size: int, path: str) -> tuple[list[int], int, int]:
    """(numbers, link, epoch) of a verified page made by :func:`encode_numbers`."""
    hdr = check_header(buf, pgno, page_size, path)
    if hdr[2] != ptype:
        raise CorruptionError(f"expected a {PAGE_TYPE_NAMES[ptype]} page, found type {hdr[2]}", path=path, page=pgno)
    count = hdr[4]
    if count > freelist_capacity(page_size):
        raise CorruptionError(f"{PAGE_TYPE_NAMES[ptype]} page claims {count} entries", path=path, page=pgno)
    return list(struct.unpack_from(f"<{count}I", buf, HEADER_SIZE)), hdr[8], hdr[7]


def encode_freelist(pgno: int, pages: list[int], next_page: int, page_size: int, epoch: int) -> bytearray:
    """A free-list page (format 3): header (count, a = next free-list page), u32 page numbers."""
    return encode_numbers(pgno, PAGE_FREELIST, pages, next_page, page_size, epoch)


def decode_freelist(buf: bytes, pgno: int, page_size: int, path: str) -> tuple[list[int], int]:
    """(free page numbers, next free-list page) of a verified free-list page."""
    pages, nxt, _epoch = decode_numbers(buf, pgno, PAGE_FREELIST, page_size, path)
    return pages, nxt
