"""Tables written in format 1 (blocks with length columns, before format 2's
end offsets) are still read: gets, scans, compaction and check."""

from __future__ import annotations

import os
import struct
import zlib

import lsmkv
from lsmkv.lsm.check import check_db
from lsmkv.lsm.table.format import FOOTER, FOOTER_SIZE, TRAILER

_U32 = struct.Struct("<I")


def _to_format_1_block(raw: bytes) -> bytes:
    """A format-2 raw block with its offset columns turned into lengths
    (the same size, so handles stay valid)."""
    n = _U32.unpack_from(raw, len(raw) - 4)[0]
    base = len(raw) - 4 - 16 * n
    ends = struct.unpack_from(f"<{2 * n}I", raw, base)
    key_ends, value_ends = ends[:n], ends[n:]
    key_lengths = [e - s for s, e in zip((0, *key_ends[:-1]), key_ends)]
    value_starts = (key_ends[-1] if n else 0, *value_ends[:-1])
    value_lengths = [e - s for s, e in zip(value_starts, value_ends)]
    return raw[:base] + struct.pack(f"<{2 * n}I", *key_lengths, *value_lengths) + raw[base + 8 * n:]


def rewrite_as_format_1(path: str) -> None:
    """Turn an uncompressed format-2 table into the format-1 table with the same entries."""
    data = bytearray(open(path, "rb").read())
    fields = list(FOOTER.unpack_from(data, len(data) - FOOTER_SIZE))
    i_off, i_size, f_off, f_size, p_off, p_size = fields[:6]
    from lsmkv.lsm.table.block import decode_block
    index = decode_block(bytes(data[i_off:i_off + i_size]))
    handles = [struct.unpack("<QQ", index.value(i)) for i in range(len(index))]
    for off, size in [*handles, (p_off, p_size), (i_off, i_size)]:
        kind = data[off + size]
        assert kind == 0, "the test needs uncompressed tables"
        data[off:off + size] = _to_format_1_block(bytes(data[off:off + size]))
        # The crc is that of the type byte followed by the payload.
        TRAILER.pack_into(data, off + size, kind, zlib.crc32(bytes(data[off:off + size]), zlib.crc32(bytes([kind]))))
    fields[6] = 1  # format version
    head = struct.pack("<QQQQQQI", *fields[:7])
    data[-FOOTER_SIZE:] = head + struct.pack("<IQ", zlib.crc32(head), fields[8])
    open(path, "wb").write(bytes(data))


def test_a_database_of_format_1_tables_reads_compacts_and_checks(tmp_path):
    path = str(tmp_path / "db")
    expected = {}
    with lsmkv.open(path, compression=None, write_buffer_size=64 << 10, disable_auto_compactions=True) as db:
        for i in range(3000):
            key, value = b"key%06d" % (i * 7 % 3000), b"v%d-" % i * (i % 5 + 1)
            db.put(key, value)
            expected[key] = value
            if i % 5 == 0:
                db.delete(b"key%06d" % i)
                expected.pop(b"key%06d" % i, None)
        db.flush()
    tables = [f for f in os.listdir(path) if f.endswith(".sst")]
    assert len(tables) >= 2
    for name in tables:
        rewrite_as_format_1(os.path.join(path, name))
    assert check_db(path).ok
    with lsmkv.open(path, block_cache_size=1 << 20) as db:
        for key in list(expected)[::37] + [b"key999999", b"absent"]:
            for _ in range(10):  # raw reads, cache hits, the key index
                assert db.get(key) == expected.get(key)
        assert list(db.scan()) == sorted(expected.items())
        assert list(db.scan(reverse=True)) == sorted(expected.items(), reverse=True)
        db.compact_range()  # merges the format-1 tables into format-2 ones
        assert list(db.scan()) == sorted(expected.items())
    versions = set()
    for name in os.listdir(path):
        if name.endswith(".sst"):
            raw = open(os.path.join(path, name), "rb").read()
            versions.add(FOOTER.unpack_from(raw, len(raw) - FOOTER_SIZE)[6])
    assert versions == {2}
    assert check_db(path).ok
