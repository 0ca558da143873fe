"""The page file: meta pages, page reads, free pages and atomic checkpoints.

This module owns ``btree.pages`` (and reads ``btree.journal``, which
format-3 checkpoints wrote):

* the two meta pages (pages 0 and 1; checkpoint epoch ``e`` goes to page
  ``e % 2``, so a torn meta write leaves the other copy intact);
* verified page reads (checksum + page number, see :mod:`btree.node`),
  each page read from the slot the page map gives it (btree/pagemap.py);
* free page numbers: allocation (lowest first); a format-3 file's
  free-list chain is read, never written;
* the checkpoint write protocol. Between checkpoints nothing is written to
  the page file. A checkpoint writes every changed page, the changed map
  pages and the map directory to slots the current checkpoint does not
  use, fsyncs, then writes the meta page (the copy the current checkpoint
  does not use) and fsyncs. Nothing durable is ever overwritten, so every
  page is written once and a crash at any moment leaves the last
  checkpoint whole (images are made and written a chunk of 256 pages at a
  time, so a checkpoint's memory does not grow with its dirty pages).
* format-3 files: a checkpoint journal left by a crash is applied at open
  (read-only handles read through it); the first checkpoint writes the
  page map, and the file is format 4 from then on.
"""

from __future__ import annotations

import copy
import heapq
import logging
import os
import struct
from array import array

try:
    import cython
except ImportError:
    from lsmkv.base.compile_hints import cython

from lsmkv.base.checksum import STORED_CRC, crc32, single_bit_error
from lsmkv.base.errors import CorruptionError, InvalidDatabaseError
from lsmkv.base.fs import FileSystem

from .node import (HEADER, HEADER_SIZE, MAX_PAGE_SIZE, MIN_PAGE_SIZE, PAGE_FREELIST, PAGE_META, UNCHECKED,
                   LeafImage, check_header, decode_numbers, leaf_image, leaf_value, read_leaf_image,
                   search_leaf_page, seal, undo_single_bit_flip)
from .pagemap import PageMap

log = logging.getLogger(__name__)

PAGES_FILE = "btree.pages"
JOURNAL_FILE = "btree.journal"
#: compact_range() writes the rewritten page file here, then renames it over PAGES_FILE.
VACUUM_FILE = "btree.pages.vacuum"
LOG_FILE = "btree.log"

META_MAGIC = b"BTREEDB\x00"
#: 2: leaf values may carry a deadline (values with a ttl); the meta page
#: counts them. 3: the meta page names the chain of pages holding the
#: metadata entries (batch.set_meta). Older versions (whose new fields read
#: as 0) are still read.
#: 4: pages move: the page map says which slot of the file holds each page
#: (btree/pagemap.py), and checkpoints write no journal. A format-4 meta page
#: whose map directory is 0 describes a file laid out as format 3 (page p in
#: slot p, a free-list chain), as files built whole are.
FORMAT_VERSION = 4
#: magic 8s, format version u32, page size u32, root u32, page count u32,
#: free-list head u32, free page count u32, checkpoint LSN u64, entries u64, height u32,
#: entries with a ttl u64, metadata chain's first page u32 (0: none), its length u32;
#: format 4 adds: slots in the file u32, first map-directory page's slot u32 (0: identity map).
META_BODY = struct.Struct("<8sIIIIIIQQIQIIII")
#: The fields format 3 has (what a format-3 meta page holds).
META_BODY_V3 = struct.Struct("<8sIIIIIIQQIQII")

JOURNAL_MAGIC = b"BTJOURNL"
#: magic 8s, version u32, page size u32, epoch u64, page images u32, crc32 of the first 28 bytes u32
JOURNAL_HEADER = struct.Struct("<8sIIQII")
_U32 = struct.Struct("<I")


def _runs(numbers: list[int], limit: int = 256):
    """(i, j) index ranges of ``numbers`` (ascending) that are runs of
    consecutive numbers, at most ``limit`` long: slots read or written in
    one call each."""
    i, n = 0, len(numbers)
    while i < n:
        j = i + 1
        while j < n and numbers[j] == numbers[j - 1] + 1 and j - i < limit:
            j += 1
        yield i, j
        i = j


class StaleView(Exception):
    """Internal: a read-only handle read a page newer than its view (a writer
    in another process checkpointed); the handle reloads and retries."""


class Meta:
    """The contents of a meta page: where the checkpointed tree is."""

    __slots__ = ("epoch", "page_size", "root", "page_count", "freelist_head", "free_count",
                 "ckpt_lsn", "entries", "height", "ttl_entries", "meta_page", "meta_length",
                 "slot_count", "map_dir", "version")

    def __init__(self, epoch: int, page_size: int, root: int, page_count: int, freelist_head: int,
                 free_count: int, ckpt_lsn: int, entries: int, height: int, ttl_entries: int = 0,
                 meta_page: int = 0, meta_length: int = 0, slot_count: int | None = None,
                 map_dir: int = 0, version: int = FORMAT_VERSION) -> None:
        self.epoch = epoch
        self.page_size = page_size
        self.root = root
        self.page_count = page_count
        self.freelist_head = freelist_head
        self.free_count = free_count
        self.ckpt_lsn = ckpt_lsn
        self.entries = entries
        self.height = height
        #: Entries whose value has a ttl (0 in a version-1 page file).
        self.ttl_entries = ttl_entries
        #: The overflow-page chain holding the metadata entries (0: none).
        self.meta_page = meta_page
        self.meta_length = meta_length
        #: Slots the file uses (format 4; with an identity map, the page count).
        self.slot_count = page_count if slot_count is None else slot_count
        #: Slot of the first map-directory page; 0: page p is in slot p and
        #: ``freelist_head`` names the free list (format 3's layout).
        self.map_dir = map_dir
        #: The format version of the meta page read (written: FORMAT_VERSION).
        self.version = version


_NAME = struct.Struct("<H")


def encode_meta_entries(entries: dict[bytes, bytes]) -> bytes:
    """The metadata entries as stored in their page chain: count u32, then
    per entry name length u16, name, value length u32, value (names ascending)."""
    parts = [_U32.pack(len(entries))]
    for name, value in sorted(entries.items()):
        parts += (_NAME.pack(len(name)), name, _U32.pack(len(value)), value)
    return b"".join(parts)


def decode_meta_entries(data: bytes, path: str, page: int) -> dict[bytes, bytes]:
    """The inverse of encode_meta_entries; CorruptionError if malformed."""
    try:
        (count,) = _U32.unpack_from(data, 0)
        pos = 4
        out: dict[bytes, bytes] = {}
        for _ in range(count):
            (n,) = _NAME.unpack_from(data, pos)
            pos += 2
            name = data[pos:pos + n]
            pos += n
            (m,) = _U32.unpack_from(data, pos)
            pos += 4
            value = data[pos:pos + m]
            pos += m
            if len(name) != n or len(value) != m or not n:
                raise struct.error
            out[name] = value
    except struct.error:
        raise CorruptionError("metadata entries malformed", path=path, page=page) from None
    if pos != len(data):
        raise CorruptionError("metadata entries have trailing bytes", path=path, page=page)
    return out


def encode_meta(meta: Meta) -> bytearray:
    slot = meta.epoch % 2
    page = bytearray(meta.page_size)
    META_BODY.pack_into(page, HEADER_SIZE, META_MAGIC, FORMAT_VERSION, meta.page_size, meta.root,
                        meta.page_count, meta.freelist_head, meta.free_count, meta.ckpt_lsn,
                        meta.entries, meta.height, meta.ttl_entries, meta.meta_page, meta.meta_length,
                        meta.slot_count, meta.map_dir)
    return seal(page, slot, PAGE_META, 0, 0, meta.epoch, 0, 0)


def decode_meta(buf: bytes, slot: int, page_size: int, path: str) -> Meta:
    hdr = check_header(buf, slot, page_size, path)
    if hdr[2] != PAGE_META:
        raise CorruptionError(f"page {slot} is not a meta page", path=path, page=slot)
    magic, version = struct.unpack_from("<8sI", buf, HEADER_SIZE)
    if magic != META_MAGIC:
        raise CorruptionError("meta page has a wrong magic number", path=path, page=slot)
    if version > FORMAT_VERSION:
        raise InvalidDatabaseError(f"{path} has format version {version}; this btree understands up to "
                                   f"{FORMAT_VERSION}: upgrade the software")
    if version >= 4:
        (_, _, psize, root, count, head, nfree, lsn, entries, height, ttl_entries, meta_page, meta_length,
         slot_count, map_dir) = META_BODY.unpack_from(buf, HEADER_SIZE)
    else:
        (_, _, psize, root, count, head, nfree, lsn, entries, height, ttl_entries, meta_page,
         meta_length) = META_BODY_V3.unpack_from(buf, HEADER_SIZE)
        slot_count, map_dir = count, 0
    if psize != page_size:
        raise CorruptionError(f"meta page records page size {psize}, read at {page_size}", path=path, page=slot)
    if not (2 <= root < count) or height < 1:
        raise CorruptionError(f"meta page has an impossible root {root} / page count {count} / height {height}",
                              path=path, page=slot)
    if ttl_entries > entries:
        raise CorruptionError(f"meta page counts {ttl_entries} entries with a ttl of {entries}", path=path, page=slot)
    if (meta_page != 0) != (meta_length != 0) or (meta_page and not 2 <= meta_page < count):
        raise CorruptionError(f"meta page names an impossible metadata chain (page {meta_page}, "
                              f"{meta_length} bytes)", path=path, page=slot)
    if map_dir and (head or not 2 <= map_dir < slot_count) or not map_dir and slot_count != count:
        raise CorruptionError(f"meta page names an impossible page map (directory in slot {map_dir} of "
                              f"{slot_count}, free-list head {head}, {count} pages)", path=path, page=slot)
    return Meta(hdr[7], psize, root, count, head, nfree, lsn, entries, height, ttl_entries, meta_page, meta_length,
                slot_count, map_dir, version)


def journal_header(page_size: int, epoch: int, count: int) -> bytes:
    """The header of a checkpoint journal of ``count`` page images."""
    header = JOURNAL_HEADER.pack(JOURNAL_MAGIC, 1, page_size, epoch, count, 0)
    return header[:28] + _U32.pack(crc32(header[:28]))


def encode_journal(page_size: int, epoch: int, images: list[bytes | bytearray]) -> bytes:
    """A checkpoint journal holding ``images`` (full page images, meta page
    last): the header, the images, the crc32 of the images. (Pager.commit
    writes the same bytes a chunk at a time.)"""
    body = b"".join(images)
    return journal_header(page_size, epoch, len(images)) + body + _U32.pack(crc32(body))


#: Pages a checkpoint makes and writes at a time (1 MiB of 4 KiB pages).
COMMIT_CHUNK = 256


def _made(pages: list) -> list:
    """(page number, image) pairs of ``pages``, whose images may still be
    functions that make them."""
    return [(pg, img if isinstance(img, (bytes, bytearray)) else img()) for pg, img in pages]


def decode_journal(data: bytes, page_size: int, path: str) -> tuple[int, list[tuple[int, bytes]]] | None:
    """(epoch, [(page number, image)]) of a complete, valid journal; None if
    it is incomplete (wrong size, a checksum that does not match: its
    checkpoint never touched the page file). A complete journal holding a
    page image that fails its own checks, or one a single flipped bit
    damaged, is corruption."""
    hs = JOURNAL_HEADER.size
    if len(data) < hs:
        return None
    magic, _version, ps, epoch, n, hcrc = JOURNAL_HEADER.unpack_from(data, 0)
    if magic != JOURNAL_MAGIC or hcrc != crc32(data[:28]) or ps != page_size:
        if single_bit_error(data[:28], hcrc) is not None:
            raise CorruptionError("checkpoint journal header is damaged (a flipped bit)", path=path, offset=0)
        return None
    end = hs + n * ps
    if len(data) != end + 4:
        return None
    body = data[hs:end]
    if _U32.unpack_from(data, end)[0] != crc32(body):
        _check_damaged_journal(data, n, ps, path)
        return None
    images = []
    for k in range(n):
        img = body[k * ps:(k + 1) * ps]
        pgno = HEADER.unpack_from(img, 0)[1]
        check_header(img, pgno, ps, path)
        images.append((pgno, img))
    return epoch, images


def _check_damaged_journal(data: bytes, n: int, ps: int, path: str) -> None:
    """A journal of the complete size fails its body checksum. One cut short
    by a crash (never synced, so its checkpoint never touched the page file)
    is ignored; but one a flipped bit damaged was complete and may be needed
    to repair the page file, so that is reported (and the journal kept)."""
    hs = JOURNAL_HEADER.size
    end = hs + n * ps
    if single_bit_error(data[hs:end], _U32.unpack_from(data, end)[0]) == STORED_CRC:
        raise CorruptionError("checkpoint journal trailer is damaged (a flipped bit)", path=path, offset=end)
    failing = [k for k in range(n)
               if HEADER.unpack_from(data, hs + k * ps)[0] != crc32(data[hs + k * ps + 4: hs + (k + 1) * ps])]
    if len(failing) == 1 and undo_single_bit_flip(data[hs + failing[0] * ps: hs + (failing[0] + 1) * ps]):
        raise CorruptionError("checkpoint journal page image is damaged (a flipped bit)",
                              path=path, offset=hs + failing[0] * ps)


def valid_page_size(n: object) -> bool:
    return type(n) is int and MIN_PAGE_SIZE <= n <= MAX_PAGE_SIZE and n & (n - 1) == 0


class Pager:
    """The open page file. Not thread-safe by itself: the DB's lock guards it."""

    def __init__(self, fs: FileSystem, dirpath: str, *, read_only: bool) -> None:
        self.fs = fs
        self.dir = dirpath
        self.path = os.path.join(dirpath, PAGES_FILE)
        self.journal_path = os.path.join(dirpath, JOURNAL_FILE)
        self.read_only = read_only
        self.file = fs.open_paged(self.path, create=False)
        self.page_size = 0
        self.meta: Meta | None = None
        #: Page images that stand in for the file's (a read-only handle's view
        #: of a checkpoint whose journal was not yet applied).
        self.overlay: dict[int, bytes] = {}
        #: Free page numbers (logical pages: see btree/pagemap.py).
        self.free: set[int] = set()
        self._free_heap: list[int] = []
        self.free_changed = False
        #: The pages of a format-3 free-list chain (none once a map is written).
        self.freelist_pages: list[int] = []
        self.page_count = 0
        #: Where each page is in the file (loaded with the free list).
        self.map: PageMap | None = None
        #: Writers: the reader table (btree/readers.py), whose readers in
        #: other processes keep the slots of the checkpoints they read.
        self.readers = None
        self.slots = array("I")
        #: The highest epoch a failed checkpoint stamped pages with (its
        #: meta page may never have reached the disk; no later checkpoint
        #: reuses the epoch, so two images of a page never share one).
        self._failed_epoch = 0
        # Counters for stats().
        self.page_reads = 0
        self.bytes_read = 0
        self.bytes_written = 0
        self.data_bytes = 0

    def replaced(self) -> bool:
        """Whether the page file at the path is no longer the one open here
        (a writer's compact_range() renamed a rewritten file over it)."""
        try:
            st = os.stat(self.path)
            return (st.st_dev, st.st_ino) != self.file.identity()
        except OSError:
            return False

    def close(self) -> None:
        self.file.close()

    # ---- creation and meta pages ------------------------------------------------

    def is_empty(self) -> bool:
        return self.file.size() == 0

    def creation_cut_short(self) -> bool:
        """Whether this page file is a database whose creation a crash cut
        short, which holds nothing: no log and no journal (open creates the
        log once the first pages are durable, before it returns, so every
        database that was ever opened has one), no longer than a new
        database's pages, and no valid meta page or only the two a new
        database starts with (epochs 0 and 1: it never checkpointed, so
        anything ever written to it would be in a log)."""
        if self.fs.exists(os.path.join(self.dir, LOG_FILE)) or self.fs.exists(self.journal_path):
            return False
        if self.file.size() > 3 * MAX_PAGE_SIZE:
            return False
        try:
            return self.read_meta().epoch <= 1
        except CorruptionError:
            return True

    def initialize(self, page_size: int, root_image_fn) -> Meta:
        """Write a new, empty database: two meta copies and an empty root leaf (page 2)."""
        meta = Meta(0, page_size, 2, 3, 0, 0, 0, 0, 1)
        m0 = encode_meta(meta)
        meta1 = Meta(1, page_size, 2, 3, 0, 0, 0, 0, 1)  # same tree, slot 1
        m1 = encode_meta(meta1)
        image = bytes(m0) + bytes(m1) + bytes(root_image_fn(page_size))
        self.file.write_at(0, image)
        self.file.sync()
        self.fs.sync_dir(self.dir)
        self.bytes_written += len(image)
        self.data_bytes += len(image)
        return meta1

    def read_meta(self) -> Meta:
        """Load the newest valid meta copy (and learn the page size)."""
        path = self.path
        head = self.file.read_at(0, HEADER_SIZE + META_BODY.size)
        self.bytes_read += len(head)
        sizes = []
        if len(head) == HEADER_SIZE + META_BODY.size:
            magic, _v, psize = struct.unpack_from("<8sII", head, HEADER_SIZE)
            if magic == META_MAGIC and valid_page_size(psize):
                sizes.append(psize)
        sizes += [s for s in (4096, 512, 1024, 2048, 8192, 16384, 32768) if s not in sizes]
        best: Meta | None = None
        errors = []
        for psize in sizes:
            damaged = []
            for slot in (0, 1):
                buf = self.file.read_at(slot * psize, psize)
                self.bytes_read += len(buf)
                try:
                    m = decode_meta(buf, slot, psize, path)
                except CorruptionError as exc:
                    errors.append(str(exc))
                    damaged.append((slot, buf))
                    continue
                if best is None or m.epoch > best.epoch:
                    best = m
            if best is not None:
                for slot, buf in damaged:
                    self._check_damaged_meta(slot, buf, best)
                break
        if best is None:
            raise CorruptionError("no valid meta page (both copies damaged or not a btree file)",
                                  path=path, page=0)
        self.page_size = best.page_size
        self.meta = best
        self.page_count = best.page_count
        return best

    def _check_damaged_meta(self, slot: int, buf: bytes, valid: Meta) -> None:
        """A meta copy failed its checks while the other one is valid. A copy
        torn by a crash while it was written is expected and the other copy
        is the current one. But if one flipped bit explains the damage, the
        copy was whole once: if it is newer than the valid copy, using the
        older one would silently go back a checkpoint, so that is reported."""
        if len(buf) != valid.page_size:
            return
        fixed = undo_single_bit_flip(buf)
        if fixed is None:
            return
        try:
            m = decode_meta(fixed, slot, valid.page_size, self.path)
        except CorruptionError:
            return
        if m.epoch > valid.epoch:
            raise CorruptionError(f"the newest meta page (epoch {m.epoch}) is damaged (a flipped bit); the other "
                                  f"copy holds an older checkpoint (epoch {valid.epoch})", path=self.path, page=slot)

    # ---- pages ------------------------------------------------------------------

    def read_page(self, pgno: int) -> bytes:
        """The raw image of page ``pgno`` (checked by the caller's decoder)."""
        if pgno < 2 or pgno >= self.page_count:
            raise CorruptionError(f"reference to page {pgno} outside the file's {self.page_count} pages",
                                  path=self.path, page=pgno)
        img = self.overlay.get(pgno)
        if img is not None:
            return img
        ps = self.page_size
        buf = self.file.read_at(self._slot(pgno) * ps, ps)
        self.page_reads += 1
        self.bytes_read += len(buf)
        self._check_epoch(pgno, buf)
        return buf

    def _slot(self, pgno: int) -> int:
        """The slot holding page ``pgno`` (CorruptionError if it has none: a
        reference to a free page)."""
        s = self.slots[pgno] if pgno < len(self.slots) else 0
        if not s:
            raise CorruptionError(f"reference to page {pgno}, which the page map holds as free",
                                  path=self.path, page=pgno)
        return s

    def read_slot(self, slot: int, ptype: int) -> tuple[list[int], int, int]:
        """(numbers, link, epoch) of the verified free-list, page-map or
        map-directory page in ``slot`` (its header names the slot itself)."""
        ps = self.page_size
        buf = self.overlay.get(slot) or self.file.read_at(slot * ps, ps)
        self.page_reads += 1
        self.bytes_read += len(buf)
        numbers, link, epoch = decode_numbers(buf, slot, ptype, ps, self.path)
        if epoch > self.meta.epoch:
            self._check_epoch(slot, buf)
        return numbers, link, epoch

    def _check_epoch(self, pgno: int, buf: bytes) -> None:
        """Raise if ``buf``, just read from the file, is an intact page
        written by a checkpoint newer than the meta page's."""
        if len(buf) == self.page_size and HEADER.unpack_from(buf, 0)[7] > self.meta.epoch and \
                crc32(buf[4:]) == _U32.unpack_from(buf, 0)[0]:
            # A read-only handle meets pages of a writer's newer checkpoint;
            # otherwise (no newer meta page, no journal) this is possible only
            # if the newest meta copy was lost after its checkpoint completed.
            if self.read_only and (self.newest_epoch_on_disk() != self.meta.epoch
                                   or self.fs.exists(self.journal_path)):
                raise StaleView(pgno)
            raise CorruptionError(f"page was written by a checkpoint newer than the meta page's epoch "
                                  f"{self.meta.epoch} (the newest meta page is damaged)", path=self.path, page=pgno)

    def read_leaf(self, pgno: int) -> LeafImage:
        """Page ``pgno`` as a verified leaf image (node.LeafImage) for a
        range read: read_page and node.read_leaf_image in one step, with the
        header unpacked once (a range read pays this for every leaf outside
        the pool). A page that fails a check raises what read_page and
        read_leaf_image raise for it."""
        ps = self.page_size
        slots = self.slots
        slot = slots[pgno] if 2 <= pgno < len(slots) else 0
        if not slot or pgno in self.overlay:
            return read_leaf_image(self.read_page(pgno), pgno, ps, self.path)
        buf = self.file.read_at(slot * ps, ps)
        self.page_reads += 1
        self.bytes_read += len(buf)
        image = leaf_image(buf, pgno, ps, self.path, self.meta.epoch)
        if image is None:
            self._check_epoch(pgno, buf)  # (a page of a newer checkpoint)
            image = read_leaf_image(buf, pgno, ps, self.path)
        return image

    @cython.locals(ps=cython.Py_ssize_t, slot=cython.Py_ssize_t)
    def search_leaf(self, pgno: int, key: bytes) -> tuple:
        """(the leaf value of ``key`` or None, the page image) for a get of
        leaf ``pgno`` outside the pool: read_page and node.search_leaf_page
        in one step (node.leaf_value: the header unpacked once, the search
        inlined). A page that fails a check raises what read_page and
        search_leaf_page raise for it."""
        ps = self.page_size
        slots = self.slots
        slot = slots[pgno] if 2 <= pgno < len(slots) else 0
        if not slot or pgno in self.overlay:
            buf = self.read_page(pgno)
            return search_leaf_page(buf, pgno, ps, self.path, key), buf
        buf = self.file.read_at(slot * ps, ps)
        self.page_reads += 1
        self.bytes_read += len(buf)
        value = leaf_value(buf, pgno, ps, key, self.meta.epoch)
        if value is UNCHECKED:
            self._check_epoch(pgno, buf)  # (a page of a newer checkpoint)
            value = search_leaf_page(buf, pgno, ps, self.path, key)
        return value, buf

    def search_leaf_keys(self, pgno: int, keys: list[bytes]) -> tuple[list, bytes]:
        """(the leaf value of each of ``keys`` or None, the page image): the
        page read once for all of them, the first key searched as
        :meth:`search_leaf` searches it (which checks the page), the others
        in the same image."""
        first, buf = self.search_leaf(pgno, keys[0])
        values = [first]
        ps = self.page_size
        epoch = self.meta.epoch
        for key in keys[1:]:
            value = leaf_value(buf, pgno, ps, key, epoch)
            if value is UNCHECKED:
                value = search_leaf_page(buf, pgno, ps, self.path, key)
            values.append(value)
        return values, buf

    def newest_epoch_on_disk(self) -> int:
        """Epoch of the newest valid meta copy now on disk (read-only handles
        compare it with their view's to tell a concurrent checkpoint from corruption)."""
        best = -1
        ps = self.page_size
        for slot in (0, 1):
            buf = self.file.read_at(slot * ps, ps)
            try:
                best = max(best, decode_meta(buf, slot, ps, self.path).epoch)
            except CorruptionError:
                pass
        return best

    # ---- free pages and the page map -------------------------------------------------

    def check_counts(self, meta: Meta) -> None:
        """CorruptionError if ``meta`` counts more slots than the file (and
        the journal) hold: a map's slot count, or the page count of a file
        without a map (page p in slot p). Found before anything that large
        is built (a page map, a list of free slots)."""
        held = max(self.file.size() // self.page_size, max(self.overlay, default=-1) + 1)
        needed = meta.slot_count if meta.map_dir else meta.page_count
        if needed > held:
            raise CorruptionError(f"meta page records {needed} {'slots' if meta.map_dir else 'pages'}; "
                                  f"the file holds {held}", path=self.path, page=0)

    def load_pages(self, meta: Meta) -> None:
        """Load where the pages of ``meta``'s checkpoint are (the page map,
        or for a file without one the identity and its free-list chain)
        and which page numbers are free."""
        self.check_counts(meta)
        self.page_count = meta.page_count
        if meta.map_dir:
            self.map = PageMap.load(self.read_slot, meta.map_dir, meta.page_count, meta.slot_count,
                                    self.page_size, self.path)
            self.freelist_pages = []
            free = self.map.free_pages(meta.page_count)
        else:
            free, chain = self._load_freelist(meta.freelist_head)
            self.freelist_pages = chain
            self.map = PageMap.identity(meta.page_count, free, chain, self.page_size)
        self.slots = self.map.slots
        self.free = free
        self._free_heap = sorted(free)
        self.free_changed = False

    def _load_freelist(self, head: int) -> tuple[set[int], list[int]]:
        """(free pages, chain pages) of the format-3 free-list chain starting
        at ``head``; every listed page and every chain page is free."""
        free: set[int] = set()
        chain: list[int] = []
        pg = head
        while pg:
            if pg in free or pg in chain or not (2 <= pg < self.page_count):
                raise CorruptionError(f"free-list chain reaches page {pg} again or out of range",
                                      path=self.path, page=pg)
            pages, nxt, _ = self.read_slot(pg, PAGE_FREELIST)
            chain.append(pg)
            free.update(pages)
            pg = nxt
        free.update(chain)
        return free, chain

    def allocate(self) -> int:
        """A page number to use: the lowest free page, else a new one at the end."""
        heap = self._free_heap
        if heap:
            pg = heapq.heappop(heap)
            self.free.discard(pg)
            self.free_changed = True
            return pg
        pg = self.page_count
        self.page_count += 1
        self.slots.append(0)  # (a slot comes with its first checkpoint)
        return pg

    def release(self, pgno: int) -> None:
        """Return ``pgno`` to the free list (reusable at once: nothing reaches
        the page file before the next checkpoint, which is atomic)."""
        if pgno in self.free or pgno < 2:
            raise AssertionError(f"page {pgno} freed twice")
        self.free.add(pgno)
        heapq.heappush(self._free_heap, pgno)
        self.free_changed = True

    # ---- checkpoint write protocol ------------------------------------------------

    def commit(self, pages: list, meta: Meta, held: set[int] = frozenset(), compact: bool = False) -> None:
        """Make ``pages`` plus ``meta`` the page file's content, atomically
        with respect to crashes. ``pages`` holds (page number, image) or
        (page number, function returning the image) pairs; ``held`` are free
        pages live snapshots may still read (free on disk, their slots kept).

        Every page goes to a slot the current checkpoint does not use, with
        the map pages that change and the map directory (btree/pagemap.py);
        they are written in slot order, a chunk of :data:`COMMIT_CHUNK`
        images at a time (so a checkpoint of many dirty pages holds about a
        megabyte of images at once), and fsynced; then the meta page naming
        the new map is written to the meta copy the current checkpoint does
        not use, and fsynced. Nothing the current checkpoint uses is
        written: a crash at any moment leaves it whole (a torn meta page
        leaves the other copy, which names it). With ``compact`` the
        checkpoint also moves the pages in the highest slots down into free
        ones (PageMap.plan), and the file is cut after the last slot in use."""
        pmap = self.map
        readers = self.readers
        if readers is not None:
            pmap.release_held(readers.oldest(self.file.identity()))
        slots = pmap.slots
        released = [pg for pg in self.free if pg < len(slots) and slots[pg] and pg not in held]
        plan = pmap.plan(pages, released, sorted(held), meta.page_count, meta.epoch,
                         self._copy_slot if compact else None)
        meta.slot_count = plan.slot_count
        meta.map_dir = plan.dir_head
        meta.freelist_head = 0
        try:
            writes = plan.writes
            self._grow_to(plan.slot_count)
            for k in range(0, len(writes), COMMIT_CHUNK):
                self._write_run(_made(writes[k:k + COMMIT_CHUNK]))
            self._sync_in_place()
            self._write_in_place([(meta.epoch % 2, encode_meta(meta))], 2)
        except BaseException:
            pmap.failed()
            self._failed_epoch = max(self._failed_epoch, meta.epoch)
            raise
        # The meta page is durable: a reader registering from now on reads
        # this checkpoint, so the readers read now are all that may still
        # need the slots it freed (btree/readers.py).
        oldest = readers.oldest(self.file.identity()) if readers is not None else None
        pmap.committed(plan, meta.epoch, hold=oldest is not None and oldest < meta.epoch)
        self.slots = pmap.slots
        self.freelist_pages = []
        self.meta = meta
        if self.file.size() > plan.slot_count * self.page_size:
            # Slots above the new checkpoint's last are free: the file is cut
            # there (not synced: a file longer than its slots is well formed).
            self.file.truncate(plan.slot_count * self.page_size)

    def hold_for_readers(self) -> None:
        """Writers, once the page map is loaded: if live readers in other
        processes read checkpoints older than this one, hold back every slot
        it does not use (their maps are not known here) until they move on."""
        if self.readers is None:
            return
        oldest = self.readers.oldest(self.file.identity())
        if oldest is not None and oldest < self.meta.epoch:
            self.map.hold_unused(self.meta.epoch, self.file.size() // self.page_size)

    def held_slots(self) -> int:
        """Slots held back for readers in other processes."""
        return self.map.held_slots() if self.map is not None else 0

    def _copy_slot(self, slot: int) -> bytes:
        """The image in ``slot``, for a compaction that moves it (as it is:
        a damaged image stays damaged, and is reported where it is read)."""
        buf = self.file.read_at(slot * self.page_size, self.page_size)
        self.bytes_read += len(buf)
        return buf

    def step_past_unfinished_checkpoint(self) -> int:
        """At a writer's open: the newest epoch of an intact page image in a
        slot the checkpoint on disk does not use, if newer than its meta
        page's (else 0). Such images are what a checkpoint that failed, or
        that a crash cut short, wrote before its meta page was durable. If
        there are any, that checkpoint is treated as a failed one
        (prepare_retry): the meta page is written again under an epoch above
        theirs, so no later checkpoint stamps pages with an epoch the file
        already holds, and two images of a page never share one (repair's
        scan mode takes the newest image of each page, and counts two of one
        epoch as damage). Reads every unused slot, and the slots past the
        last one: a fraction of the file after a crash, at most 1/64 of it
        after close()."""
        ps = self.page_size
        epoch = self.meta.epoch
        newest = 0
        unused = self.map.unused_slots()
        unused += range(self.map.slot_count, self.file.size() // ps)  # (where it may have grown the file)
        for i, j in _runs(unused):
            data = self.file.read_at(unused[i] * ps, (j - i) * ps)
            view = memoryview(data)
            for at in range(0, len(data) - ps + 1, ps):
                stamped = HEADER.unpack_from(data, at)[7]
                if stamped > max(epoch, newest) and crc32(view[at + 4:at + ps]) == _U32.unpack_from(data, at)[0]:
                    newest = stamped
            self.bytes_read += len(data)
        if newest:
            log.info("%s: pages of an unfinished checkpoint (epoch %d) lie in unused slots; the next "
                     "checkpoint's epoch goes above it", self.path, newest)
            self._failed_epoch = max(self._failed_epoch, newest)
            self.prepare_retry()
        return newest

    def prepare_retry(self) -> None:
        """Before the checkpoint that follows a failed one: make the next
        commit safe whatever the failed one left.

        The failed checkpoint may have written its meta page (durably or
        not) over the copy of the checkpoint before the last one. The last
        checkpoint known durable (``self.meta``, epoch E) is whole, in its
        slots and its meta copy. Its meta page is written again, under an
        epoch above every epoch on disk or of a failed checkpoint's pages,
        and of the other parity than E, to
        the other copy: both copies then name checkpoint E's tree, so the
        next commit, which writes the copy E's own meta page is in, can be
        torn by a crash and still leave a copy naming a tree whose slots it
        did not touch (it takes none of E's slots: PageMap.failed). A
        format-3 file's journal never needs applying here: open applied it,
        and format 4 writes none."""
        durable = self.meta
        newest = max(durable.epoch, self._failed_epoch, self.newest_epoch_on_disk())
        epoch = newest + 1 if (newest + 1) % 2 != durable.epoch % 2 else newest + 2
        again = copy.copy(durable)
        again.epoch, again.version = epoch, FORMAT_VERSION
        self._write_in_place([(epoch % 2, encode_meta(again))], 2)
        self.meta = again

    def _write_in_place(self, images, page_count: int) -> None:
        """Write (page number, image) pairs in place and fsync."""
        self._grow_to(page_count)
        self._write_run(images)
        self._sync_in_place()

    def _grow_to(self, page_count: int) -> None:
        want = page_count * self.page_size
        if self.file.size() < want:
            self.file.truncate(want)

    def _write_run(self, images) -> None:
        """Write (page number, image) pairs, sorted by page number, in place
        (not synced): runs of consecutive pages, up to 256 at a time, in one
        write each."""
        ps = self.page_size
        written = 0
        for i, j in _runs([pg for pg, _ in images]):
            data = b"".join(img for _, img in images[i:j])
            self.file.write_at(images[i][0] * ps, data)
            written += len(data)
        self.bytes_written += written
        self.data_bytes += written

    def _sync_in_place(self) -> None:
        self.file.sync()

    def read_journal(self) -> tuple[int, list[tuple[int, bytes]]] | None:
        """(epoch, page images) of a complete, valid journal; None if there is
        none or it is incomplete (its checkpoint never reached the page file)."""
        try:
            data = self.fs.read_file(self.journal_path)
        except FileNotFoundError:
            return None  # (also: a writer in another process just removed it)
        self.bytes_read += len(data)
        return decode_journal(data, self.page_size, self.journal_path)


    def recover_journal(self) -> bool:
        """Finish a checkpoint cut short by a crash (writers only). Returns True
        if a journal was applied."""
        journal = self.read_journal()
        applied = False
        if journal is not None:
            epoch, images = journal
            if epoch >= self.meta.epoch:
                slot, meta_img = [(pg, img) for pg, img in images if pg < 2][-1]
                m = decode_meta(meta_img, slot, self.page_size, self.journal_path)
                count = max(m.page_count, self.page_count)
                log.info("re-applying checkpoint journal of epoch %d (%d pages)", epoch, len(images))
                self._write_in_place(images, count)
                applied = True
        if self.fs.exists(self.journal_path):
            self.fs.remove(self.journal_path)
            self.fs.sync_dir(self.dir)
        if applied:
            self.read_meta()
        return applied

    def overlay_journal(self) -> None:
        """Read-only handles: take a complete journal's pages as the file's
        (the writer is mid-checkpoint, or crashed in it)."""
        self.overlay = {}
        journal = self.read_journal()
        if journal is None:
            return
        epoch, images = journal
        if epoch < self.meta.epoch:
            return
        for pg, img in images:
            if pg < 2:
                m = decode_meta(img, pg, self.page_size, self.journal_path)
                self.meta = m
                self.page_count = m.page_count
            else:
                self.overlay[pg] = img


def page_slots(dirpath: str, fs: FileSystem | None = None) -> array:
    """Page number -> slot of its image in ``btree.pages`` (0: none), as the
    database's last checkpoint has it: where tools (and tests) find a
    page's bytes, at offset ``slot * page_size``."""
    from lsmkv.base.fs import DEFAULT_FS
    pager = Pager(fs or DEFAULT_FS, dirpath, read_only=True)
    try:
        pager.load_pages(pager.read_meta())
        return pager.slots
    finally:
        pager.close()
