"""Statistics: what ``db.stats()`` reports, and the shape of the tree it measures.

This module owns the stats dict of a btree database (docs/btree.md lists
its keys): the DB's counters (gets, puts, bytes written and read,
checkpoints, vacuums, the failure that stopped writes...), the buffer
pool's and the page file's figures, the group commit's, and the tree's
shape (:func:`level_fill`: pages and fill factor per level, kept until
the next write or reload). It reads; the only thing it changes is that
cache.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from lsmkv.base.meta import describe_meta
from lsmkv.base.build import BUILD

from .bufferpool import BufferPool
from .node import HEADER_SIZE, check_header
from .pager import Pager
from .tree import Tree

if TYPE_CHECKING:
    from .db import DB


def level_fill(tree: Tree, pager: Pager, pool: BufferPool) -> tuple[list[int], list[float]]:
    """(pages per level, fill factor per level), root level first. Leaves
    outside the pool are measured from their page header, not decoded."""
    ps = pager.page_size
    counts: list[int] = []
    fills: list[float] = []
    level = [tree.root]
    for depth in range(tree.height):
        leaf = depth == tree.height - 1
        used = 0
        nxt: list[int] = []
        for pg in level:
            node = pool.pages.get(pg)
            if node is None and leaf:
                buf = pager.read_page(pg)
                hdr = check_header(buf, pg, ps, pager.path)
                cell_start = hdr[5] or ps
                used += HEADER_SIZE + 2 * hdr[4] + (ps - cell_start)
                continue
            if node is None:
                node = tree.node(pg, False)
            used += node.used
            if not leaf:
                nxt += node.kids
        counts.append(len(level))
        fills.append(round(used / (len(level) * ps), 4))
        level = nxt
    return counts, fills


def _level_fill_cached(db: DB) -> tuple[list[int], list[float]]:
    """level_fill() of the DB's tree, computed again only after a write
    (``db._version``) or a reload (which empties ``db._fill_cache``)."""
    cache = db._fill_cache
    if cache is not None and cache[0] == db._version:
        return cache[1], cache[2]
    counts, fills = level_fill(db._tree, db._pager, db._pool)
    db._fill_cache = (db._version, counts, fills)
    return counts, fills


def collect_stats(db: DB) -> dict:
    """The stats dict of ``db`` (see DB.stats); called with its lock held,
    the handle open."""
    pager, pool, tree, point = db._pager, db._pool, db._tree, db._point
    readers = db._readers.readers(pager.file.identity()) if db._readers is not None else []
    counts, fills = db._read(lambda tree: _level_fill_cached(db))
    log_written = db._log_bytes_done + (db._log.bytes_written if db._log else 0)
    bytes_written = log_written + pager.bytes_written
    bytes_read = pager.bytes_read + db._log_bytes_read
    disk = 0
    for name in db._fs.listdir(db.path):
        try:
            disk += db._fs.file_size(os.path.join(db.path, name))
        except OSError:
            pass
    lookups = pool.lookups
    return {
        "engine": "btree",
        # Which build runs: "compiled" (the hot modules built from their source) or "pure" (lsmkv/base/build.py).
        "build": BUILD.kind,
        "entries": tree.entries,
        # Metadata entries (set_meta) and the bytes of each value.
        "meta": describe_meta(db._meta),
        "user_bytes_written": db._user_bytes,
        "bytes_written": bytes_written,
        "write_amp": round(bytes_written / db._user_bytes, 3) if db._user_bytes else 0.0,
        "bytes_read": bytes_read,
        "gets": point.gets,
        "read_amp": round(point.page_reads / point.gets, 4) if point.gets else 0.0,
        "disk_bytes": disk,
        "puts": db._puts,
        "deletes": db._deletes,
        "batches": db._batches,
        "page_size": pager.page_size,
        "height": tree.height,
        "page_count": pager.page_count,
        "pages_per_level": counts,
        "fill_factor": fills,
        "free_pages": len(pager.free),
        "cache_size": pool.cache_size,
        "cache_bytes": pool.memory_bytes(),
        "cache_page_bytes": round(pool.page_bytes),
        "cache_inner_page_bytes": round(pool.inner_bytes),
        "cache_inner_pages": pool.inner_pages,
        "cache_capacity_pages": pool.capacity,
        "cache_pages": len(pool.pages),
        "dirty_pages": pool.dirty_count(),
        "cache_hit_rate": round(1 - pool.misses / lookups, 4) if lookups else 0.0,
        "cache_misses": pool.misses,
        "hash_index_hits": point.ahi_hits,
        "hash_index_entries": len(tree.ahi) if tree.ahi is not None else 0,
        "page_reads": pager.page_reads,
        "log_bytes_written": log_written,
        "data_bytes_written": pager.data_bytes,
        "slot_count": pager.map.slot_count,
        "free_slots": pager.map.free_slots(),
        "map_pages": len(pager.map.map_slots) + len(pager.map.dir_slots),
        "format_version": pager.meta.version,
        "log_bytes": (db._log.end_lsn - db._log.base_lsn) if db._log else 0,
        "data_file_bytes": pager.file.size(),
        "checkpoints": db._checkpoints,
        "vacuums": db._vacuums,
        "ingests": db._ingests,
        "vacuum_pages_freed": db._vacuum_pages_freed,
        # db.merge calls and db.delete_range calls (batches and transactions
        # count as batches), and the pages range deletes gave back.
        "merges": db._merges,
        "range_deletes": db._range_deletes,
        "range_delete_pages_freed": db._range_delete_pages_freed,
        "checkpoint_epoch": pager.meta.epoch,
        # Readers in other processes (btree/readers.py) and what the writer
        # holds back for them; this handle's views that snapshots read.
        "readers": len(readers),
        "readers_oldest_epoch": min((r.epoch for r in readers), default=None),
        "readers_cleared": db._readers.cleared if db._readers is not None else 0,
        "held_slots": pager.held_slots(),
        "held_bytes": pager.held_slots() * pager.page_size,
        "snapshot_views": len(db._views),
        "replayed_batches": db._replayed,
        "max_key_size": db._max_key,
        "read_only": db._read_only,
        "background_error": None if db._failed is None else repr(db._failed),
        "writes_stopped": db._failed is not None,
        "resumes": db._resumes,
        **db._commits.stats(),
        # Keys whose value has a ttl (expired ones included until a
        # sweep deletes them), and keys the sweeps deleted so far.
        "ttl_entries": tree.ttl_entries,
        "ttl_swept": db._ttl_swept,
    }
