"""``lsmkv repair DB`` for the btree engine: rebuild from the leaves that verify.

A repair holds the writer lock throughout (it refuses to run while another
process has the database open for writing) and goes:

1. **Find the checkpoint.** The newest valid meta page, with a complete
   checkpoint journal laid over the page file (in memory) as open would.
   If no meta page is valid, or the log starts after the meta page's
   checkpoint (so a newer checkpoint's meta page was lost), the repair
   works without one (*scan mode*); otherwise in *tree mode*.
2. **Tree mode.** Walk the tree from the root. Every page on the way must
   verify (checksum, page number, type, epoch not newer than the meta page,
   keys in order and within the separators the parent gives them); a page
   that does not leaves a *hole*, the key range its parent assigned to it.
   Load the free list. Then read every other page of the checkpoint: a leaf
   that verifies, is not free, and whose keys lie inside a hole is an
   *orphan* of a damaged internal page and is kept; a leaf outside every
   hole is a stale image (a freed page) and is ignored.
3. **Scan mode.** Every leaf page in the file that verifies is a candidate.
4. **Deciding between candidates** whose key ranges overlap (stale images
   of freed pages): the one written by the newer checkpoint (higher epoch)
   wins, since a page's keys move only into pages written later. Unless the
   free list verified (which makes every orphan current), an orphan whose
   sibling link names a kept leaf that does not link back is dropped too.
5. **What was lost** follows from the sibling links: two neighbouring kept
   leaves that do not link to each other had leaf pages between them that
   failed verification; the keys between their bounds are reported lost.
   A value whose overflow chain fails is lost with its key.
6. **The log** past the checkpoint is applied up to its first damaged
   record (the rest is reported as dropped bytes).
7. **Rebuild.** A new page file holding the surviving entries is written
   (btree/bulk.py) under a temporary name, the old files are copied into
   ``lost/N/``, the new page file is renamed over ``btree.pages`` (the
   commit point; its checkpoint LSN is past everything in the old log, so
   a crash before the next step replays nothing twice) and an empty log is
   started at that LSN.

Library code: it never prints.
"""

from __future__ import annotations

import os
from bisect import bisect_left, insort
from collections import deque
from typing import Iterator

from lsmkv.dbdir import engine_of_damaged
from lsmkv.errors import CorruptionError, InvalidDatabaseError
from lsmkv.fs import DEFAULT_FS, FileLock, FileSystem
from lsmkv.repair_report import Loss, RepairReport
from lsmkv.set_aside import copy_aside, new_set_aside_dir

from .bulk import build_page_file
from .node import (HEADER, MAX_PAGE_SIZE, MIN_PAGE_SIZE, PAGE_LEAF, Expiring, Node, Overflow, check_header,
                   decode_freelist, decode_node, decode_overflow)
from .pager import JOURNAL_FILE, LOG_FILE, PAGES_FILE, Meta, Pager, decode_meta, decode_meta_entries
from .wal import LOG_HEADER_SIZE, LogWriter, MetaEntry, parse_log

#: The new page file while it is being written.
REBUILT_FILE = PAGES_FILE + ".repair"
#: Pages read per call while scanning the page file.
_SCAN_BATCH = 256
_PAGE_SIZES = [MIN_PAGE_SIZE << i for i in range((MAX_PAGE_SIZE // MIN_PAGE_SIZE).bit_length())]


class _Leaf:
    """What the repair knows of a leaf page that verified."""

    __slots__ = ("pgno", "first", "last", "prev", "next", "epoch", "trusted")

    def __init__(self, pgno: int, node: Node, epoch: int, trusted: bool) -> None:
        self.pgno = pgno
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
        self.overlay: dict[int, bytes] = {}
        self.file_pages = 0
        self.max_epoch = 0
        #: (lo, hi): key ranges [lo, hi) whose subtree failed verification (None: unbounded).
        self.holes: list[tuple[bytes | None, bytes | None]] = []
        self.bad_pages: dict[int, str] = {}
        self.leaves: dict[int, _Leaf] = {}
        self.free: set[int] = set()
        self.free_exact = False
        self.stale = 0
        #: Pages the tree walk visited (tree mode).
        self.walked: set[int] = set()
        self.file = None

    # -- the run ------------------------------------------------------------------

    def run(self) -> RepairReport:
        fs = self.fs
        report = self.report
        self.file = fs.open_readable(self.pages_path)
        try:
            self._find_checkpoint()
            log = self._read_log()
            tree_mode = self.meta is not None and not (log is not None and log.base_lsn > self.meta.ckpt_lsn)
            if self.meta is not None and not tree_mode:
                report.notes.append(f"{self.log_path} starts at LSN {log.base_lsn}, after the checkpoint of the "
                                    f"newest valid meta page ({self.meta.ckpt_lsn}): a newer meta page was lost; "
                                    "every leaf page in the file is a candidate")
            if tree_mode:
                self._walk()
                self._load_free_list()
                self._scan(limit=self.meta.page_count, epoch_limit=self.meta.epoch)
            else:
                self.holes = [(None, None)]
                self._scan(limit=self.file_pages, epoch_limit=None)
            kept = self._resolve(link_check=not (tree_mode and self.free_exact))
            self._losses_from_links(kept, empty_tree=tree_mode and not self.holes)
            self._checkpointed_metadata(tree_mode)
            ops = self._log_ops(log, tree_mode)
            report.details.update(mode="tree" if tree_mode else "scan", page_size=self.page_size,
                                  pages_in_file=self.file_pages, leaves_kept=len(kept),
                                  stale_leaves_ignored=self.stale,
                                  pages_dropped=sorted(self.bad_pages)[:50], pages_dropped_count=len(self.bad_pages))
            self._rebuild(self._entries(kept, ops), log)
        finally:
            self.file.close()
        return report

    # -- 1. the checkpoint -------------------------------------------------------------

    def _find_checkpoint(self) -> None:
        pager = Pager(self.fs, self.path, read_only=True)
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
                    self.report.notes.append(f"checkpoint journal ignored: {exc}")
                if journal is not None and journal[0] >= self.meta.epoch:
                    for pgno, img in journal[1]:
                        if pgno < 2:
                            self.meta = decode_meta(img, pgno, self.page_size, pager.journal_path)
                        else:
                            self.overlay[pgno] = img
                    self.report.notes.append(f"completed the checkpoint of epoch {journal[0]} from its journal")
                self.max_epoch = self.meta.epoch
        finally:
            pager.close()
        if not self.page_size:
            self.page_size = self._guess_page_size()
        size = self.file.size
        self.file_pages = size // self.page_size if self.page_size else 0
        if self.meta is not None:
            self.file_pages = max(self.file_pages, max(self.overlay, default=0) + 1)

    def _guess_page_size(self) -> int:
        """The page size under which most of the file's first pages verify."""
        best, best_count = 4096, 0
        for ps in _PAGE_SIZES:
            data = self.file.read_at(0, ps * 64)
            count = 0
            for pg in range(2, len(data) // ps):
                try:
                    check_header(data[pg * ps:(pg + 1) * ps], pg, ps, self.pages_path)
                    count += 1
                except CorruptionError:
                    pass
            if count > best_count:
                best, best_count = ps, count
        return best

    def _image(self, pgno: int) -> bytes:
        img = self.overlay.get(pgno)
        if img is None:
            ps = self.page_size
            img = self.file.read_at(pgno * ps, ps)
        return img

    def _verified_node(self, pgno: int, img: bytes, epoch_limit: int | None) -> Node:
        node = decode_node(img, pgno, self.page_size, self.pages_path)
        epoch = HEADER.unpack_from(img, 0)[7]
        if epoch_limit is not None and epoch > epoch_limit:
            raise CorruptionError(f"page written by checkpoint {epoch}, after the meta page's {epoch_limit}",
                                  path=self.pages_path, page=pgno)
        return node

    # -- 2. tree mode ------------------------------------------------------------------

    def _walk(self) -> None:
        meta = self.meta
        seen: set[int] = set()
        stack: list[tuple[int, int, bytes | None, bytes | None]] = [(meta.root, 0, None, None)]
        while stack:
            pg, depth, lo, hi = stack.pop()
            expect_leaf = depth == meta.height - 1
            try:
                if not 2 <= pg < meta.page_count or pg in seen:
                    raise CorruptionError(f"reference to page {pg}, outside the tree's pages or used twice",
                                          path=self.pages_path, page=pg)
                seen.add(pg)
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
                continue
            if node.leaf:
                if node.keys:
                    self.leaves[pg] = _Leaf(pg, node, HEADER.unpack_from(img, 0)[7], trusted=True)
                continue
            bounds = [lo, *node.keys, hi]
            for i, kid in enumerate(node.kids):
                stack.append((kid, depth + 1, bounds[i], bounds[i + 1]))
        self.walked = seen

    def _load_free_list(self) -> None:
        meta = self.meta
        free: set[int] = set()
        pg = meta.freelist_head
        try:
            while pg:
                if pg in free or not 2 <= pg < meta.page_count:
                    raise CorruptionError("free-list chain loops or leaves the file", path=self.pages_path, page=pg)
                img = self._image(pg)
                pages, nxt = decode_freelist(img, pg, self.page_size, self.pages_path)
                if HEADER.unpack_from(img, 0)[7] > meta.epoch:
                    raise CorruptionError("free-list page newer than the meta page", path=self.pages_path, page=pg)
                free.add(pg)
                free.update(pages)
                pg = nxt
            self.free_exact = True
        except CorruptionError as exc:
            self.report.notes.append(f"free list unreadable ({exc}); leaves are checked against their siblings")
        self.free = free

    # -- 2/3. every page -----------------------------------------------------------------

    def _scan(self, limit: int, epoch_limit: int | None) -> None:
        """Read pages 2..limit-1 not walked or free; keep the leaves that verify."""
        ps = self.page_size
        walked = self.walked
        for base in range(2, limit, _SCAN_BATCH):
            end = min(limit, base + _SCAN_BATCH)
            data = self.file.read_at(base * ps, (end - base) * ps)
            for pg in range(base, end):
                if pg in walked or pg in self.free:
                    continue
                img = self.overlay.get(pg) or data[(pg - base) * ps:(pg - base + 1) * ps]
                try:
                    hdr = check_header(img, pg, ps, self.pages_path)
                except CorruptionError as exc:
                    # In use (the free list does not name it) and damaged; a
                    # page of zeros may be a free page never written, unless
                    # the free list is known to be complete.
                    if epoch_limit is not None and (self.free_exact or any(img)):
                        self.bad_pages.setdefault(pg, exc.reason)
                    continue
                self.max_epoch = max(self.max_epoch, hdr[7])
                if hdr[2] != PAGE_LEAF:
                    continue
                try:
                    node = self._verified_node(pg, img, epoch_limit)
                except CorruptionError as exc:
                    if epoch_limit is not None:
                        self.bad_pages.setdefault(pg, exc.reason)
                    continue
                if node.keys:
                    self.leaves[pg] = _Leaf(pg, node, hdr[7], trusted=False)

    # -- 4. deciding -----------------------------------------------------------------------

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
        the orphans that link to it, so a whole stale chain goes."""
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
        """Whether page ``pgno`` holds a verified image (of any type) or is free."""
        if pgno in self.leaves or pgno in self.free:
            return True
        if not 2 <= pgno < self.file_pages:
            return False
        try:
            check_header(self._image(pgno), pgno, self.page_size, self.pages_path)
        except CorruptionError:
            return False
        return True

    # -- 5. what was lost ------------------------------------------------------------------

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

    # -- 6. the log ------------------------------------------------------------------------

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

    def _checkpointed_metadata(self, tree_mode: bool) -> None:
        """The metadata entries the checkpoint's meta page names, if their
        chain verifies (else they are reported lost)."""
        meta = self.meta
        if not tree_mode or meta is None or not meta.meta_page:
            return
        data = self._overflow(b"(metadata entries)", Overflow(meta.meta_page, meta.meta_length))
        if data is None:
            return
        try:
            self.metadata.update(decode_meta_entries(data, self.pages_path, meta.meta_page))
        except CorruptionError as exc:
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
                    else:
                        ops[key] = value
                applied += 1
        self.report.details["log_batches_applied"] = applied
        return ops

    # -- 7. rebuild ------------------------------------------------------------------------

    def _entries(self, kept: list[_Leaf], ops: dict[bytes, bytes | None]) -> Iterator[tuple[bytes, bytes]]:
        """The surviving entries in key order, the log's changes applied."""
        pending = sorted(ops)
        j = 0
        count = 0
        for leaf in kept:
            node = decode_node(self._image(leaf.pgno), leaf.pgno, self.page_size, self.pages_path)
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
                if type(val) is Expiring:
                    inner = val.value
                    if type(inner) is not bytes:
                        inner = self._overflow(key, inner)
                        if inner is None:
                            continue
                    val = Expiring(val.deadline, inner)
                elif type(val) is not bytes:
                    val = self._overflow(key, val)
                    if val is None:
                        continue
                count += 1
                yield key, val
        for k in pending[j:]:
            if ops[k] is not None:
                count += 1
                yield k, ops[k]
        self.report.details["entries_kept"] = count

    def _overflow(self, key: bytes, ref: Overflow) -> bytes | None:
        """The value of an overflow chain, or None (reported lost) if it fails."""
        parts = []
        total = 0
        pg = ref.page
        seen = set()
        try:
            while pg:
                if pg in seen or not 2 <= pg < max(self.file_pages, 3):
                    raise CorruptionError("overflow chain loops or leaves the file", path=self.pages_path, page=pg)
                seen.add(pg)
                data, nxt = decode_overflow(self._image(pg), pg, self.page_size, self.pages_path)
                total += len(data)
                if total > ref.length:
                    raise CorruptionError("overflow chain longer than its value", path=self.pages_path, page=pg)
                parts.append(data)
                pg = nxt
            if total != ref.length:
                raise CorruptionError(f"overflow chain holds {total} of {ref.length} bytes", path=self.pages_path,
                                      page=ref.page)
        except CorruptionError as exc:
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
        report.set_aside = new_set_aside_dir(fs, path)
        for name in (PAGES_FILE, LOG_FILE, JOURNAL_FILE):
            if fs.exists(os.path.join(path, name)):
                copy_aside(fs, os.path.join(path, name), report.set_aside)
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


__all__ = ["repair_db"]
