"""``db.stats()`` of the LSM engine: its counters and shape as one plain dict.

RocksDB keeps its figures in internal_stats.cc. The counters live where
the work happens -- the DB's write path, flush thread and ingest (db.py),
the table readers' I/O (``IOStats``), the compactor, the write queue and
log syncer, the write controller, the block cache -- and stay there, so
the hot paths count with a plain attribute. :func:`lsm_stats` only reads
them, and the shape of the current Version, into the dict
docs/architecture.md describes key by key. It changes nothing.
"""

from __future__ import annotations

import os

from lsmkv.base.cache_size import DEFAULT_RULE as CACHE_RULE
from lsmkv.base.fs import FileSystem
from lsmkv.base.meta import describe_meta
from lsmkv.base.build import BUILD

from .cache import BlockCache
from .compaction import level_scores
from .compactor import Compactor
from .error_handler import ErrorHandler
from .options import Options
from .read_state import ReadState
from .table.reader import IOStats
from .table_cache import TableCache
from .write_controller import WriteController


def lsm_stats(*, path: str, fs: FileSystem, options: Options, state: ReadState, last_sequence: int,
              counters: dict, manifest_bytes_written: int, compactor: Compactor | None, io: IOStats,
              commits: dict, write_control: WriteController, block_cache: BlockCache | None,
              tables: TableCache, snapshots: int, meta: dict[str, bytes], recovery: dict,
              errors: ErrorHandler) -> dict:
    """The stats dict of the database at ``path``. ``state``: the read
    state of the moment; ``counters``: the DB's own counters by their key
    (user, log and flush bytes written, flushes, ingests and their bytes,
    gets, stalls and their seconds); ``commits``: the write queue's and log
    syncer's (``GroupCommit.stats()``); ``snapshots``: how many are open;
    ``meta``: the metadata entries (``db.meta()``)."""
    version = state.version
    limits = compactor.limits if compactor is not None else Compactor.limits_for(options)
    scores = level_scores(version, limits)
    compaction = compactor.stats.as_dict() if compactor is not None else Compactor.empty_stats()
    levels = []
    table_entries = 0
    table_tombstones = 0
    table_range_tombstones = 0
    for level, files in enumerate(version.levels):
        entries = sum(f.entries for f in files)
        tombstones = sum(f.tombstones for f in files)
        table_entries += entries
        table_tombstones += tombstones
        table_range_tombstones += sum(f.range_tombstones for f in files)
        levels.append({"level": level, "files": len(files), "bytes": sum(f.size for f in files),
                       "entries": entries, "tombstones": tombstones, "score": round(scores[level], 3),
                       "compactions_into": compaction["compactions_into"][level],
                       "compaction_bytes_read_into": compaction["bytes_read_into"][level],
                       "compaction_bytes_written_into": compaction["bytes_written_into"][level],
                       "bytes_moved_into": compaction["bytes_moved_into"][level]})
    mem_entries = sum(len(m) for m in state.memtables)
    user = counters["user_bytes_written"]
    written = (counters["wal_bytes_written"] + counters["flush_bytes_written"] + compaction["bytes_written"]
               + manifest_bytes_written)
    gets = counters["gets"]
    cache = block_cache
    return {
        "engine": "lsm",
        # Which build runs: "compiled" (the hot modules built from their source) or "pure" (lsmkv/base/build.py).
        "build": BUILD.kind,
        "path": path,
        "entries": table_entries + mem_entries,
        "table_entries": table_entries,
        "table_tombstones": table_tombstones,
        # Range tombstone records (fragment, sequence) the tables hold.
        "table_range_tombstones": table_range_tombstones,
        "memtable_keys": mem_entries,
        "memtable_bytes": state.mem.size,
        "immutable_memtables": len(state.imms),
        "last_sequence": last_sequence,
        "files_per_level": [lv["files"] for lv in levels],
        "bytes_per_level": [lv["bytes"] for lv in levels],
        "levels": levels,
        "user_bytes_written": user,
        "wal_bytes_written": counters["wal_bytes_written"],
        "flush_bytes_written": counters["flush_bytes_written"],
        "compaction_bytes_written": compaction["bytes_written"],
        "compaction_bytes_read": compaction["bytes_read"],
        "compactions": compaction["compactions"],
        "trivial_moves": compaction["trivial_moves"],
        "compaction_seconds": compaction["seconds"],
        "compaction_cpu_seconds": compaction["cpu_seconds"],
        "compaction_entries_read": compaction["entries_read"],
        "compaction_entries_written": compaction["entries_written"],
        "entries_dropped": compaction["versions_dropped"],
        "tombstones_dropped": compaction["tombstones_dropped"],
        # Values with a ttl that compactions found expired and turned
        # into tombstones (their space is then reclaimed as tombstones' is).
        "ttl_expired": compaction["ttl_expired"],
        # Versions compactions dropped because a range tombstone deleted
        # them for every reader, and range tombstone records dropped where
        # nothing lay below them and no snapshot predated them.
        "range_covered_dropped": compaction["range_covered_dropped"],
        "range_tombstones_dropped": compaction["range_tombstones_dropped"],
        # Merge operands compactions folded into values, and keys whose
        # operands the operator failed on (kept as they were).
        "merge_operands_folded": compaction["merges_folded"],
        "merge_failures": compaction["merge_failures"],
        "manifest_bytes_written": manifest_bytes_written,
        "bytes_written": written,
        "write_amp": written / user if user else 0.0,
        "flush_count": counters["flush_count"],
        "ingest_count": counters["ingest_count"],
        "ingest_bytes": counters["ingest_bytes"],
        "bytes_read": io.bytes_read,
        "block_reads": io.block_reads,
        "gets": gets,
        # Blocks read from table files per get (0 when the cache holds them).
        "read_amp": io.get_block_reads / gets if gets else 0.0,
        "tables_probed_per_get": io.searches / gets if gets else 0.0,
        **commits,
        "stall_count": counters["stall_count"],
        "stall_seconds": counters["stall_seconds"],
        "slowdown_count": write_control.slowdowns,
        "slowdown_seconds": write_control.slowdown_seconds,
        "delayed_write_rate": round(write_control.rate),
        "level0_max_tables": write_control.max_level0,
        "block_cache": {
            "capacity": cache.capacity if cache is not None else 0,
            "usage": cache.usage if cache is not None else 0,
            "blocks": len(cache) if cache is not None else 0,
            "admitted": cache.admitted if cache is not None else 0,
            "evicted": cache.evicted if cache is not None else 0,
            "promoted": cache.promoted if cache is not None else 0,
            "sizing": "block_cache_size option" if options.block_cache_size is not None else CACHE_RULE,
        },
        "open_tables": len(tables),
        # Kept by the open tables whatever the cache holds: their index and filter blocks.
        "table_memory": tables.resident_bytes(),
        "snapshots": snapshots,
        # Metadata entries (set_meta) and the bytes of each value.
        "meta": describe_meta(meta),
        "disk_bytes": disk_bytes(fs, path),
        "recovery": dict(recovery),
        "background_error": None if errors.error is None else repr(errors.error),
        "writes_stopped": errors.error is not None,
        "resumes": errors.resumes,
    }


def disk_bytes(fs: FileSystem, path: str) -> int:
    """Bytes of the files in the directory ``path`` (a file removed while
    counting counts as nothing)."""
    total = 0
    for name in fs.listdir(path):
        try:
            total += fs.file_size(os.path.join(path, name))
        except OSError:
            pass
    return total
