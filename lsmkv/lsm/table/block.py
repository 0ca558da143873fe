"""The block codec: data blocks, index blocks and properties blocks share it.

A block holds n entries of (key, seq_kind, value) in order. Its layout is
columnar, so that Python reads it with a few C calls instead of a loop of
varint parsing, and so that a point lookup can binary-search it in its raw
bytes without decoding it (:func:`search_block`). Format 2 (tables written
today)::

    key_0 ... key_{n-1} | value_0 ... value_{n-1} |
    key_end[n] (u32 each) | value_end[n] (u32 each) | seq_kind[n] (u64 each) | n (u32)

Keys are concatenated from offset 0, values right after the last key;
``key_end[i]`` is the offset just past key i (key i starts at
``key_end[i-1]``, key 0 at 0) and ``value_end[i]`` the offset just past value
i (value 0 starts at ``key_end[n-1]``). seq_kind = sequence << 8 | kind.
End offsets, not lengths, so that entry i's key is two array reads away:
that is what makes a search over the raw bytes cheap.

Format 1 (tables written before) stores ``key_length[n]`` and
``value_length[n]`` in place of the two offset columns; it is still read
(decoded whole), never written.
"""

from __future__ import annotations

import struct
import sys
from array import array
from itertools import accumulate, pairwise

try:
    import cython
except ImportError:
    from lsmkv.base.compile_hints import cython

from lsmkv.base.errors import CorruptionError

if not cython.compiled:  # (compiled, put_le is a C function cimported in the .pxd)
    from lsmkv.base.little_endian import put_le

_COUNT = struct.Struct("<I")
_ENTRY = struct.Struct("<Q")
_PAIR = struct.Struct("<II")


# The unpacks of a lookup. In the compiled build each is a C function that
# reads the integers of a bytes block in place (no call into struct, no
# tuple or int objects); anything else -- another buffer type, an offset
# outside the block -- goes to struct, for the same answer or error. The
# pure build binds the Struct methods themselves (below): a Python function
# around them would only add a call.
def _unpack_count(data, at):
    """``_COUNT.unpack_from(data, at)``: the u32 at ``at``."""
    if type(data) is bytes and 0 <= at and at + 4 <= len(data):
        return (_le32(data, at),)
    return _COUNT.unpack_from(data, at)


def _unpack_pair(data, at):
    """``_PAIR.unpack_from(data, at)``: the two u32s at ``at``."""
    if type(data) is bytes and 0 <= at and at + 8 <= len(data):
        return _le32(data, at), _le32(data, at + 4)
    return _PAIR.unpack_from(data, at)


def _unpack_entry(data, at):
    """``_ENTRY.unpack_from(data, at)``: the u64 at ``at``."""
    if type(data) is bytes and 0 <= at and at + 8 <= len(data):
        return (_le32(data, at) | _le32(data, at + 4) << 32,)
    return _ENTRY.unpack_from(data, at)


def _le32(data, at):
    """The little-endian u32 at ``data[at:at + 4]`` (the caller checked the bounds)."""
    p = data
    v = p[at + 3]
    v = v << 8 | p[at + 2]
    v = v << 8 | p[at + 1]
    return v << 8 | p[at]


if not cython.compiled:
    _unpack_count = _COUNT.unpack_from
    _unpack_pair = _PAIR.unpack_from
    _unpack_entry = _ENTRY.unpack_from
# The substring search of a lookup, bound once: a method looked up on its
# object per call makes a bound method each time.
_find = bytes.find
_LITTLE = sys.byteorder == "little"
#: Bytes charged to the block cache per entry, for the Python objects of a
#: decoded entry (the key's bytes object and list slot, 12 bytes of array
#: columns) and its slot in the table's key index (reader.py: a dict entry
#: and an int), on top of the raw block size.
DECODED_ENTRY_OVERHEAD = 150


def _u32(data: bytes) -> array:
    a = array("I", data)
    if not _LITTLE:  # pragma: no cover - big-endian hosts
        a.byteswap()
    return a


def _u64(data: bytes) -> array:
    a = array("Q", data)
    if not _LITTLE:  # pragma: no cover
        a.byteswap()
    return a


assert array("I").itemsize == 4 and array("Q").itemsize == 8


class BlockBuilder:
    """Accumulates sorted entries and encodes them as one block."""

    __slots__ = ("keys", "values", "seq_kinds", "size")

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.values: list[bytes] = []
        self.seq_kinds: list[int] = []
        #: Encoded size so far.
        self.size = 4

    def add(self, key: bytes, seq_kind: int, value: bytes) -> None:
        self.keys.append(key)
        self.values.append(value)
        self.seq_kinds.append(seq_kind)
        self.size += len(key) + len(value) + 16

    def __len__(self) -> int:
        return len(self.keys)

    def finish(self) -> bytes:
        return encode_block(self.keys, self.seq_kinds, self.values)

    def reset(self) -> None:
        self.keys = []
        self.values = []
        self.seq_kinds = []
        self.size = 4


#: Block codec of each table format version (table/format.py).
CODEC_LENGTHS = 1
CODEC_OFFSETS = 2
#: Bytes charged to the block cache for a block held raw (its bytes object).
RAW_BLOCK_OVERHEAD = 64


def encode_block(keys: list[bytes], seq_kinds: list[int], values: list[bytes]) -> bytes:
    """A raw block in the current codec (format 2, end offsets)."""
    if cython.compiled:
        data = b"".join((b"".join(keys), b"".join(values), _columns_in_place(keys, seq_kinds, values)))
        if len(data) >= 1 << 32:
            raise ValueError("block larger than 4 GiB")
        return data
    n = len(keys)
    key_ends = array("I", accumulate(map(len, keys)))
    value_ends = array("I", accumulate(map(len, values), initial=key_ends[-1] if n else 0))
    del value_ends[0]
    sk = array("Q", seq_kinds)
    if not _LITTLE:  # pragma: no cover
        key_ends.byteswap(); value_ends.byteswap(); sk.byteswap()
    data = b"".join((b"".join(keys), b"".join(values), key_ends.tobytes(), value_ends.tobytes(),
                     sk.tobytes(), _COUNT.pack(n)))
    if len(data) >= 1 << 32:
        raise ValueError("block larger than 4 GiB")
    return data


def _columns_in_place(keys: list[bytes], seq_kinds: list[int], values: list[bytes]) -> bytearray:
    """encode_block's columns and count, the compiled build's form: the key
    ends, the value ends (from the keys' total), the seq_kinds and the
    count, little-endian, written in one C loop into one buffer (the pure
    build makes arrays of them: a loop of writes is slower in Python)."""
    n = len(keys)
    out = bytearray(16 * n + 4)
    p = out
    key_end = 0
    for i in range(n):
        key_end += len(keys[i])
        put_le(p, 4 * i, key_end, 4)
    value_end = key_end
    for i in range(n):
        value_end += len(values[i])
        put_le(p, 4 * (n + i), value_end, 4)
        put_le(p, 8 * n + 8 * i, seq_kinds[i], 8)
    put_le(p, 16 * n, n, 4)
    return out


class Block:
    """A decoded block: ``keys`` (a sorted list, bisect it), ``seq_kinds``
    (an array of u64) and ``value_ends`` (an array of u32, n + 1 offsets
    into ``data``); values stay in the block's bytes and are sliced out on access
    (``value(i)``), so loading a block for one lookup builds no value
    objects, and a cached block holds each value once."""

    __slots__ = ("keys", "seq_kinds", "data", "value_ends", "charge")

    def __init__(self, keys: list[bytes], seq_kinds: array, data: bytes, value_ends: array) -> None:
        self.keys = keys
        self.seq_kinds = seq_kinds
        #: The raw block; value i is data[value_ends[i]:value_ends[i + 1]].
        self.data = data
        self.value_ends = value_ends
        #: What the block costs in the cache, in bytes (an estimate of its objects).
        self.charge = len(data) + DECODED_ENTRY_OVERHEAD * len(keys)

    def value(self, i: int) -> bytes:
        ends = self.value_ends
        return self.data[ends[i]:ends[i + 1]]

    def values(self) -> list[bytes]:
        data = self.data
        return [data[a:b] for a, b in pairwise(self.value_ends)]

    def kinds(self) -> bytes:
        """Each entry's kind (the low byte of its seq_kind), as one bytes
        object sliced from the seq_kind column (little-endian u64s)."""
        n = len(self.keys)
        data = self.data
        start = len(data) - 4 - 8 * n
        return data[start:len(data) - 4:8]

    def entries(self, i: int, j: int) -> tuple[list[bytes], bytes, list[bytes]]:
        """(keys, kinds, values) of entries i to j (exclusive), kinds as in
        :meth:`kinds`: what a range read takes from a cached decoded block."""
        data = self.data
        ends = self.value_ends
        start = len(data) - 4 - 8 * len(self.keys)
        return (self.keys[i:j], data[start + 8 * i: start + 8 * j: 8],
                [data[ends[k]:ends[k + 1]] for k in range(i, j)])

    def __len__(self) -> int:
        return len(self.keys)


def _layout(data: bytes, path: str, offset: int) -> tuple[int, int]:
    """(n, base) of a raw block: its entry count and where its columns start."""
    size = len(data)
    if size < 4:
        raise CorruptionError("block too short", path=path, offset=offset)
    (n,) = _unpack_count(data, size - 4)
    base = size - 4 - 16 * n
    if base < 0:
        raise CorruptionError(f"block claims {n} entries in {size} bytes", path=path, offset=offset)
    return n, base


def decode_block(data: bytes, path: str = "", offset: int = 0, codec: int = CODEC_OFFSETS,
                 checked: bool = False) -> Block:
    """Decode a raw block of either codec; CorruptionError if its structure
    is inconsistent. ``checked``: the block already passed check_block (a
    block read from a table file does), so its offsets are not checked again.

    The seq_kind and value-end columns stay arrays (one C buffer each, no
    int objects): a cached decoded block then holds a bytes object per key
    and little else, which is what makes promoting a block cheap."""
    n, base = _layout(data, path, offset)
    if not n:
        if base != 0:
            raise CorruptionError("empty block has data", path=path, offset=offset)
        return Block([], array("Q"), data, array("I", (0,)))
    seq_kinds = _u64(data[base + 8 * n: base + 16 * n])
    first = _u32(data[base: base + 4 * n])
    if codec == CODEC_LENGTHS:
        key_ends = list(accumulate(first, initial=0))
        ends = list(accumulate(_u32(data[base + 4 * n: base + 8 * n]), initial=key_ends[-1]))
        if ends[-1] != base:
            raise CorruptionError("block lengths do not add up to its size", path=path, offset=offset)
        value_ends = array("I", ends)  # (lengths are unsigned: every end is at most base)
        length = key_ends[1]
        uniform = 0 < length and key_ends[-1] == n * length and key_ends == list(range(0, n * length + 1, length))
    else:
        # The value ends with the last key end before them: value i is
        # data[value_ends[i]:value_ends[i + 1]], one slice of the columns.
        value_ends = _u32(data[base + 4 * n - 4: base + 8 * n])
        if not checked and (value_ends[-1] != base or not _ascending(_u32(data[base: base + 8 * n]).tolist())):
            raise CorruptionError("block offsets are out of order or do not end at its columns", path=path,
                                  offset=offset)
        length = first[0]
        uniform = 0 < length and first[-1] == n * length and first == array("I", range(length, n * length + 1, length))
    if uniform:
        # Keys of one length: split by Structs (a cached one per 32 keys), not a slice each.
        keys = _fixed_run(data, 0, length, n)
    elif codec == CODEC_LENGTHS:
        keys = [data[s:e] for s, e in pairwise(key_ends)]
    else:
        keys = [data[s:e] for s, e in pairwise([0, *first])]
    return Block(keys, seq_kinds, data, value_ends)


def with_sequence(data: bytes, seq: int, path: str = "", offset: int = 0) -> bytes:
    """A raw format-2 block with every entry's sequence number replaced by
    ``seq`` (kinds kept): how an ingested table's entries, stored with
    sequence 0, read as the one sequence the manifest gave the table."""
    n, base = _layout(data, path, offset)
    if not n:
        return data
    start = base + 8 * n
    column = _u64(data[start: start + 8 * n])
    high = seq << 8
    column = array("Q", [high | (sk & 0xFF) for sk in column])
    if not _LITTLE:  # pragma: no cover
        column.byteswap()
    return b"".join((data[:start], column.tobytes(), data[start + 8 * n:]))


def _ascending(ends: list[int]) -> bool:
    """Whether ``ends`` never decreases: sorted() of a sorted list is one
    pass in C (one run), about 10x faster than comparing pairs in a map."""
    return ends == sorted(ends)


def _ends_ascending_in_place(data: bytes, base: int, n: int) -> bool:
    """check_block's test read in place, the compiled build's form: whether
    the ``2 * n`` u32 offsets from ``base`` (key ends, then value ends)
    never decrease and the last is ``base``. (The pure build lists them
    and compares the list with its sorted copy: a loop of reads is slower
    in Python, and a C loop with no int objects in the compiled build.)"""
    at = base
    stop = base + 8 * n
    last = 0
    while at < stop:
        end = _le32(data, at)
        if end < last:
            return False
        last = end
        at += 4
    return last == base


def check_block(data: bytes, path: str = "", offset: int = 0) -> None:
    """Verify the structure of a raw format-2 block before it is searched
    in place (:func:`search_block`): entry count within the block, offsets
    ascending, values ending where the columns start. CorruptionError
    otherwise. O(n) in C calls; called once per block read from a file."""
    n, base = _layout(data, path, offset)
    if not n:
        if base != 0:
            raise CorruptionError("empty block has data", path=path, offset=offset)
        return
    # key ends, then value ends: one ascending run up to base (from 0: they are unsigned).
    if cython.compiled and type(data) is bytes:
        ordered = _ends_ascending_in_place(data, base, n)
    else:
        if _LITTLE:
            ends = memoryview(data)[base: base + 8 * n].cast("I").tolist()
        else:  # pragma: no cover - big-endian hosts
            ends = _u32(data[base: base + 8 * n]).tolist()
        ordered = ends[-1] == base and _ascending(ends)
    if not ordered:
        raise CorruptionError("block offsets are out of order or do not end at its columns", path=path,
                              offset=offset)


def _first_at_or_above(data: bytes, key_ends, n: int, key: bytes, inclusive: bool) -> int:
    """The index of the first of a raw block's ``n`` keys that is >= ``key``
    (> if not inclusive), ``n`` if none: a binary search with slice
    compares over the key offsets (``key_ends``, the block's first column)."""
    lo, hi = 0, n
    if inclusive:
        while lo < hi:
            mid = (lo + hi) >> 1
            if data[key_ends[mid - 1] if mid else 0: key_ends[mid]] < key:
                lo = mid + 1
            else:
                hi = mid
    else:
        while lo < hi:
            mid = (lo + hi) >> 1
            if data[key_ends[mid - 1] if mid else 0: key_ends[mid]] <= key:
                lo = mid + 1
            else:
                hi = mid
    return lo


#: Structs that split a run of fields of one width, by (width, fields), for
#: up to FIXED_RUN_MAX fields: a longer run is split FIXED_RUN_MAX at a
#: time. A width needs at most FIXED_RUN_MAX of them (about 21 KiB in all);
#: at most FIXED_RUNS_KEPT are kept, then all are dropped at once.
_fixed_structs: dict[tuple[int, int], struct.Struct] = {}
FIXED_RUN_MAX = 32
FIXED_RUNS_KEPT = 96


def _fixed_run(data: bytes, at: int, width: int, count: int) -> list[bytes]:
    """The ``count`` fields of ``width`` bytes laid end to end from ``at``,
    split by one C call per FIXED_RUN_MAX of them (a Struct of
    ``width``-byte strings) instead of a slice each; compiled, by a C loop
    of slices of the bytes in place (no struct, no tuple to copy)."""
    if cython.compiled and type(data) is bytes and 0 <= at and 0 <= width and at + width * count <= len(data):
        # (Anything else goes to struct below, which says what is wrong.)
        p = data
        out = []
        for _ in range(count):
            out.append(p[at: at + width])
            at += width
        return out
    out = []
    while count > 0:
        part = count if count <= FIXED_RUN_MAX else FIXED_RUN_MAX
        layout = _fixed_structs.get((width, part))
        if layout is None:
            if len(_fixed_structs) >= FIXED_RUNS_KEPT:
                _fixed_structs.clear()
            layout = _fixed_structs[(width, part)] = struct.Struct("<" + f"{width}s" * part)
        if part == count and not out:
            return list(layout.unpack_from(data, at))  # (one part: a seek's chunk, most blocks)
        out += layout.unpack_from(data, at)
        at += width * part
        count -= part
    return out


def _stride(ends: list[int], start: int) -> int:
    """``w`` if ``ends`` are ``start + w``, ``start + 2w``, ... (fields of one
    width laid end to end from ``start``), else -1."""
    width = ends[0] - start
    n = len(ends)
    if width > 0:
        return width if ends == list(range(start + width, start + width * n + 1, width)) else -1
    return 0 if width == 0 and ends == [start] * n else -1


def fixed_widths(data: bytes) -> tuple[int, int] | None:
    """(key width, value width) of a raw format-2 block checked by
    :func:`check_block` whose keys all take one number of bytes and whose
    values all take one (fixed-size records, the common case): what lets
    :func:`entries_after` split them without their offsets. None otherwise."""
    size = len(data)
    (n,) = _unpack_count(data, size - 4)
    if not n:
        return None
    base = size - 4 - 16 * n
    if cython.compiled and type(data) is bytes and 0 <= base:
        return _widths_in_place(data, base, n)
    ends = memoryview(data)[base: base + 8 * n].cast("I").tolist()
    key_width = _stride(ends[:n], 0)
    if key_width < 0:
        return None
    value_width = _stride(ends[n:], ends[n - 1])
    if value_width < 0:
        return None
    return key_width, value_width


def _widths_in_place(data: bytes, base: int, n: int) -> tuple[int, int] | None:
    """fixed_widths' test read in place, the compiled build's form: whether
    the ``n`` key ends from ``base`` are multiples of the first and the
    ``n`` value ends steps of one width from the last key end. (The pure
    build lists the offsets and compares them with ranges: a loop of reads
    is slower in Python, and a C loop with no int objects compiled.)"""
    key_width = _le32(data, base)
    value_start = _le32(data, base + 4 * (n - 1))
    first_value_end = _le32(data, base + 4 * n)
    if first_value_end < value_start:
        return None
    value_width = first_value_end - value_start
    for i in range(n):
        if _le32(data, base + 4 * i) != key_width * (i + 1):
            return None
        if _le32(data, base + 4 * (n + i)) != value_start + value_width * (i + 1):
            return None
    return key_width, value_width


def entries_after(data: bytes, key: bytes | None, inclusive: bool, limit: int | None,
                  widths: tuple[int, int] | None = None) -> tuple[list[bytes], bytes, list[bytes]]:
    """(keys, kinds, values) of up to ``limit`` entries (None: all) from the
    first key >= ``key`` (> if not inclusive; None: from the first) of a raw
    format-2 block checked by :func:`check_block`, decoding only those: a
    binary search over the key offsets, then slices. Every entry is taken
    as it is (one version per key, all visible: the caller's condition).
    ``kinds`` is bytes, the low byte of each entry's seq_kind. A short range
    read then pays for the entries it reads, not for the whole block.

    ``widths``: the block's :func:`fixed_widths`, if the caller knows them:
    the search then compares keys at a stride and the keys and values are
    split by Structs (:func:`_fixed_run`), without their offsets, about
    2.5 times as fast for 16 entries."""
    size = len(data)
    (n,) = _unpack_count(data, size - 4)
    base = size - 4 - 16 * n
    sk_at = base + 8 * n
    if widths is not None and n * (widths[0] + widths[1]) == base:  # (the widths are this block's)
        key_width, value_width = widths
        # _first_at_or_above's search at the keys' stride: handing it
        # range(key_width, ...) as the key ends costs a fifth of this call.
        # (Compiled, ``p`` is the block's bytes as a C pointer: a slice of
        # it makes the key's bytes directly, with no slice object.)
        p = data
        lo, hi = 0, n
        if key is None:
            pass
        elif inclusive:
            while lo < hi:
                mid = (lo + hi) >> 1
                at = mid * key_width
                if p[at: at + key_width] < key:
                    lo = mid + 1
                else:
                    hi = mid
        else:
            while lo < hi:
                mid = (lo + hi) >> 1
                at = mid * key_width
                if p[at: at + key_width] <= key:
                    lo = mid + 1
                else:
                    hi = mid
        end = n if limit is None else min(n, lo + limit)
        if lo >= end:
            return [], b"", []
        return (_fixed_run(data, lo * key_width, key_width, end - lo),
                data[sk_at + 8 * lo: sk_at + 8 * end: 8],
                _fixed_run(data, n * key_width + lo * value_width, value_width, end - lo))
    # The key ends (entries 0..n-1), then the value ends (n..2n-1): one cast.
    ends_at = memoryview(data)[base: base + 8 * n].cast("I")
    lo = 0 if key is None else _first_at_or_above(data, ends_at, n, key, inclusive)
    end = n if limit is None else min(n, lo + limit)
    if lo >= end:
        return [], b"", []
    # Entry j's key is data[ends[j]:ends[j + 1]] with ends = [start of lo, key ends of lo..end).
    ends = ends_at[lo - 1: end].tolist() if lo else [0, *ends_at[:end]]
    keys = [data[a:b] for a, b in pairwise(ends)]
    # Values follow the keys: value 0 starts where the last key ends.
    ends = ends_at[n + lo - 1: n + end].tolist() if lo else [ends_at[n - 1], *ends_at[n: n + end]]
    values = [data[a:b] for a, b in pairwise(ends)]
    return keys, data[sk_at + 8 * lo: sk_at + 8 * end: 8], values


#: search_block's answer when the key's versions may continue in the next block.
CONTINUE = object()


def search_block(data: bytes, key: bytes, read_seq: int):
    """Look ``key`` up in a raw format-2 block (checked by :func:`check_block`)
    without decoding it: a substring search of the key column when keys
    are of one length, else a binary search over its key offsets with slice
    compares. Returns ``(kind, value)`` of the newest version with sequence
    <= read_seq, ``None`` if the block shows the key has no such version, or
    :data:`CONTINUE` if the block ends while the key's versions may go on in
    the next block."""
    tail = len(data) - 4
    (n,) = _unpack_count(data, tail)
    base = tail - 16 * n
    klen = len(key)
    if n and klen:
        # The common case first: keys of one length (klen) laid end to end,
        # so that key j starts at j * klen. A C-level substring search of
        # the keys and values (the key column comes first, so a key that is
        # there is found there) finds the key's first occurrence; it is
        # taken only if entry p // klen is exactly there (both its offsets
        # checked), which makes it the key's first entry. Anything else --
        # no match, a match inside or across keys or in the values, keys of
        # other lengths, a version newer than read_seq -- is answered by the
        # binary search below. (The search runs up to ``base``, not to the
        # key column's end, which would cost an unpack; offsets are computed
        # with as few int operations as will do: each is a measurable share
        # of a lookup.)
        p = _find(data, key, 0, base)
        if p >= 0:
            j = p // klen
            if j:
                if j < n:
                    at = base + 4 * j - 4  # key end j - 1; value end j - 1 is 4n further
                    start, end = _unpack_pair(data, at)
                    if start == p and end == p + klen:
                        (sk,) = _unpack_entry(data, base + 8 * (n + j))
                        if sk >> 8 <= read_seq:
                            start, end = _unpack_pair(data, at + 4 * n)
                            return sk & 0xFF, data[start:end]
            elif p == 0 and _unpack_count(data, base)[0] == klen:
                (sk,) = _unpack_entry(data, base + 8 * n)
                if sk >> 8 <= read_seq:
                    start, end = _unpack_pair(data, base + 4 * n - 4)
                    return sk & 0xFF, data[start:end]
    key_ends: memoryview | array
    if _LITTLE:
        key_ends = memoryview(data)[base: base + 4 * n].cast("I")
    else:  # pragma: no cover - big-endian hosts
        key_ends = _u32(data[base: base + 4 * n])
    lo = _first_at_or_above(data, key_ends, n, key, True)
    sk_at = base + 8 * n
    while lo < n:
        if data[key_ends[lo - 1] if lo else 0: key_ends[lo]] != key:
            return None
        (sk,) = _unpack_entry(data, sk_at + 8 * lo)
        if sk >> 8 <= read_seq:
            if lo:
                start, end = _unpack_pair(data, base + 4 * n + 4 * (lo - 1))
            else:
                start = key_ends[n - 1]
                (end,) = _unpack_count(data, base + 4 * n)
            return sk & 0xFF, data[start:end]
        lo += 1
    return CONTINUE
