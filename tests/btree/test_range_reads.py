"""Range reads: how scans and cursors read the tree a chunk at a time.

* A leaf page of fixed-size records decodes through one struct call
  (btree.node._uniform_cells) instead of cell by cell: it must read every
  page exactly as the format says, whatever the page holds.
* A chunk goes on where the last one stopped (Tree.chunk_forward's
  RangePos: no descent, the page it stopped in not read again) when nothing
  was written in between, and seeks again otherwise: each chunk must be the
  tree exactly as it was when the chunk was read.
* Short range reads do not read pages they may never return, and a scan
  over leaves outside the pool reads each of them once.
"""

from __future__ import annotations

import os
import random
import struct
from itertools import islice

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import btree
import btree.cursor as btree_cursor
import btree.db as btree_db
import btree.scan as btree_scan
from btree.node import (_U32, DEADLINE, LEAF_CELL, Expiring, Node, Overflow, _slots, decode_node, encode_node,
                        read_leaf_image)
from btree.tree import Tree, _leaf_used
from lsmkv.base.checksum import crc32
from lsmkv.base.errors import CorruptionError

# ---- decoding runs of fixed-size records ------------------------------------------------------


def _reference_cells(buf: bytes, offsets) -> list:
    """The cells at ``offsets`` read as docs/formats.md lays them out, one
    by one: header (key length u16, kind u8, value length u32), a deadline
    u64 for kinds 2 and 3, the key, then the value (kinds 0, 2) or its
    overflow page u32 (kinds 1, 3)."""
    out = []
    for off in offsets:
        klen, kind, vlen = LEAF_CELL.unpack_from(buf, off)
        at = off + LEAF_CELL.size
        deadline = None
        if kind & 2:
            deadline = DEADLINE.unpack_from(buf, at)[0]
            at += DEADLINE.size
        key = buf[at:at + klen]
        at += klen
        if kind & 1:
            val = ("overflow", struct.unpack_from("<I", buf, at)[0], vlen)
        else:
            val = buf[at:at + vlen]
        out.append((key, val if deadline is None else ("expiring", deadline, val)))
    return out


def _plain(v):
    if type(v) is Overflow:
        return ("overflow", v.page, v.length)
    if type(v) is Expiring:
        return ("expiring", v.deadline, _plain(v.value))
    return v


@st.composite
def _record_pages(draw):
    """Leaf pages of records that share one key length and one value length
    (the fast path's case), now and then broken by a record of another
    layout: a different value length (the last record too, which the
    offsets alone do not show), the same cell size split differently
    between key and value, a value with a ttl or in an overflow chain; or
    two cells of the same size that trade places in the page while the
    slot array keeps the keys in order (valid, though encode_node never
    writes it). Returns (page size, image, indexes of the changed records)."""
    page_size = draw(st.sampled_from([512, 4096]))
    klen = draw(st.integers(1, 12))
    vlen = draw(st.integers(1, 40))
    n = draw(st.integers(8, 60))
    keys = sorted(draw(st.sets(st.binary(min_size=klen, max_size=klen), min_size=1, max_size=n)))
    vals: list = [draw(st.binary(min_size=vlen, max_size=vlen)) for _ in keys]
    changed = set()
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(keys) - 1))
        kind = draw(st.sampled_from(["length", "split", "ttl", "overflow", "last"]))
        if kind == "last":  # the last record shorter: its cell ends before the stride says
            i = len(keys) - 1
            kind = "length"
        if type(vals[i]) is not bytes or len(keys[i]) != klen:
            continue  # (one change per record)
        changed.add(keys[i])
        if kind == "length":
            vals[i] = draw(st.binary(min_size=0, max_size=vlen + 8).filter(lambda v: len(v) != vlen))
        elif kind == "split":
            keys[i] = keys[i] + b"\x00"  # (one byte longer key, one byte shorter value: same cell size)
            vals[i] = vals[i][1:]
            changed.add(keys[i])
        elif kind == "ttl":
            vals[i] = Expiring(draw(st.integers(0, 1 << 62)), vals[i])
        elif kind == "overflow":
            vals[i] = Overflow(draw(st.integers(2, 1 << 31)), draw(st.integers(0, 1 << 30)))
    table = dict(zip(keys, vals))  # (a split key may now sort elsewhere: order them again)
    node = Node(5, True)
    node.keys = sorted(table)
    node.vals = [table[k] for k in node.keys]
    node.ovf = any(type(v) is not bytes for v in node.vals)
    node.used = _leaf_used(node)
    while node.used > page_size:
        node.keys.pop()
        node.vals.pop()
        node.used = _leaf_used(node)
    img = bytearray(encode_node(node, page_size, epoch=1))
    at = [n for n, k in enumerate(node.keys) if k in changed]
    count = len(node.keys)
    if count >= 2 and draw(st.booleans()):
        a, b = sorted(draw(st.lists(st.integers(0, count - 1), min_size=2, max_size=2, unique=True)))
        slots = list(_slots(count).unpack_from(img, 32))
        size = LEAF_CELL.size + len(node.keys[a]) + len(node.vals[a]) if type(node.vals[a]) is bytes else None
        if size and type(node.vals[b]) is bytes and len(node.keys[b]) + len(node.vals[b]) + LEAF_CELL.size == size:
            oa, ob = slots[a], slots[b]
            img[oa:oa + size], img[ob:ob + size] = img[ob:ob + size], img[oa:oa + size]
            slots[a], slots[b] = ob, oa
            struct.pack_into(f"<{count}H", img, 32, *slots)
            img[:4] = _U32.pack(crc32(memoryview(img)[4:]))
            at += [a, b]
    return page_size, bytes(img), at


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_record_pages(), st.data())
def test_runs_of_fixed_size_records_decode_as_the_format_says(page, data):
    page_size, img, changed = page
    count = struct.unpack_from("<H", img, 10)[0]
    slots = _slots(count).unpack_from(img, 32) if count else ()
    want = _reference_cells(img, slots)
    node = decode_node(img, 5, page_size, "f")
    assert [(k, _plain(v)) for k, v in zip(node.keys, node.vals)] == want
    image = read_leaf_image(img, 5, page_size, "f")
    ranges = [(0, count)] + [(max(0, c - 7), min(count, c + 9)) for c in changed]
    for _ in range(4):
        i = data.draw(st.integers(0, count))
        ranges.append((i, data.draw(st.integers(i, count))))
    for i, j in ranges:
        keys, vals, ovf = image.cells(i, j)
        assert [(k, _plain(v)) for k, v in zip(keys, vals)] == want[i:j], (i, j)
        assert ovf == any(type(v) is not bytes for v in vals)


def test_a_damaged_run_of_fixed_size_records_is_reported():
    node = Node(5, True)
    node.keys = [b"k%05d" % i for i in range(40)]
    node.vals = [b"v" * 50 for _ in node.keys]
    node.used = _leaf_used(node)
    img = bytearray(encode_node(node, 4096, epoch=1))
    image = read_leaf_image(bytes(img), 5, 4096, "f")
    assert list(image.cells(3, 30)[0]) == node.keys[3:30]
    # Keys out of order in an image whose checksum holds (a bad write, not
    # a flipped bit): swap two keys and seal the page again.
    a, b = image.offsets()[10], image.offsets()[11]
    img[a + 7:a + 13], img[b + 7:b + 13] = img[b + 7:b + 13], img[a + 7:a + 13]
    img[:4] = _U32.pack(crc32(memoryview(img)[4:]))
    bad = read_leaf_image(bytes(img), 5, 4096, "f")
    with pytest.raises(CorruptionError, match="out of order"):
        bad.cells(3, 30)
    with pytest.raises(CorruptionError, match="out of order"):
        decode_node(bytes(img), 5, 4096, "f")


# ---- each chunk is the tree as it was when read -------------------------------------------------

_keys = st.integers(0, 799).map(lambda i: b"k%03d" % i)
_ops = st.lists(st.one_of(
    st.tuples(st.just("scan"), st.booleans(), st.one_of(st.none(), _keys), st.one_of(st.none(), _keys),
              st.sampled_from([None, "snapshot", "cursor"])),
    st.tuples(st.just("next"), st.integers(0, 7), st.integers(1, 60)),
    st.tuples(st.just("put"), _keys, st.integers(0, 3)),
    st.tuples(st.just("delete"), _keys),
    st.tuples(st.just("delete_run"), _keys, st.integers(1, 40)),
    # A write next to where a scan stands (just behind it, or in the part
    # of its leaf it has not returned yet): where a stale position shows.
    # The tree starts with even numbers only: an odd one is a new key.
    st.tuples(st.just("near"), st.integers(0, 7), st.sampled_from([-3, -1, 1, 3, 5, 9, 15, 21, 2, 6]),
              st.integers(-1, 3)),
    st.tuples(st.just("flush")),
), min_size=1, max_size=80)
# Every run starts with a scan of the live tree that has returned a few entries.
_runs = st.tuples(st.booleans(), st.integers(1, 30), _ops).map(
    lambda t: [("scan", t[0], None, None, None), ("next", 0, t[1]), *t[2]])


def _value(key: bytes, version: int) -> bytes:
    # Mostly small values; version 3 goes to an overflow chain (512-byte pages).
    return key * (300 if version == 3 else 1 + version)


def _watch_chunks(mp: pytest.MonkeyPatch, chunk_forward, chunk_backward=None) -> None:
    """Route every chunk a scan or a cursor reads (btree/scan.py and
    btree/cursor.py call ``Tree.chunk_forward`` / ``chunk_backward``)
    through the given functions. Tree is an extension type in the compiled
    build, which cannot be patched: the callers' ``Tree`` becomes a
    subclass that overrides them."""
    overrides = {"chunk_forward": chunk_forward}
    if chunk_backward is not None:
        overrides["chunk_backward"] = chunk_backward
    watched = type("WatchedTree", (Tree,), overrides)
    for module in (btree_scan, btree_cursor):
        mp.setattr(module, "Tree", watched)


class _Recorder:
    """Wraps Tree.chunk_forward/chunk_backward of one handle and checks every
    chunk they return against the model as it is when the chunk is read:
    the chunk must hold exactly the model's first entries past its start
    (all of them to the range's end when it says nothing more follows)."""

    def __init__(self, mp: pytest.MonkeyPatch, models: dict) -> None:
        self.models = models  # view -> the dict a read of that view must see (None: the live one)
        self.chunks = 0
        self.resumed = 0
        forward, backward = Tree.chunk_forward, Tree.chunk_backward

        def chunk_forward(tree, lo, inclusive, hi, limit, view=None, resume=None):
            items, pos = forward(tree, lo, inclusive, hi, limit, view, resume)
            want = [(k, v) for k, v in sorted(self._model(view).items())
                    if (lo is None or k > lo or (inclusive and k == lo)) and (hi is None or k < hi)]
            self._check(list(items), pos, want, resume)
            return items, pos

        def chunk_backward(tree, hi, lo, limit, view=None, resume=None):
            items, pos = backward(tree, hi, lo, limit, view, resume)
            want = [(k, v) for k, v in sorted(self._model(view).items(), reverse=True)
                    if (hi is None or k < hi) and (lo is None or k >= lo)]
            self._check(list(items), pos, want, resume)
            return items, pos

        _watch_chunks(mp, chunk_forward, chunk_backward)

    def _model(self, view) -> dict:
        return self.models[None if view is None else id(view[2])]

    def _check(self, items, pos, want, resume) -> None:
        self.chunks += 1
        self.resumed += resume is not None
        if pos is None:
            assert items == want
        else:
            assert items and items == want[:len(items)]


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_runs, st.sampled_from([16 * 512, 64 * 512, 1 << 22]))
def test_each_chunk_of_a_scan_is_the_tree_as_it_was_when_read(tmp_path_factory, ops, cache_size):
    """Scans, snapshot scans and cursors interleaved with puts, deletes and
    checkpoints (512-byte pages, pools from 16 pages up: leaves in and out
    of the pool). Every chunk read is checked against the model at that
    moment (_Recorder), so a chunk that went on from a position a write had
    moved would be caught; the items a scan returns are checked against
    what its chunks held."""
    with pytest.MonkeyPatch.context() as mp:  # (undone after each example)
        _interleave(str(tmp_path_factory.mktemp("db")), mp, ops, cache_size)


def _interleave(path: str, mp: pytest.MonkeyPatch, ops: list, cache_size: int) -> None:
    rng = random.Random(1)
    model = {b"k%03d" % i: _value(b"k%03d" % i, 0) for i in rng.sample(range(0, 800, 2), 250)}
    models: dict = {None: model}
    recorder = _Recorder(mp, models)
    db = btree.open(path, page_size=512, cache_size=cache_size)
    scans: list = []
    try:
        with db.write_batch() as batch:
            for k, v in model.items():
                batch.put(k, v)
        db.flush()
        for op in ops:
            if op[0] == "scan":
                _, reverse, start, end, how = op
                owner = None
                if how == "cursor":
                    it = db.iterator(lower_bound=start, upper_bound=end)
                    models[id(it._pinned._view[2])] = dict(model)
                    if reverse:
                        it.seek_to_last()
                    else:
                        it.seek_to_first()
                    owner = it
                    source = _cursor_items(it, reverse)
                elif how == "snapshot":
                    owner = db.snapshot()
                    models[id(owner._view[2])] = dict(model)
                    source = owner.scan(start=start, end=end, reverse=reverse)
                else:
                    source = db.scan(start=start, end=end, reverse=reverse)
                scans.append([source, owner, [], reverse, start, end, how])
            elif op[0] == "next" and scans:
                scan = scans[op[1] % len(scans)]
                scan[2] += list(islice(scan[0], op[2]))
            elif op[0] == "put":
                db.put(op[1], _value(op[1], op[2]))
                model[op[1]] = _value(op[1], op[2])
            elif op[0] == "delete":
                db.delete(op[1])
                model.pop(op[1], None)
            elif op[0] == "near" and scans:
                scan = scans[op[1] % len(scans)]
                at = scan[2][-1][0] if scan[2] else (scan[4] or b"k000")
                step = -op[2] if scan[3] else op[2]  # (behind and ahead of a reverse scan too)
                key = b"k%03d" % min(max(int(at[1:4]) + step, 0), 799)
                if op[3] < 0:
                    db.delete(key)
                    model.pop(key, None)
                else:
                    db.put(key, _value(key, op[3]))
                    model[key] = _value(key, op[3])
            elif op[0] == "delete_run":  # empties leaves: merges under the scans
                first = int(op[1][1:])
                for i in range(first, min(first + op[2], 800)):
                    db.delete(b"k%03d" % i)
                    model.pop(b"k%03d" % i, None)
            elif op[0] == "flush":
                db.flush()
        for source, owner, got, reverse, start, end, how in scans:
            got += list(source)
            keys = [k for k, _ in got]
            assert keys == sorted(set(keys), reverse=reverse)  # in order, each key once
            assert all((start is None or k >= start) and (end is None or k < end) for k in keys)
            if how is not None:  # a point-in-time view: exactly what it saw when taken
                view_model = models[id((owner._pinned if how == "cursor" else owner)._view[2])]
                assert got == [(k, v) for k, v in sorted(view_model.items(), reverse=reverse)
                               if (start is None or k >= start) and (end is None or k < end)]
                owner.close()
        assert list(db.scan()) == sorted(model.items())
        assert db.check_invariants() == []
    finally:
        db.close()
    assert recorder.chunks


def _cursor_items(it, reverse: bool):
    while it.valid():
        yield it.key(), it.value()
        if reverse:
            it.prev()
        else:
            it.next()


# ---- what a range read reads ---------------------------------------------------------------------


def _fill(path: str, n: int) -> dict[bytes, bytes]:
    rng = random.Random(11)
    table = {rng.randbytes(16): rng.randbytes(100) for _ in range(n)}
    with btree.open(path) as db:
        with db.write_batch() as batch:
            for k, v in table.items():
                batch.put(k, v)
    return table


def _leaves(db) -> list[int]:
    """Page numbers of the leaves, in key order."""
    tree = db._tree
    pg = tree.root
    for _ in tree.inner:
        pg = tree.node(pg, False).kids[0]
    out = []
    while pg:
        out.append(pg)
        pg = decode_node(db._pager.read_page(pg), pg, tree.page_size, "f").next
    return out


def _no_admission(db) -> None:
    """Leaves read outside the pool stay outside it (the internal pages,
    read first, stay in). For handles opened without the hash index."""
    pool = db._pool
    for pg, node in list(pool.pages.items()):
        if node.leaf and not node.dirty:
            del pool.pages[pg]
    pool.seen.clear()
    pool.admit_after = 1 << 30


def test_a_scan_reads_each_leaf_outside_the_pool_once(tmp_path):
    """Chunk after chunk, a scan goes on where it stopped: it reads every
    leaf once, the one a chunk stopped in included (its image is kept),
    and no page above the leaves again."""
    path = str(tmp_path / "db")
    table = _fill(path, 20_000)
    keys = sorted(table)
    with btree.open(path, cache_size=1 << 22, hash_index=False) as db:
        leaves = _leaves(db)
        for k in (keys[0], keys[-1], keys[5000]):
            db.get(k)  # (the pages above the leaves these scans seek into)
        for reverse in (False, True):
            _no_admission(db)
            reads = db._pager.page_reads
            got = list(db.scan(reverse=reverse))
            assert got == [(k, table[k]) for k in (reversed(keys) if reverse else keys)]
            assert db._pager.page_reads - reads == len(leaves)
        # A bounded scan from the middle: the leaves it spans, once each.
        lo, hi = keys[5000], keys[15000]
        _no_admission(db)
        reads = db._pager.page_reads
        assert [k for k, _ in db.scan(start=lo, end=hi)] == keys[5000:15000]
        spanned = db._pager.page_reads - reads
        assert spanned <= 1 + len(leaves) // 2 + 1


def test_a_short_range_read_does_not_read_the_next_leaf_it_may_not_need(tmp_path):
    """A seek into the last entries of a leaf outside the pool returns what
    that leaf holds in its first chunk; the next leaf is read only when the
    caller asks for more."""
    path = str(tmp_path / "db")
    _fill(path, 5_000)
    with btree.open(path, cache_size=1 << 22, hash_index=False) as db:
        leaves = _leaves(db)
        pg = leaves[len(leaves) // 2]
        node = decode_node(db._pager.read_page(pg), pg, db._tree.page_size, "f")
        nxt = decode_node(db._pager.read_page(node.next), node.next, db._tree.page_size, "f")
        start = node.keys[-3]  # three entries left in this leaf
        db.get(start)
        db.get(nxt.keys[2])  # (the pages above the two leaves)
        _no_admission(db)
        reads = db._pager.page_reads
        it = db.scan(start=start)
        assert [k for k, _ in islice(it, 3)] == node.keys[-3:]
        assert db._pager.page_reads - reads == 1
        assert next(it)[0] == nxt.keys[0]  # (the next leaf, read now)
        assert db._pager.page_reads - reads == 2
        # Backward, the same: the leaf below is read when asked for.
        reads = db._pager.page_reads
        it = db.scan(end=nxt.keys[2], reverse=True)
        assert [k for k, _ in islice(it, 2)] == nxt.keys[1::-1]
        assert db._pager.page_reads - reads == 1
        assert next(it)[0] == node.keys[-1]


def test_chunks_grow_fast_in_memory_and_as_a_square_root_outside_the_pool(tmp_path, monkeypatch):
    path = str(tmp_path / "db")
    table = _fill(path, 30_000)
    limits: list[int] = []
    forward = Tree.chunk_forward

    def chunk_forward(tree, lo, inclusive, hi, limit, view=None, resume=None):
        limits.append(limit)
        return forward(tree, lo, inclusive, hi, limit, view, resume)

    _watch_chunks(monkeypatch, chunk_forward)
    with btree.open(path, cache_size=1 << 24, hash_index=False) as db:
        for k in table:  # every leaf in the pool
            db.get(k)
        assert sum(1 for _ in db.scan()) == len(table)
        assert limits[:6] == [16, 32, 64, 128, 256, 512] and max(limits) == btree_db.SCAN_MAX_CHUNK
        limits.clear()
        _no_admission(db)
        assert sum(1 for _ in db.scan()) == len(table)
        # Outside the pool: after n entries, about sqrt(4 n) (at least 16).
        assert limits[:3] == [16, 16, 16]
        assert 2 * 100 < limits[-1] < 2 * 200  # (sqrt(4 x 30,000) is 346)
        assert len(limits) < 400


def test_a_cursor_goes_on_where_it_stopped(tmp_path):
    path = str(tmp_path / "db")
    table = _fill(path, 20_000)
    keys = sorted(table)
    with btree.open(path, cache_size=1 << 22, hash_index=False) as db:
        leaves = _leaves(db)
        _no_admission(db)
        reads = db._pager.page_reads
        with db.iterator() as it:
            it.seek_to_first()
            got = list(it)
        assert got == [(k, table[k]) for k in keys]
        # (Iterating a cursor seeks its position again: the first leaf twice.)
        assert db._pager.page_reads - reads == len(leaves) + 1
        db.get(keys[-1])  # (the pages above the last leaf)
        _no_admission(db)
        reads = db._pager.page_reads
        with db.iterator() as it:
            it.seek_to_last()
            back = []
            while it.valid():
                back.append(it.key())
                it.prev()
        assert back == keys[::-1]
        assert db._pager.page_reads - reads == len(leaves)
        # Writes while a cursor moves: it keeps its point in time.
        with db.iterator() as it:
            it.seek(keys[100])
            seen = []
            for n in range(3000):
                seen.append(it.key())
                if n % 100 == 0:
                    db.put(keys[100 + n + 50] + b"!", b"new")
                    db.delete(keys[100 + n + 60])
                it.next()
            assert seen == keys[100:3100]
            it.seek_for_prev(keys[3000])
            back = []
            while it.valid() and len(back) < 500:
                back.append(it.key())
                it.prev()
            assert back == keys[3000:2500:-1]


@pytest.mark.parametrize("damage", ["bit", "misplaced", "newer"])
def test_damage_in_a_leaf_a_scan_reads_outside_the_pool_is_reported(tmp_path, damage):
    path = str(tmp_path / "db")
    table = _fill(path, 8_000)
    keys = sorted(table)
    with btree.open(path) as db:
        leaves = _leaves(db)
        ps = db._tree.page_size
        epoch = db._pager.meta.epoch
    victim = leaves[len(leaves) // 2]
    with open(os.path.join(path, "btree.pages"), "r+b") as f:
        f.seek(victim * ps)
        img = bytearray(f.read(ps))
        if damage == "bit":
            img[ps - 100] ^= 0x04
        else:
            from btree.node import HEADER
            fields = list(HEADER.unpack_from(img, 0))
            if damage == "misplaced":
                fields[1] = leaves[0]
            else:
                fields[7] = epoch + 5
            HEADER.pack_into(img, 0, *fields)
            img[:4] = _U32.pack(crc32(memoryview(img)[4:]))
        f.seek(victim * ps)
        f.write(img)
    match = {"bit": "checksum", "misplaced": "image of page", "newer": "newer than the meta page"}[damage]
    with btree.open(path, cache_size=16 * 4096) as db:
        for reverse in (False, True):
            with pytest.raises(CorruptionError, match=match):
                list(db.scan(reverse=reverse))
            with pytest.raises(CorruptionError, match=match):
                with db.iterator() as it:
                    it.seek_to_first()
                    list(it)
        # Scans that stay clear of the page still work.
        assert [k for k, _ in islice(db.scan(), 10)] == keys[:10]


def test_a_leaf_whose_cells_overlap_its_slot_array_is_reported(tmp_path):
    """A slot that points into the page's header or slot array, in an image
    whose checksum holds (a bad write, not a flipped bit)."""
    node = Node(5, True)
    node.keys = [b"k%05d" % i for i in range(20)]
    node.vals = [b"v" * 30 for _ in node.keys]
    node.used = _leaf_used(node)
    img = bytearray(encode_node(node, 4096, epoch=1))
    struct.pack_into("<H", img, 32 + 2 * 7, 40)  # slot 7 -> offset 40: inside the slot array
    img[:4] = _U32.pack(crc32(memoryview(img)[4:]))
    with pytest.raises(CorruptionError, match="overlaps the slot array"):
        read_leaf_image(bytes(img), 5, 4096, "f")
    with pytest.raises(CorruptionError, match="overlaps the slot array"):
        decode_node(bytes(img), 5, 4096, "f")


@pytest.mark.parametrize("reverse", [False, True])
def test_a_scan_chunk_holds_its_own_copy_of_the_leaves_it_read(tmp_path, reverse):
    """A scan hands a chunk's entries out after the lock is released
    (btree/leaf_runs.py): writes into a leaf the chunk holds, next to the
    scan's position, neither repeat nor skip a key. Every key present
    throughout the scan is returned once, in order."""
    with btree.open(str(tmp_path / "db"), page_size=4096) as db:
        keys = [b"k%05d" % (2 * i) for i in range(3000)]
        for k in keys:
            db.put(k, b"v" * 20)
        it = db.scan(reverse=reverse)
        # Past the first chunks (16, 32, ... entries): this one holds whole leaves.
        got = [next(it)[0] for _ in range(1200)]
        here = int(got[-1][1:])
        for step in range(1, 40, 2):  # keys just behind the position, then just ahead
            db.put(b"k%05d" % (here - step if not reverse else here + step), b"new")
            db.put(b"k%05d" % (here + step if not reverse else here - step), b"new")
        got += [k for k, _ in it]
        assert got == sorted(set(got), reverse=reverse)
        assert set(keys) <= set(got)
