"""Version edits and their manifest encoding."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from lsmkv.base.errors import CorruptionError, InvalidDatabaseError
from lsmkv.lsm.version import FileMeta, Version, VersionEdit, NUM_LEVELS


def meta(n, lo, hi, seq=1):
    return FileMeta(n, 100 + n, lo, hi, seq, seq + 5, 10, 2)


def test_edit_round_trip():
    e = VersionEdit()
    e.format_version = 1
    e.log_number = 7
    e.next_file_number = 20
    e.last_sequence = 12345
    e.delete_file(1, 4)
    e.add_file(0, meta(9, b"a", b"m"))
    e.add_file(2, meta(10, b"", b"\xff" * 3))
    e.compact_pointers.append((1, b"k"))
    d = VersionEdit.decode(e.encode())
    assert (d.format_version, d.log_number, d.next_file_number, d.last_sequence) == (1, 7, 20, 12345)
    assert d.deleted == {(1, 4)}
    assert [(lvl, m.number, m.smallest, m.largest, m.size, m.entries, m.tombstones) for lvl, m in d.added] == \
        [(0, 9, b"a", b"m", 109, 10, 2), (2, 10, b"", b"\xff\xff\xff", 110, 10, 2)]
    assert d.compact_pointers == [(1, b"k")]


def test_newer_format_version_is_refused_clearly():
    e = VersionEdit()
    e.format_version = 99
    with pytest.raises(InvalidDatabaseError, match="format version 99 is newer"):
        VersionEdit.decode(e.encode(), "MANIFEST-000001")


@settings(max_examples=400)
@given(st.binary(max_size=200))
def test_decoder_rejects_garbage_cleanly(data):
    try:
        VersionEdit.decode(data, "m", 0)
    except (CorruptionError, InvalidDatabaseError):
        pass


def test_apply_orders_levels_and_rejects_overlap():
    v = Version([[] for _ in range(NUM_LEVELS)])
    e = VersionEdit()
    e.add_file(0, meta(1, b"a", b"z", seq=1))
    e.add_file(0, meta(2, b"a", b"z", seq=50))
    e.add_file(1, meta(3, b"m", b"p"))
    e.add_file(1, meta(4, b"a", b"c"))
    v2 = v.apply(e)
    assert [f.number for f in v2.levels[0]] == [2, 1]  # newest first
    assert [f.number for f in v2.levels[1]] == [4, 3]  # by key
    assert [f.number for f in v2.overlapping(1, b"b", b"n")] == [4, 3]
    assert [f.number for f in v2.overlapping(1, b"d", b"l")] == []
    bad = VersionEdit()
    bad.add_file(1, meta(5, b"o", b"q"))
    with pytest.raises(CorruptionError, match="overlap"):
        v2.apply(bad)
    gone = VersionEdit()
    gone.delete_file(1, 99)
    with pytest.raises(CorruptionError, match="does not hold it"):
        v2.apply(gone)
