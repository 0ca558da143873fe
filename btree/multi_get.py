"""``multi_get``: many keys read in one consistent view, and its hash-index hits.

This module owns :func:`multi_get` (the DB's method of that name: every
key checked, the distinct keys looked up sorted under the DB's lock, the
adaptive hash index first as ``get`` does, the rest by Tree.get_many, one
descent per leaf) and :func:`mark_hash_hits`, the bookkeeping its hash
index hits share with ``get``'s: hits counted, and a leaf marked as
recently used per 16 of them, so that hot leaves stay in the pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsmkv.base.keys import MAX_KEY_SIZE, as_keys

from .tree import Tree

if TYPE_CHECKING:
    from .db import DB


def multi_get(db: DB, keys) -> list[bytes | None]:
    """The value of each of ``keys`` (None where absent), in the order
    given, duplicates allowed, all read under the lock at once (a
    consistent view, which a loop of get() is not). Every key is checked
    before anything is read. The keys are looked up sorted, one descent
    per leaf for all the keys that fall in it (Tree.get_many)."""
    checked = as_keys(keys, MAX_KEY_SIZE)
    distinct = sorted(set(checked))
    with db._lock:
        if not db._usable:
            db._check_open()
        db._gets += len(distinct)
        found: dict[bytes, bytes | None] = {}
        ahi_get = db._ahi_get
        if ahi_get is not None:
            # The adaptive hash index first, as get() does: its hits need no descent.
            misses = []
            for key in distinct:
                value = ahi_get(key)
                if value is None:
                    misses.append(key)
                else:
                    found[key] = value
            if len(misses) != len(distinct):
                mark_hash_hits(db, distinct, len(distinct) - len(misses))
            distinct = misses
        if distinct:
            pager = db._pager
            reads = pager.page_reads
            if db._read_only:
                values = db._read(Tree.get_many, distinct)
            else:
                values = db._tree.get_many(distinct)
            found.update(zip(distinct, values))
            if pager.page_reads != reads:
                db._get_page_reads += pager.page_reads - reads
                db._trim_after_read()
    return [found[key] for key in checked]


def mark_hash_hits(db: DB, keys: list[bytes], hits: int) -> None:
    """Count ``hits`` hash index hits among ``keys`` and mark one leaf
    as recently used per 16 of them, as get() does for its hits."""
    before = db._ahi_hits
    db._ahi_hits = before + hits
    marks = (before + hits) // 16 - before // 16
    if not marks:
        return
    ahi_page = db._ahi_page
    pages = db._pages
    for key in keys:
        node = pages.get(ahi_page.get(key))
        if node is not None:
            node.ref = True
            node.hits += 16
            marks -= 1
            if not marks:
                return
