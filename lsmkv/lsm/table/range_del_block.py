"""The range-tombstone block of a table: its encoding and its strict decoder.

A table whose data has range tombstones (``db.delete_range``) keeps them,
fragmented (lsmkv/lsm/range_tombstones.py), in one block of their own,
never among the data entries. The block uses the block codec (block.py),
one entry per (fragment, sequence)::

    key = fragment start | seq_kind = sequence << 8 | 5 | value = fragment end

in fragment order (start ascending), the sequences of one fragment newest
first. It is stored like every block (``payload | type | crc32``, maybe
compressed) and located by the table properties ``range_del_offset`` and
``range_del_size`` (docs/formats.md). Decoding checks everything a reader
relies on: kind 5, start < end, fragments ascending and disjoint, one
fragment's sequences strictly descending and nonzero. A block that breaks
any of it is corruption, never tombstones.
"""

from __future__ import annotations

from lsmkv.base.errors import CorruptionError

from ..range_tombstones import FragmentedTombstones
from .block import CODEC_OFFSETS, decode_block, encode_block

#: The kind of a range tombstone entry (write_batch.RANGE_DELETE).
RANGE_DELETE_KIND = 5


def encode_range_dels(fragments: FragmentedTombstones) -> bytes:
    """The raw block holding ``fragments``."""
    keys: list[bytes] = []
    seq_kinds: list[int] = []
    values: list[bytes] = []
    for start, end, seq in fragments.tombstones():
        keys.append(start)
        seq_kinds.append(seq << 8 | RANGE_DELETE_KIND)
        values.append(end)
    return encode_block(keys, seq_kinds, values)


def decode_range_dels(raw: bytes, path: str = "", offset: int = 0) -> FragmentedTombstones:
    """The fragments a raw range-tombstone block holds; CorruptionError
    naming the problem if it is not a well-formed one."""
    block = decode_block(raw, path, offset, CODEC_OFFSETS)
    starts: list[bytes] = []
    ends: list[bytes] = []
    seqs: list[tuple[int, ...]] = []
    current: list[int] = []
    for i, start in enumerate(block.keys):
        sk = block.seq_kinds[i]
        end = block.value(i)
        seq = sk >> 8
        if sk & 0xFF != RANGE_DELETE_KIND:
            raise CorruptionError(f"range tombstone entry {i} has kind {sk & 0xFF}, not {RANGE_DELETE_KIND}",
                                  path=path, offset=offset)
        if not start < end or seq == 0:
            raise CorruptionError(f"range tombstone entry {i} is empty or has sequence 0", path=path, offset=offset)
        if starts and start == starts[-1]:
            if end != ends[-1] or seq >= current[-1]:
                raise CorruptionError(f"range tombstone entry {i} does not continue its fragment in order",
                                      path=path, offset=offset)
            current.append(seq)
            continue
        if starts and start < ends[-1]:
            raise CorruptionError(f"range tombstone fragment {i} overlaps or precedes the one before it",
                                  path=path, offset=offset)
        if current:
            seqs.append(tuple(current))
        starts.append(start)
        ends.append(end)
        current = [seq]
    if current:
        seqs.append(tuple(current))
    return FragmentedTombstones(starts, ends, seqs)
