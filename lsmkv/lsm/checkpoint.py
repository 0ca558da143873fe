"""Checkpoints and split keys: a consistent copy of a database, and where
to cut it for parallel reads.

:func:`write_checkpoint` writes a new database directory holding exactly a
given Version's tables (hard-linked: tables never change once written, so
a link is a copy; copied where links are impossible or the source has been
deleted since it was opened), the contents of a memtable as one more
level-0 table, and a fresh manifest recording all of them with the
metadata entries and the last sequence number. No write-ahead log is
copied: the checkpoint's memtable is empty. The result opens with
``lsmkv.open`` and is independent of its source.

:func:`split_keys` (``db.split_keys``) cuts a Version into key ranges of
about equal size on disk: :func:`equal_size_cuts` turns the (key, bytes)
boundaries of the deepest level's blocks into the keys that cut them into
parts of about equal size.

The DB (db.py) holds writers off, or takes a read-only handle's view as
published, and hands these functions what they copy or cut.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from itertools import accumulate
from typing import Callable

from lsmkv.base.filenames import CURRENT, manifest_name, table_name
from lsmkv.base.fs import FileSystem

from .flush import write_table
from .memtable import MemTable
from .options import Options
from .version import DB_FORMAT_VERSION, FileMeta, Version, VersionEdit
from .wal import LogWriter


def write_checkpoint(fs: FileSystem, dest: str, source: str, version: Version, memtable: MemTable | None,
                     last_sequence: int, meta: dict[bytes, bytes], options: Options,
                     open_reader: Callable[[FileMeta], object], merge_operator: str | None = None) -> None:
    """Write ``version`` (plus ``memtable``, if given and not empty) as a new
    database at ``dest``, which must not exist. ``open_reader(meta)`` gives
    an open reader of a table whose file may have been deleted. On failure
    ``dest`` is removed again. ``merge_operator``: the name the source's
    manifest records, carried into the copy's."""
    fs.makedirs(dest)
    try:
        _write(fs, dest, source, version, memtable, last_sequence, meta, options, open_reader, merge_operator)
    except BaseException:
        fs.discard_directory(dest)
        raise


def _write(fs: FileSystem, dest: str, source: str, version: Version, memtable: MemTable | None,
           last_sequence: int, meta: dict[bytes, bytes], options: Options, open_reader,
           merge_operator: str | None) -> None:
    edit = VersionEdit()
    edit.merge_operator = merge_operator
    edit.format_version = DB_FORMAT_VERSION
    next_number = 1
    for level, files in enumerate(version.levels):
        for f in files:
            target = os.path.join(dest, table_name(f.number))
            try:
                fs.link_or_copy(os.path.join(source, table_name(f.number)), target)
            except FileNotFoundError:
                fs.copy_readable(open_reader(f).file, target)  # deleted since it was opened
            edit.add_file(level, f)
            next_number = max(next_number, f.number + 1)
    if memtable is not None and len(memtable):
        table = write_table(fs, dest, next_number, memtable.sorted_runs([]), options,
                            memtable.range_dels)
        if table is not None:
            edit.add_file(0, table)
        next_number += 1
        meta = {**meta, **memtable.meta}
    manifest_number = next_number
    edit.log_number = manifest_number + 1
    edit.next_file_number = manifest_number + 2
    edit.last_sequence = last_sequence
    edit.meta = meta
    f = fs.create(os.path.join(dest, manifest_name(manifest_number)))
    writer = LogWriter(f)
    try:
        writer.add_record(edit.encode())
        writer.sync()
    finally:
        writer.close()
    fs.sync_dir(dest)
    fs.write_file_atomically(os.path.join(dest, CURRENT), (manifest_name(manifest_number) + "\n").encode())


def equal_size_cuts(bounds: list[tuple[bytes, int]], parts: int) -> list[bytes]:
    """Keys that cut ``bounds`` -- (key, bytes up to and including it)
    pairs in key order, each a unit that is not split -- into ``parts``
    ranges of about equal total size: at most parts - 1 strictly ascending
    keys, each the first key of the range it starts."""
    if parts <= 1 or len(bounds) < 2:
        return []
    totals = list(accumulate(size for _, size in bounds))
    whole = totals[-1]
    cuts: list[bytes] = []
    for i in range(1, parts):
        j = bisect_left(totals, whole * i / parts)
        if j + 1 >= len(bounds):
            break
        key = bounds[j][0] + b"\x00"  # just past the unit's last key: the unit stays whole
        if (not cuts or key > cuts[-1]) and key <= bounds[-1][0]:
            cuts.append(key)
    return cuts


def split_keys(version: Version, open_reader: Callable[[FileMeta], object], parts: int) -> list[bytes]:
    """At most ``parts - 1`` ascending keys that cut ``version`` into ranges
    of about equal size on disk: cuts fall on block boundaries of the
    deepest level that holds data, weighed by block size (``open_reader``
    gives a table's open reader). ``[]`` for a Version with no tables or
    parts <= 1; ValueError unless ``parts`` is a positive int."""
    if type(parts) is not int or parts < 1:
        raise ValueError(f"parts must be a positive int, not {parts!r}")
    levels = [files for files in version.levels if files]
    if parts == 1 or not levels:
        return []
    bounds: list[tuple[bytes, int]] = []  # (last key of a block, its size), in key order
    for meta in levels[-1]:
        r = open_reader(meta)
        ends = r.index_offsets[1:] + [meta.size]
        bounds.extend(zip(r.index_keys, (e - o for o, e in zip(r.index_offsets, ends))))
    bounds.sort()
    return equal_size_cuts(bounds, parts)
