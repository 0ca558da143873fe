"""Writing a sorted stream of entries to a durable table file.

``write_table`` is the one way a table comes into existence (flushes now;
compaction outputs later): it writes under a temporary name, fsyncs, renames
to the final name and fsyncs the directory, so that by the time the manifest
records the table, the file is durably there under its name.

``memtable_entries`` turns an immutable memtable into the entry stream of a
flush, keeping only the versions some reader can still see (retention.py).
"""

from __future__ import annotations

import os
from typing import Iterable, Iterator

from .filenames import table_name
from .fs import FileSystem
from .memtable import MemTable
from .options import Options
from .retention import retained
from .table.builder import TableBuilder
from .version import FileMeta


def memtable_entries(mem: MemTable, snapshots: list[int]) -> Iterator[tuple[bytes, int, int, bytes]]:
    """(key, seq, kind, value) in internal order, dropping versions no reader can see."""
    for key, versions in mem.versions():
        if len(versions) > 1:
            versions = retained(versions, snapshots)
        for seq, kind, value in versions:
            yield key, seq, kind, value


def write_table(fs: FileSystem, dbpath: str, number: int, entries: Iterable[tuple[bytes, int, int, bytes]],
                options: Options) -> FileMeta | None:
    """Write ``entries`` as table ``number``; None if there were no entries."""
    path = os.path.join(dbpath, table_name(number))
    tmp = path + ".tmp"
    f = fs.create(tmp)
    try:
        builder = TableBuilder(f, block_size=options.block_size, compression=options.compression,
                               compression_level=options.compression_level,
                               bloom_bits_per_key=options.bloom_bits_per_key)
        add = builder.add
        for key, seq, kind, value in entries:
            add(key, seq, kind, value)
        if builder.entries == 0:
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
                    props.largest_seq, props.entries, props.tombstones)
