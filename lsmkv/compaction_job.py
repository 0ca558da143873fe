"""Running one compaction: merge input tables, write output tables.

``run_compaction(job)`` is a plain function of a picklable CompactionJob, so
it runs equally in the DB's compaction thread or in a worker process (where
it does not compete with the DB's writers for the GIL). It reads the input
tables, merges them, keeps per user key only the versions some reader can
see (retention.py), drops tombstones where nothing older can exist below the
output (the *bottommost* data for that key), and writes outputs under
temporary names, fsynced. It never touches the manifest: the DB renames the
outputs to their table numbers and records the change in one edit.

Merge order: sources are given newest first (each level-0 table is a
source; a deeper level's tables, concatenated, are one). For equal user keys
the merge yields entries in source order, which is newest-version-first,
because a newer source always holds the newer versions of a key.

Outputs are cut at user-key boundaries (so tables in a level never share a
key) when they reach ``target_file_size`` or when they would overlap more
than ``max_grandparent_overlap_bytes`` of the level below the output.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from heapq import merge
from itertools import chain
from operator import itemgetter

from .fs import DEFAULT_FS, FileSystem
from .retention import retained
from .table.builder import TableBuilder
from .table.reader import TableReader
from .write_batch import TOMBSTONE


@dataclass
class TableOptions:
    block_size: int
    compression: str | None
    compression_level: int
    bloom_bits_per_key: int


@dataclass
class CompactionJob:
    dbpath: str
    #: Unique among live processes: names the temporary output files.
    job_id: str
    #: Newest first; each source is a list of (path, number) read one after another.
    sources: list[list[tuple[str, int]]]
    output_level: int
    #: Live snapshot sequences, ascending.
    snapshots: list[int]
    #: For each level below the output level: (smallest, largest) of its tables, sorted.
    lower_ranges: list[list[tuple[bytes, bytes]]]
    #: (largest key, size) of each grandparent table, sorted.
    grandparents: list[tuple[bytes, int]]
    target_file_size: int
    max_grandparent_overlap_bytes: int
    table: TableOptions


@dataclass
class CompactionOutput:
    tmp_path: str
    size: int
    smallest: bytes
    largest: bytes
    smallest_seq: int
    largest_seq: int
    entries: int
    tombstones: int


@dataclass
class CompactionResult:
    outputs: list[CompactionOutput] = field(default_factory=list)
    entries_read: int = 0
    entries_written: int = 0
    #: Versions dropped because no reader can see them.
    versions_dropped: int = 0
    #: Tombstones dropped at the bottommost data.
    tombstones_dropped: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    seconds: float = 0.0


class _BottommostTest:
    """Whether nothing in the levels below the output can hold a key.
    Keys must be asked about in ascending order."""

    def __init__(self, lower_ranges: list[list[tuple[bytes, bytes]]]) -> None:
        self.levels = [ranges for ranges in lower_ranges if ranges]
        self.pointers = [0] * len(self.levels)

    def __call__(self, key: bytes) -> bool:
        for i, ranges in enumerate(self.levels):
            p = self.pointers[i]
            while p < len(ranges) and key > ranges[p][1]:
                p += 1
            self.pointers[i] = p
            if p < len(ranges) and key >= ranges[p][0]:
                return False
        return True


class _OutputWriter:
    """Writes the merged entries into output tables, cutting at key boundaries."""

    def __init__(self, job: CompactionJob, fs: FileSystem) -> None:
        self.job = job
        self.fs = fs
        self.outputs: list[CompactionOutput] = []
        self.builder: TableBuilder | None = None
        self.file = None
        self.path = ""
        self.grandparents = job.grandparents
        self.gp_index = 0
        self.gp_overlap = 0
        self.seen_key = False

    def start_key(self, key: bytes) -> None:
        """Called before the first entry of each user key: maybe cut here."""
        gps = self.grandparents
        while self.gp_index < len(gps) and key > gps[self.gp_index][0]:
            if self.seen_key:
                self.gp_overlap += gps[self.gp_index][1]
            self.gp_index += 1
        self.seen_key = True
        if self.builder is not None and (
                self.builder.file_size >= self.job.target_file_size
                or self.gp_overlap > self.job.max_grandparent_overlap_bytes):
            self.finish_file()
        if self.builder is None:
            self.gp_overlap = 0
            self._open()

    def _open(self) -> None:
        t = self.job.table
        self.path = os.path.join(self.job.dbpath,
                                 f"compaction-{self.job.job_id}-{len(self.outputs):04d}.sst.tmp")
        self.file = self.fs.create(self.path)
        self.builder = TableBuilder(self.file, block_size=t.block_size, compression=t.compression,
                                    compression_level=t.compression_level,
                                    bloom_bits_per_key=t.bloom_bits_per_key)

    def finish_file(self) -> None:
        builder, f = self.builder, self.file
        self.builder = self.file = None
        if builder.entries == 0:
            f.close()
            self.fs.remove(self.path)
            return
        props = builder.finish()
        f.sync()
        size = f.size
        f.close()
        self.outputs.append(CompactionOutput(self.path, size, props.smallest_key, props.largest_key,
                                             props.smallest_seq, props.largest_seq, props.entries,
                                             props.tombstones))

    def abort(self) -> None:
        paths = [o.tmp_path for o in self.outputs]
        if self.file is not None:
            self.file.close()
            paths.append(self.path)
        for path in paths:
            try:
                self.fs.remove(path)
            except OSError:
                pass


def _source_entries(fs: FileSystem, tables: list[tuple[str, int]], readers: list[TableReader]):
    for path, number in tables:
        reader = TableReader(fs, path, number, cache=None)
        readers.append(reader)
        yield from reader.entries()
        reader.close()


def run_compaction(job: CompactionJob, fs: FileSystem | None = None) -> CompactionResult:
    fs = fs or DEFAULT_FS
    started = time.perf_counter()
    result = CompactionResult()
    readers: list[TableReader] = []
    sources = [_source_entries(fs, tables, readers) for tables in job.sources]
    entries = sources[0] if len(sources) == 1 else merge(*sources, key=itemgetter(0))
    out = _OutputWriter(job, fs)
    bottommost = _BottommostTest(job.lower_ranges)
    snapshots = job.snapshots
    read = written = versions_dropped = tombstones_dropped = 0
    try:
        current = None
        group: list[tuple[int, int, bytes]] = []
        for key, seq_kind, value in chain(entries, ((None, 0, b""),)):
            if key == current:
                group.append((seq_kind >> 8, seq_kind & 0xFF, value))
                continue
            if current is not None:
                read += len(group)
                kept = retained(group, snapshots) if len(group) > 1 else group
                versions_dropped += len(group) - len(kept)
                if kept[-1][1] == TOMBSTONE and bottommost(current):
                    while kept and kept[-1][1] == TOMBSTONE:
                        kept = kept[:-1]
                        tombstones_dropped += 1
                if kept:
                    out.start_key(current)
                    add = out.builder.add
                    for seq, kind, val in kept:
                        add(current, seq, kind, val)
                    written += len(kept)
            if key is None:
                break
            current = key
            group = [(seq_kind >> 8, seq_kind & 0xFF, value)]
        if out.builder is not None:
            out.finish_file()
    except BaseException:
        out.abort()
        raise
    finally:
        for reader in readers:
            reader.close()
    result.outputs = out.outputs
    result.entries_read = read
    result.entries_written = written
    result.versions_dropped = versions_dropped
    result.tombstones_dropped = tombstones_dropped
    result.bytes_read = sum(reader.file_size for reader in readers)
    result.bytes_written = sum(o.size for o in out.outputs)
    result.seconds = time.perf_counter() - started
    return result
