"""``multi_get``: many keys read in one consistent view, and its hash-index hits.

This module owns :func:`multi_get` (the DB's method of that name: every
key checked, the distinct keys looked up sorted under the DB's lock, the
adaptive hash index first as ``get`` does, the rest by Tree.get_many, one
descent per leaf). Its hash index hits are counted as ``get``'s are
(PointGet.count_hash_hits, btree/point_get.py).
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
    point = db._point
    with db._lock:
        if not db._usable:
            db._check_open()
        point.gets += len(distinct)
        found: dict[bytes, bytes | None] = {}
        ahi = point.ahi
        if ahi:
            # The adaptive hash index first, as get() does: its hits need no descent.
            misses = []
            for key in distinct:
                value = ahi.get(key)
                if value is None:
                    misses.append(key)
                else:
                    found[key] = value
            if len(misses) != len(distinct):
                point.count_hash_hits(distinct, len(distinct) - len(misses))
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
                point.page_reads += pager.page_reads - reads
                db._trim_after_read()
    return [found[key] for key in checked]

