"""Recovery: torn log tails, damaged logs, and checkpoints cut short at every
step (through a file system that tears a write and then fails, as a power
loss would leave the files)."""

from __future__ import annotations

import os
import random

import pytest

import struct

import btree
from btree.node import HEADER, HEADER_SIZE, PAGE_INTERNAL, PAGE_LEAF, PAGE_META, decode_node, encode_node, seal
from btree.pager import JOURNAL_FILE, Meta, Pager, encode_journal, encode_meta
from lsmkv.base.errors import BackgroundError, CorruptionError
from lsmkv.base.fs import OsFileSystem, PagedFile, WritableFile

# A pool of about 64 pages (a decoded 1 KiB page is charged about 2.5 KiB).
OPTS = dict(page_size=1024, cache_size=160 * 1024)


class Crash(Exception):
    """The simulated power cut."""


class TearingFS(OsFileSystem):
    """Counts data writes (page-file writes and log/journal appends); write
    number ``fail_at`` lands only half of its bytes and raises Crash, and so
    does every write after it (the machine is off)."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at
        self.writes = 0
        #: Set to cut the first page write after a checkpoint journal is
        #: complete (wherever the checkpoint's runs of fresh pages put it).
        self.tear_after_journal = False

    def _hit(self, data) -> int | None:
        self.writes += 1
        if self.writes >= self.fail_at:
            return len(data) // 2 if self.writes == self.fail_at else 0
        return None

    def open_paged(self, path, create=False):
        f = super().open_paged(path, create)
        fs = self

        class P(PagedFile):
            __slots__ = ()

            def write_at(self, offset, data):
                cut = fs._hit(data)
                if cut is not None:
                    if cut:
                        super().write_at(offset, bytes(data)[:cut])
                    raise Crash("power cut")
                super().write_at(offset, data)

            def sync(self):
                if fs.writes >= fs.fail_at:
                    raise Crash("power cut")
                super().sync()
        return P(f.path, f._fd)

    def _wrap(self, f):
        fs = self

        class W(WritableFile):
            __slots__ = ()

            def append(self, data):
                cut = fs._hit(data)
                if cut is not None:
                    if cut:
                        super().append(bytes(data)[:cut])
                    raise Crash("power cut")
                super().append(data)

            def sync(self):
                if fs.writes >= fs.fail_at:
                    raise Crash("power cut")
                super().sync()
                if fs.tear_after_journal and self.path.endswith("btree.journal"):
                    fs.fail_at = fs.writes + 1  # (the journal is complete and durable)
        return W(f.path, f._fd, f.size)

    def create(self, path):
        return self._wrap(super().create(path))

    def open_appendable(self, path):
        return self._wrap(super().open_appendable(path))

    def rename(self, src, dst):
        if self.writes >= self.fail_at:
            raise Crash("power cut")
        super().rename(src, dst)

    def remove(self, path):
        if self.writes >= self.fail_at:
            raise Crash("power cut")
        super().remove(path)


def _abandon(db) -> None:
    """Drop a handle the way a dead process does: no checkpoint, files closed."""
    db._simulate_crash()


def _workload(db, model, rng, n):
    for i in range(n):
        k = b"key%04d" % rng.randrange(1500)
        if rng.random() < 0.2:
            db.delete(k)
            model.pop(k, None)
        else:
            v = bytes([i % 256]) * rng.choice((10, 50, 300, 3000))
            db.put(k, v)
            model[k] = v


@pytest.mark.slow
@pytest.mark.parametrize("chunk", [256, 3])
def test_checkpoint_cut_at_every_write_recovers(tmp_path, monkeypatch, chunk):
    """Fill a DB, then checkpoint through a file system that dies at write N
    (N = 1, 2, ...: inside the runs of pages written to free slots, the map
    pages, the meta page, the log switch). Every reopen must give back
    exactly the data. With ``chunk`` 3 the checkpoint makes and writes its
    pages 3 at a time (many runs) instead of 256."""
    monkeypatch.setattr(btree.pager, "COMMIT_CHUNK", chunk)
    base = random.Random(7)
    model: dict[bytes, bytes] = {}
    path = str(tmp_path / "db")
    with btree.open(path, **OPTS) as db:
        _workload(db, model, base, 1500)
    n = 1
    cut_inside_pages = 0
    while True:
        fs = TearingFS(fail_at=10**9)
        db = btree.open(path, fs=fs, **OPTS)
        rng = random.Random(n)
        _workload(db, model, rng, 200)  # sync=False writes: handed to the OS, so they survive
        fs.fail_at = fs.writes + n
        epoch = db._pager.meta.epoch
        try:
            db.flush()
        except BackgroundError as exc:
            assert isinstance(exc.__cause__, Crash)
            crashed = True
            if _epoch_on_disk(path) == epoch:  # cut before the new meta page was whole
                cut_inside_pages += 1
        else:
            crashed = False
        _abandon(db)
        with btree.open(path, **OPTS) as db2:
            assert dict(db2.scan()) == model, f"wrong data after a cut at write {n}"
            assert db2.check_invariants() == []
        report = btree.check(path)
        assert report.ok, report.problems
        if not crashed:
            break
        n += 1
    assert n > 3 and cut_inside_pages >= 2


def _epoch_on_disk(path: str) -> int:
    pager = Pager(OsFileSystem(), path, read_only=True)
    try:
        return pager.read_meta().epoch
    finally:
        pager.close()


def _as_format_3(path: str) -> None:
    """Make the page file of a database whose pages sit in their own slots
    (what compact_range() writes) a format-3 file: both meta copies say
    version 3 (whose fields are a prefix of format 4's)."""
    pager = Pager(OsFileSystem(), path, read_only=True)
    meta = pager.read_meta()
    ps = meta.page_size
    assert meta.map_dir == 0 and meta.slot_count == meta.page_count
    with open(os.path.join(path, "btree.pages"), "r+b") as f:
        for slot in (0, 1):
            f.seek(slot * ps)
            img = bytearray(f.read(ps))
            struct.pack_into("<I", img, HEADER_SIZE + 8, 3)
            f.seek(slot * ps)
            f.write(seal(img, slot, PAGE_META, 0, 0, HEADER.unpack_from(img, 0)[7], 0, 0))
    pager.close()


def test_a_format_3_file_with_a_checkpoint_journal_is_recovered_and_converted(tmp_path):
    """A format-3 database that crashed in the in-place writes of a
    checkpoint (a complete journal, a torn page in the file): open applies
    the journal, as format 3 did, and the first checkpoint writes the page
    map: the file is format 4 from then on and holds the same data."""
    path = str(tmp_path / "db")
    model: dict[bytes, bytes] = {}
    with btree.open(path, **OPTS) as db:
        _workload(db, model, random.Random(1), 800)
        db.compact_range()  # every page in its own slot, no map: format 3's layout
    _as_format_3(path)
    pager = Pager(OsFileSystem(), path, read_only=True)
    meta = pager.read_meta()
    pager.load_pages(meta)
    ps = meta.page_size
    # The journal of a checkpoint of epoch + 1 that changed one leaf.
    leaf_pg = next(pg for pg in range(2, meta.page_count) if decode_node(pager.read_page(pg), pg, ps, "p").leaf)
    node = decode_node(pager.read_page(leaf_pg), leaf_pg, ps, "p")
    pager.close()
    i = next(i for i, v in enumerate(node.vals) if type(v) is bytes)
    new_value = b"J" * len(node.vals[i])  # (the same size: the leaf's size bookkeeping stands)
    node.vals[i] = new_value
    model[node.keys[i]] = new_value
    newer = Meta(meta.epoch + 1, ps, meta.root, meta.page_count, meta.freelist_head, meta.free_count,
                 meta.ckpt_lsn, meta.entries, meta.height, meta.ttl_entries, meta.meta_page, meta.meta_length)
    meta_img = bytearray(encode_meta(newer))
    struct.pack_into("<I", meta_img, HEADER_SIZE + 8, 3)
    meta_img = seal(meta_img, newer.epoch % 2, PAGE_META, 0, 0, newer.epoch, 0, 0)
    with open(os.path.join(path, JOURNAL_FILE), "wb") as f:
        f.write(encode_journal(ps, newer.epoch, [encode_node(node, ps, newer.epoch), bytes(meta_img)]))
    with open(os.path.join(path, "btree.pages"), "r+b") as f:
        f.seek(leaf_pg * ps + ps // 2)
        f.write(b"\x00" * 16)  # the in-place write the crash tore
    pre = btree.check(path)  # check reads the journal's pages in place of the file's
    assert pre.ok and pre.details["pending_journal"] and pre.details["format_version"] == 3
    with btree.open(path, **OPTS) as db:
        assert dict(db.scan()) == model
        db.put(b"after", b"conversion")
        model[b"after"] = b"conversion"
    assert not os.path.exists(os.path.join(path, JOURNAL_FILE))
    after = btree.check(path)
    assert after.ok and after.details["format_version"] == 4 and after.details["map_pages"] >= 2
    with btree.open(path, **OPTS) as db:
        assert dict(db.scan()) == model


def test_torn_log_tail_is_dropped(tmp_path):
    path = str(tmp_path / "db")
    db = btree.open(path, **OPTS)
    db.put(b"a", b"1", sync=True)
    db.put(b"b", b"2", sync=True)
    _abandon(db)
    log_path = os.path.join(path, "btree.log")
    size = os.path.getsize(log_path)
    with open(log_path, "r+b") as f:  # cut the last record in half
        f.truncate(size - 3)
    with btree.open(path, **OPTS) as db:
        assert db.get(b"a") == b"1" and db.get(b"b") is None
        db.put(b"c", b"3", sync=True)
    with btree.open(path, **OPTS) as db:
        assert dict(db.scan()) == {b"a": b"1", b"c": b"3"}
    # Zero bytes after the last record (a file extended but never written) are a torn tail too.
    db = btree.open(path, **OPTS)
    db.put(b"d", b"4", sync=True)
    _abandon(db)
    with open(log_path, "ab") as f:
        f.write(b"\0" * 100)
    with btree.open(path, **OPTS) as db:
        assert dict(db.scan()) == {b"a": b"1", b"c": b"3", b"d": b"4"}


def test_damaged_log_record_before_the_tail_is_corruption(tmp_path):
    path = str(tmp_path / "db")
    db = btree.open(path, **OPTS)
    for i in range(5):
        db.put(b"k%d" % i, b"v" * 20, sync=True)
    _abandon(db)
    log_path = os.path.join(path, "btree.log")
    with open(log_path, "r+b") as f:
        f.seek(32 + 20)  # inside the first record
        f.write(b"\xff")
    with pytest.raises(CorruptionError, match="log record checksum mismatch") as info:
        btree.open(path, **OPTS)
    assert info.value.path == log_path and info.value.offset == 32
    report = btree.check(path)
    assert not report.ok and "btree.log" in report.problems[0]


def test_replay_after_crash_without_checkpoint_keeps_batches_whole(tmp_path):
    path = str(tmp_path / "db")
    db = btree.open(path, **OPTS)
    with db.write_batch() as b:
        for i in range(200):
            b.put(b"b%03d" % i, b"x" * 100)
    db.put(b"single", b"y")
    _abandon(db)
    with btree.open(path, **OPTS) as db:
        assert db.stats()["replayed_batches"] == 2
        assert len(list(db.scan(prefix=b"b"))) == 200 and db.get(b"single") == b"y"


def test_an_io_error_while_logging_stops_writes_until_reopened(tmp_path):
    path = str(tmp_path / "db")
    fs = TearingFS(fail_at=10**9)
    db = btree.open(path, fs=fs, **OPTS)
    db.put(b"a", b"1", sync=True)
    fs.fail_at = fs.writes + 1  # the next log append lands half a record, then fails
    with pytest.raises(BackgroundError, match="writing the log failed") as info:
        db.put(b"b", b"2")
    assert isinstance(info.value.__cause__, Crash)
    with pytest.raises(BackgroundError, match="resume"):
        db.put(b"c", b"3")
    assert db.get(b"a") == b"1" and db.get(b"b") is None  # reads go on
    assert db.stats()["writes_stopped"]
    db.close()  # no checkpoint through the failed handle
    with btree.open(path, **OPTS) as db:
        assert dict(db.scan()) == {b"a": b"1"}  # the half record was a torn tail


def test_creation_cut_short_is_created_afresh(tmp_path):
    """A crash while a new database's first pages were written (before open
    returned) leaves a page file without a valid meta page and no log: the
    next open creates the database afresh."""
    from lsmkv.base.fault_fs import FaultInjectionFS
    path = str(tmp_path / "db")
    fs = FaultInjectionFS()
    fs.cut_power(2, torn_prefix=100)  # call 1 opens the page file, call 2 writes the first pages
    with pytest.raises(OSError):
        btree.open(path, fs=fs, **OPTS)
    fs.power_on()
    assert 0 < os.path.getsize(os.path.join(path, "btree.pages")) < 1024
    with btree.open(path, **OPTS) as db:
        db.put(b"a", b"1")
    with btree.open(path, **OPTS) as db:
        assert dict(db.scan()) == {b"a": b"1"}


def test_creation_cut_short_with_a_whole_meta_page_is_created_afresh(tmp_path):
    """The first pages' write cut short after the first meta page (mostly
    zeros, so a prefix of it plus zeros is the whole page): a valid meta
    page of epoch 0, a root page of zeros, no log. Nothing was ever
    acknowledged (open creates the log before it returns), so open creates
    the database afresh instead of reporting the zero root page."""
    path = str(tmp_path / "db")
    with btree.open(path, **OPTS) as db:
        pass
    with open(os.path.join(path, "btree.pages"), "rb") as f:
        first_meta = f.read(OPTS["page_size"])
    os.remove(os.path.join(path, "btree.log"))
    with open(os.path.join(path, "btree.pages"), "wb") as f:
        f.write(first_meta + bytes(2 * OPTS["page_size"]))
    with btree.open(path, **OPTS) as db:
        db.put(b"a", b"1")
    with btree.open(path, **OPTS) as db:
        assert dict(db.scan()) == {b"a": b"1"}
    assert btree.check(path).ok


def test_damaged_meta_pages_of_a_database_with_a_log_are_corruption(tmp_path):
    path = str(tmp_path / "db")
    with btree.open(path, **OPTS) as db:
        db.put(b"a", b"1")
    with open(os.path.join(path, "btree.pages"), "r+b") as f:
        f.write(b"\xff" * 2048)  # both meta copies
    with pytest.raises(CorruptionError, match="no valid meta page"):
        btree.open(path, **OPTS)


@pytest.mark.slow
def test_a_checkpoint_holds_a_chunk_of_page_images_at_a_time(tmp_path):
    """A checkpoint of thousands of dirty pages makes and writes their images
    a chunk at a time: its memory does not grow with the number of dirty
    pages. (Made all at once, the images and the journal format 3 built
    from them took three times the pages' size: 24 MB here.)"""
    import tracemalloc
    path = str(tmp_path / "db")
    rng = random.Random(5)
    keys = [rng.randbytes(16) for _ in range(60_000)]
    options = dict(cache_size=64 << 20, checkpoint_log_bytes=1 << 30)
    with btree.open(path, **options) as db:
        for k in keys:
            db.put(k, rng.randbytes(100))
    with btree.open(path, **options) as db:
        for k in keys[::30]:  # one update in most leaves: pages the checkpoint moves to free slots
            db.put(k, b"new")
        dirty = len(db._pool.dirty)
        assert dirty > 1000
        written = db._pager.data_bytes
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            db.flush()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert db._pager.data_bytes - written >= dirty * 4096  # every dirty page was written
        assert peak - before < 4 << 20, (peak - before, dirty)
    with btree.open(path) as db:
        assert all(db[k] == b"new" for k in keys[::30])
        assert db.check_invariants() == []


def _images_by_page_and_epoch(path: str, page_size: int) -> dict:
    """(page number, epoch) -> slots, for every intact leaf or internal
    page image anywhere in the page file (current or stale)."""
    from lsmkv.base.checksum import crc32

    found: dict = {}
    with open(os.path.join(path, "btree.pages"), "rb") as f:
        data = f.read()
    for slot in range(2, len(data) // page_size):
        buf = data[slot * page_size:(slot + 1) * page_size]
        hdr = HEADER.unpack_from(buf, 0)
        if hdr[2] in (PAGE_LEAF, PAGE_INTERNAL) and hdr[0] == crc32(buf[4:]):
            found.setdefault((hdr[1], hdr[7]), []).append(slot)
    return found


@pytest.mark.parametrize("where", ["the highest unused slot", "the first slot past the last"])
def test_the_checkpoint_after_an_unfinished_one_stamps_no_epoch_the_file_holds(tmp_path, monkeypatch, where):
    """A checkpoint that failed or that a crash cut short (E+1) leaves
    intact page images in slots the checkpoint on disk (E) does not use.
    The writer's open treats it as failed: its meta page is written again
    above E+1, so the next checkpoint does not stamp a page's new image
    with the epoch of a stale image of it (repair's scan mode takes the
    newest image of each page, and counts two of one epoch as damage). The
    unfinished checkpoint may also have grown the file: its pages past the
    last slot count too."""
    monkeypatch.setattr(btree.vacuum, "COMPACT_FREE", 0)  # close() keeps the unused slots
    path = str(tmp_path / "db")
    model: dict[bytes, bytes] = {}
    with btree.open(path, **OPTS) as db:
        _workload(db, model, random.Random(3), 1500)
        db.flush()
        _workload(db, model, random.Random(4), 300)
    ps = OPTS["page_size"]
    pager = Pager(OsFileSystem(), path, read_only=True)
    try:
        meta = pager.read_meta()
        pager.load_pages(meta)
        unused = pager.map.unused_slots()
        leaf = next(pg for pg in range(2, meta.page_count) if pager.slots[pg] and HEADER.unpack_from(
            pager.file.read_at(pager.slots[pg] * ps, ps), 0)[2] == PAGE_LEAF)
        image = bytearray(pager.file.read_at(pager.slots[leaf] * ps, ps))
    finally:
        pager.close()
    assert len(unused) >= 2
    # What the unfinished checkpoint left: the leaf's image under epoch E+1
    # in the highest unused slot (the next checkpoint writes the lowest
    # first), or in a slot it added to the file.
    hdr = HEADER.unpack_from(image, 0)
    seal(image, leaf, PAGE_LEAF, hdr[4], hdr[5], meta.epoch + 1, hdr[8], hdr[9])
    with open(os.path.join(path, "btree.pages"), "r+b") as f:
        f.seek((unused[-1] if where == "the highest unused slot" else meta.slot_count) * ps)
        f.write(image)
    key = decode_node(bytes(image), leaf, ps, "p").keys[0]
    with btree.open(path, **OPTS) as db:
        assert db._pager.meta.epoch > meta.epoch + 1
        db.put(key, b"rewritten")
        model[key] = b"rewritten"
        db.flush()
        assert dict(db.scan()) == model
    twice = {k: slots for k, slots in _images_by_page_and_epoch(path, ps).items() if len(slots) > 1}
    assert not twice, f"pages with two images of one epoch: {twice}"
    assert btree.check(path).ok
    with btree.open(path, **OPTS) as db:
        assert dict(db.scan()) == model


@pytest.mark.parametrize("with_map", [True, False], ids=["page map", "no map"])
def test_a_meta_page_counting_more_slots_than_the_file_holds_is_corruption_before_any_allocation(tmp_path,
                                                                                                 with_map):
    # A sealed meta page (its checksum right) whose slot count -- or, for a
    # file without a page map, page count -- is 2**31: opening and checking
    # must report corruption, not build a map of 2**31 entries (16 GiB).
    import copy as _copy

    from btree.pager import PAGES_FILE, decode_meta
    path = str(tmp_path / "db")
    with btree.open(path, page_size=512) as db:
        for i in range(300):
            db.put(b"key%05d" % i, b"v" * 40)
    file = os.path.join(path, PAGES_FILE)
    with open(file, "rb") as f:
        pages = bytearray(f.read())
    metas = []
    for slot in (0, 1):
        try:
            metas.append(decode_meta(bytes(pages[slot * 512:(slot + 1) * 512]), slot, 512, file))
        except CorruptionError:
            pass
    meta = _copy.copy(max(metas, key=lambda m: m.epoch))
    meta.epoch += 1
    if with_map:
        assert meta.map_dir
        meta.slot_count = 1 << 31
    else:
        meta.page_count = meta.slot_count = 1 << 31
        meta.map_dir = 0
    slot = meta.epoch % 2
    pages[slot * 512:(slot + 1) * 512] = encode_meta(meta)
    with open(file, "wb") as f:
        f.write(pages)
    with pytest.raises(CorruptionError, match="meta page records 2147483648"):
        btree.open(path, read_only=True)
    assert not btree.check(path).ok
