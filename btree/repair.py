"""``lsmkv repair DB`` for the btree engine: rebuild from the leaves that verify.

**Pages and slots.** Parents, sibling links and overflow references name
*logical* pages (the number a page's header carries too); a page's image
lies in a *slot* of ``btree.pages`` (offset ``slot * page_size``). A
format-3 file, and a format-4 file whose meta page names no page map (one
built whole by btree/bulk.py), keeps page ``p`` in slot ``p`` and its free
pages in a free-list chain. A format-4 file with a page map
(btree/pagemap.py) writes each checkpoint's pages to slots the previous
checkpoint does not use, so besides the current image of each page it holds
*stale images*: older copies of pages (same page number, older epoch) in
slots the map no longer names, and maybe pages of a checkpoint a crash cut
short (newer epoch) in slots no meta page's map names. Everything reported
names logical pages.

A repair holds the writer lock throughout (it refuses to run while another
process has the database open for writing) and goes:

1. **Find the checkpoint.** The newest valid meta page, with a complete
   format-3 checkpoint journal laid over the page file (in memory) as open
   would. If no meta page is valid, or the log starts after the meta page's
   checkpoint (so a newer checkpoint's meta page was lost), the repair
   works without one (*scan mode*); otherwise in *tree mode*.
2. **Find the pages** (tree mode). Load the page map the meta page names;
   if it (or its directory) fails to load, the repair goes on in scan mode,
   ignoring pages newer than the meta page. Without a map: page ``p`` is in
   slot ``p`` and the free list says which pages are free (if it fails to
   load, leaves are checked against their siblings, step 5).
3. **Tree mode.** Walk the tree from the root. Every page on the way must
   verify (checksum, page number, type, epoch not newer than the meta page,
   keys in order and within the separators the parent gives them); a page
   that does not, or one the map holds as free, leaves a *hole*, the key
   range its parent assigned to it. Then read the current image of every
   page not walked and not free (in the slot the map names; stale images in
   other slots are never read): a leaf that verifies and whose keys lie
   inside a hole is an *orphan* of a damaged internal page and is kept; a
   leaf outside every hole is ignored.
4. **Scan mode.** Read every slot of the file. Of the images that verify,
   the one with the newest epoch is its page's current image and the
   others are stale, unless a slot that fails verification claims (in its
   unchecked header) a newer image of the same page, or two images share
   the newest epoch: then the page counts as damaged. Every current leaf
   image is a candidate.
5. **Deciding between candidates** whose key ranges overlap (stale images
   of freed pages): the one written by the newer checkpoint (higher epoch)
   wins, since a page's keys move only into pages written later. Unless the
   page map or free list verified (which makes every orphan current), an
   orphan whose sibling link names a kept leaf that does not link back, or
   a page that verifies but is no kept leaf, is dropped too (in scan mode a
   page no slot holds any image of counts as such: it was freed and its
   slot reused).
6. **What was lost** follows from the sibling links: two neighbouring kept
   leaves that do not link to each other had leaf pages between them that
   failed verification; the keys between their bounds are reported lost.
   A value whose overflow chain fails is lost with its key.
7. **The log** past the checkpoint is applied up to its first damaged
   record (the rest is reported as dropped bytes).
8. **Rebuild.** A new page file holding the surviving entries is written
   (btree/bulk.py; page ``p`` in slot ``p``) under a temporary name, what
   was given up is copied into ``lost/N/`` (the images of the slots that
   failed verification or could not be told current, at their offsets in
   a sparse copy of ``btree.pages``; the log if it dropped bytes; a
   journal that was ignored as damaged; nothing, and no folder, if nothing
   was given up), the new page file is renamed over
   ``btree.pages`` (the commit point; its checkpoint LSN is past everything
   in the old log, so a crash before the next step replays nothing twice)
   and an empty log is started at that LSN.

Library code: it never prints.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left, insort
from collections import deque
from typing import Iterable, Iterator

from lsmkv.base.dbdir import engine_of_damaged
from lsmkv.base.errors import CorruptionError, InvalidDatabaseError
from lsmkv.base.fs import DEFAULT_FS, FileLock, FileSystem
from lsmkv.base.key_ranges import KeyRanges
from lsmkv.base.repair_report import Loss, RepairReport
from lsmkv.base.set_aside import copy_aside, copy_pieces_aside, new_set_aside_dir

from .bulk import build_page_file
from .node import (HEADER, MAX_PAGE_SIZE, MIN_PAGE_SIZE, PAGE_FREELIST, PAGE_LEAF, PAGE_MAP, PAGE_MAPDIR,
                   PAGE_META, Expiring, Node, Overflow, check_header, decode_node, decode_numbers,
                   decode_overflow, overflow_pages)
from .pagemap import PageMap
from .pager import JOURNAL_FILE, LOG_FILE, PAGES_FILE, Meta, Pager, decode_meta, decode_meta_entries
from .wal import LOG_HEADER_SIZE, LogWriter, MetaEntry, RangeDelete, parse_log

#: The new page file while it is being written.
REBUILT_FILE = PAGES_FILE + ".repair"
#: Slots read per call while scanning the page file.
_SCAN_BATCH = 256
_PAGE_SIZES = [MIN_PAGE_SIZE << i for i in range((MAX_PAGE_SIZE // MIN_PAGE_SIZE).bit_length())]
#: Page types whose header carries their own slot, not a logical page number.
_SLOT_NAMED = (PAGE_META, PAGE_MAP, PAGE_MAPDIR)


class _Leaf:
    """What the repair knows of a leaf page that verified."""

    __slots__ = ("pgno", "slot", "first", "last", "prev", "next", "epoch", "trusted")

    def __init__(self, pgno: int, slot: int, node: Node, epoch: int, trusted: bool) -> None:
        #: The logical page (what sibling links name).
        self.pgno = pgno
        #: Where the image read is.
        self.slot = slot
        self.first = node.keys[0]
        self.last = node.keys[-1]
        self.prev = node.prev
        self.next = node.next
        self.epoch = epoch
        #: Reached from the root through verified pages (tree mode).
        self.trusted = trusted


def repair_db(path: str | os.PathLike, fs: FileSystem | None = None) -> RepairReport:
    """Repair the btree database in ``path``; returns what was kept and lost.

    Raises LockError if another process has the database open for writing
    and InvalidDatabaseError if ``path`` is not a btree database (or one of
    a newer format); changes nothing then."""
    fs = fs or DEFAULT_FS
    path = os.fspath(path)
    engine = engine_of_damaged(path, fs)
    if engine != "btree":
        raise InvalidDatabaseError(f"{path} is an {engine} database; repair it as one (lsmkv repair detects it)")
    locks = [fs.lock(os.path.join(path, PAGES_FILE))]
    try:
        return _Repair(path, fs, locks).run()
    finally:
        for lock in locks:
            lock.release()


class _Repair:
    def __init__(self, path: str, fs: FileSystem, locks: list[FileLock]) -> None:
        self.path = path
        self.fs = fs
        self.locks = locks
        self.pages_path = os.path.join(path, PAGES_FILE)
        self.log_path = os.path.join(path, LOG_FILE)
        self.report = RepairReport(engine="btree", path=path)
        self.page_size = 0
        self.meta: Meta | None = None
        #: Metadata entries (set_meta) to carry into the rebuilt file.
        self.metadata: dict[bytes, bytes] = {}
        #: (start, end) of the range deletes the log's batches hold.
        self._log_ranges: list[tuple[bytes, bytes]] = []
        #: Slot -> image standing in for the file's (a format-3 journal's).
        self.overlay: dict[int, bytes] = {}
        #: Slots in the file.
        self.file_slots = 0
        self.max_epoch = 0
        #: Logical page -> slot of its current image (0: none); None: page p
        #: is in slot p (a file without a page map).
        self.slots: array | None = None
        #: (lo, hi): key ranges [lo, hi) whose subtree failed verification (None: unbounded).
        self.holes: list[tuple[bytes | None, bytes | None]] = []
        #: Logical page -> why it failed verification.
        self.bad_pages: dict[int, str] = {}
        #: Logical page -> the leaf its current image holds.
        self.leaves: dict[int, _Leaf] = {}
        #: Free logical pages (tree mode).
        self.free: set[int] = set()
        #: Whether ``free`` is known complete (a page map, or a free list that verified).
        self.free_exact = False
        self.stale = 0
        #: Pages the tree walk visited (tree mode).
        self.walked: set[int] = set()
        #: Scan mode: the pages whose newest image fails verification (a
        #: page no slot holds an image of was freed and its slot reused).
        self.damaged: set[int] | None = None
        #: Slots whose images the repair gave up (failed verification, or
        #: could not be told current): kept in lost/N/.
        self.given_up: set[int] = set()
        #: A checkpoint journal that was ignored because it failed verification.
        self.journal_damaged = False
        self.file = None

    # -- the run ------------------------------------------------------------------

    def run(self) -> RepairReport:
        fs = self.fs
        report = self.report
        self.file = fs.open_readable(self.pages_path)
        try:
            self._find_checkpoint()
            log = self._read_log()
            newer_meta_lost = self.meta is not None and log is not None and log.base_lsn > self.meta.ckpt_lsn
            if newer_meta_lost:
                report.notes.append(f"{self.log_path} starts at LSN {log.base_lsn}, after the checkpoint of the "
                                    f"newest valid meta page ({self.meta.ckpt_lsn}): a newer meta page was lost; "
                                    "every leaf page in the file is a candidate")
            tree_mode = self.meta is not None and not newer_meta_lost and self._load_pages()
            if tree_mode:
                self._walk()
                self._read_leaves(self._unwalked_pages(), epoch_limit=self.meta.epoch)
            else:
                self.holes = [(None, None)]
                # After a page map failed to load, the meta page is still the
                # checkpoint: pages newer than it are a failed checkpoint's.
                limit = self.meta.epoch if self.meta is not None and not newer_meta_lost else None
                self._read_leaves(self._newest_images(limit), epoch_limit=None)
            kept = self._resolve(link_check=not (tree_mode and self.free_exact))
            self._losses_from_links(kept, empty_tree=tree_mode and not self.holes)
            if self.meta is not None and not newer_meta_lost:
                self._checkpointed_metadata()
            ops = self._log_ops(log, tree_mode)
            report.details.update(mode="tree" if tree_mode else "scan", page_size=self.page_size,
                                  format_version=self.meta.version if self.meta is not None else None,
                                  page_map=self.slots is not None,
                                  pages_in_file=self.file_slots, leaves_kept=len(kept),
                                  stale_leaves_ignored=self.stale,
                                  pages_dropped=sorted(self.bad_pages)[:50], pages_dropped_count=len(self.bad_pages))
            self._rebuild(self._entries(kept, ops), log)
        finally:
            self.file.close()
        return report

    # -- 1. the checkpoint -------------------------------------------------------------

    def _find_checkpoint(self) -> None:
        pager = Pager(self.fs, self.path, read_only=True)
        replaced_meta: set[int] = set()  # meta slots a complete journal stands in for
        try:
            try:
                self.meta = pager.read_meta()
            except CorruptionError as exc:
                self.report.notes.append(f"{exc.reason}; every leaf page in the file is a candidate")
            if self.meta is not None:
                self.page_size = self.meta.page_size
                try:
                    journal = pager.read_journal()
                except CorruptionError as exc:
                    journal = None
                    self.journal_damaged = True
                    self.report.notes.append(f"checkpoint journal ignored: {exc}")
                if journal is not None and journal[0] >= self.meta.epoch:
                    for pgno, img in journal[1]:
                        if pgno < 2:
                            self.meta = decode_meta(img, pgno, self.page_size, pager.journal_path)
                            replaced_meta.add(pgno)
                        else:
                            self.overlay[pgno] = img
                    self.report.notes.append(f"completed the checkpoint of epoch {journal[0]} from its journal")
                self.max_epoch = self.meta.epoch
        finally:
            pager.close()
        if not self.page_size:
            self.page_size = self._guess_page_size()
        self.file_slots = self.file.size // self.page_size if self.page_size else 0
        if self.overlay:
            self.file_slots = max(self.file_slots, max(self.overlay) + 1)
        for slot in {0, 1} - replaced_meta:
            img = self._slot_image(slot)
            if any(img):
                try:
                    decode_meta(img, slot, self.page_size, self.pages_path)
                except CorruptionError:
                    self.given_up.add(slot)

    def _guess_page_size(self) -> int:
        """The page size under which most of the file's first slots hold a
        page whose checksum matches."""
        best, best_count = 4096, 0
        for ps in _PAGE_SIZES:
            data = self.file.read_at(0, ps * 64)
            count = 0
            for slot in range(2, len(data) // ps):
                img = data[slot * ps:(slot + 1) * ps]
                try:
                    check_header(img, HEADER.unpack_from(img, 0)[1], ps, self.pages_path)
                    count += 1
                except CorruptionError:
                    pass
            if count > best_count:
                best, best_count = ps, count
        return best

    # -- reading pages -------------------------------------------------------------------

    def _slot_image(self, slot: int) -> bytes:
        img = self.overlay.get(slot)
        if img is None:
            ps = self.page_size
            img = self.file.read_at(slot * ps, ps)
        return img

    def _slot_images(self, slots: Iterable[int]) -> Iterator[tuple[int, bytes]]:
        """(slot, image) for each of ``slots`` (ascending), read a batch at a time."""
        ps = self.page_size
        base, data = 0, None
        for slot in slots:
            if data is None or slot >= base + _SCAN_BATCH:
                base = slot
                data = self.file.read_at(base * ps, _SCAN_BATCH * ps)
            img = self.overlay.get(slot)
            yield slot, img if img is not None else data[(slot - base) * ps:(slot - base + 1) * ps]

    def _slot(self, pgno: int) -> int:
        """The slot of logical page ``pgno``'s current image (CorruptionError if none)."""
        if self.slots is None:
            if pgno >= 2:
                return pgno
        elif 0 <= pgno < len(self.slots) and self.slots[pgno]:
            return self.slots[pgno]
        raise CorruptionError(f"page {pgno} has no image (the page map holds it as free, or no slot holds "
                              "a current image of it)", path=self.pages_path, page=pgno)

    def _image(self, pgno: int) -> bytes:
        """The current image of logical page ``pgno`` (not yet verified)."""
        return self._slot_image(self._slot(pgno))

    def _give_up(self, exc: CorruptionError, logical: bool = True) -> None:
        """Note the slot of the page ``exc`` names (a logical page, or a
        slot if not ``logical``) as given up, if it has one in the file."""
        if exc.page is None:
            return
        slot = exc.page
        if logical:
            try:
                slot = self._slot(exc.page)
            except CorruptionError:
                return
        if 0 <= slot < self.file_slots:
            self.given_up.add(slot)

    def _verified_node(self, pgno: int, img: bytes, epoch_limit: int | None) -> Node:
        node = decode_node(img, pgno, self.page_size, self.pages_path)
        epoch = HEADER.unpack_from(img, 0)[7]
        if epoch_limit is not None and epoch > epoch_limit:
            raise CorruptionError(f"page written by checkpoint {epoch}, after the meta page's {epoch_limit}",
                                  path=self.pages_path, page=pgno)
        return node

    # -- 2. where the pages are (tree mode) -------------------------------------------------

    def _load_pages(self) -> bool:
        """Load the meta page's page map (or the free list of a file without
        one). False if the map fails to load: the repair goes on in scan mode."""
        if not self.meta.map_dir:
            self._load_free_list()
            return True
        meta = self.meta
        try:
            pmap = PageMap.load(self._read_numbers, meta.map_dir, meta.page_count, meta.slot_count,
                                self.page_size, self.pages_path)
        except CorruptionError as exc:
            self._give_up(exc, logical=False)  # map pages name their slots
            self.report.notes.append(f"page map unreadable ({exc}); every leaf page the file holds a current "
                                     "image of is a candidate")
            return False
        self.slots = pmap.slots
        self.free = pmap.free_pages(meta.page_count)
        self.free_exact = True
        return True

    def _read_numbers(self, slot: int, ptype: int) -> tuple[list[int], int, int]:
        """A verified map or directory page of the meta page's checkpoint (PageMap.load's reader)."""
        numbers, link, epoch = decode_numbers(self._slot_image(slot), slot, ptype, self.page_size,
                                              self.pages_path)
        if epoch > self.meta.epoch:
            raise CorruptionError(f"page written by checkpoint {epoch}, after the meta page's {self.meta.epoch}",
                                  path=self.pages_path, page=slot)
        return numbers, link, epoch

    def _load_free_list(self) -> None:
        meta = self.meta
        free: set[int] = set()
        pg = meta.freelist_head
        try:
            while pg:
                if pg in free or not 2 <= pg < meta.page_count:
                    raise CorruptionError("free-list chain loops or leaves the file", path=self.pages_path, page=pg)
                pages, nxt, epoch = decode_numbers(self._image(pg), pg, PAGE_FREELIST, self.page_size,
                                                   self.pages_path)
                if epoch > meta.epoch:
                    raise CorruptionError("free-list page newer than the meta page", path=self.pages_path, page=pg)
                free.add(pg)
                free.update(pages)
                pg = nxt
            self.free_exact = True
        except CorruptionError as exc:
            self._give_up(exc)
            self.report.notes.append(f"free list unreadable ({exc}); leaves are checked against their siblings")
        self.free = free

    # -- 3. tree mode ------------------------------------------------------------------

    def _walk(self) -> None:
        meta = self.meta
        seen: set[int] = set()
        stack: list[tuple[int, int, bytes | None, bytes | None]] = [(meta.root, 0, None, None)]
        while stack:
            pg, depth, lo, hi = stack.pop()
            expect_leaf = depth == meta.height - 1
            read = False  # whether the page itself was read (not only a bad reference to it)
            try:
                if not 2 <= pg < meta.page_count or pg in seen:
                    raise CorruptionError(f"reference to page {pg}, outside the tree's pages or used twice",
                                          path=self.pages_path, page=pg)
                seen.add(pg)
                read = True
                img = self._image(pg)
                node = self._verified_node(pg, img, meta.epoch)
                if node.leaf != expect_leaf:
                    raise CorruptionError(f"a {'leaf' if node.leaf else 'internal'} page where the tree needs "
                                          f"{'a leaf' if expect_leaf else 'an internal'} page",
                                          path=self.pages_path, page=pg)
                if node.keys and ((lo is not None and node.keys[0] < lo)
                                  or (hi is not None and node.keys[-1] >= hi)):
                    raise CorruptionError("keys outside the range its parent gives it", path=self.pages_path,
                                          page=pg)
            except CorruptionError as exc:
                self.holes.append((lo, hi))
                if 2 <= pg < meta.page_count:
                    self.bad_pages.setdefault(pg, exc.reason)
                if read:
                    self._give_up(CorruptionError(exc.reason, page=pg))
                continue
            if node.leaf:
                if node.keys:
                    self.leaves[pg] = _Leaf(pg, self._slot(pg), node, HEADER.unpack_from(img, 0)[7], trusted=True)
                continue
            bounds = [lo, *node.keys, hi]
            for i, kid in enumerate(node.kids):
                stack.append((kid, depth + 1, bounds[i], bounds[i + 1]))
        self.walked = seen

    def _unwalked_pages(self) -> dict[int, int]:
        """Slot -> logical page, for the current image of every page of the
        checkpoint that the walk did not visit and that is not free."""
        out: dict[int, int] = {}
        for pg in range(2, self.meta.page_count):
            if pg not in self.walked and pg not in self.free:
                slot = self.slots[pg] if self.slots is not None else pg
                if slot:
                    out[slot] = pg
        return out

    # -- 4. scan mode --------------------------------------------------------------------

    def _newest_images(self, epoch_limit: int | None) -> dict[int, int]:
        """Slot -> logical page, for the current image of every page (see
        the module docstring, step 4): each verifying image's header names
        its page, and the newest image of a page (not newer than
        ``epoch_limit``) is its current one. Also sets ``slots`` and ``damaged``."""
        ps = self.page_size
        newest: dict[int, tuple[int, int]] = {}  # page -> (epoch, slot)
        tied: dict[int, set[int]] = {}  # page -> slots of its images of its newest epoch, if several
        leaf_slots: set[int] = set()
        claimed: dict[int, tuple[int, int]] = {}  # page -> (epoch, slot) of the newest failing image
        for slot, img in self._slot_images(range(2, self.file_slots)):
            if len(img) != ps or not any(img):
                continue  # past the end, or a slot never written
            hdr = HEADER.unpack_from(img, 0)
            pg, ptype, epoch = hdr[1], hdr[2], hdr[7]
            if ptype in _SLOT_NAMED or pg < 2 or (epoch_limit is not None and epoch > epoch_limit):
                continue
            try:
                check_header(img, pg, ps, self.pages_path)
            except CorruptionError:
                if epoch > claimed.get(pg, (-1, 0))[0]:
                    claimed[pg] = (epoch, slot)
                continue
            self.max_epoch = max(self.max_epoch, epoch)
            if ptype == PAGE_LEAF:
                leaf_slots.add(slot)
            have = newest.get(pg)
            if have is None or epoch > have[0]:
                newest[pg] = (epoch, slot)
                tied.pop(pg, None)
            elif epoch == have[0]:
                tied.setdefault(pg, {have[1]}).add(slot)
        current: dict[int, int] = {}
        for pg, (epoch, slot) in newest.items():
            if pg in tied:
                self.bad_pages[pg] = f"two images of checkpoint {epoch}: which is current is not known"
                self.given_up.update(tied[pg])
            elif claimed.get(pg, (-1, 0))[0] > epoch:
                bad_epoch, bad_slot = claimed[pg]
                self.bad_pages[pg] = (f"its newest image (slot {bad_slot}, checkpoint {bad_epoch}) failed "
                                      "verification")
                self.given_up.add(bad_slot)
            else:
                current[slot] = pg
        for pg, (bad_epoch, bad_slot) in claimed.items():
            if pg not in newest:
                self.bad_pages[pg] = f"its only image (slot {bad_slot}, checkpoint {bad_epoch}) failed verification"
                self.given_up.add(bad_slot)
        self.damaged = set(self.bad_pages)
        self.stale += len(leaf_slots - current.keys())
        self.slots = slots = array("I", bytes(4 * (max(newest, default=1) + 1)))
        for slot, pg in current.items():
            slots[pg] = slot
        return current

    # -- 3/4. the current images ----------------------------------------------------------

    def _read_leaves(self, pages: dict[int, int], epoch_limit: int | None) -> None:
        """Read the current images ``pages`` (slot -> logical page) names;
        keep the leaves that verify. With ``epoch_limit`` (tree mode) a page
        that fails is recorded as dropped."""
        ps = self.page_size
        for slot, img in self._slot_images(sorted(pages)):
            pg = pages[slot]
            try:
                hdr = check_header(img, pg, ps, self.pages_path)
            except CorruptionError as exc:
                # In use (neither the map nor the free list has it free) and
                # damaged; without a map, a page of zeros may be a free page
                # never written, unless the free list is known to be complete.
                if epoch_limit is not None and (self.free_exact or any(img)):
                    self.bad_pages.setdefault(pg, exc.reason)
                    self.given_up.add(slot)
                continue
            self.max_epoch = max(self.max_epoch, hdr[7])
            if hdr[2] != PAGE_LEAF:
                continue
            try:
                node = self._verified_node(pg, img, epoch_limit)
            except CorruptionError as exc:
                if epoch_limit is not None:
                    self.bad_pages.setdefault(pg, exc.reason)
                self.given_up.add(slot)
                continue
            if node.keys:
                self.leaves[pg] = _Leaf(pg, slot, node, hdr[7], trusted=False)

    # -- 5. deciding -----------------------------------------------------------------------

    def _in_a_hole(self, leaf: _Leaf) -> bool:
        return any((lo is None or leaf.first >= lo) and (hi is None or leaf.last < hi) for lo, hi in self.holes)

    def _resolve(self, link_check: bool) -> list[_Leaf]:
        """The leaves to keep, in key order."""
        trusted = [leaf for leaf in self.leaves.values() if leaf.trusted]
        kept: dict[int, _Leaf] = {leaf.pgno: leaf for leaf in trusted}
        firsts = sorted((leaf.first, leaf.pgno) for leaf in trusted)
        orphans = sorted((leaf for leaf in self.leaves.values() if not leaf.trusted),
                         key=lambda leaf: (-leaf.epoch, leaf.pgno))
        for leaf in orphans:
            if not self._in_a_hole(leaf) or self._overlaps(leaf, firsts, kept):
                self.stale += 1
                continue
            kept[leaf.pgno] = leaf
            insort(firsts, (leaf.first, leaf.pgno))
        if link_check:
            self._drop_inconsistent_orphans(kept)
        return sorted(kept.values(), key=lambda leaf: leaf.first)

    @staticmethod
    def _overlaps(leaf: _Leaf, firsts: list[tuple[bytes, int]], kept: dict[int, _Leaf]) -> bool:
        i = bisect_left(firsts, (leaf.first, -1))
        if i < len(firsts) and firsts[i][0] <= leaf.last:
            return True  # a kept leaf starts inside this one
        return i > 0 and kept[firsts[i - 1][1]].last >= leaf.first  # the one before reaches into it

    def _drop_inconsistent_orphans(self, kept: dict[int, _Leaf]) -> None:
        """Drop orphans whose sibling links contradict the kept leaves.

        In a consistent tree, neighbouring leaves link to each other. So an
        orphan is stale when a link of it names a kept leaf that does not
        link back and is newer (or reached from the root), or names a page
        that verifies but is no kept leaf (a stale leaf, a free page, a page
        reused for something else). A link to a page that fails verification
        says nothing (that neighbour is damaged). Dropping a leaf re-examines
        the orphans that link to it, so a whole stale chain goes. (Links,
        and ``kept``'s keys, are logical page numbers.)"""
        linking: dict[int, list[_Leaf]] = {}
        work = deque(leaf for leaf in kept.values() if not leaf.trusted)
        for leaf in work:
            linking.setdefault(leaf.prev, []).append(leaf)
            linking.setdefault(leaf.next, []).append(leaf)
        while work:
            leaf = work.popleft()
            if leaf.pgno not in kept:
                continue
            victim = self._link_conflict(leaf, kept)
            if victim is None:
                continue
            del kept[victim.pgno]
            self.stale += 1
            work.extend(linking.get(victim.pgno, ()))
            if victim is not leaf:
                work.append(leaf)

    def _link_conflict(self, leaf: _Leaf, kept: dict[int, _Leaf]) -> _Leaf | None:
        """The leaf to drop because of ``leaf``'s sibling links, or None."""
        for other_pg, back in ((leaf.prev, "next"), (leaf.next, "prev")):
            if not other_pg:
                continue
            other = kept.get(other_pg)
            if other is None:
                if self._verifies(other_pg):
                    return leaf  # its neighbour is no current leaf
                continue
            if getattr(other, back) != leaf.pgno:
                return leaf if other.trusted or other.epoch > leaf.epoch else other
        return None

    def _verifies(self, pgno: int) -> bool:
        """Whether logical page ``pgno``'s current image verifies (as a page
        of any type), or the page is free. In scan mode: whether it is not
        known damaged (a page of which no slot holds an image, not even a
        damaged one, was freed and its slot reused)."""
        if pgno in self.leaves or pgno in self.free:
            return True
        if self.damaged is not None:
            return pgno not in self.damaged
        try:
            check_header(self._image(pgno), pgno, self.page_size, self.pages_path)
        except CorruptionError:
            return False
        return True

    # -- 6. what was lost ------------------------------------------------------------------

    def _losses_from_links(self, kept: list[_Leaf], empty_tree: bool) -> None:
        lost = self.report.lost
        where = self.pages_path
        if not kept:
            if not empty_tree:
                lost.append(Loss(f"{where}: no leaf page verified", None, None))
            return

        def why(pg: int) -> str:
            reason = self.bad_pages.get(pg)
            return f"leaf page {pg} {'failed verification: ' + reason if reason else 'did not verify'}"

        first, last = kept[0], kept[-1]
        if first.prev:
            lost.append(Loss(f"{where}: keys before leaf page {first.pgno}: {why(first.prev)}", None, first.first,
                             last_inclusive=False))
        for a, b in zip(kept, kept[1:]):
            if a.next != b.pgno or b.prev != a.pgno:
                missing = a.next if a.next != b.pgno else b.prev
                lost.append(Loss(f"{where}: keys between leaf pages {a.pgno} and {b.pgno}: {why(missing)}",
                                 a.last, b.first, first_inclusive=False, last_inclusive=False))
        if last.next:
            lost.append(Loss(f"{where}: keys after leaf page {last.pgno}: {why(last.next)}", last.last, None,
                             first_inclusive=False))

    # -- 7. the log ------------------------------------------------------------------------

    def _read_log(self):
        try:
            data = self.fs.read_file(self.log_path)
        except FileNotFoundError:
            return None
        log = parse_log(data, self.log_path, salvage=True)
        if log is None:
            return None
        if log.dropped is not None:
            offset, size, why = log.dropped
            self.report.lost.append(Loss(f"{self.log_path}: {size} bytes from offset {offset} dropped ({why})",
                                         keys_known=False))
        if log.torn_bytes:
            self.report.notes.append(f"{LOG_FILE}: torn tail of {log.torn_bytes} bytes dropped (a write cut "
                                     "short by a crash, never acknowledged as durable)")
        return log

    def _checkpointed_metadata(self) -> None:
        """The metadata entries the checkpoint's meta page names, if their
        chain verifies (else they are reported lost)."""
        meta = self.meta
        if not meta.meta_page:
            return
        data = self._overflow(b"(metadata entries)", Overflow(meta.meta_page, meta.meta_length), meta.epoch)
        if data is None:
            return
        try:
            self.metadata.update(decode_meta_entries(data, self.pages_path, meta.meta_page))
        except CorruptionError as exc:
            self._give_up(exc)
            self.report.lost.append(Loss(f"metadata entries: {exc}", keys_known=False))

    def _log_ops(self, log, tree_mode: bool) -> dict[bytes, bytes | None]:
        """key -> value (None: deleted) after the log's batches past the checkpoint."""
        ops: dict[bytes, bytes | None] = {}
        applied = 0
        if log is not None:
            ckpt = self.meta.ckpt_lsn if tree_mode else log.base_lsn
            for start, end, batch in log.records:
                if start < ckpt:
                    continue  # already in the page file
                for key, value in batch:
                    if type(value) is MetaEntry:  # a metadata entry, not a key
                        self.metadata[key] = value.value
                    elif type(value) is RangeDelete:
                        # Deletes the keys the log wrote before it, and the tree's
                        # (_entries leaves out those not written again after it).
                        end = value.end
                        for k in [k for k in ops if key <= k < end]:
                            ops[k] = None
                        self._log_ranges.append((key, end))
                    else:
                        ops[key] = value
                applied += 1
        self.report.details["log_batches_applied"] = applied
        return ops

    # -- 8. rebuild ------------------------------------------------------------------------

    def _entries(self, kept: list[_Leaf], ops: dict[bytes, bytes | None]) -> Iterator[tuple[bytes, bytes]]:
        """The surviving entries in key order, the log's changes applied."""
        pending = sorted(ops)
        deleted = KeyRanges(self._log_ranges)
        j = 0
        count = 0
        for leaf in kept:
            node = decode_node(self._slot_image(leaf.slot), leaf.pgno, self.page_size, self.pages_path)
            for key, val in zip(node.keys, node.vals):
                while j < len(pending) and pending[j] < key:
                    value = ops[pending[j]]
                    j += 1
                    if value is not None:
                        count += 1
                        yield pending[j - 1], value
                if j < len(pending) and pending[j] == key:
                    value = ops[key]
                    j += 1
                    if value is not None:
                        count += 1
                        yield key, value
                    continue
                if deleted and deleted.containing(key) is not None:
                    continue  # a range delete in the log removed it
                if type(val) is Expiring:
                    inner = val.value
                    if type(inner) is not bytes:
                        inner = self._overflow(key, inner, leaf.epoch)
                        if inner is None:
                            continue
                    val = Expiring(val.deadline, inner)
                elif type(val) is not bytes:
                    val = self._overflow(key, val, leaf.epoch)
                    if val is None:
                        continue
                count += 1
                yield key, val
        for k in pending[j:]:
            if ops[k] is not None:
                count += 1
                yield k, ops[k]
        self.report.details["entries_kept"] = count

    def _overflow(self, key: bytes, ref: Overflow, epoch_limit: int) -> bytes | None:
        """The value of an overflow chain, or None (reported lost) if it
        fails. A chain is written no later than the page referring to it
        (epoch ``epoch_limit``): a newer page is another value's."""
        def page_data(pg: int) -> tuple[bytes, int]:
            img = self._image(pg)
            found = decode_overflow(img, pg, self.page_size, self.pages_path)
            if HEADER.unpack_from(img, 0)[7] > epoch_limit:
                raise CorruptionError(f"overflow page newer than the page referring to it (checkpoint "
                                      f"{epoch_limit})", path=self.pages_path, page=pg)
            return found

        try:
            # (the file's slots bound the pages a chain can have)
            parts = [data for _, data in overflow_pages(ref, page_data, self.file_slots, self.page_size,
                                                        self.pages_path)]
        except CorruptionError as exc:
            self._give_up(exc)
            self.report.lost.append(Loss(f"value of {key!r}: {exc}", key, key))
            return None
        return b"".join(parts)

    def _rebuild(self, entries: Iterator[tuple[bytes, bytes]], log) -> None:
        fs, path = self.fs, self.path
        ckpt_lsn = self.meta.ckpt_lsn if self.meta is not None else 0
        if log is not None:
            ckpt_lsn = max(ckpt_lsn, log.base_lsn + log.size - LOG_HEADER_SIZE)
        epoch = self.max_epoch + 1
        rebuilt = os.path.join(path, REBUILT_FILE)
        meta = build_page_file(fs, rebuilt, self.page_size, entries, epoch=epoch, ckpt_lsn=ckpt_lsn,
                               metadata=self.metadata)
        report = self.report
        self._set_aside(log)
        # The new file's lock moves with it: no writer can slip in at the rename.
        self.locks.append(fs.lock(rebuilt))
        fs.rename(rebuilt, self.pages_path)
        fs.sync_dir(path)
        LogWriter.create(fs, self.log_path, ckpt_lsn, path).close()
        for name in (JOURNAL_FILE, LOG_FILE + ".tmp"):
            if fs.exists(os.path.join(path, name)):
                fs.remove(os.path.join(path, name))
        fs.sync_dir(path)
        report.details.update(epoch=epoch, height=meta.height, page_count=meta.page_count)

    def _set_aside(self, log) -> None:
        """Copy what the repair gave up into lost/N/ (none if nothing): the
        images of the slots given up, at their offsets in a sparse copy of
        the page file; the log if it dropped bytes; the journal if it was
        ignored as damaged or stood in for a slot given up."""
        fs, path, report = self.fs, self.path, self.report
        slots = sorted(self.given_up)
        keep_log = log is not None and log.dropped is not None
        keep_journal = fs.exists(os.path.join(path, JOURNAL_FILE)) and (
            self.journal_damaged or any(slot in self.overlay for slot in slots))
        report.details.update(pages_set_aside=slots[:50], pages_set_aside_count=len(slots))
        if not (slots or keep_log or keep_journal):
            return
        report.set_aside = new_set_aside_dir(fs, path)
        if slots:
            ps = self.page_size
            copy_pieces_aside(fs, self.pages_path, report.set_aside, [(slot * ps, ps) for slot in slots])
        if keep_log:
            copy_aside(fs, self.log_path, report.set_aside)
        if keep_journal:
            copy_aside(fs, os.path.join(path, JOURNAL_FILE), report.set_aside)


__all__ = ["repair_db"]
