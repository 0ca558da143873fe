"""The manifest: which tables make up the database, level by level.

* :class:`FileMeta`: one table as the manifest knows it (number, size, key
  range, sequence range, counts).
* :class:`VersionEdit`: a change (tables added and removed per level, counters)
  and its encoding as one manifest record.
* :class:`Version`: an immutable list of tables per level. Readers hold the
  Version they started with; a table file is deleted only when no live
  Version references it.
* :class:`VersionSet`: the current Version, the counters (next file number,
  last sequence, log number), the MANIFEST log they are recorded in, and
  recovery from it; for a read-only handle, following the manifest another
  process writes (``follow``: only the edits appended since the last read,
  or the whole of a new manifest CURRENT has come to name).

Level 0 holds tables that may overlap, newest first. Levels 1 and deeper
hold non-overlapping tables sorted by key.

VersionEdit encoding: a sequence of tagged fields::

    1 log_number u64 | 2 next_file_number u64 | 3 last_sequence u64 |
    4 deleted table: level u8, number u64 |
    5 added table: level u8, number u64, size u64, smallest_seq u64, largest_seq u64,
                   entries u64, tombstones u64, smallest key (u32 length + bytes),
                   largest key (u32 length + bytes) |
    6 compact pointer: level u8, key (u32 length + bytes) (from earlier versions; no longer written) |
    7 format version u32 (first field of every manifest's first record)
    8 table ttl: number u64, ttl entries u64, earliest deadline u64 (ms), right
      after the added table it describes (only for tables with ttl entries)
    10 ingested table's sequence: number u64, sequence u64, right after the
      added table it describes (only for tables taken in by db.ingest, whose
      entries are stored with sequence 0 and all read as this one)
    11 table range tombstones: number u64, records u64, right after the added
      table it describes (only for tables holding range tombstones)
    12 merge operator: name (u32 length + UTF-8 bytes), recorded before the
      first merge operand is written; every later manifest repeats it
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import weakref
from bisect import bisect_left
from typing import Iterable

from lsmkv.base.errors import BackgroundError, CorruptionError, InvalidDatabaseError, LsmkvError
from lsmkv.base.filenames import CURRENT, manifest_name
from lsmkv.base.fs import FileSystem

from .wal import BLOCK_SIZE, LogReader, LogWriter

log = logging.getLogger(__name__)

NUM_LEVELS = 7
#: A manifest that grows past this is replaced by a fresh one holding a snapshot.
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
#: Manifest records larger than this are refused (bounds memory on corrupt input).
MAX_EDIT_BYTES = 256 * 1024 * 1024
#: Times ``follow`` reads CURRENT again when the manifest it named is gone
#: (the writer started a new one and deleted the old meanwhile).
_FOLLOW_ATTEMPTS = 20

_U8 = struct.Struct("<B")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_DELETED = struct.Struct("<BQ")
_ADDED = struct.Struct("<BQQQQQQ")

TAG_LOG_NUMBER = 1
TAG_NEXT_FILE = 2
TAG_LAST_SEQUENCE = 3
TAG_DELETED = 4
TAG_ADDED = 5
TAG_COMPACT_POINTER = 6
TAG_FORMAT_VERSION = 7
#: The ttl summary of the table added just before it (format version 2).
TAG_TABLE_TTL = 8
_TABLE_TTL = struct.Struct("<QQQ")
#: A metadata entry (format version 3): name and value of write batches'
#: set_meta, as of the memtable the edit flushed.
TAG_META = 9
#: The sequence number every entry of an ingested table reads as (format
#: version 4), right after the added table it describes.
TAG_TABLE_GLOBAL_SEQ = 10
#: The range tombstone records of the table added just before it (format
#: version 5): a reader knows from the Version alone whether any table has some.
TAG_TABLE_RANGE_DELS = 11
#: The name of the merge operator the store's operands are folded with.
TAG_MERGE_OPERATOR = 12

#: Version of the database layout this code writes (recorded in each
#: manifest). 2: write-ahead logs and tables may hold kind-2 entries (values
#: with a ttl, docs/formats.md); 3: logs may hold kind-3 operations and
#: manifests tag-9 records (metadata). Code that knows an older version
#: refuses the database cleanly instead of misreading it; older versions
#: are still read. 4: manifests may hold tag-10 records (ingested tables).
#: 5: logs may hold kind-4 operations (merge operands) and kind-5 ones
#: (range tombstones), tables kind-4 entries and a range-tombstone block,
#: manifests tag-11 records (a table's range tombstones) and tag-12 ones
#: (the merge operator's name).
DB_FORMAT_VERSION = 5


class FileMeta:
    """A table file as the manifest records it."""

    __slots__ = ("number", "size", "smallest", "largest", "smallest_seq", "largest_seq", "entries",
                 "tombstones", "ttl_entries", "earliest_deadline", "global_seq", "range_tombstones", "reader",
                 "being_compacted")

    def __init__(self, number: int, size: int, smallest: bytes, largest: bytes, smallest_seq: int,
                 largest_seq: int, entries: int = 0, tombstones: int = 0, ttl_entries: int = 0,
                 earliest_deadline: int = 0, global_seq: int = 0, range_tombstones: int = 0) -> None:
        self.number = number
        self.size = size
        self.smallest = smallest
        self.largest = largest
        self.smallest_seq = smallest_seq
        self.largest_seq = largest_seq
        self.entries = entries
        self.tombstones = tombstones
        #: Values with a ttl in the table, and their earliest deadline (ms
        #: since the epoch; 0 if none): when a compaction should look at it.
        self.ttl_entries = ttl_entries
        self.earliest_deadline = earliest_deadline
        #: For a table taken in by db.ingest: the sequence number all its
        #: entries read as (they are stored with 0); 0 for every other table.
        self.global_seq = global_seq
        #: Range tombstone records in the table's range-tombstone block (0: none).
        self.range_tombstones = range_tombstones
        #: The open TableReader, managed by the DB's table cache (None when closed).
        self.reader = None
        #: Set while a compaction has this table as input.
        self.being_compacted = False

    def __repr__(self) -> str:
        return (f"FileMeta(#{self.number}, {self.size}B, {self.smallest!r}..{self.largest!r}, "
                f"seq {self.smallest_seq}..{self.largest_seq})")


class VersionEdit:
    __slots__ = ("format_version", "log_number", "next_file_number", "last_sequence", "deleted", "added",
                 "compact_pointers", "meta", "merge_operator")

    def __init__(self) -> None:
        self.format_version: int | None = None
        self.log_number: int | None = None
        self.next_file_number: int | None = None
        self.last_sequence: int | None = None
        self.deleted: set[tuple[int, int]] = set()
        self.added: list[tuple[int, FileMeta]] = []
        self.compact_pointers: list[tuple[int, bytes]] = []
        #: Metadata entries set by this edit (name -> value).
        self.meta: dict[bytes, bytes] = {}
        #: The merge operator's name, once the store may hold merge operands.
        self.merge_operator: str | None = None

    def add_file(self, level: int, meta: FileMeta) -> None:
        self.added.append((level, meta))

    def delete_file(self, level: int, number: int) -> None:
        self.deleted.add((level, number))

    def encode(self) -> bytes:
        parts = []
        if self.format_version is not None:
            parts.append(_U8.pack(TAG_FORMAT_VERSION) + _U32.pack(self.format_version))
        if self.log_number is not None:
            parts.append(_U8.pack(TAG_LOG_NUMBER) + _U64.pack(self.log_number))
        if self.next_file_number is not None:
            parts.append(_U8.pack(TAG_NEXT_FILE) + _U64.pack(self.next_file_number))
        if self.last_sequence is not None:
            parts.append(_U8.pack(TAG_LAST_SEQUENCE) + _U64.pack(self.last_sequence))
        for level, number in sorted(self.deleted):
            parts.append(_U8.pack(TAG_DELETED) + _DELETED.pack(level, number))
        for level, f in self.added:
            parts.append(_U8.pack(TAG_ADDED) + _ADDED.pack(level, f.number, f.size, f.smallest_seq,
                                                            f.largest_seq, f.entries, f.tombstones)
                         + _U32.pack(len(f.smallest)) + f.smallest + _U32.pack(len(f.largest)) + f.largest)
            if f.ttl_entries:
                parts.append(_U8.pack(TAG_TABLE_TTL) + _TABLE_TTL.pack(f.number, f.ttl_entries,
                                                                       f.earliest_deadline))
            if f.global_seq:
                parts.append(_U8.pack(TAG_TABLE_GLOBAL_SEQ) + _U64.pack(f.number) + _U64.pack(f.global_seq))
            if f.range_tombstones:
                parts.append(_U8.pack(TAG_TABLE_RANGE_DELS) + _U64.pack(f.number) + _U64.pack(f.range_tombstones))
        for level, key in self.compact_pointers:
            parts.append(_U8.pack(TAG_COMPACT_POINTER) + _U8.pack(level) + _U32.pack(len(key)) + key)
        for name, value in sorted(self.meta.items()):
            parts.append(_U8.pack(TAG_META) + _U32.pack(len(name)) + name + _U32.pack(len(value)) + value)
        if self.merge_operator is not None:
            name = self.merge_operator.encode("utf-8")
            parts.append(_U8.pack(TAG_MERGE_OPERATOR) + _U32.pack(len(name)) + name)
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes, path: str = "", offset: int = 0) -> "VersionEdit":
        edit = cls()
        pos = 0
        size = len(data)

        def need(n: int) -> None:
            if pos + n > size:
                raise CorruptionError("manifest record truncated", path=path, offset=offset)

        def key() -> bytes:
            nonlocal pos
            need(4)
            (n,) = _U32.unpack_from(data, pos)
            pos += 4
            need(n)
            value = data[pos: pos + n]
            pos += n
            return value

        while pos < size:
            tag = data[pos]
            pos += 1
            if tag in (TAG_LOG_NUMBER, TAG_NEXT_FILE, TAG_LAST_SEQUENCE):
                need(8)
                (value,) = _U64.unpack_from(data, pos)
                pos += 8
                if tag == TAG_LOG_NUMBER:
                    edit.log_number = value
                elif tag == TAG_NEXT_FILE:
                    edit.next_file_number = value
                else:
                    edit.last_sequence = value
            elif tag == TAG_DELETED:
                need(_DELETED.size)
                level, number = _DELETED.unpack_from(data, pos)
                pos += _DELETED.size
                if level >= NUM_LEVELS:
                    raise CorruptionError(f"manifest names level {level}", path=path, offset=offset)
                edit.deleted.add((level, number))
            elif tag == TAG_ADDED:
                need(_ADDED.size)
                level, number, fsize, sseq, lseq, entries, tombstones = _ADDED.unpack_from(data, pos)
                pos += _ADDED.size
                smallest = key()
                largest = key()
                if level >= NUM_LEVELS or smallest > largest or sseq > lseq:
                    raise CorruptionError(f"manifest entry for table {number} is inconsistent",
                                          path=path, offset=offset)
                edit.added.append((level, FileMeta(number, fsize, smallest, largest, sseq, lseq, entries,
                                                   tombstones)))
            elif tag == TAG_TABLE_TTL:
                need(_TABLE_TTL.size)
                number, ttl_entries, earliest = _TABLE_TTL.unpack_from(data, pos)
                pos += _TABLE_TTL.size
                if not edit.added or edit.added[-1][1].number != number or not ttl_entries \
                        or ttl_entries > edit.added[-1][1].entries:
                    raise CorruptionError(f"manifest ttl record for table {number} does not follow that table's "
                                          "entry or is inconsistent", path=path, offset=offset)
                edit.added[-1][1].ttl_entries = ttl_entries
                edit.added[-1][1].earliest_deadline = earliest
            elif tag == TAG_TABLE_GLOBAL_SEQ:
                need(16)
                (number,) = _U64.unpack_from(data, pos)
                (global_seq,) = _U64.unpack_from(data, pos + 8)
                pos += 16
                if not edit.added or edit.added[-1][1].number != number or not global_seq \
                        or global_seq >= 1 << 56:
                    raise CorruptionError(f"manifest sequence record for ingested table {number} does not follow "
                                          "that table's entry or is inconsistent", path=path, offset=offset)
                edit.added[-1][1].global_seq = global_seq
            elif tag == TAG_TABLE_RANGE_DELS:
                need(16)
                (number,) = _U64.unpack_from(data, pos)
                (count,) = _U64.unpack_from(data, pos + 8)
                pos += 16
                if not edit.added or edit.added[-1][1].number != number or not count:
                    raise CorruptionError(f"manifest range tombstone record for table {number} does not follow "
                                          "that table's entry or is inconsistent", path=path, offset=offset)
                edit.added[-1][1].range_tombstones = count
            elif tag == TAG_FORMAT_VERSION:
                need(4)
                (edit.format_version,) = _U32.unpack_from(data, pos)
                pos += 4
                if edit.format_version > DB_FORMAT_VERSION:
                    raise InvalidDatabaseError(
                        f"{path}: database format version {edit.format_version} is newer than this "
                        f"lsmkv understands ({DB_FORMAT_VERSION}); upgrade lsmkv to open it")
            elif tag == TAG_META:
                name = key()
                if not 0 < len(name) <= 255:
                    raise CorruptionError(f"manifest metadata name of {len(name)} bytes", path=path, offset=offset)
                edit.meta[name] = key()
            elif tag == TAG_MERGE_OPERATOR:
                raw = key()
                try:
                    edit.merge_operator = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise CorruptionError("manifest merge operator name is not UTF-8", path=path,
                                          offset=offset) from None
            elif tag == TAG_COMPACT_POINTER:
                need(1)
                level = data[pos]
                pos += 1
                if level >= NUM_LEVELS:
                    raise CorruptionError(f"manifest names level {level}", path=path, offset=offset)
                edit.compact_pointers.append((level, key()))
            else:
                raise CorruptionError(f"manifest record has unknown tag {tag}", path=path, offset=offset)
        return edit


class Version:
    """Tables per level at one point in time. Immutable once built."""

    __slots__ = ("levels", "largest_keys", "level_entries", "deep_levels", "range_tombstones", "__weakref__")

    def __init__(self, levels: list[list[FileMeta]]) -> None:
        self.levels = levels
        #: For levels >= 1: the largest key of each table, for bisecting.
        self.largest_keys = [[f.largest for f in files] for files in levels]
        #: The entries (versions) each level holds: how dense a level is
        #: beside the others, which sizes a cursor's first read (cursor.py).
        self.level_entries = [sum(f.entries for f in files) for files in levels]
        #: The levels >= 1 that hold tables, ascending.
        self.deep_levels = [level for level in range(1, len(levels)) if levels[level]]
        #: Whether some table holds range tombstones (reads then take the path that honours them).
        self.range_tombstones = any(f.range_tombstones for files in levels for f in files)

    def files(self) -> Iterable[FileMeta]:
        for files in self.levels:
            yield from files

    def numbers(self) -> set[int]:
        return {f.number for files in self.levels for f in files}

    def overlapping(self, level: int, start: bytes | None, end: bytes | None) -> list[FileMeta]:
        """Tables of ``level`` whose key range meets [start, end] (both inclusive; None = open)."""
        files = self.levels[level]
        if level == 0:
            return [f for f in files
                    if (start is None or f.largest >= start) and (end is None or f.smallest <= end)]
        i = 0 if start is None else bisect_left(self.largest_keys[level], start)
        out = []
        for f in files[i:]:
            if end is not None and f.smallest > end:
                break
            out.append(f)
        return out

    def level_bytes(self, level: int) -> int:
        return sum(f.size for f in self.levels[level])

    def apply(self, edit: VersionEdit, path: str = "") -> "Version":
        """The Version that results from applying ``edit`` to this one."""
        levels = [list(files) for files in self.levels]
        if edit.deleted:
            for level, number in edit.deleted:
                before = len(levels[level])
                levels[level] = [f for f in levels[level] if f.number != number]
                if len(levels[level]) == before:
                    raise CorruptionError(f"manifest deletes table {number} from level {level}, "
                                          "which does not hold it", path=path)
        for level, meta in edit.added:
            levels[level].append(meta)
        levels[0].sort(key=lambda f: (f.largest_seq, f.number), reverse=True)
        for level in range(1, NUM_LEVELS):
            files = levels[level]
            files.sort(key=lambda f: f.smallest)
            for a, b in zip(files, files[1:]):
                if a.largest >= b.smallest:
                    raise CorruptionError(f"tables {a.number} and {b.number} overlap in level {level}",
                                          path=path)
        return Version(levels)


def _empty_version() -> Version:
    return Version([[] for _ in range(NUM_LEVELS)])


class VersionSet:
    """The current Version and the counters, persisted in the MANIFEST."""

    def __init__(self, dbpath: str, fs: FileSystem) -> None:
        self.dbpath = dbpath
        self.fs = fs
        self.current = _empty_version()
        self.next_file_number = 2
        self.last_sequence = 0
        #: Logs with numbers >= log_number hold data not yet in tables.
        self.log_number = 0
        self.compact_pointers: dict[int, bytes] = {}
        #: Metadata entries as of the last flushed memtable (name -> value).
        self.meta: dict[bytes, bytes] = {}
        #: The name of the merge operator recorded (None: no merge was written).
        self.merge_operator: str | None = None
        self.manifest_number = 0
        #: Read-only handles: the offset in the manifest past the last edit
        #: ``follow`` applied (where the next one starts).
        self.manifest_read_end = 0
        self.manifest_bytes_written = 0
        self._manifest: LogWriter | None = None
        #: Set when a manifest write failed: its tail is unknown (see log_and_apply).
        self._manifest_error: BaseException | None = None
        self._live: weakref.WeakSet[Version] = weakref.WeakSet([self.current])
        self._lock = threading.Lock()

    # -- counters ---------------------------------------------------------

    def new_file_number(self) -> int:
        with self._lock:
            n = self.next_file_number
            self.next_file_number += 1
            return n

    def live_table_numbers(self) -> set[int]:
        """Tables referenced by any Version still in use (current or held by a reader)."""
        with self._lock:
            versions = list(self._live)
        out: set[int] = set()
        for v in versions:
            out |= v.numbers()
        return out

    # -- recovery -------------------------------------------------------

    def _current_manifest(self) -> str:
        """The name of the manifest CURRENT names (checked)."""
        current_path = os.path.join(self.dbpath, CURRENT)
        try:
            raw = self.fs.read_file(current_path)
        except FileNotFoundError:
            raise CorruptionError("CURRENT is missing (the database was destroyed or damaged)",
                                  path=current_path, offset=0) from None
        name = raw.decode("ascii", "replace").strip()
        if not raw.endswith(b"\n") or not name.startswith("MANIFEST-") or not name[9:].isdigit():
            raise CorruptionError(f"CURRENT does not name a manifest ({raw[:40]!r})", path=current_path, offset=0)
        return name

    def recover(self) -> None:
        """Load the state recorded by CURRENT and its manifest."""
        fs = self.fs
        current_path = os.path.join(self.dbpath, CURRENT)
        name = self._current_manifest()
        path = os.path.join(self.dbpath, name)
        if not fs.exists(path):
            raise CorruptionError(f"CURRENT names {name}, which is missing", path=current_path, offset=0)
        reader = LogReader(fs.read_file(path), path, salvage=False)
        version = _empty_version()
        seen_any = False
        for offset, payload in reader.records():
            edit = VersionEdit.decode(payload, path, offset)
            version = version.apply(edit, path)
            self._absorb_counters(edit)
            seen_any = True
        if not seen_any:
            raise CorruptionError("manifest holds no records", path=path, offset=0)
        if reader.report.torn_tail_bytes:
            log.warning("%s: dropped a torn record of %d bytes at its end", path,
                        reader.report.torn_tail_bytes)
        self.manifest_number = int(name[9:])
        self.next_file_number = max(self.next_file_number, self.manifest_number + 1)
        self._install(version)

    # -- following a writer (read-only handles) ---------------------------

    def follow(self) -> bool:
        """Read-only handles: bring the current Version up to what the
        manifest on disk records, reading only the edits appended since the
        last call, or the whole manifest when CURRENT names a new one (the
        writer started one: it grew too large, or the writer reopened or
        resumed). A record the writer is still appending ends the reading
        quietly (the next call reads it). Tables the current Version knows
        keep their FileMeta (and so their open reader) in the new one.
        Returns whether anything was applied. Changes nothing when it raises."""
        current_path = os.path.join(self.dbpath, CURRENT)
        for _ in range(_FOLLOW_ATTEMPTS):
            name = self._current_manifest()
            number = int(name[9:])
            fresh = number != self.manifest_number
            path = os.path.join(self.dbpath, name)
            try:
                edits, end = self._read_edits(path, 0 if fresh else self.manifest_read_end)
            except FileNotFoundError:
                if self._current_manifest() == name:
                    raise CorruptionError(f"CURRENT names {name}, which is missing", path=current_path,
                                          offset=0) from None
                continue  # a newer manifest replaced it meanwhile
            if fresh and not edits:
                raise CorruptionError("manifest holds no records", path=path, offset=0)
            self._apply_followed(edits, fresh, path)
            self.manifest_number = number
            self.manifest_read_end = end
            return bool(edits)
        raise LsmkvError(f"{self.dbpath}: the writer kept replacing its manifest while it was read; retry")

    def pending_edits(self) -> list[VersionEdit] | None:
        """Read-only handles: the edits recorded after those ``follow``
        applied, without applying them; None when CURRENT names another
        manifest than the one followed (or that one is gone)."""
        name = self._current_manifest()
        if int(name[9:]) != self.manifest_number:
            return None
        try:
            edits, _ = self._read_edits(os.path.join(self.dbpath, name), self.manifest_read_end)
        except FileNotFoundError:
            return None
        return edits

    def _read_edits(self, path: str, start: int) -> tuple[list[VersionEdit], int]:
        """The whole edits of the manifest at ``path`` from offset ``start``
        on, and the offset past the last of them."""
        origin = start - start % BLOCK_SIZE
        f = self.fs.open_readable(path)
        try:
            data = f.read_at(origin, max(0, f.size - origin))
        finally:
            f.close()
        if origin + len(data) < start:
            return [], start
        reader = LogReader(data, path, salvage=False, origin=origin, start=start, in_progress=True)
        edits = [VersionEdit.decode(payload, path, offset) for offset, payload in reader.records()]
        return edits, reader.end

    def _apply_followed(self, edits: list[VersionEdit], fresh: bool, path: str) -> None:
        """Apply ``edits`` (read by follow) to the current Version, or, when
        ``fresh`` (a new manifest, whose first edit holds the whole state),
        to an empty one; install the result and take in the counters."""
        known = {f.number: f for f in self.current.files()}
        version = _empty_version() if fresh else self.current
        for edit in edits:
            if edit.added:
                # A table moved to another level (or listed again by a new
                # manifest) is the same file: keep its FileMeta and reader.
                edit.added = [(level, known.setdefault(meta.number, meta)) for level, meta in edit.added]
            version = version.apply(edit, path)
        meta = {} if fresh else dict(self.meta)
        for edit in edits:
            meta.update(edit.meta)
            edit.meta = {}
            self._absorb_counters(edit)
        with self._lock:
            self.meta = meta
        self._install(version)

    def _absorb_counters(self, edit: VersionEdit) -> None:
        # Counters only move forward: numbers may have been handed out (by
        # new_file_number, without the manifest lock) after the edit was made.
        with self._lock:
            if edit.log_number is not None:
                self.log_number = max(self.log_number, edit.log_number)
            if edit.next_file_number is not None:
                self.next_file_number = max(self.next_file_number, edit.next_file_number)
            if edit.last_sequence is not None:
                self.last_sequence = max(self.last_sequence, edit.last_sequence)
        for level, key in edit.compact_pointers:
            self.compact_pointers[level] = key
        if edit.merge_operator is not None:
            self.merge_operator = edit.merge_operator
        if edit.meta:
            with self._lock:
                self.meta = {**self.meta, **edit.meta}  # replaced whole: readers hold the old dict

    # -- writing the manifest ---------------------------------------------

    def write_new_manifest(self, edit: VersionEdit | None = None) -> None:
        """Start a fresh MANIFEST holding the whole current state (with
        ``edit`` applied, if given) and point CURRENT at it (atomically); the
        old manifest becomes obsolete. The new state is installed only if
        this succeeds. A failure leaves CURRENT naming either manifest, both
        of which describe a valid state, and stops manifest appends until a
        later call succeeds."""
        version = self.current if edit is None else self.current.apply(edit, "new manifest")
        number = self.new_file_number()
        path = os.path.join(self.dbpath, manifest_name(number))
        snapshot = VersionEdit()
        snapshot.format_version = DB_FORMAT_VERSION
        for level, files in enumerate(version.levels):
            for f in files:
                snapshot.add_file(level, f)
        pointers = dict(self.compact_pointers)
        if edit is not None:
            pointers.update(edit.compact_pointers)
        for level, key in sorted(pointers.items()):
            snapshot.compact_pointers.append((level, key))
        snapshot.meta = {**self.meta, **(edit.meta if edit is not None else {})}
        snapshot.merge_operator = (edit.merge_operator if edit is not None and edit.merge_operator is not None
                                   else self.merge_operator)
        with self._lock:
            snapshot.log_number = max(self.log_number, edit.log_number or 0) if edit else self.log_number
            snapshot.next_file_number = self.next_file_number
            snapshot.last_sequence = (max(self.last_sequence, edit.last_sequence or 0) if edit
                                      else self.last_sequence)
        try:
            f = self.fs.create(path)
        except BaseException as exc:
            self._manifest_error = exc
            raise
        writer = LogWriter(f)
        try:
            self.manifest_bytes_written += writer.add_record(snapshot.encode())
            writer.sync()
            self.fs.sync_dir(self.dbpath)
            self.fs.write_file_atomically(os.path.join(self.dbpath, CURRENT),
                                          (manifest_name(number) + "\n").encode())
        except BaseException as exc:
            self._manifest_error = exc
            writer.close()
            raise
        self.manifest_bytes_written += len(manifest_name(number)) + 1
        if self._manifest is not None:
            self._manifest.close()
        self._manifest = writer
        self.manifest_number = number
        self._manifest_error = None
        if edit is not None:
            self._absorb_counters(edit)
            self._install(version)

    def log_and_apply(self, edit: VersionEdit, last_sequence: int | None = None) -> Version:
        """Record ``edit`` durably in the manifest, then make it current.

        The caller serializes calls (the DB holds its manifest lock). After a
        failed append or sync the manifest's tail is unknown, so nothing more
        is appended to it: every later call raises until write_new_manifest()
        succeeds (the DB's resume() does that)."""
        if self._manifest_error is not None:
            raise BackgroundError(f"{manifest_name(self.manifest_number)}: the manifest is not written to after "
                                  f"a failure ({self._manifest_error})") from self._manifest_error
        assert self._manifest is not None, "manifest not open"
        if self._manifest.file.size > MAX_MANIFEST_BYTES:
            self.write_new_manifest()
        with self._lock:
            if edit.next_file_number is None:
                edit.next_file_number = self.next_file_number
            if last_sequence is not None:
                edit.last_sequence = last_sequence
        version = self.current.apply(edit, manifest_name(self.manifest_number))
        try:
            self.manifest_bytes_written += self._manifest.add_record(edit.encode())
            self._manifest.sync()
        except BaseException as exc:
            self._manifest_error = exc
            raise
        self._absorb_counters(edit)
        self._install(version)
        return version

    def _install(self, version: Version) -> None:
        with self._lock:
            self.current = version
            self._live.add(version)

    @property
    def manifest_size(self) -> int:
        return self._manifest.file.size if self._manifest is not None else 0

    def close(self) -> None:
        if self._manifest is not None:
            self._manifest.close()
            self._manifest = None

    def abandon(self) -> None:
        """Release the manifest without further I/O (a simulated crash)."""
        if self._manifest is not None:
            self._manifest.abandon()
            self._manifest = None

