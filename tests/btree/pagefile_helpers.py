"""Finding and damaging the pages of a btree page file, for tests.

In format 4 a page's *number* (what parents, links and headers name) and
its *slot* (where its image is: offset ``slot * page_size``) differ, and
the file also holds stale images of pages in slots the page map no longer
names (btree/pagemap.py). These helpers go through the map of the last
checkpoint (:func:`btree.pager.page_slots`), so a test damages the bytes it
means to."""

from __future__ import annotations

import os

from btree.node import HEADER, check_header, decode_node
from btree.pager import PAGES_FILE, Pager
from lsmkv.base.errors import CorruptionError
from lsmkv.base.fs import DEFAULT_FS


def slot_of(path: str, pgno: int) -> int:
    """The slot holding the current image of logical page ``pgno``."""
    pager = Pager(DEFAULT_FS, path, read_only=True)
    try:
        pager.load_pages(pager.read_meta())
        slot = pager.slots[pgno] if pgno < len(pager.slots) else 0
    finally:
        pager.close()
    assert slot, f"page {pgno} has no slot (free)"
    return slot


def damage_slot(path: str, slot: int, page_size: int, offset: int = 100) -> None:
    """Flip bits of one byte of the image in ``slot`` (slots 0 and 1: the meta pages)."""
    with open(os.path.join(path, PAGES_FILE), "r+b") as f:
        f.seek(slot * page_size + offset)
        byte = f.read(1)
        f.seek(slot * page_size + offset)
        f.write(bytes([byte[0] ^ 0xA5]))


def damage_page(path: str, pgno: int, page_size: int, offset: int = 100) -> int:
    """Damage the current image of logical page ``pgno``; returns its slot."""
    slot = slot_of(path, pgno)
    damage_slot(path, slot, page_size, offset)
    return slot


def read_slot(path: str, slot: int, page_size: int) -> bytes:
    with open(os.path.join(path, PAGES_FILE), "rb") as f:
        f.seek(slot * page_size)
        return f.read(page_size)


def leaf_keys(path: str, pgno: int, page_size: int) -> list[bytes]:
    """The keys of the current image of leaf page ``pgno``."""
    return decode_node(read_slot(path, slot_of(path, pgno), page_size), pgno, page_size, "p").keys


def pages_by_type(path: str) -> dict:
    """The last checkpoint's pages: logical page numbers by page type (from
    each image's header, read in the slot the map names), plus ``"root"``,
    ``"freelist"`` (a free-list chain's pages: none once a map is written),
    ``"map"`` and ``"mapdir"`` (slots of the map and directory pages)."""
    pager = Pager(DEFAULT_FS, path, read_only=True)
    try:
        meta = pager.read_meta()
        pager.load_pages(meta)
        ps = meta.page_size
        out: dict = {}
        for pg in range(2, meta.page_count):
            slot = pager.slots[pg]
            if pg in pager.free or not slot:
                continue
            hdr = HEADER.unpack_from(pager.file.read_at(slot * ps, ps), 0)
            assert hdr[1] == pg, f"slot {slot} holds page {hdr[1]}, the map says page {pg}"
            out.setdefault(hdr[2], []).append(pg)
        out["root"] = [meta.root]
        out["freelist"] = list(pager.freelist_pages)
        out["map"] = list(pager.map.map_slots)
        out["mapdir"] = list(pager.map.dir_slots)
        return out
    finally:
        pager.close()


def verifying_images(path: str) -> list[tuple[int, int, int, int]]:
    """(slot, page number, page type, epoch) of every image in slots 2 and
    up whose checksum and header verify, current or stale (a map or
    directory page's header names its slot, the others their logical page)."""
    with open(os.path.join(path, PAGES_FILE), "rb") as f:
        data = f.read()
    ps = _page_size(path)
    out = []
    for slot in range(2, len(data) // ps):
        img = data[slot * ps:(slot + 1) * ps]
        hdr = HEADER.unpack_from(img, 0)
        try:
            check_header(img, hdr[1], ps, path)
        except CorruptionError:
            continue
        out.append((slot, hdr[1], hdr[2], hdr[7]))
    return out


def _page_size(path: str) -> int:
    pager = Pager(DEFAULT_FS, path, read_only=True)
    try:
        return pager.read_meta().page_size
    finally:
        pager.close()


def stale_images(path: str) -> list[tuple[int, int, int, int]]:
    """(slot, page number, page type, epoch) of every verifying image in a
    slot the last checkpoint's map does not name (nor as a map or
    directory page): stale copies of pages, rewritten or freed since."""
    pager = Pager(DEFAULT_FS, path, read_only=True)
    try:
        pager.load_pages(pager.read_meta())
        named = set(pager.slots) | set(pager.map.map_slots) | set(pager.map.dir_slots)
    finally:
        pager.close()
    return [image for image in verifying_images(path) if image[0] not in named]


def leaf_links(path: str, slot: int, pgno: int, page_size: int) -> list[int]:
    """The sibling links (prev, next; 0: none) of the leaf image in ``slot``."""
    node = decode_node(read_slot(path, slot, page_size), pgno, page_size, "p")
    return [link for link in (node.prev, node.next) if link]


def stale_leaf_keys(path: str, pgno: int, page_size: int) -> list[bytes]:
    """The keys of the newest stale image of leaf page ``pgno``."""
    found = [(epoch, slot) for slot, pg, _, epoch in stale_images(path) if pg == pgno]
    assert found, f"no stale image of page {pgno}"
    slot = max(found)[1]
    return decode_node(read_slot(path, slot, page_size), pgno, page_size, "p").keys
