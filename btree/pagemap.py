"""The page map: which slot of ``btree.pages`` holds each logical page.

Format 4 separates a page's *number* (what parents, siblings and overflow
references name, and what its header carries) from its *slot* (where its
current image lies in the file: byte offset ``slot * page_size``). A
checkpoint writes every page it changes to a slot the page file's durable
checkpoint does not use, then the map pages that changed and the map
directory, fsyncs, and writes the meta page naming the new directory: the
durable checkpoint is never overwritten, so no page is written twice (no
journal) and a crash at any moment leaves it whole. The slots the old
checkpoint used for rewritten pages are free for the next one. This is the
shadow paging of LMDB and of System R, with the indirection that lets a
page move without its parent or its linked siblings being rewritten.

On disk: map page ``m`` (type PAGE_MAP, header page number = its slot, link
a = ``m * capacity``, the first logical page it describes) holds the slots
of logical pages ``m * capacity`` up to ``(m + 1) * capacity`` (0: the page
is free); directory pages (PAGE_MAPDIR, header page number = its slot,
link a = the next directory page's slot) list the map pages' slots in
order. The meta page names the first directory page (``map_dir``) and the
number of slots the file uses (``slot_count``). A meta page whose
``map_dir`` is 0 describes an *identity* map (page ``p`` in slot ``p``) with
a format-3 free-list chain: how format-3 files and files built whole
(btree/bulk.py) are laid out. The first checkpoint a writer makes of such a
file writes the whole map.

This module owns the in-memory map (``slots``: logical page -> slot,
``array('I')``), which slots are free, and the layout of a checkpoint:
:meth:`PageMap.plan` gives each changed page a free slot and makes the map
and directory images; :meth:`PageMap.committed` takes the new map once the
meta page naming it is durable.
"""

from __future__ import annotations

import heapq
from array import array
from typing import Callable

from lsmkv.base.errors import CorruptionError

from .node import PAGE_MAP, PAGE_MAPDIR, encode_numbers, freelist_capacity


class CommitPlan:
    """The pages one checkpoint writes, in slot order: (slot, image or a
    function making it) for the changed pages, the changed map pages and
    the directory; and what the map becomes once it is durable."""

    __slots__ = ("writes", "slots", "map_slots", "dir_head", "dir_slots", "slot_count", "freed")

    def __init__(self, writes: list, slots: array, map_slots: list[int], dir_slots: list[int],
                 slot_count: int, freed: list[int]) -> None:
        self.writes = writes
        self.slots = slots
        self.map_slots = map_slots
        self.dir_slots = dir_slots
        self.dir_head = dir_slots[0]
        #: The slots the new checkpoint uses (its highest slot + 1).
        self.slot_count = slot_count
        #: Slots the durable checkpoint used that the new one does not.
        self.freed = freed


class PageMap:
    """The map of an open page file (see the module docstring)."""

    def __init__(self, slots: array, map_slots: list[int], dir_slots: list[int], slot_count: int,
                 page_size: int, busy: set[int] = frozenset()) -> None:
        #: Logical page -> slot of its image in the file (0: no image: a
        #: free page, or one made since the last checkpoint). Pages held back
        #: for live snapshots keep their slot here until they are released.
        self.slots = slots
        self.map_slots = map_slots
        self.dir_slots = dir_slots
        #: Slots the file uses (the file may be longer: slots past it hold
        #: pages a failed checkpoint wrote).
        self.slot_count = slot_count
        self.capacity = freelist_capacity(page_size)
        self.page_size = page_size
        #: Set after a checkpoint failed (the slots it took are neither
        #: reused nor known free until the next one succeeds) and for a file
        #: without a map (its free-list chain's slots are busy until then):
        #: the next checkpoint that succeeds counts the free slots afresh.
        self._rebuild = False
        self._free: list[int] = []
        #: Slots held back for readers in other processes (btree/readers.py):
        #: the epoch of the checkpoint that freed them -> the slots. They are
        #: free once no live reader reads an epoch below that one.
        self.held: dict[int, list[int]] = {}
        self._rebuild_free(busy)

    # ---- loading --------------------------------------------------------------------

    @classmethod
    def identity(cls, page_count: int, free: set[int], chain: list[int], page_size: int) -> "PageMap":
        """The map of a file without one (format 3, or built whole): page
        ``p`` in slot ``p``; free pages have no slot, and the free-list
        chain's pages are busy until the first checkpoint writes a map."""
        slots = array("I", range(page_count))
        slots[0] = slots[1] = 0  # (the meta pages)
        for pg in free:
            slots[pg] = 0
        pmap = cls(slots, [], [], page_count, page_size, busy=set(chain))
        pmap._rebuild = True  # (the chain's slots are free once a map is written)
        return pmap

    @classmethod
    def load(cls, read_numbers: Callable[[int, int], tuple[list[int], int, int]], dir_head: int,
             page_count: int, slot_count: int, page_size: int, path: str) -> "PageMap":
        """The map a meta page names: ``read_numbers(slot, page type)``
        returns a verified page's (numbers, link, epoch). Raises
        CorruptionError if the map is malformed."""
        cap = freelist_capacity(page_size)
        want = -(-page_count // cap)
        map_slots: list[int] = []
        dir_slots: list[int] = []
        slot = dir_head
        while slot:
            if slot in dir_slots or not 2 <= slot < slot_count or len(dir_slots) > want:
                raise CorruptionError(f"map directory chain reaches slot {slot} again or out of range",
                                      path=path, page=slot)
            numbers, slot_next, _ = read_numbers(slot, PAGE_MAPDIR)
            dir_slots.append(slot)
            map_slots += numbers
            slot = slot_next
        if len(map_slots) != want:
            raise CorruptionError(f"map directory lists {len(map_slots)} map pages; {page_count} pages need {want}",
                                  path=path, page=dir_head)
        slots = array("I")
        for m, ms in enumerate(map_slots):
            if not 2 <= ms < slot_count:
                raise CorruptionError(f"map page {m} is in slot {ms}, outside the file's {slot_count}",
                                      path=path, page=ms)
            numbers, first, _ = read_numbers(ms, PAGE_MAP)
            if first != m * cap or len(numbers) != min(cap, page_count - first):
                raise CorruptionError(f"map page {m} describes {len(numbers)} pages from page {first}",
                                      path=path, page=ms)
            slots.extend(numbers)
        for pg, s in enumerate(slots):
            if s and not 2 <= s < slot_count or pg < 2 and s:
                raise CorruptionError(f"page map puts page {pg} in slot {s}, outside the file's {slot_count}",
                                      path=path, page=pg)
        return cls(slots, map_slots, dir_slots, slot_count, page_size)

    def _rebuild_free(self, busy: set[int] = frozenset()) -> None:
        used = set(self.slots)
        used.update(self.map_slots, self.dir_slots, busy)
        for slots in self.held.values():
            used.update(slots)
        self._free = [s for s in range(2, self.slot_count) if s not in used]
        self._rebuild = False

    # ---- checkpoints -----------------------------------------------------------------

    def _take(self) -> int:
        """The lowest free slot, else a new one at the end of the file."""
        if self._free:
            return heapq.heappop(self._free)
        s = self.slot_count
        self.slot_count += 1
        return s

    def plan(self, pages: list, released: list[int], held: list[int], page_count: int, epoch: int,
             copy: Callable[[int], bytes] | None = None) -> CommitPlan:
        """Lay out a checkpoint of epoch ``epoch``: ``pages`` are (logical
        page, image or function) pairs of every changed page; ``released``
        are free pages, whose slots the new map drops; ``held`` are free
        pages live snapshots may still read, which the new map drops but
        whose slots stay busy. Slots are taken lowest first, so the plan's
        writes come in slot order.

        With ``copy`` (a function returning the image in a slot), the plan
        also *compacts*: every other page in a slot above the number of
        slots in use moves down into the lowest free slot below it, its
        image copied as it is (its header names the page, not the slot), so
        that once the checkpoint is durable the file can be cut at about
        the slots in use."""
        cap = self.capacity
        new = array("I", self.slots)
        if len(new) < page_count:
            new.frombytes(bytes(4 * (page_count - len(new))))
        writes = []
        freed = []
        touched = set(range(len(self.map_slots), -(-page_count // cap)))
        for pg, image in sorted(pages, key=lambda t: t[0]):
            old = new[pg]
            if old:
                freed.append(old)
            new[pg] = s = self._take()
            touched.add(pg // cap)
            writes.append((s, image))
        for pg in released:
            if new[pg]:
                freed.append(new[pg])
                new[pg] = 0
                touched.add(pg // cap)
        if copy is not None:
            self._compact(new, {pg for pg, _ in pages} | set(held), copy, writes, freed, touched)
        on_disk = new
        if held:
            on_disk = array("I", new)
            for pg in held:
                if on_disk[pg]:
                    on_disk[pg] = 0
                    touched.add(pg // cap)
        map_slots = list(self.map_slots)
        for m in sorted(touched):
            s = self._take()
            if m < len(map_slots):
                freed.append(map_slots[m])
                map_slots[m] = s
            else:
                map_slots.append(s)
            first = m * cap
            writes.append((s, _numbers_page(s, PAGE_MAP, on_disk[first:first + cap], first, self.page_size, epoch)))
        dir_count = max(1, -(-len(map_slots) // cap))
        dir_slots = [self._take() for _ in range(dir_count)]
        freed += self.dir_slots
        for j, s in enumerate(dir_slots):
            nxt = dir_slots[j + 1] if j + 1 < dir_count else 0
            writes.append((s, _numbers_page(s, PAGE_MAPDIR, map_slots[j * cap:(j + 1) * cap], nxt,
                                            self.page_size, epoch)))
        writes.sort(key=lambda t: t[0])
        # The new checkpoint's extent: its highest slot (free slots above it
        # are dropped once it is durable, and the file cut there).
        extent = max(max(new, default=0), max(map_slots), max(dir_slots)) + 1
        return CommitPlan(writes, new, map_slots, dir_slots, extent, freed)

    def _compact(self, new: array, fixed: set[int], copy, writes: list, freed: list, touched: set) -> None:
        """plan()'s compaction: move the pages in the highest slots (not
        those in ``fixed``) into the lowest free slots while those are lower,
        and write the map pages in high slots again."""
        cap = self.capacity
        in_use = len(new) - new.count(0) + len(self.map_slots) + max(1, len(self.dir_slots))
        high = sorted(((s, pg) for pg, s in enumerate(new) if s >= in_use + 2 and pg not in fixed), reverse=True)
        for old, pg in high:
            if not self._free or self._free[0] >= old:
                break
            new[pg] = s = self._take()
            freed.append(old)
            touched.add(pg // cap)
            writes.append((s, lambda old=old: copy(old)))
        # Map pages in high slots are written again too (to the lowest free
        # slots, as every map page this checkpoint writes), as is the directory.
        touched.update(m for m, s in enumerate(self.map_slots) if s >= in_use + 2)

    def committed(self, plan: CommitPlan, epoch: int = 0, hold: bool = False) -> None:
        """The meta page naming ``plan``'s map (checkpoint ``epoch``) is
        durable: take it as the map. With ``hold``, readers in other
        processes read older checkpoints: the slots the plan freed are held
        back for them (:meth:`release_held`), and the file keeps them."""
        self.slots = plan.slots
        self.map_slots = plan.map_slots
        self.dir_slots = plan.dir_slots
        if hold and plan.freed:
            self.held.setdefault(epoch, []).extend(plan.freed)
            plan.freed = []
        highest_held = max((max(slots) for slots in self.held.values() if slots), default=0)
        plan.slot_count = max(plan.slot_count, highest_held + 1)
        if plan.slot_count < self.slot_count:
            # Lowest-first allocation moves pages down into the slots earlier
            # checkpoints freed; the slots above the last page in use go.
            self.slot_count = plan.slot_count
            if not self._rebuild:
                self._free = [s for s in self._free if s < plan.slot_count]
                plan.freed = [s for s in plan.freed if s < plan.slot_count]
                heapq.heapify(self._free)
        if self._rebuild:
            self._rebuild_free()
        else:
            for s in plan.freed:
                heapq.heappush(self._free, s)

    def release_held(self, oldest: int | None) -> int:
        """Free the held slots no reader needs any more: those freed by a
        checkpoint whose epoch is at most ``oldest``, the oldest epoch a
        live reader reads (None: no reader, all of them). Returns how many."""
        done = [e for e in self.held if oldest is None or e <= oldest]
        count = 0
        for e in done:
            slots = self.held.pop(e)
            count += len(slots)
            if not self._rebuild:
                for s in slots:
                    if s < self.slot_count:
                        heapq.heappush(self._free, s)
        return count

    def hold_unused(self, epoch: int, file_slots: int) -> None:
        """A writer opens a file older checkpoints of which live readers
        read: every slot this checkpoint does not use, up to the file's end
        (``file_slots``), is held for them as if checkpoint ``epoch`` had
        freed it (the map of their epoch is not known here)."""
        self.slot_count = max(self.slot_count, file_slots)
        self._rebuild_free()
        if self._free:
            self.held.setdefault(epoch, []).extend(self._free)
            self._free = []

    def held_slots(self) -> int:
        return sum(len(slots) for slots in self.held.values())

    def failed(self) -> None:
        """A checkpoint failed: the file holds either the old map or the
        planned one, so neither's slots may be taken until the next
        checkpoint succeeds (then the free slots are counted afresh)."""
        self._rebuild = True

    def free_pages(self, page_count: int) -> set[int]:
        """The page numbers below ``page_count`` the map gives no slot (free)."""
        slots = self.slots
        return {pg for pg in range(2, page_count) if not slots[pg]}

    def free_slots(self) -> int:
        return len(self._free)

    def unused_slots(self) -> list[int]:
        """The slots, ascending, that this checkpoint gives to no page, map
        page or directory page (what its next checkpoint may write)."""
        return sorted(self._free)

    def problems(self, path: str) -> list[str]:
        """What is wrong with the map (btree.check): a slot given to two
        pages, or to a page and a map or directory page."""
        owner: dict[int, str] = {}
        found = []
        named = [(s, f"page {pg}") for pg, s in enumerate(self.slots) if s]
        named += [(s, f"map page {m}") for m, s in enumerate(self.map_slots)]
        named += [(s, f"map-directory page {j}") for j, s in enumerate(self.dir_slots)]
        for s, what in named:
            if s in owner:
                found.append(f"{path}: slot {s} holds both {owner[s]} and {what}")
            else:
                owner[s] = what
        return found[:50]


def _numbers_page(slot: int, ptype: int, numbers, link: int, page_size: int, epoch: int):
    """A function making a map or directory page image (made when written,
    a chunk at a time, as the checkpoint's other pages are)."""
    numbers = list(numbers)
    return lambda: encode_numbers(slot, ptype, numbers, link, page_size, epoch)
