"""Catching up with the writer: how a read-only handle follows the writes
another process makes to the database (``db.refresh()``; RocksDB's
TryCatchUpWithPrimary on a secondary instance).

A read-only handle builds its view from the files a writer leaves: the
manifest CURRENT names (which tables make up the database, and the number
of the oldest log not yet in a table), then every log from that number on.
:class:`CatchUp` does this at open and again at each ``refresh()``, reading
only what was appended since the last time:

1. the manifest's new edits (or, when CURRENT names a new manifest, that
   one whole): the Version and its log number (VersionSet.follow);
2. every table of that Version is opened now. An open file stays readable
   after the writer deletes it (a compaction replaced it), so the handle
   keeps the tables of every Version some snapshot, scan or cursor still
   uses open, and a view once built never loses a file;
3. each log numbered from the log number on, from where the last reading
   stopped, into a memtable of its own (one per log, so the memtables of
   logs the writer has since flushed are simply dropped). The newest log
   may be being appended to: it is read as in progress (wal.py), so damage
   that nothing intact follows is where the writer has got to, and reading
   stops there quietly; damage followed by an intact record is judged as
   the writer's recovery judges it (``wal_recovery_mode``), after one more
   read of the file (a record can be seen half-copied while the writer
   appends it, never once records after it are there);
4. the manifest is looked at again. The writer deletes a log only after it
   has recorded the flush of that log's memtable (the log number moved
   past it): if it recorded one since step 1, logs may have vanished before
   they were listed or read, so everything is done again from step 1 (only
   new bytes are read again). So it is when CURRENT names a new manifest,
   when an ingest was recorded whose sequence number is not above the
   writes read in step 3 (they came after it), and when a table or log
   vanished between the steps.

The result is a prefix of the writer's history: the manifest's tables plus
every log record up to where each log was read. Every write the writer had
acknowledged when the catch-up began is in it, synced or not: the writer
hands a write to the OS (an append to a shared memory mapping or a
``write``) before acknowledging it, and another process reads the same page
cache. The caller publishes the result as one read state (db.py).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from lsmkv.base.errors import CorruptionError, LsmkvError
from lsmkv.base.filenames import log_name, parse, table_name
from lsmkv.base.fs import FileSystem

from .memtable import MemTable
from .table_cache import TableCache
from .version import Version, VersionEdit, VersionSet
from .wal import BLOCK_SIZE, LogReader
from .write_batch import MERGE, META, RANGE_DELETE, log_batches

log = logging.getLogger(__name__)

#: Rounds of steps 1-4 before giving up (the writer flushed, or replaced
#: files, during every one of them).
MAX_ROUNDS = 100
#: A log being written is read this much at a time, and no further once a
#: whole block of zeros ends a read (its preallocated, unwritten space).
_READ_CHUNK = 8 * BLOCK_SIZE
_ZERO_BLOCK = bytes(BLOCK_SIZE)


@dataclass
class CaughtUp:
    """What a catch-up found: the view to publish."""

    version: Version
    #: One memtable per log not yet in a table, newest first (never empty:
    #: an empty memtable stands in when there is no such log).
    memtables: tuple[MemTable, ...]
    #: The sequence number of the last write in the view.
    last_sequence: int
    #: The metadata entries the manifest records (name -> value), as of the Version.
    meta: dict[bytes, bytes]


@dataclass
class _LogTail:
    """A log as far as it has been read."""

    number: int
    mem: MemTable
    #: The file offset where reading goes on.
    end: int = 0
    #: The largest sequence number read from it.
    max_seq: int = 0
    #: Metadata entries read but not yet published: they go into the
    #: memtable's ``meta``, which readers see without a sequence, only
    #: when the catch-up succeeds.
    pending_meta: dict[bytes, bytes] = field(default_factory=dict)


@dataclass
class ReplayReport:
    """What reading the logs found (``stats()["recovery"]``): the logs the
    view holds records of (numbered from the manifest's log number on),
    and counts and damage over every catch-up so far."""

    logs: list[int] = field(default_factory=list)
    batches: int = 0
    torn_tail_bytes: int = 0
    dropped: list[tuple[str, int, int, str]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"logs": list(self.logs), "batches": self.batches, "torn_tail_bytes": self.torn_tail_bytes,
                "dropped": list(self.dropped)}


class CatchUp:
    """Follows the manifest and logs of the database at ``path`` for a
    read-only handle. Not thread-safe: the DB runs one catch-up at a time."""

    def __init__(self, path: str, fs: FileSystem, versions: VersionSet, tables: TableCache,
                 salvage: bool) -> None:
        self._path = path
        self._fs = fs
        self._versions = versions
        self._tables = tables
        self._salvage = salvage
        #: Logs from the log number on, by number.
        self._logs: dict[int, _LogTail] = {}
        self.report = ReplayReport()

    def run(self) -> CaughtUp:
        """Steps 1-4 of the module docstring, again until a round finds the
        manifest unchanged in what matters. Raises CorruptionError for
        damage (naming the file), LsmkvError if the writer kept the files
        moving for MAX_ROUNDS rounds."""
        versions = self._versions
        for attempt in range(MAX_ROUNDS):
            if attempt >= 3:
                time.sleep(min(0.001 * attempt, 0.02))  # let a writer busy flushing get ahead
            versions.follow()
            version = versions.current
            log_number = versions.log_number
            if not self._open_tables(version):
                continue
            tails = self._read_logs(log_number)
            if tails is None:
                continue
            last_seq = max([versions.last_sequence] + [t.max_seq for t in tails])
            if self._manifest_moved(log_number, last_seq):
                continue
            for number in [n for n in self._logs if n < log_number]:
                del self._logs[number]  # in a table of this version now
            for tail in tails:
                if tail.pending_meta:
                    tail.mem.meta.update(tail.pending_meta)
                    tail.pending_meta.clear()
            self.report.logs = [t.number for t in tails]
            mems = tuple(t.mem for t in reversed(tails)) or (MemTable(log_number),)
            return CaughtUp(version, mems, last_seq, versions.meta)
        raise LsmkvError(f"{self._path}: could not catch up with the writer, which kept flushing or replacing "
                         f"files during {MAX_ROUNDS} attempts; retry")

    # -- step 2 -----------------------------------------------------------------

    def _open_tables(self, version: Version) -> bool:
        """Open every table of ``version``; False if one is gone because the
        writer recorded newer edits (a round to do again)."""
        for level, files in enumerate(version.levels):
            for meta in files:
                if meta.reader is not None:
                    continue
                try:
                    self._tables.reader(meta)
                except FileNotFoundError:
                    if self._versions.pending_edits() != []:
                        return False  # compacted away and deleted since the manifest was read
                    raise CorruptionError(
                        f"table {table_name(meta.number)} (level {level}) recorded in the manifest is missing; "
                        "`lsmkv check` reports the damage",
                        path=os.path.join(self._path, table_name(meta.number))) from None
        return True

    # -- step 3 -----------------------------------------------------------------

    def _read_logs(self, log_number: int) -> list[_LogTail] | None:
        """Read what was appended to each log numbered >= ``log_number``;
        the tails oldest first, or None if one vanished meanwhile. A log
        read before that is no longer listed keeps what was read of it
        (only damage removes a log the manifest does not cover)."""
        listed = set()
        for name in self._fs.listdir(self._path):
            parsed = parse(name)
            if parsed is not None and parsed[0] == "log" and parsed[1] >= log_number:
                listed.add(parsed[1])
        newest = max(listed, default=None)
        tails = []
        for number in sorted(listed.union(n for n in self._logs if n >= log_number)):
            tail = self._logs.get(number)
            if tail is None:
                tail = self._logs[number] = _LogTail(number, MemTable(number))
            if number in listed:
                try:
                    self._read_log(tail, in_progress=number == newest)
                except FileNotFoundError:
                    return None
            tails.append(tail)
        return tails

    def _read_log(self, tail: _LogTail, in_progress: bool) -> None:
        path = os.path.join(self._path, log_name(tail.number))
        parsed = self._parse_log(path, tail.end, in_progress)
        if parsed is None:
            return  # shorter than what was read of it: nothing new
        batches, reader, torn = parsed
        add = tail.mem.add
        for seq, ops in batches:
            for kind, key, value in ops:  # MemTable.add_batch, with the metadata held back
                if kind == META:
                    tail.pending_meta[key] = value
                elif kind == RANGE_DELETE:
                    tail.mem.add_range_delete(seq, key, value)
                else:
                    add(seq, kind, key, value)
                seq += 1
            tail.max_seq = max(tail.max_seq, seq - 1)
        tail.end = reader.end
        report = self.report
        report.batches += len(batches)
        report.torn_tail_bytes += torn
        report.dropped.extend((path, off, n, why) for off, n, why in reader.report.dropped)
        if torn:
            log.info("%s: dropped a torn tail of %d bytes (never acknowledged as synced)", path, torn)
        for off, n, why in reader.report.dropped:
            log.warning("%s: salvage skipped %d damaged bytes at offset %d (%s)", path, n, off, why)

    def _parse_log(self, path: str, start: int, in_progress: bool) -> tuple[list, LogReader, int] | None:
        """The batches of the log at ``path`` from ``start`` on, the reader
        that read them, and the bytes of a torn record it dropped at the
        end (a log the writer has just left for a new one still shows its
        unwritten space, zeros, until the writer trims it: not counted).
        Damage in a log being written is read a second time before it
        counts (see the module docstring). None if the file ends before
        ``start``."""
        for attempt in (1, 2):
            data, origin = _read_from(self._fs, path, start, in_progress)
            if origin + len(data) < start:
                return None
            reader = LogReader(data, path, salvage=self._salvage, origin=origin, start=start,
                               in_progress=in_progress)
            try:
                batches = [(seq, ops) for seq, ops in log_batches(reader) if ops]
            except CorruptionError:
                if in_progress and attempt == 1:
                    continue
                raise
            if in_progress and attempt == 1 and reader.report.dropped:
                continue
            torn = len(data[reader.end - origin:].rstrip(b"\0")) if reader.report.torn_tail_bytes else 0
            return batches, reader, torn
        raise AssertionError("unreachable")

    # -- step 4 -----------------------------------------------------------------

    def _manifest_moved(self, log_number: int, last_seq: int) -> bool:
        """Whether the writer recorded, since the manifest was read, what
        makes the logs just read an unsound complement of its Version."""
        pending = self._versions.pending_edits()
        if pending is None:
            return True
        return any(_moves_view(edit, log_number, last_seq) for edit in pending)


def _moves_view(edit: VersionEdit, log_number: int, last_seq: int) -> bool:
    """A flush recorded (the log number moved: logs below it may be gone),
    or an ingest older than writes already read."""
    if edit.log_number is not None and edit.log_number > log_number:
        return True
    return any(0 < meta.global_seq <= last_seq for _, meta in edit.added)


def _read_from(fs: FileSystem, path: str, start: int, in_progress: bool) -> tuple[bytes, int]:
    """The file's bytes from the block holding ``start`` on, and that
    block's offset. A log being written is read a chunk at a time up to a
    chunk that ends in a block of zeros (its unwritten space)."""
    origin = start - start % BLOCK_SIZE
    f = fs.open_readable(path)
    try:
        size = f.size
        if not in_progress:
            return f.read_at(origin, max(0, size - origin)), origin
        parts = []
        offset = origin
        while offset < size:
            chunk = f.read_at(offset, min(_READ_CHUNK, size - offset))
            if not chunk:
                break
            parts.append(chunk)
            offset += len(chunk)
            if chunk.endswith(_ZERO_BLOCK) and len(chunk) % BLOCK_SIZE == 0:
                break
        return b"".join(parts), origin
    finally:
        f.close()


def merged_memtable(mems: tuple[MemTable, ...], seq: int) -> MemTable:
    """One memtable holding, for each key of ``mems`` (newest first), its
    newest version at read sequence ``seq`` (below a merge operand, the
    older versions down to the first that is not one), and their metadata
    entries (newer ones win): what a read-only handle's checkpoint writes
    as one table."""
    out = MemTable()
    for i, mem in enumerate(mems):
        for key in list(mem._latest):
            if out.newest(key) is not None:
                continue  # a newer memtable holds it
            chain = []
            for older in mems[i:]:
                version = older.get(key, seq)
                while version is not None:
                    chain.append(version)
                    if version[1] != MERGE:
                        break
                    version = version[3]
                if chain and chain[-1][1] != MERGE:
                    break
            for version in reversed(chain):  # oldest first, as they were written
                out.add(version[0], version[1], key, version[2])
    for mem in reversed(mems):
        out.meta.update(mem.meta)
        if mem.range_dels is not None:
            for start, end, tomb_seq in mem.range_dels.tombstones():
                if tomb_seq <= seq:
                    out.add_range_delete(tomb_seq, start, end)
    return out
