"""Pages on disk: overflow values, free-page reuse, corruption detection,
page encodings, and read-only handles following a writer."""

from __future__ import annotations

import os
import random

import pytest

import btree
from btree.node import HEADER, Node, Overflow, decode_node, decode_overflow, encode_node, encode_overflow
from btree.pager import page_slots
from btree.tree import _internal_used, _leaf_used
from lsmkv.base.errors import CorruptionError
from lsmkv.base.keys import MAX_VALUE_SIZE


def test_node_encoding_round_trips():
    leaf = Node(7, True)
    leaf.keys = [b"", b"a", b"b" * 50]
    leaf.vals = [b"", b"x" * 30, Overflow(99, 123456)]
    leaf.prev, leaf.next = 3, 11
    leaf.used = _leaf_used(leaf)
    img = encode_node(leaf, 512, epoch=5)
    back = decode_node(bytes(img), 7, 512, "f")
    assert back.keys == leaf.keys and back.vals[:2] == leaf.vals[:2]
    assert (back.vals[2].page, back.vals[2].length) == (99, 123456)
    assert (back.prev, back.next, back.leaf) == (3, 11, True)
    inner = Node(8, False)
    inner.keys, inner.kids = [b"m", b"t"], [2, 3, 4]
    inner.used = _internal_used(inner)
    back = decode_node(bytes(encode_node(inner, 512, 1)), 8, 512, "f")
    assert back.keys == inner.keys and back.kids == inner.kids and not back.leaf
    with pytest.raises(CorruptionError, match="image of page 8"):
        decode_node(bytes(encode_node(inner, 512, 1)), 9, 512, "f")


@pytest.mark.parametrize("size", [0, 1, 95, 96, 200, 4064, 4065, 100_000, 3 * 1024 * 1024])
def test_values_of_every_size_round_trip(tmp_path, size):
    path = str(tmp_path / "db")
    value = bytes(random.Random(size).getrandbits(8) for _ in range(min(size, 5000))) * (size // 5000 + 1)
    value = value[:size]
    with btree.open(path, page_size=512) as db:
        db.put(b"k", value)
        db.put(b"j", b"small")
        assert db.get(b"k") == value
    with btree.open(path) as db:
        assert db.get(b"k") == value
        assert list(db.scan()) == [(b"j", b"small"), (b"k", value)]
        assert db.check_invariants() == []
    assert btree.check(path).ok


def test_value_size_limit(db):
    with pytest.raises(ValueError, match="value is"):
        db.put(b"k", b"x" * (MAX_VALUE_SIZE + 1))


def test_overflow_chains_are_freed_on_overwrite_and_delete(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        db.put(b"a", b"x" * 20_000)
        db.flush()
        pages = db.stats()["page_count"]
        for i in range(10):
            db.put(b"a", bytes([i]) * 20_000)  # each overwrite frees the old chain
            db.flush()
        assert db.stats()["page_count"] <= pages + 50
        assert db.get(b"a") == bytes([9]) * 20_000
        db.delete(b"a")
        db.flush()
        s = db.stats()
        assert s["free_pages"] >= 40 and s["entries"] == 0
        assert db.check_invariants() == []


@pytest.mark.slow
def test_file_size_is_bounded_under_churn(dbpath):
    rng = random.Random(3)
    sizes = []
    with btree.open(dbpath, page_size=1024, cache_size=128 * 1024) as db:
        for rnd in range(6):
            keys = [b"%08d" % rng.randrange(10**8) for _ in range(3000)]
            for k in keys:
                db.put(k, b"v" * rng.randrange(0, 200))
            for k, _ in list(db.scan()):
                db.delete(k)
            db.flush()
            assert db.stats()["entries"] == 0
            sizes.append(os.path.getsize(os.path.join(dbpath, "btree.pages")))
        assert db.stats()["height"] == 1
        assert db.check_invariants() == []
    # (flush() gives back free slots once there are 16 and more than 1/64 of the file)
    assert max(sizes[1:]) <= max(sizes[0] * 1.1, sizes[0] + 16 * 1024), sizes
    assert btree.check(dbpath).ok


def _leaf_pages(dbpath):
    """Page numbers of the leaves in the page file (read through the check)."""
    db = btree.open(dbpath, read_only=True)
    try:
        tree = db._tree
        pg = tree.root
        for _ in range(tree.height - 1):
            pg = tree.node(pg, False).kids[0]
        leaves = []
        while pg:
            leaves.append(pg)
            pg = tree.node(pg, True).next
        return leaves
    finally:
        db.close()


def _flip(dbpath, page, offset, page_size=512):
    """Flip a bit of page ``page``'s image (the meta pages 0 and 1 are in
    their own slots; any other page wherever the page map puts it)."""
    slot = page if page < 2 else page_slots(dbpath)[page]
    with open(os.path.join(dbpath, "btree.pages"), "r+b") as f:
        f.seek(slot * page_size + offset)
        b = f.read(1)
        f.seek(slot * page_size + offset)
        f.write(bytes([b[0] ^ 0x40]))


def test_flipped_bit_in_a_leaf_is_detected_never_returned(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        for i in range(500):
            db.put(b"key%04d" % i, b"value%04d" % i)
    leaves = _leaf_pages(dbpath)
    victim = leaves[3]
    _flip(dbpath, victim, 400)
    report = btree.check(dbpath)
    assert not report.ok
    assert any(f"page {victim}" in p and "checksum" in p for p in report.problems)
    with btree.open(dbpath, cache_size=0) as db:
        hit = 0
        for i in range(500):
            try:
                assert db.get(b"key%04d" % i) == b"value%04d" % i
            except CorruptionError as exc:
                assert exc.page == victim and exc.path.endswith("btree.pages")
                hit += 1
        assert hit > 0
        with pytest.raises(CorruptionError, match=f"page {victim}"):
            list(db.scan())


def test_misplaced_page_is_detected(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        for i in range(500):
            db.put(b"key%04d" % i, b"v")
    a, b = _leaf_pages(dbpath)[1:3]
    slots = page_slots(dbpath)
    f = open(os.path.join(dbpath, "btree.pages"), "r+b")
    with f:
        f.seek(slots[a] * 512)
        img = f.read(512)
        f.seek(slots[b] * 512)
        f.write(img)  # page a's image written at page b's place
    report = btree.check(dbpath)
    assert any(f"page {b}" in p and "image of page" in p for p in report.problems)
    with btree.open(dbpath, cache_size=0) as db:
        with pytest.raises(CorruptionError, match="misplaced"):
            list(db.scan())


def test_damaged_overflow_page_is_detected(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        db.put(b"big", b"z" * 5000)
        tree = db._tree
        leaf = tree.node(tree.root, True)
        first = leaf.vals[0].page
    _flip(dbpath, first, 100)
    with btree.open(dbpath, cache_size=0) as db:
        with pytest.raises(CorruptionError) as info:
            db.get(b"big")
        assert info.value.page == first
    assert not btree.check(dbpath).ok


def _rewrite(dbpath, page, image, page_size=512):
    """Put a sealed ``image`` in the place of page ``page``'s current one."""
    with open(os.path.join(dbpath, "btree.pages"), "r+b") as f:
        f.seek(page_slots(dbpath)[page] * page_size)
        f.write(image)


def _page(dbpath, page, page_size=512) -> bytes:
    with open(os.path.join(dbpath, "btree.pages"), "rb") as f:
        f.seek(page_slots(dbpath)[page] * page_size)
        return f.read(page_size)


@pytest.mark.parametrize("damage", ["cycle", "length"])
def test_an_overflow_chain_that_loops_or_a_length_the_file_cannot_hold_is_corruption(dbpath, damage):
    # Pages sealed with their checksums right: the chain's last page leading
    # back to its first, or the leaf giving the value 2**32 - 1 bytes. A read
    # and a check must report corruption, not read on towards 4 GiB.
    with btree.open(dbpath, page_size=512) as db:
        db.put(b"big", b"z" * 5000)
        db.put(b"small", b"s")
        tree = db._tree
        leaf_page = tree.root
        ref = tree.node(leaf_page, True).vals[0]
        chain = [pg for pg, _ in tree._overflow_chain(ref)]
    assert len(chain) > 2
    if damage == "cycle":
        last = _page(dbpath, chain[-1])
        data, _ = decode_overflow(last, chain[-1], 512, "")
        _rewrite(dbpath, chain[-1], encode_overflow(chain[-1], data, chain[0], 512, HEADER.unpack_from(last, 0)[7]))
        message = "comes back to a page it passed"
    else:
        image = _page(dbpath, leaf_page)
        leaf = decode_node(image, leaf_page, 512, "")
        leaf.vals[0] = Overflow(ref.page, 2**32 - 1)
        _rewrite(dbpath, leaf_page, bytes(encode_node(leaf, 512, HEADER.unpack_from(image, 0)[7])))
        message = "more than the file's"
    with btree.open(dbpath, cache_size=0) as db:
        assert db.get(b"small") == b"s"
        with pytest.raises(CorruptionError, match=message):
            db.get(b"big")
    report = btree.check(dbpath)
    assert not report.ok and any(message in p for p in report.problems)


def test_damaged_meta_copy_falls_back_and_both_damaged_is_an_error(dbpath):
    with btree.open(dbpath, page_size=512) as db:
        db.put(b"a", b"1")
    with btree.open(dbpath) as db:  # two checkpoints: both meta copies in use
        db.put(b"b", b"2")
    report = btree.check(dbpath)
    assert report.ok
    epoch = report.details["epoch"]
    _flip(dbpath, 1 - epoch % 2, 60)  # the older copy
    with btree.open(dbpath) as db:
        assert dict(db.scan()) == {b"a": b"1", b"b": b"2"}
    _flip(dbpath, 0, 70)
    _flip(dbpath, 1, 70)
    with pytest.raises(CorruptionError, match="no valid meta page"):
        btree.open(dbpath)


def test_read_only_handle_follows_a_writer(dbpath):
    rng = random.Random(5)
    with btree.open(dbpath, page_size=512) as db:
        for i in range(2000):
            db.put(b"k%05d" % i, b"old")
        db.flush()
        ro = btree.open(dbpath, read_only=True, cache_size=0)
        try:
            assert ro.get(b"k00010") == b"old"
            first_epoch = ro.stats()["checkpoint_epoch"]
            for rnd in range(3):
                for i in rng.sample(range(2000), 500):
                    db.put(b"k%05d" % i, b"new%d" % rnd)
                db.flush()  # rewrites pages into the slots the reader's view may still use
                got = dict(ro.scan())
                assert len(got) == 2000
                assert set(got.values()) <= {b"old", b"new0", b"new1", b"new2"}
            # The reader's view moves on when it meets pages newer than it
            # (slots the writer reused) or when refreshed.
            assert ro.stats()["checkpoint_epoch"] > first_epoch
            ro.refresh()
            assert dict(ro.scan()) == dict(db.scan())
            assert ro.stats()["checkpoint_epoch"] == db.stats()["checkpoint_epoch"]
            db.put(b"k00001", b"newest")  # in the log only: seen after an explicit refresh
            assert ro.refresh() is True  # new writes became visible
            assert ro.get(b"k00001") == b"newest"
            assert ro.refresh() is False  # nothing new since
            assert db.refresh() is False  # a writable handle's view is always current
        finally:
            ro.close()


def _check_consistent(items):
    """The writer's state after some whole number of its steps: one batch set
    every third key to round R, then single puts set the next keys to R one
    by one: so batch keys agree, and single-put keys read R...R, R-1...R-1."""
    vals = dict(items)
    assert list(vals) == [b"k%04d" % i for i in range(1000)]
    batch = {vals[b"k%04d" % i] for i in range(0, 1000, 3)}
    assert len(batch) == 1, batch  # a batch is seen whole
    r = int(batch.pop()[1:])
    singles = [int(vals[b"k%04d" % i][1:].rstrip(b"x")) for i in range(1, 1000, 3)]
    assert all(x in (r, r - 1) or (r == 0 and x == 0) for x in singles), (r, set(singles))
    assert singles == sorted(singles, reverse=True)
    assert all(vals[b"k%04d" % i] == b"r0" for i in range(2, 1000, 3))
    return r


@pytest.mark.subprocess
def test_read_only_handle_beside_a_writer_process(dbpath):
    """A read-only handle reads while another process rewrites and
    checkpoints (pages overwritten in place under it): every snapshot it
    takes is one consistent state of the writer, never a mix, an error or
    garbage."""
    import subprocess
    import sys
    with btree.open(dbpath, page_size=512) as db:
        for i in range(1000):
            db.put(b"k%04d" % i, b"r0")
    writer = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "follow_writer.py"),
                               dbpath], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "1"
        rounds = set()
        with btree.open(dbpath, read_only=True, cache_size=0) as ro:
            for n in range(60):
                with ro.snapshot() as snap:  # the writer keeps what it reads (btree/readers.py)
                    items = list(snap.scan())
                rounds.add(_check_consistent(items))
                if n % 5 == 4:
                    writer.stdout.readline()  # wait until the writer finished another round
                    ro.refresh()
        assert len(rounds) > 1  # the reader did move on with the writer
    finally:
        writer.stdin.close()
        writer.wait(timeout=60)
        writer.stdout.close()
    assert btree.check(dbpath).ok


def test_flush_gives_back_the_room_a_rewrite_took(dbpath):
    """A checkpoint writes changed pages to free slots, so rewriting every
    page takes as many again; flush() then moves the pages in the highest
    slots down and cuts the file (without it the file would stay twice the
    size), and the data and the file check out."""
    rng = random.Random(11)
    keys = [rng.randbytes(16) for _ in range(20_000)]
    with btree.open(dbpath, cache_size=64 << 20) as db:
        for k in keys:
            db.put(k, rng.randbytes(100))
        db.flush()
        compact = os.path.getsize(os.path.join(dbpath, "btree.pages"))
        pages = db.stats()["slot_count"]
        for rnd in range(3):
            model = {k: rng.randbytes(100) for k in keys}
            for k, v in model.items():
                db.put(k, v)
            db.flush()
            size = os.path.getsize(os.path.join(dbpath, "btree.pages"))
            assert size <= compact * 1.05, (rnd, size, compact)
            stats = db.stats()
            assert stats["slot_count"] <= pages * 1.05 and stats["free_slots"] * 64 <= stats["slot_count"]
            assert db.check_invariants() == []
    assert btree.check(dbpath).ok
    with btree.open(dbpath) as db:
        assert dict(db.items()) == model
