"""A get of a leaf outside the buffer pool searches the page image in place
(btree.node.search_leaf_page; on the get path btree.node.leaf_value, the
same with its checks in one step, falling back to it on any failure), and
a range read decodes only the cells it reads (btree.node.LeafImage): all
must answer exactly what a decoded page answers, report damage as
CorruptionError, and decide which leaves the pool keeps (a leaf read a
second time while remembered; a scan does not fill the pool)."""

from __future__ import annotations

import gc
import os
import random
import struct
from bisect import bisect_right

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import btree
from btree.node import (_PAST_END, _U32, HEADER, UNCHECKED, Expiring, Node, Overflow, _cell_value_in_place,
                        _checked_leaf_count, _Damage, _leaf_header, _search_cells, _slot_at_or_above, decode_node,
                        encode_node, leaf_image, leaf_value, read_leaf_image, search_leaf_page)
from btree.pager import page_slots
from btree.tree import _internal_used, _leaf_used
from lsmkv.base.checksum import crc32
from lsmkv.base.errors import CorruptionError

PAGE = 4096

# Keys from a two-letter alphabet share long prefixes: "ab", "aba", "abab"...
_keys = st.binary(min_size=0, max_size=12).map(lambda b: bytes(0x61 + (c & 1) for c in b))
_values = st.one_of(
    st.binary(max_size=60),
    st.builds(Overflow, st.integers(2, 1 << 31), st.integers(0, 1 << 30)),
    st.builds(Expiring, st.integers(0, 1 << 62), st.binary(max_size=40)),
    st.builds(Expiring, st.integers(0, 1 << 62), st.builds(Overflow, st.integers(2, 1 << 31),
                                                           st.integers(0, 1 << 30))),
)


def _leaf(entries: dict[bytes, object]) -> bytes:
    node = Node(5, True)
    node.keys = sorted(entries)
    node.vals = [entries[k] for k in node.keys]
    node.ovf = any(type(v) is not bytes for v in node.vals)
    node.used = _leaf_used(node)
    return bytes(encode_node(node, PAGE, epoch=1))


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is Overflow:
        return (a.page, a.length) == (b.page, b.length)
    if type(a) is Expiring:
        return a.deadline == b.deadline and _same(a.value, b.value)
    return a == b


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=40), st.lists(_keys, max_size=30))
def test_raw_search_answers_what_the_decoded_page_answers(entries, others):
    img = _leaf(entries)
    decoded = decode_node(img, 5, PAGE, "f")
    table = dict(zip(decoded.keys, decoded.vals))
    keys = sorted(entries)
    probes = set(keys) | set(others) | {b"", b"\xff" * 13}
    probes |= {k + b"\x00" for k in keys} | {k[:-1] for k in keys if k}  # between and beside each key
    for probe in probes:
        found = search_leaf_page(img, 5, PAGE, "f", probe)
        if probe in table:
            assert _same(found, table[probe]), probe
        else:
            assert found is None, probe


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=40), st.lists(_keys, max_size=30), st.integers(0, 3))
def test_the_get_path_answers_what_the_checks_one_by_one_answer(entries, others, epoch):
    """leaf_value (one header unpack, the search inlined) against
    search_leaf_page and the decoded page: every key of the page, the
    first and the last, absent keys between, before and beyond them, keys
    that are prefixes of others; and a page of a checkpoint newer than
    ``max_epoch`` is never searched."""
    img = _leaf(entries)  # (written at epoch 1)
    decoded = decode_node(img, 5, PAGE, "f")
    table = dict(zip(decoded.keys, decoded.vals))
    keys = sorted(entries)
    probes = set(keys) | set(others) | {b"", b"\xff" * 13}
    probes |= {k + b"\x00" for k in keys} | {k[:-1] for k in keys if k} | {k + b"\xff" for k in keys}
    for probe in probes:
        got = leaf_value(img, 5, PAGE, probe, epoch)
        if epoch < 1:
            assert got is UNCHECKED
            continue
        assert _same(got, search_leaf_page(img, 5, PAGE, "f", probe)), probe
        if probe in table:
            assert _same(got, table[probe]), probe
        else:
            assert got is None, probe
    assert leaf_value(img, 6, PAGE, keys[0] if keys else b"a", 1) is UNCHECKED  # misplaced
    assert leaf_value(img[:-1], 5, PAGE, b"a", 1) is UNCHECKED  # short


def test_the_get_path_never_answers_from_a_page_with_a_flipped_bit():
    rng = random.Random(5)
    img = _leaf({rng.randbytes(16): rng.randbytes(100) for _ in range(25)})
    keys = decode_node(img, 5, PAGE, "f").keys
    for bit in rng.sample(range(PAGE * 8), 600):
        bad = bytearray(img)
        bad[bit // 8] ^= 1 << (bit % 8)
        key = keys[bit % len(keys)]
        assert leaf_value(bytes(bad), 5, PAGE, key, 1) is UNCHECKED, bit
        assert leaf_value(bytes(bad), 5, PAGE, key + b"!", 1) is UNCHECKED, bit


def _resealed(img: bytearray) -> bytes:
    img[:4] = _U32.pack(crc32(memoryview(img)[4:]))
    return bytes(img)


def _agree(img: bytes, probe: bytes) -> None:
    """leaf_value answers what search_leaf_page answers, and UNCHECKED
    exactly where it raises (the get then runs it and raises that)."""
    got = leaf_value(img, 5, PAGE, probe, 1)
    try:
        want = search_leaf_page(img, 5, PAGE, "f", probe)
    except CorruptionError:
        assert got is UNCHECKED, probe
    else:
        assert got is not UNCHECKED and _same(got, want), probe


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _values, min_size=1, max_size=40), st.lists(_keys, max_size=10), st.data())
def test_malformed_cells_in_a_sound_page_are_left_to_the_checks_one_by_one(entries, others, data):
    """Bytes a bad write changed in a page whose checksum holds (resealed):
    slots, cell headers, keys. Whatever the search meets, the get path
    agrees with search_leaf_page."""
    img = bytearray(_leaf(entries))
    count = len(entries)
    slots = struct.unpack_from(f"<{count}H", img, 32)
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.one_of(
            st.integers(32, 32 + 2 * count - 1),  # the slot array
            st.sampled_from(slots).flatmap(lambda off: st.integers(off, off + 7)),  # a cell header
            st.integers(32, PAGE - 1)))
        img[where] = data.draw(st.integers(0, 255))
    bad = _resealed(img)
    keys = sorted(entries)
    for probe in {*keys, *others, b"", b"\xff" * 13, *(k + b"\x00" for k in keys)}:
        _agree(bad, probe)


def _first_slot_not_below(img: bytes, count: int, key: bytes, above: bool = False) -> int:
    """The binary search of a leaf image as plain Python slices make it
    (each probed cell's key ``img[ks:ks + klen]``, cut at the page's end),
    -1 where a probed cell's header runs past the page; with ``above``,
    the first slot whose key is above ``key``."""
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) >> 1
        off = struct.unpack_from("<H", img, 32 + 2 * mid)[0]
        if off + 7 > len(img):
            return -1
        klen, kind, _vlen = struct.unpack_from("<HBI", img, off)
        ks = off + 7 + (8 if kind & 2 else 0)
        if img[ks:ks + klen] < key or (above and img[ks:ks + klen] == key):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _reference_value(img: bytes, i: int, count: int, key: bytes):
    """Slot ``i``'s cell as slices and struct read it: its value if its
    key is ``key``, None if another; "past the end" or "kind" for damage."""
    off = struct.unpack_from("<H", img, 32 + 2 * i)[0]
    try:
        klen, kind, vlen = struct.unpack_from("<HBI", img, off)
        ks, deadline = off + 7, None
        if kind & 2:
            deadline = struct.unpack_from("<Q", img, ks)[0]
            ks += 8
        ke = ks + klen
        if off < 32 + 2 * count or ke > PAGE:
            return "past the end"
        if img[ks:ke] != key:
            return None
        if kind > 3:
            return "kind"
        val = img[ke:ke + vlen] if kind & 1 == 0 else Overflow(struct.unpack_from("<I", img, ke)[0], vlen)
        if kind & 1 == 0 and ke + vlen > PAGE:
            return "past the end"
    except struct.error:
        return "past the end"
    return val if deadline is None else Expiring(deadline, val)


def _as_reference(found):
    if found is _PAST_END:
        return "past the end"
    return "kind" if type(found) is _Damage else found


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _values, min_size=1, max_size=40), st.lists(_keys, max_size=10), st.data())
def test_the_search_in_place_finds_what_slices_of_the_image_find(entries, others, data):
    """_slot_at_or_above and _cell_value_in_place (C loops in the compiled
    build, Python in the pure one) and _search_cells (either build's) against
    the search written with slices and struct, on sound pages and on pages
    with bytes changed in the slots, cell headers, keys and values."""
    img = bytearray(_leaf(entries))
    count = len(entries)
    slots = struct.unpack_from(f"<{count}H", img, 32)
    for _ in range(data.draw(st.integers(0, 3))):
        where = data.draw(st.one_of(
            st.integers(32, 32 + 2 * count - 1),
            st.sampled_from(slots).flatmap(lambda off: st.integers(off, min(off + 30, PAGE - 1))),
            st.integers(32, PAGE - 1)))
        img[where] = data.draw(st.integers(0, 255))
    img = bytes(img)
    keys = sorted(entries)
    for probe in {*keys, *others, b"", b"\xff" * 13, *(k + b"\x00" for k in keys), *(k[:-1] for k in keys)}:
        lo = _first_slot_not_below(img, count, probe)
        assert _slot_at_or_above(img, count, probe) == lo, probe
        assert _slot_at_or_above(img, count, probe, True) == _first_slot_not_below(img, count, probe, True), probe
        want = "past the end" if lo < 0 else None if lo == count else _reference_value(img, lo, count, probe)
        assert _same(_as_reference(_search_cells(img, count, PAGE, probe)), want), probe
        if 0 <= lo < count:
            assert _same(_as_reference(_cell_value_in_place(img, lo, count, PAGE, probe)), want), probe


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=40), st.data())
def test_the_header_check_in_place_passes_what_the_unpacked_header_passes(entries, data):
    """_checked_leaf_count (the header read in place, compiled) against
    _leaf_header: sound pages (half of all checksums have their top bit
    set), bytes changed with or without a new checksum, other page
    numbers and epochs, an internal page."""
    img = bytearray(_leaf(entries))
    if data.draw(st.booleans()):
        for _ in range(data.draw(st.integers(1, 3))):
            img[data.draw(st.integers(0, PAGE - 1))] = data.draw(st.integers(0, 255))
        if data.draw(st.booleans()):
            img = bytearray(_resealed(img))
    img = bytes(img)
    pgno = data.draw(st.sampled_from([5, 4, 5 | 1 << 24, 5 | 1 << 31]))
    max_epoch = data.draw(st.sampled_from([0, 1, 2, (1 << 63) - 1]))
    hdr = _leaf_header(img, pgno, PAGE, max_epoch)
    assert _checked_leaf_count(img, pgno, PAGE, max_epoch) == (-1 if hdr is None else hdr[4])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=40), st.lists(_keys, max_size=6),
       st.sampled_from([0, 9, (1 << 31) + 5, (1 << 32) - 1]), st.data())
def test_a_range_reads_leaf_image_is_checked_and_searched_as_the_unpacked_header_and_slices_do(entries, others,
                                                                                               link, data):
    """leaf_image (compiled: the header, the slot array and the links read
    in place) against _leaf_header with the slots unpacked by struct: the
    same pages refused, the same slots and links kept; then
    LeafImage.lower_bound (compiled: _slot_at_or_above in place) against
    the search written with slices, inclusive or not, a cell past the
    page's end a CorruptionError. On sound pages and on pages with bytes
    changed, resealed or not."""
    node = Node(5, True)
    node.keys = sorted(entries)
    node.vals = [entries[k] for k in node.keys]
    node.ovf = any(type(v) is not bytes for v in node.vals)
    node.prev, node.next = link, link ^ 0x5A5A5A5A
    node.used = _leaf_used(node)
    img = bytearray(encode_node(node, PAGE, epoch=1))
    count = len(entries)
    if data.draw(st.booleans()):
        for _ in range(data.draw(st.integers(1, 3))):
            where = data.draw(st.one_of(st.integers(0, PAGE - 1), st.integers(8, 31),
                                        st.integers(32, 32 + 2 * count + 1)))
            img[where] = data.draw(st.integers(0, 255))
        if data.draw(st.booleans()):
            img = bytearray(_resealed(img))
    img = bytes(img)
    max_epoch = data.draw(st.sampled_from([0, 1, (1 << 64) - 1]))
    hdr = _leaf_header(img, 5, PAGE, max_epoch)
    slots = struct.unpack_from(f"<{hdr[4]}H", img, 32) if hdr is not None else None
    refused = hdr is None or (bool(slots) and min(slots) < 32 + 2 * len(slots))
    image = leaf_image(img, 5, PAGE, "f", max_epoch)
    assert (image is None) == refused
    if image is None:
        return
    assert (image.offsets(), image.count, image.prev, image.next) == (slots, len(slots), hdr[8], hdr[9])
    keys = sorted(entries)
    for probe in {*keys, *others, b"", b"\xff" * 13, *(k + b"\x00" for k in keys), *(k[:-1] for k in keys)}:
        for inclusive in (True, False):
            want = _first_slot_not_below(img, len(slots), probe, not inclusive)
            if want < 0:
                with pytest.raises(CorruptionError, match="past the end"):
                    image.lower_bound(probe, inclusive)
            else:
                assert image.lower_bound(probe, inclusive) == want, (probe, inclusive)


def test_the_header_check_in_place_refuses_what_the_unpacked_header_refuses():
    node = Node(5, False)
    node.keys = [b"m"]
    node.kids = [7, 8]
    node.used = _internal_used(node)
    internal = bytes(encode_node(node, PAGE, epoch=1))
    sound = _leaf({b"k%d" % i: b"v" for i in range(30)})
    for img, pgno, size, epoch in [(internal, 5, PAGE, 1), (sound, 6, PAGE, 1), (sound, 5, PAGE, 0),
                                   (sound[:-1], 5, PAGE - 1, 1), (sound, 5, PAGE, 1)]:
        hdr = _leaf_header(img, pgno, size, epoch)
        assert _checked_leaf_count(img, pgno, size, epoch) == (-1 if hdr is None else hdr[4])
    assert _checked_leaf_count(sound, 5, PAGE, 1) == 30


def test_every_change_to_the_found_cells_header_is_answered_as_slices_answer():
    """Each byte of the found cell's header (key length, kind, value
    length) set to values that make it damaged, expiring, an overflow, or
    longer than the page: the search in place answers what the search
    written with slices and struct answers."""
    for entries in ({b"k%05d" % i: (b"v" * 30 if i % 3 else Overflow(9, 70000)) for i in range(25)},
                    {b"k%05d" % i: b"" for i in range(25)}):  # (a deadline would run past the page)
        _every_header_change_agrees(entries)


def _every_header_change_agrees(entries: dict) -> None:
    sound = _leaf(entries)
    keys = sorted(entries)
    slots = struct.unpack_from("<25H", sound, 32)
    nearest_end = max(range(25), key=lambda i: slots[i])
    for i in (0, 12, 24, nearest_end):
        for byte in range(7):
            for value in (0, 1, 2, 3, 4, 9, 0x80, 0xFF):
                img = bytearray(sound)
                img[slots[i] + byte] = value
                img = bytes(img)
                for probe in (keys[i], keys[i] + b"\x00"):
                    lo = _first_slot_not_below(img, 25, probe)
                    want = "past the end" if lo < 0 else None if lo == 25 else _reference_value(img, lo, 25, probe)
                    got = _search_cells(img, 25, PAGE, probe)
                    assert _same(_as_reference(got), want), (i, byte, value, probe)
                    if 0 <= lo < 25:
                        got = _cell_value_in_place(img, lo, 25, PAGE, probe)
                        assert _same(_as_reference(got), want), (i, byte, value, probe)
                    # The tail on the changed cell itself, wherever the search lands.
                    got = _cell_value_in_place(img, i, 25, PAGE, probe)
                    assert _same(_as_reference(got), _reference_value(img, i, 25, probe)), (i, byte, value, probe)


def test_a_probed_key_cut_by_the_pages_end_compares_as_its_slice_does():
    """A cell whose key length runs past the page: the search in place
    compares the key up to the page's end, as the slice does."""
    node = Node(5, True)
    node.keys = [b"k%05d" % i for i in range(20)]
    node.vals = [b"v" * 30 for _ in node.keys]
    node.used = _leaf_used(node)
    img = bytearray(encode_node(node, PAGE, epoch=1))
    slots = struct.unpack_from("<20H", img, 32)
    last = max(range(20), key=lambda i: slots[i])  # the cell nearest the page's end
    struct.pack_into("<H", img, slots[last], 0xFFFF)
    img = bytes(img)
    cut = img[slots[last] + 7:]  # its key as the slice cuts it
    for probe in (*node.keys, cut, cut[:-1], cut + b"\x00", cut[:-1] + b"\xff"):
        assert _slot_at_or_above(img, 20, probe) == _first_slot_not_below(img, 20, probe), probe


def test_malformed_cells_the_search_meets_are_reported_by_the_checks_one_by_one():
    node = Node(5, True)
    node.keys = [b"k%05d" % i for i in range(20)]
    node.vals = [b"v" * 30 for _ in node.keys]
    node.used = _leaf_used(node)
    img = bytearray(encode_node(node, PAGE, epoch=1))
    slots = list(struct.unpack_from("<20H", img, 32))
    cases = []
    overlap = bytearray(img)
    struct.pack_into("<H", overlap, 32, 40)  # slot 0 -> inside the slot array; b"" sorts first
    cases.append((_resealed(overlap), b"", "past the end"))
    past = bytearray(img)
    struct.pack_into("<H", past, 32 + 2 * 9, PAGE - 3)  # slot 9 -> a cell header cut by the page's end
    cases.append((_resealed(past), node.keys[9], "past the end"))
    long_value = bytearray(img)
    struct.pack_into("<I", long_value, slots[19] + 3, 5000)  # the last value runs past the page
    cases.append((_resealed(long_value), node.keys[19], "past the end"))
    kind = bytearray(img)
    kind[slots[4] + 2] = 9  # an unknown value kind
    cases.append((_resealed(kind), node.keys[4], "unknown value kind"))
    for bad, key, match in cases:
        with pytest.raises(CorruptionError, match=match):
            search_leaf_page(bad, 5, PAGE, "f", key)
        assert leaf_value(bad, 5, PAGE, key, 1) is UNCHECKED, match


def _image_range(img: bytes, bound, inclusive: bool, limit: int, reverse: bool = False):
    """A range read of a leaf image as Tree.chunk_forward/chunk_backward
    make it: up to ``limit`` entries from ``bound`` (below it with
    ``reverse``); (keys, values, whether they reach the page's end)."""
    image = read_leaf_image(img, 5, PAGE, "f")
    if reverse:
        j = image.count if bound is None else image.lower_bound(bound, True)
        i = max(0, j - limit)
    else:
        i = 0 if bound is None else image.lower_bound(bound, inclusive)
        j = min(image.count, i + limit)
    keys, vals, _ovf = image.cells(i, j)
    return list(keys), list(vals), (i == 0 if reverse else j == image.count)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=40), st.lists(_keys, max_size=12), st.integers(1, 45))
def test_a_range_read_of_a_page_answers_what_the_decoded_page_answers(entries, others, limit):
    img = _leaf(entries)
    decoded = decode_node(img, 5, PAGE, "f")
    keys = decoded.keys
    bounds = [None, b"", b"\xff" * 13, *keys, *others] + [k + b"\x00" for k in keys] + [k[:-1] for k in keys if k]
    for bound in bounds:
        for inclusive in (True, False):
            got_keys, got_vals, complete = _image_range(img, bound, inclusive, limit)
            if bound is None:
                i = 0
            else:
                i = next((n for n, k in enumerate(keys) if k > bound or (inclusive and k == bound)), len(keys))
            want = list(zip(keys, decoded.vals))[i:i + limit]
            assert got_keys == [k for k, _ in want], (bound, inclusive)
            assert all(_same(a, v) for a, (_, v) in zip(got_vals, want))
            assert complete == (i + limit >= len(keys))
        got_keys, got_vals, complete = _image_range(img, bound, True, limit, reverse=True)
        j = len(keys) if bound is None else sum(1 for k in keys if k < bound)
        want = list(zip(keys, decoded.vals))[max(0, j - limit):j]
        assert got_keys == [k for k, _ in want], ("reverse", bound)
        assert all(_same(a, v) for a, (_, v) in zip(got_vals, want))
        assert complete == (j - limit <= 0)


def test_an_empty_leaf_holds_nothing_and_other_pages_are_refused():
    assert search_leaf_page(_leaf({}), 5, PAGE, "f", b"a") is None
    inner = Node(5, False)
    inner.keys, inner.kids = [b"m"], [2, 3]
    inner.used = _internal_used(inner)
    with pytest.raises(CorruptionError, match="expected a leaf page"):
        search_leaf_page(bytes(encode_node(inner, PAGE, 1)), 5, PAGE, "f", b"m")
    assert leaf_value(bytes(encode_node(inner, PAGE, 1)), 5, PAGE, b"m", 1) is UNCHECKED
    assert leaf_value(_leaf({}), 5, PAGE, b"a", 1) is None
    with pytest.raises(CorruptionError, match="image of page 5"):
        search_leaf_page(_leaf({b"a": b"1"}), 6, PAGE, "f", b"a")


def test_every_flipped_bit_is_reported_never_returned():
    rng = random.Random(3)
    img = _leaf({rng.randbytes(16): rng.randbytes(100) for _ in range(25)})
    key = decode_node(img, 5, PAGE, "f").keys[7]
    for bit in rng.sample(range(PAGE * 8), 400):
        bad = bytearray(img)
        bad[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(CorruptionError):
            search_leaf_page(bytes(bad), 5, PAGE, "f", key)
        with pytest.raises(CorruptionError):
            _image_range(bytes(bad), key, True, 4, reverse=bit % 2 == 1)


def _fill(path, n, **options):
    rng = random.Random(11)
    table = {rng.randbytes(16): rng.randbytes(100) for _ in range(n)}
    with btree.open(path, **options) as db:
        for k, v in table.items():
            db.put(k, v)
    return table


def _leaf_of(tree, key: bytes) -> int:
    pg = tree.root
    for _ in tree.inner:
        node = tree.node(pg, False)
        pg = node.kids[bisect_right(node.keys, key)]
    return pg


def test_gets_beyond_the_pool_read_leaves_raw_and_keep_those_read_again(tmp_path):
    path = str(tmp_path / "db")
    table = _fill(path, 20_000)
    keys = list(table)
    with btree.open(path, cache_size=32 * 4096) as db:
        tree, pool = db._tree, db._pool
        assert db.stats()["pages_per_level"][-1] > 10 * pool.capacity  # the data is many times the pool
        assert pool.admit_after == 2  # (a new pool admits on the second read)
        leaves = min(30, pool.capacity - 2)
        one_per_leaf = list({_leaf_of(tree, k): k for k in keys[:600]}.values())[:leaves]
        for k in one_per_leaf:
            assert db[k] == table[k]
        # A leaf read once stays out of the pool; it is only remembered.
        assert not any(node.leaf for node in pool.pages.values())
        assert len(pool.seen) == leaves
        # A leaf read again while remembered is decoded and kept.
        k = one_per_leaf[-1]
        pg = _leaf_of(tree, k)
        assert pg in pool.seen
        assert db.get(k) == table[k]
        assert pg not in pool.seen and pool.pages[pg].leaf
        assert db.check_invariants() == []
        # Every answer through either path is the stored one.
        for k in random.Random(2).sample(keys, 3000):
            assert db.get(k) == table[k]
            assert db.get(k + b"!") is None
        assert len(pool.seen) <= pool.capacity


@pytest.mark.parametrize("damage", ["bit", "misplaced", "newer"])
def test_a_damaged_leaf_outside_the_pool_is_reported_by_a_get(tmp_path, damage):
    """A flipped bit, a page written at the wrong place and a page of a
    checkpoint newer than the meta page's: a get of a key in that leaf
    raises CorruptionError (the get path's one-step checks fall back to
    the checks one by one, which name what is wrong)."""
    path = str(tmp_path / "db")
    table = _fill(path, 5_000)
    with btree.open(path) as db:
        key = next(iter(table))
        pg = _leaf_of(db._tree, key)
        other = _leaf_of(db._tree, max(table))
        page_size = db._tree.page_size
        epoch = db._pager.meta.epoch
    assert other != pg
    slot = page_slots(path)[pg]
    with open(os.path.join(path, "btree.pages"), "r+b") as f:
        f.seek(slot * page_size)
        img = bytearray(f.read(page_size))
        if damage == "bit":
            img[page_size // 2] ^= 0x10
        else:
            fields = list(HEADER.unpack_from(img, 0))
            if damage == "misplaced":
                fields[1] = other
            else:
                fields[7] = epoch + 5
            HEADER.pack_into(img, 0, *fields)
            img = bytearray(_resealed(img))
        f.seek(slot * page_size)
        f.write(img)
    match = {"bit": "checksum", "misplaced": "image of page", "newer": "newer than the meta page"}[damage]
    with btree.open(path, cache_size=16 * 4096) as db:
        assert pg not in db._pool.pages
        for _ in range(2):  # (the second read is the one the pool would admit)
            with pytest.raises(CorruptionError, match=match):
                db.get(key)
            assert pg not in db._pool.pages
        assert db.get(max(table)) == table[max(table)]  # other leaves still read
    assert table[key]


@pytest.mark.slow
def test_memory_stays_bounded_by_the_pool_on_data_many_times_its_size(tmp_path):
    import tracemalloc
    path = str(tmp_path / "db")
    table = _fill(path, 30_000)
    keys = list(table)
    rng = random.Random(4)
    rounds = [rng.sample(keys, 10_000) for _ in range(3)]
    tracemalloc.start()
    try:
        db = btree.open(path, cache_size=64 * 4096)
        try:
            pool = db._pool
            assert db.stats()["page_count"] > 10 * pool.capacity  # the data is many times the pool
            for k in rounds[0]:
                assert db.get(k) == table[k]
            warm = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            most = pool.capacity
            for sample in rounds[1:]:
                for k in sample:
                    assert db.get(k) == table[k]
                    # (the remembered leaves are cleared when they reach the
                    # capacity, which moves with the estimate of a page's cost)
                    most = max(most, pool.capacity)
                    assert len(pool.pages) <= pool.capacity and len(pool.seen) <= most
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            db.close()
    finally:
        tracemalloc.stop()
    # 20,000 more gets over data ten times the pool keep nothing beyond it:
    # a pool of decoded leaves is replaced, not added to.
    assert peak - warm < 512 << 10, peak - warm


def test_a_leaf_image_whose_first_slot_points_past_the_page_only_moves_the_estimate_less(tmp_path):
    """The pool's estimate samples leaves searched in their image, reading
    the first cell's sizes for the allocator's slack: a page whose checksum
    holds but whose first slot points past it (a search of it reports the
    damage) adds no slack and raises nothing there."""
    from btree.bufferpool import ESTIMATE_WEIGHT
    path = str(tmp_path / "db")
    table = _fill(path, 2_000)
    with btree.open(path) as db:
        pool, pager = db._pool, db._pager
        pg = _leaf_of(db._tree, next(iter(table)))
        img = pager.read_page(pg)
        broken = bytearray(img)
        struct.pack_into("<H", broken, HEADER.size, len(img) - 2)
        broken = _resealed(broken)
        estimates = []
        for image in (img, broken):
            pool.page_bytes = 0.0
            for _ in range(8):  # one in 8 images searched is sampled
                pool.observe_image(image)
            estimates.append(pool.page_bytes)
        assert estimates[1] > 0
        count = HEADER.unpack_from(img, 0)[4]
        # 16-byte keys and 100-byte values: 15 + 11 bytes of slack per entry, weighted in once.
        assert estimates[0] - estimates[1] == pytest.approx(26 * count * ESTIMATE_WEIGHT, rel=1e-6)


# Run in a fresh process (no memory freed by earlier work to reuse): decode
# one leaf of fixed-size records again and again, holding every node, and
# report the resident memory each took beside what page_cost charges for it.
_RESIDENT_PROBE = r"""
import random, sys
from btree.bufferpool import page_cost
from btree.node import HEADER_SIZE, Node, decode_node, encode_node, leaf_cell_size
value_size, copies = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(value_size)
node = Node(7, True)
node.used = HEADER_SIZE
while True:
    key, value = rng.randbytes(16), rng.randbytes(value_size)
    if node.used + leaf_cell_size(key, value) > 4096:
        break
    node.keys.append(key)
    node.vals.append(value)
    node.used += leaf_cell_size(key, value)
node.keys.sort()
image = encode_node(node, 4096, 1)
def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
before = resident()
held = [decode_node(image, 7, 4096, "probe") for _ in range(copies)]
print((resident() - before) / copies, page_cost(held[0]))
"""


@pytest.mark.subprocess
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads resident memory from /proc")
@pytest.mark.parametrize("value_size", [10, 100, 1000])
def test_a_decoded_page_is_charged_at_least_the_resident_memory_it_takes(value_size):
    """The pool's charge for a decoded page (page_cost, which bounds the
    pool by cache_size) against the resident memory a fresh process grows
    by per decoded copy of one 4 KiB leaf: not below it (the allocator hands
    out blocks of 16-byte multiples, which counting the objects' own sizes
    misses: a leaf of 16-byte keys and 100-byte values takes 10% more than
    that), and not above it by more than a tenth."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _RESIDENT_PROBE, str(value_size), "20000"], check=True,
                         capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}).stdout
    resident, charged = map(float, out.split())
    assert resident * 0.98 <= charged <= resident * 1.10, (resident, charged)


@pytest.mark.parametrize("value_size", [pytest.param(10, marks=pytest.mark.slow),
                                        pytest.param(100, marks=pytest.mark.slow), 1000])
def test_the_pool_and_hash_index_take_no_more_memory_than_cache_size(tmp_path, value_size):
    """The pool is charged by decoded pages, not page images: filled over
    data several times cache_size (every key read three times, so every
    leaf it can hold is admitted and the leaves that stay long enough have
    their keys indexed), the
    handle's memory stays within cache_size whatever the values' size (a
    decoded 4 KiB leaf of 10-byte values takes 2.6 times its page)."""
    import tracemalloc
    cache_size = 384 << 10
    path = str(tmp_path / "db")
    rng = random.Random(value_size)
    n = 4 * cache_size // (16 + value_size + 16)
    table = {rng.randbytes(16): rng.randbytes(value_size) for _ in range(n)}
    with btree.open(path) as db:
        for k, v in table.items():
            db.put(k, v)
    keys = list(table)
    rng.shuffle(keys)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        db = btree.open(path, cache_size=cache_size)
        try:
            for _ in range(3):
                for k in keys:
                    assert db.get(k) == table[k]
            stats = db.stats()
            gc.collect()  # garbage awaiting the collector is not memory the handle holds
            held = tracemalloc.get_traced_memory()[0] - base
        finally:
            db.close()
    finally:
        tracemalloc.stop()
    assert stats["page_count"] * 4096 > 3 * cache_size  # the pages do not all fit
    assert stats["cache_pages"] > 0.5 * stats["cache_capacity_pages"]
    assert stats["hash_index_entries"] > 0  # (the hash index's memory is in the figure)
    # (64 KiB: what an open handle holds besides its pool.)
    assert held < 1.1 * cache_size + (64 << 10), (held, stats)


@pytest.mark.slow
def test_scans_over_a_small_pool_read_what_is_stored_and_do_not_fill_it(tmp_path):
    path = str(tmp_path / "db")
    table = _fill(path, 20_000)
    keys = sorted(table)
    rng = random.Random(9)
    with btree.open(path, cache_size=32 * 4096) as db:
        pool = db._pool
        assert db.stats()["pages_per_level"][-1] > 10 * pool.capacity
        # A full scan, both ways, reads every entry and keeps (almost) nothing.
        assert list(db.scan()) == [(k, table[k]) for k in keys]
        assert sum(node.leaf for node in pool.pages.values()) <= 8
        assert list(db.scan(reverse=True)) == [(k, table[k]) for k in reversed(keys)]
        # Short range reads from random places, bounded and not.
        for _ in range(300):
            a = rng.randbytes(16)
            b = rng.choice([None, rng.randbytes(16), a + b"\xff"])
            lo, hi = (a, b) if b is None or a < b else (b, a)
            want = [(k, table[k]) for k in keys if k >= lo and (hi is None or k < hi)]
            n = rng.choice([1, 10, 40])
            assert list(zip(range(n), db.scan(start=lo, end=hi))) == list(enumerate(want[:n]))
            got = list(zip(range(n), db.scan(start=lo, end=hi, reverse=True)))
            assert got == list(enumerate(want[::-1][:n]))
        # A leaf a range read started in is kept when read again.
        start = keys[5000]
        pg = _leaf_of(db._tree, start)
        pool.pages.pop(pg, None)
        pool.seen.clear()
        pool.admit_after = 2
        list(zip(range(3), db.scan(start=start)))
        assert pg in pool.seen and pg not in pool.pages
        list(zip(range(3), db.scan(start=start)))
        assert pg in pool.pages
        assert db.check_invariants() == []


def test_a_snapshot_scan_over_leaves_outside_the_pool_sees_its_point_in_time(tmp_path):
    path = str(tmp_path / "db")
    table = _fill(path, 8_000)
    keys = sorted(table)
    with btree.open(path, cache_size=16 * 4096) as db:
        with db.snapshot() as snap:
            for k in keys[::3]:
                db.put(k, b"new")
            for k in keys[1::3]:
                db.delete(k)
            assert list(snap.scan()) == [(k, table[k]) for k in keys]
            assert list(snap.scan(start=keys[100], end=keys[200], reverse=True)) == \
                [(k, table[k]) for k in reversed(keys[100:200])]
        assert [k for k, _ in db.scan()] == [k for i, k in enumerate(keys) if i % 3 != 1]


def test_admission_gets_stricter_when_kept_leaves_serve_few_reads_and_stays_loose_for_hot_ones(tmp_path):
    """Uniform random gets over data many times the pool: keeping a leaf
    pays for its decode only if it serves several reads, which it does not
    here, so the pool asks for more reads before admitting and decodes far
    fewer leaves. Gets over a hot set that fits: admission stays on the
    second read and the hot leaves are kept."""
    path = str(tmp_path / "db")
    table = _fill(path, 30_000)
    keys = list(table)
    rng = random.Random(7)
    with btree.open(path, cache_size=1_500_000) as db:
        pool = db._pool
        assert db.stats()["pages_per_level"][-1] > 5 * pool.capacity
        assert pool.admit_after == 2
        first = rng.choices(keys, k=15_000)
        for k in first:
            assert db[k] == table[k]
        strict = pool.admit_after
        assert strict > 2
        misses = pool.misses
        second = rng.choices(keys, k=15_000)
        for k in second:
            assert db[k] == table[k]
        # Decoded leaves per get: at the second read (2) about a third of
        # the gets decode here; stricter, few do.
        assert (pool.misses - misses) / len(second) < 0.1, (pool.misses - misses, pool.admit_after)

    with btree.open(path, cache_size=1_500_000) as db:
        pool = db._pool
        hot = keys[:: len(keys) // 60][:60]  # on at most 60 leaves, fewer than the pool holds
        hot_leaves = {_leaf_of(db._tree, k) for k in hot}
        assert len(hot_leaves) < pool.capacity // 2
        for _ in range(20):
            for k in hot:
                assert db.get(k) == table[k]
        assert pool.admit_after == 2
        assert hot_leaves <= set(pool.pages)


def test_range_reads_over_expired_runs_of_leaves_outside_the_pool(tmp_path):
    """A part of a page read outside the pool may hold nothing but expired
    values: the read goes on past them (forward and reverse, from the
    first chunk's 16 entries up), never stopping or ending early."""
    now = [1_000_000.0]
    path = str(tmp_path / "db")
    rng = random.Random(9)
    keys = sorted({rng.randbytes(12) for _ in range(6_000)})
    with btree.open(path, ttl_clock=lambda: now[0]) as db:
        for n, k in enumerate(keys):
            # Runs of 150 keys (several leaves' worth) expire, then 50 stay.
            db.put(k, b"v%d" % n, ttl=10 if n % 200 < 150 else None)
    now[0] += 60
    live = [k for n, k in enumerate(keys) if n % 200 >= 150]
    with btree.open(path, cache_size=16 * 4096, ttl_clock=lambda: now[0]) as db:
        pool = db._pool
        for start in [None, keys[0], keys[3], keys[160], keys[1999], keys[4000] + b"\x00"]:
            want = [k for k in live if start is None or k >= start]
            assert [k for k, _ in db.scan(start=start)] == want
            back = [k for k in live if start is None or k < start][::-1]
            assert [k for k, _ in db.scan(end=start, reverse=True)] == back
            assert len(pool.pages) <= pool.capacity


def test_the_estimate_of_a_page_follows_leaves_read_in_place(tmp_path):
    """When reads admit almost no leaves, the estimate of what a decoded
    page takes (which sizes the pool) still comes to the leaves' cost:
    a sample of the leaves searched in their page image updates it."""
    from btree.bufferpool import page_cost
    from btree.node import HEADER, PAGE_LEAF
    path = str(tmp_path / "db")
    table = _fill(path, 30_000)
    keys = list(table)
    with btree.open(path, cache_size=1_500_000) as db:
        pool, pager = db._pool, db._pager
        costs = []
        for pg in range(2, pager.page_count):
            img = pager.read_page(pg)
            if HEADER.unpack_from(img, 0)[2] == PAGE_LEAF:
                costs.append(page_cost(decode_node(img, pg, pager.page_size, pager.path)))
        mean = sum(costs) / len(costs)
        assert abs(pool.page_bytes - mean) > 0.3 * mean  # it starts far from it
        pool.admit_after = 10**9  # (nothing read is admitted)
        rng = random.Random(3)
        for k in rng.choices(keys, k=8_000):
            assert db[k] == table[k]
        assert abs(pool.page_bytes - mean) < 0.1 * mean, (pool.page_bytes, mean)


def test_internal_pages_are_estimated_apart_from_leaves(tmp_path):
    """A reopened tree loads its internal pages first, each costing about
    three leaves here (512-byte pages of 100-byte values). Estimated apart,
    they leave the leaf estimate at the leaves' cost (mixed in, they
    raised it half as much again and shrank the pool's capacity), and the
    pool counts the internal pages it holds through splits, evictions,
    frees and checkpoints."""
    from btree.bufferpool import HASH_INDEX_ENTRY_BYTES, page_cost
    from btree.node import PAGE_INTERNAL, PAGE_LEAF
    path = str(tmp_path / "db")
    table = _fill(path, 30_000, page_size=512)
    keys = sorted(table)
    with btree.open(path, page_size=512, cache_size=4_000_000) as db:
        pool, pager = db._pool, db._pager
        costs: dict[int, list[int]] = {PAGE_LEAF: [], PAGE_INTERNAL: []}
        for pg in range(2, pager.page_count):
            img = pager.read_page(pg)
            ptype = HEADER.unpack_from(img, 0)[2]
            if ptype in costs:
                costs[ptype].append(page_cost(decode_node(img, pg, pager.page_size, pager.path)))
        leaf_mean = sum(costs[PAGE_LEAF]) / len(costs[PAGE_LEAF])
        inner_mean = sum(costs[PAGE_INTERNAL]) / len(costs[PAGE_INTERNAL])
        assert inner_mean > 2 * leaf_mean and len(costs[PAGE_INTERNAL]) > 300
        pool.admit_after = 10**9  # (no leaf decoded: only images sampled)
        for k in keys[::10]:  # every internal page, in key order
            assert db[k] == table[k]
        inner = [node for node in pool.pages.values() if not node.leaf]
        assert len(inner) == len(costs[PAGE_INTERNAL]) == pool.inner_pages
        assert abs(pool.page_bytes - leaf_mean) < 0.15 * leaf_mean, (pool.page_bytes, leaf_mean)
        assert abs(pool.inner_bytes - inner_mean) < 0.15 * inner_mean, (pool.inner_bytes, inner_mean)
        room = pool.cache_size - pool.hash_index_peak * HASH_INDEX_ENTRY_BYTES - pool.inner_pages * pool.inner_bytes
        assert pool.capacity == pool.inner_pages + int(room // pool.page_bytes)
    # Writes that split, merge and free pages through a pool too small for
    # the tree (evictions, checkpoints): the count stays the pool's.
    rng = random.Random(5)
    with btree.open(path, page_size=512, cache_size=300_000) as db:
        pool = db._pool
        for step in range(20_000):
            k = rng.choice(keys)
            if rng.random() < 0.4:
                db.delete(k)
            else:
                db.put(k, rng.randbytes(rng.choice([10, 100, 300])))
            if step % 5_000 == 0:
                db.flush()
        db.delete_range(keys[1000], keys[9000])
        assert pool.evictions and pool.inner_pages == sum(not node.leaf for node in pool.pages.values())
        assert pool.memory_bytes() <= 300_000 * 1.1


def _cell_by_cell(node: Node, page_size: int, epoch: int) -> bytes:
    """A leaf's page image as the format describes it, made one cell at a
    time (the reference encode_node's fast paths must agree with)."""
    from btree.node import _HDR_AFTER_CRC, HEADER_SIZE, LEAF_CELL, PAGE_LEAF
    cells = [LEAF_CELL.pack(len(k), 0, len(v)) + k + v for k, v in zip(node.keys, node.vals)]
    body = b"".join(cells)
    start = page_size - len(body)
    offsets, at = [], start
    for cell in cells:
        offsets.append(at)
        at += len(cell)
    slots = struct.pack(f"<{len(cells)}H", *offsets)
    rest = _HDR_AFTER_CRC.pack(node.pgno, PAGE_LEAF, 0, len(cells), start, 0, epoch, node.prev, node.next)
    gap = bytes(start - HEADER_SIZE - len(slots))
    return _U32.pack(crc32(rest + slots + gap + body)) + rest + slots + gap + body


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 40), st.integers(0, 120), st.integers(1, 60), st.booleans(), st.data())
def test_a_leaf_of_fixed_size_records_encodes_as_cell_by_cell(klen, vlen, count, uneven, data):
    """encode_node's path for leaves of one key length and one value length
    writes the same bytes as cells made one at a time, and so does its
    general path when one record differs in size."""
    keys = sorted(set(data.draw(st.lists(st.binary(min_size=klen, max_size=klen), min_size=1, max_size=count))))
    vals = [data.draw(st.binary(min_size=vlen, max_size=vlen)) for _ in keys]
    if uneven:
        vals[-1] += b"+"
    node = Node(7, True)
    node.keys, node.vals, node.prev, node.next = keys, vals, 3, 9
    node.used = _leaf_used(node)
    if node.used > PAGE:
        return
    assert bytes(encode_node(node, PAGE, epoch=4)) == _cell_by_cell(node, PAGE, 4)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=40), st.integers(0, 40), st.integers(0, 40))
def test_a_range_reads_cells_read_in_place_are_the_decoded_cells(entries, i, j):
    """The compiled build decodes a leaf (decode_node) and a range read's
    cells (LeafImage.cells) by reading the slots and plain cells' headers
    byte by byte in place (_plain_cells_in_place, given a range of slots):
    the keys and values the loop of decode_node makes, and the bytes they
    take with their slots, while every cell is plain and each key is above
    the one before it; CELLS_NOT_PLAIN at an Overflow or Expiring cell
    (the caller then decodes them all); CELLS_OUT_OF_ORDER at a key not
    above the one before; a cell that runs past the page, or slots past
    the image, is IndexError, which the callers report as CorruptionError.
    Each build runs its own form here."""
    from btree.node import CELLS_NOT_PLAIN, CELLS_OUT_OF_ORDER, _decode_leaf_cells, _plain_cells_in_place

    img = _leaf(entries)
    first, last = min(i, j, len(entries)), min(max(i, j), len(entries))
    slots = read_leaf_image(img, 5, PAGE, "f").offsets()[first:last]
    keys, vals = [], []
    cells = _plain_cells_in_place(img, first, last, keys, vals)
    want_keys, want_vals = [], []
    used, ovf = _decode_leaf_cells(img, slots, want_keys, want_vals, PAGE, "f", 5)
    assert (cells == CELLS_NOT_PLAIN) == ovf
    if not ovf:
        assert (keys, vals, cells) == (want_keys, want_vals, used)

    def with_slots(image: bytes, offsets) -> bytes:
        changed = bytearray(image)
        struct.pack_into(f"<{len(offsets)}H", changed, 32 + 2 * first, *offsets)
        return bytes(changed)

    if len(slots) > 1 and not ovf:
        # The same cells with two neighbours swapped, and with one repeated:
        # every key must be above the one before it.
        swapped = slots[:-2] + (slots[-1], slots[-2])
        assert _plain_cells_in_place(with_slots(img, swapped), first, last, [], []) == CELLS_OUT_OF_ORDER
        repeated = slots[:-1] + (slots[-2],)
        assert _plain_cells_in_place(with_slots(img, repeated), first, last, [], []) == CELLS_OUT_OF_ORDER
    if slots and not ovf:
        long_value = bytearray(img)
        struct.pack_into("<I", long_value, slots[-1] + 3, PAGE)  # the last cell's value runs past the page
        with pytest.raises(IndexError):
            _plain_cells_in_place(bytes(long_value), first, last, [], [])
        with pytest.raises(IndexError):  # a header past the page
            _plain_cells_in_place(with_slots(img, slots[:-1] + (PAGE - 3,)), first, last, [], [])
        huge = bytearray(img)
        struct.pack_into("<I", huge, slots[-1] + 3, 0x80000001)  # a value length with its top bit set
        with pytest.raises(IndexError):
            _plain_cells_in_place(bytes(huge), first, last, [], [])
        with pytest.raises(IndexError):  # slots past the end of a short image
            _plain_cells_in_place(img[:32 + 2 * last - 1], first, last, [], [])
