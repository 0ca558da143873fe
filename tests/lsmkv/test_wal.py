"""The log format: framing, fragments, torn tails, corruption."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from lsmkv.base.errors import CorruptionError
from lsmkv.base.fs import DEFAULT_FS
from lsmkv.lsm.wal import BLOCK_SIZE, HEADER_SIZE, LogReader, LogWriter


def write_log(path, payloads):
    f = DEFAULT_FS.create(str(path))
    w = LogWriter(f)
    offsets = []
    for p in payloads:
        offsets.append(f.size)
        w.add_record(p)
    w.sync()
    w.close()
    return path.read_bytes(), offsets


def read_all(data, salvage=False, path="log"):
    r = LogReader(data, path, salvage=salvage)
    return [p for _, p in r.records()], r.report


def test_round_trip_small_and_fragmented(tmp_path):
    rng = random.Random(7)
    payloads = [rng.randbytes(rng.choice([0, 1, 10, 100, BLOCK_SIZE - HEADER_SIZE, BLOCK_SIZE, 3 * BLOCK_SIZE + 5]))
                for _ in range(60)]
    data, _ = write_log(tmp_path / "a.log", payloads)
    got, report = read_all(data)
    assert got == payloads
    assert report.torn_tail_bytes == 0 and not report.dropped


def test_block_trailer_shorter_than_header_is_padded(tmp_path):
    # Leave exactly 6 bytes in the first block: the writer must pad, the reader skip.
    first = b"x" * (BLOCK_SIZE - HEADER_SIZE - 6)
    data, offsets = write_log(tmp_path / "p.log", [first, b"second"])
    assert offsets[1] == BLOCK_SIZE  # the next record starts at the next block
    assert data[BLOCK_SIZE - 6: BLOCK_SIZE] == bytes(6)
    assert read_all(data)[0] == [first, b"second"]


@pytest.mark.parametrize("size", [50, 2 * BLOCK_SIZE + 100])
def test_every_truncation_of_the_last_record_is_a_torn_tail(tmp_path, size):
    payloads = [b"a" * 30, b"b" * 40, bytes(range(256)) * (size // 256) + b"z" * (size % 256)]
    data, offsets = write_log(tmp_path / "t.log", payloads)
    step = 1 if size < 1000 else 97
    for cut in range(offsets[2] + 1, len(data), step):
        got, report = read_all(data[:cut])
        assert got == payloads[:2], cut
        assert report.torn_tail_bytes == cut - offsets[2]


def test_zeroed_tail_stops_reading(tmp_path):
    payloads = [b"one", b"two", b"three"]
    data, offsets = write_log(tmp_path / "z.log", payloads)
    damaged = data[: offsets[1]] + bytes(len(data) - offsets[1])
    got, report = read_all(damaged)
    assert got == [b"one"]
    assert report.torn_tail_bytes == len(data) - offsets[1]


def test_last_record_cut_short_by_zeros_is_a_torn_tail(tmp_path):
    # A preallocated log whose last append was cut short: its bytes end in
    # the file's zero-filled space.
    data, offsets = write_log(tmp_path / "d.log", [b"one", b"two" * 10])
    for cut in range(offsets[1] + 1, len(data)):
        damaged = data[:cut] + bytes(len(data) - cut + 100)
        got, report = read_all(damaged)
        assert got == [b"one"], cut
        assert report.torn_tail_bytes == len(damaged) - offsets[1]


@pytest.mark.parametrize("where", ["crc", "length", "type", "data"])
def test_flipped_bit_in_the_last_record_is_corruption(tmp_path, where):
    data, offsets = write_log(tmp_path / "d.log", [b"one", b"two" * 10])
    at = offsets[1] + {"crc": 1, "length": 4, "type": 6, "data": HEADER_SIZE + 3}[where]
    for bit in range(8):
        damaged = bytearray(data + bytes(64))  # the zeros of a preallocated log, too
        damaged[at] ^= 1 << bit
        if where == "type" and damaged[at] == 0:
            # A type byte of zero is where an append that never finished
            # begins (the writer writes it last): the log's end, by design.
            got, report = read_all(bytes(damaged))
            assert got == [b"one"] and report.torn_tail_bytes == len(damaged) - offsets[1]
            continue
        with pytest.raises(CorruptionError) as info:
            read_all(bytes(damaged), path="d.log")
        assert info.value.offset == offsets[1]
        # Salvage keeps the records before it and says what it dropped.
        got, report = read_all(bytes(damaged), salvage=True)
        assert got == [b"one"] and report.dropped[0][0] == offsets[1]


def test_damage_followed_by_more_records_in_the_same_block_is_corruption(tmp_path):
    data, offsets = write_log(tmp_path / "m.log", [b"r%d" % i * 5 for i in range(20)])
    damaged = bytearray(data)
    damaged[offsets[3] + HEADER_SIZE] ^= 0xFF  # several bits: no single flip explains it
    with pytest.raises(CorruptionError, match="checksum mismatch") as info:
        read_all(bytes(damaged))
    assert info.value.offset == offsets[3]


def test_corruption_followed_by_valid_records_is_reported(tmp_path):
    # Records in three different blocks: damage the first, the later blocks stay valid.
    payloads = [b"a" * (BLOCK_SIZE - 2 * HEADER_SIZE), b"b" * 100, b"c" * (BLOCK_SIZE), b"d" * 10]
    data, offsets = write_log(tmp_path / "c.log", payloads)
    damaged = bytearray(data)
    damaged[offsets[0] + HEADER_SIZE + 5] ^= 0x01
    with pytest.raises(CorruptionError, match="checksum mismatch") as info:
        read_all(bytes(damaged), path="c.log")
    assert info.value.path == "c.log" and info.value.offset == offsets[0]
    got, report = read_all(bytes(damaged), salvage=True)
    assert b"a" * (BLOCK_SIZE - 2 * HEADER_SIZE) not in got
    assert got[-1] == b"d" * 10
    assert report.dropped and report.dropped[0][0] == offsets[0]


def test_damaged_record_mid_block_is_corruption_and_salvage_keeps_the_rest_of_the_block(tmp_path):
    # All in one block: a damaged payload whose length field is intact is
    # followed by intact records, so it is no torn tail.
    payloads = [b"one", b"two" * 10, b"three", b"four"]
    data, offsets = write_log(tmp_path / "m.log", payloads)
    damaged = bytearray(data)
    damaged[offsets[1] + HEADER_SIZE + 3] ^= 0x40
    with pytest.raises(CorruptionError, match="checksum mismatch") as info:
        read_all(bytes(damaged))
    assert info.value.offset == offsets[1]
    got, report = read_all(bytes(damaged), salvage=True)
    assert got == [b"one", b"three", b"four"]
    assert report.dropped == [(offsets[1], offsets[2] - offsets[1], "checksum mismatch")]
    assert report.torn_tail_bytes == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3 * BLOCK_SIZE), st.booleans())
def test_reader_never_crashes_on_garbage(data, salvage):
    r = LogReader(data, "fuzz", salvage=salvage)
    try:
        for _ in r.records():
            pass
    except CorruptionError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=20), st.data())
def test_bit_flips_are_never_returned_as_data(payloads, data):
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        from pathlib import Path
        raw, _ = write_log(Path(d) / "f.log", payloads)
    pos = data.draw(st.integers(0, len(raw) - 1))
    bit = data.draw(st.integers(0, 7))
    flipped = bytearray(raw)
    flipped[pos] ^= 1 << bit
    try:
        got, _ = read_all(bytes(flipped), salvage=True)
    except CorruptionError:
        return
    # Whatever comes back must be records that were written, in order.
    it = iter(payloads)
    assert all(any(g == p for p in it) for g in got)
    del os


class _KilledMidAppend(Exception):
    pass


def test_an_append_killed_midway_reads_as_a_torn_tail_whatever_bytes_landed(tmp_path):
    """A copy into the mapped log is not ordered: a process killed during it
    can leave any of the append's bytes written (seen in the crash test: a
    zero header followed by its batch's bytes). The writer writes the first
    header's type byte last, so every such state reads as a torn tail."""
    path = str(tmp_path / "000001.log")
    f = DEFAULT_FS.create_log(path, 1 << 20)
    w = LogWriter(f)
    w.add_record(b"first")
    w.add_records([b"second" * 10, b"third" * 10])
    mapping = f._map

    class Killing:
        """The mapping, but the process dies at the single-byte store."""
        def __setitem__(self, index, value):
            if isinstance(index, int):
                raise _KilledMidAppend
            mapping[index] = value

        def __getattr__(self, name):
            return getattr(mapping, name)

    object.__setattr__(f, "_map", Killing())
    with pytest.raises(_KilledMidAppend):
        w.add_records([b"fourth" * 100, b"fifth" * 100])
    object.__setattr__(f, "_map", mapping)
    data = bytes(mapping[: len(mapping)])
    reader = LogReader(data, path)
    assert [p for _, p in reader] == [b"first", b"second" * 10, b"third" * 10]
    assert reader.report.torn_tail_bytes > 0
    # The same bytes with the type byte written but not the checksum and
    # length (what an unordered copy left before) are damage, not a tail.
    offsets = [off for off, _ in LogReader(data, path)]
    tail = offsets[-1] + HEADER_SIZE + len(b"third" * 10)
    broken = bytearray(data)
    broken[tail:tail + HEADER_SIZE - 1] = bytes(HEADER_SIZE - 1)
    broken[tail + HEADER_SIZE - 1] = 1
    with pytest.raises(CorruptionError):
        list(LogReader(bytes(broken), path))
    f.abandon()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=40), st.binary(max_size=3000), st.sampled_from([0, 1, 2, 4])),
                min_size=1, max_size=40),
       st.booleans())
def test_a_record_framed_in_place_is_the_record_add_record_writes(tmp_path_factory, ops, mapped):
    """The compiled put path encodes its record after room for the header
    (encode_single_framed) and the log writer fills the header in place
    (add_framed): the log holds exactly what encode_single and add_record
    write, on a mapped log and a plain file, records crossing blocks
    included (those go through add_record)."""
    from lsmkv.lsm.write_batch import encode_single, encode_single_framed
    folder = tmp_path_factory.mktemp("framed")
    logs = []
    for name, framed in (("plain", False), ("framed", True)):
        path = str(folder / name)
        f = DEFAULT_FS.create_log(path, 4096) if mapped else DEFAULT_FS.create(path)
        w = LogWriter(f)
        total = 0
        for seq, (key, value, kind) in enumerate(ops, 1):
            if framed:
                record = encode_single_framed(seq, kind, key, value, HEADER_SIZE)
                assert bytes(record[HEADER_SIZE:]) == encode_single(seq, kind, key, value)
                total += w.add_framed(record)
            else:
                total += w.add_record(encode_single(seq, kind, key, value))
        w.sync()
        w.close()
        data = DEFAULT_FS.read_file(path)
        assert len(data) == total
        logs.append(data)
    assert logs[0] == logs[1]
    assert read_all(logs[1])[0] == [encode_single(seq, kind, key, value)
                                    for seq, (key, value, kind) in enumerate(ops, 1)]
