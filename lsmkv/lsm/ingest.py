"""Taking finished table files into a database: ``db.ingest(paths)``.

The way RocksDB's IngestExternalFile and HBase's bulk load do it: files
written outside the database by :class:`lsmkv.TableWriter` (sorted, one
version per key, every entry with sequence 0) join the tree whole, without
being rewritten. This module owns the two decisions that make that
correct, and linking the files in; the DB (db.py) owns the locking (writers
held off, compactions paused) and installs the manifest edit.

* :func:`inspect_tables`: every file is opened and checked before anything
  changes -- a table file of format 2 or later, at least one entry, one
  version per key -- and the files must not overlap each other (two files
  holding the same key would leave it ambiguous which one wins). Bad input
  raises one error naming the file and changes nothing.
* :func:`ingest_level`: where a file goes. All of the files of one ingest
  get one new sequence number, newer than anything in the database, so the
  ingested data replaces what it overlaps. A file goes to the deepest level
  L such that no table of levels 0..L overlaps its key range: every older
  version of its keys is then in a deeper level, where reads find it only
  after the ingested one. A file that overlaps a level-0 table stays in
  level 0 (level 0 is ordered by sequence, newest first). The memtable is
  flushed first if it holds a key in an ingested range (db.py), and
  compactions are held off meanwhile, so no table moves under the decision.
* :func:`link_tables`: the files are hard-linked (or copied) in under new
  table numbers and recorded in one manifest edit, all or none.

A file placed at the deepest level needs no compaction at all: bulk loads
into an empty store (or into empty key ranges) cost no write amplification.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from lsmkv.base.errors import CorruptionError
from lsmkv.base.filenames import table_name
from lsmkv.base.fs import FileSystem

from .table.block import CODEC_LENGTHS
from .table.reader import TableReader
from .version import NUM_LEVELS, FileMeta, Version, VersionEdit
from .write_batch import MERGE


@dataclass(frozen=True)
class IngestTable:
    """A table file checked for ingest, with what the manifest records of it."""

    path: str
    size: int
    smallest: bytes
    largest: bytes
    entries: int
    tombstones: int
    ttl_entries: int
    earliest_deadline: int


def inspect_tables(fs: FileSystem, paths) -> list[IngestTable]:
    """Check every file at ``paths`` and return them sorted by key range.
    TypeError / ValueError / CorruptionError / FileNotFoundError naming the
    file, before anything changes."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise TypeError("ingest takes a list of table file paths, not one path")
    try:
        paths = [os.path.abspath(os.fsdecode(p)) for p in paths]
    except TypeError as exc:
        raise TypeError(f"ingest paths must be str, bytes or os.PathLike ({exc})") from None
    if len(set(paths)) != len(paths):
        raise ValueError("ingest was given the same file twice")
    tables = []
    for path in paths:
        if not fs.exists(path):
            raise FileNotFoundError(f"{path}: no such table file to ingest")
        try:
            reader = TableReader(fs, path, 0, cache=None)
        except CorruptionError as exc:
            raise CorruptionError(f"{path} is not a valid table file: {exc}", path=path) from exc
        try:
            props = reader.properties
            if reader.codec == CODEC_LENGTHS:
                raise ValueError(f"{path}: a table of format 1 cannot be ingested (write it with lsmkv.TableWriter)")
            if props.range_tombstones:
                raise ValueError(f"{path}: the table holds range tombstones; only tables of puts and deletes "
                                 "(as lsmkv.TableWriter writes) can be ingested")
            if props.entries == 0:
                raise ValueError(f"{path}: the table holds no entries")
            if props.distinct_keys != props.entries:
                raise ValueError(f"{path}: the table holds several versions of a key; only tables with one "
                                 "version per key (as lsmkv.TableWriter writes) can be ingested")
            if holds_merge_operands(reader):
                raise ValueError(f"{path}: the table holds merge operands, which only the database that wrote "
                                 "them can fold; only tables of values and deletes (as lsmkv.TableWriter "
                                 "writes) can be ingested")
            tables.append(IngestTable(path, reader.file_size, props.smallest_key, props.largest_key, props.entries,
                                      props.tombstones, props.ttl_entries, props.earliest_deadline))
        finally:
            reader.close()
    tables.sort(key=lambda t: t.smallest)
    for before, after in zip(tables, tables[1:]):
        if after.smallest <= before.largest:
            raise ValueError(f"ingested files overlap: {before.path} ({before.smallest!r}..{before.largest!r}) and "
                             f"{after.path} ({after.smallest!r}..{after.largest!r}); ingest them in separate "
                             "calls (the later call wins) or merge them first")
    return tables


def holds_merge_operands(reader: TableReader) -> bool:
    """Whether the table holds a merge operand (kind 4). Only a table of
    format 3 can; one with no value with a ttl is of format 3 for that
    alone, one with both is read to find out."""
    if reader.format_version < 3:
        return False
    if not reader.properties.ttl_entries:
        return True
    return any(seq_kind & 0xFF == MERGE for _, seq_kind, _ in reader.entries())


def ingest_level(version: Version, smallest: bytes, largest: bytes) -> int:
    """The deepest level L such that no table of levels 0..L overlaps
    [smallest, largest]; 0 if a level-0 table does."""
    level = 0
    for candidate in range(NUM_LEVELS):
        if version.overlapping(candidate, smallest, largest):
            break
        level = candidate
    return level


def link_tables(fs: FileSystem, path: str, tables: list[IngestTable], version: Version, seq: int,
                new_file_number: Callable[[], int], pending_outputs: set[int],
                install: Callable[[VersionEdit], object]) -> None:
    """Link ``tables`` into the database directory ``path`` under new table
    numbers (from ``new_file_number()``; each in ``pending_outputs`` until
    the edit is installed, so no obsolete-file sweep removes it), each at
    the level :func:`ingest_level` picks in ``version``, all with the
    sequence number ``seq``; then make the links durable and hand
    ``install`` the one edit recording them. If anything fails, the links
    made are removed and the error propagates."""
    edit = VersionEdit()
    numbers = []
    try:
        for t in tables:
            number = new_file_number()
            pending_outputs.add(number)
            numbers.append(number)
            fs.link_or_copy(t.path, os.path.join(path, table_name(number)))
            edit.add_file(ingest_level(version, t.smallest, t.largest),
                          FileMeta(number, t.size, t.smallest, t.largest, seq, seq, t.entries, t.tombstones,
                                   t.ttl_entries, t.earliest_deadline, global_seq=seq))
        fs.sync_dir(path)
        install(edit)
    except BaseException:
        for number in numbers:
            try:
                fs.remove(os.path.join(path, table_name(number)))
            except OSError:
                pass
        raise
    finally:
        pending_outputs.difference_update(numbers)


def remove_sources(fs: FileSystem, tables: list[IngestTable]) -> None:
    """``ingest(move=True)``, once the ingest is durable: remove the source
    files and make their removal durable."""
    for t in tables:
        fs.remove(t.path)
    for directory in sorted({os.path.dirname(t.path) for t in tables}):
        fs.sync_dir(directory)
