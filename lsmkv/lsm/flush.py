"""Writing a sorted stream of entries to a durable table file.

``write_table`` is how a flush (or recovery) makes a table: it writes under
a temporary name, fsyncs, renames to the final name and fsyncs the
directory, so that by the time the manifest records the table, the file is
durably there under its name. (Compaction outputs follow the same protocol,
split between compaction_job.py, which writes, and compactor.py, which names.)

Level-0 tables are merged again soon, so they are compressed at
``upper_compression_level`` (options.py).

Entries arrive as sorted runs of parallel lists (keys, seq_kinds, values),
which the table builder takes in bulk (MemTable.sorted_runs for flushes).
"""

from __future__ import annotations

import os
from typing import Iterable

from lsmkv.base.filenames import table_name
from lsmkv.base.fs import FileSystem

from .options import Options
from .range_tombstones import FragmentedTombstones
from .table.builder import TableBuilder
from .version import FileMeta


def write_table(fs: FileSystem, dbpath: str, number: int,
                runs: Iterable[tuple[list[bytes], list[int], list[bytes]]], options: Options,
                range_dels: FragmentedTombstones | None = None) -> FileMeta | None:
    """Write the sorted ``runs`` (and the range tombstones ``range_dels``)
    as table ``number``; None if there was nothing to write."""
    path = os.path.join(dbpath, table_name(number))
    tmp = path + ".tmp"
    f = fs.create(tmp)
    try:
        builder = TableBuilder(f, block_size=options.block_size, compression=options.compression,
                               compression_level=options.upper_level,
                               bloom_bits_per_key=options.bloom_bits_per_key)
        for keys, seq_kinds, values in runs:
            builder.add_sorted(keys, seq_kinds, values)
        if range_dels is not None:
            builder.set_range_tombstones(range_dels)
        if builder.empty:
            f.close()
            fs.remove(tmp)
            return None
        props = builder.finish()
        f.sync()
        size = f.size
        f.close()
        fs.rename(tmp, path)
        fs.sync_dir(dbpath)
    except BaseException:
        f.close()
        try:
            fs.remove(tmp)
        except OSError:
            pass
        raise
    return FileMeta(number, size, props.smallest_key, props.largest_key, props.smallest_seq,
                    props.largest_seq, props.entries, props.tombstones, props.ttl_entries,
                    props.earliest_deadline, range_tombstones=props.range_tombstones)
