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
import pickle
import struct
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from itertools import accumulate, chain, compress, repeat
from operator import add, and_, not_
from typing import BinaryIO

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


class _Source:
    """One merge source (tables read one after another), taken a key range at a time."""

    def __init__(self, readers: list[TableReader]) -> None:
        self.readers = readers
        self.table = 0
        self.block = 0
        self.keys: list[bytes] = []
        self.seq_kinds: list[int] = []
        self.values: list[bytes] = []

    def _load_block(self) -> bool:
        while self.table < len(self.readers):
            reader = self.readers[self.table]
            if self.block < reader.num_blocks:
                block = reader.block(self.block)
                self.block += 1
                self.keys += block.keys
                self.seq_kinds += block.seq_kinds
                self.values += block.values
                return True
            self.table += 1
            self.block = 0
        return False

    def take_below(self, hi: bytes | None) -> tuple[list[bytes], list[int], list[bytes]]:
        """Every remaining entry with key < hi (all of them when hi is None)."""
        while not self.keys or hi is None or self.keys[-1] < hi:
            if not self._load_block():
                break
        cut = len(self.keys) if hi is None else bisect_left(self.keys, hi)
        taken = self.keys[:cut], self.seq_kinds[:cut], self.values[:cut]
        del self.keys[:cut], self.seq_kinds[:cut], self.values[:cut]
        return taken


def _chunk_bounds(readers: list[TableReader], blocks_per_chunk: int) -> list[bytes]:
    """Keys that split the merge into ranges of about ``blocks_per_chunk``
    input blocks, so memory stays bounded whatever the compaction's size."""
    ends = sorted(set(chain.from_iterable(r.index_keys for r in readers)))
    return ends[blocks_per_chunk::blocks_per_chunk]


def _merge(parts: list[tuple[list[bytes], list[int], list[bytes]]]):
    """One run in internal order from runs given newest source first.

    A stable sort by user key keeps, for equal keys, the order of the
    concatenation: newer sources first, and within a source newer first."""
    parts = [p for p in parts if p[0]]
    if len(parts) <= 1:
        return parts[0] if parts else ([], [], [])
    keys = list(chain.from_iterable(p[0] for p in parts))
    seq_kinds = list(chain.from_iterable(p[1] for p in parts))
    values = list(chain.from_iterable(p[2] for p in parts))
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return [keys[i] for i in order], [seq_kinds[i] for i in order], [values[i] for i in order]


def _resolve(keys, seq_kinds, values, snapshots: list[int], bottommost: _BottommostTest, result: CompactionResult):
    """Drop the versions no reader can see and the tombstones nothing older
    lies under. Only keys with several versions or a tombstone are looked at
    one by one; the rest pass through untouched."""
    n = len(keys)
    same_as_previous = list(compress(range(1, n), map(bytes.__eq__, keys[1:], keys[:-1])))
    tombstones = list(compress(range(n), map(not_, map(and_, seq_kinds, repeat(0xFF)))))
    if not same_as_previous and not tombstones:
        return keys, seq_kinds, values
    candidates = sorted(set(same_as_previous) | set(tombstones))
    drop: list[int] = []
    done_until = 0
    for i in candidates:
        if i < done_until:
            continue
        start = i
        while start > 0 and keys[start - 1] == keys[i]:
            start -= 1
        end = i + 1
        while end < n and keys[end] == keys[i]:
            end += 1
        done_until = end
        group = [(seq_kinds[x] >> 8, seq_kinds[x] & 0xFF, x) for x in range(start, end)]
        kept = retained(group, snapshots) if len(group) > 1 else group
        result.versions_dropped += len(group) - len(kept)
        if kept[-1][1] == TOMBSTONE and bottommost(keys[start]):
            while kept and kept[-1][1] == TOMBSTONE:
                kept = kept[:-1]
                result.tombstones_dropped += 1
        if len(kept) < len(group):
            keep = {x for _, _, x in kept}
            drop.extend(x for x in range(start, end) if x not in keep)
    if not drop:
        return keys, seq_kinds, values
    mask = [True] * n
    for x in drop:
        mask[x] = False
    return list(compress(keys, mask)), list(compress(seq_kinds, mask)), list(compress(values, mask))


def _zero_sequences(keys: list[bytes], seq_kinds: list[int], snapshots: list[int]) -> list[int]:
    """At the bottom of the tree, a key's last version that every reader can
    see gets sequence 0 (as RocksDB does): nothing older exists to order it
    against, and a column of zeros compresses to nearly nothing."""
    if not snapshots:
        # Retention left one version per key: every one of them qualifies.
        return list(map(and_, seq_kinds, repeat(0xFF)))
    limit = snapshots[0]
    last_of_key = [*map(bytes.__ne__, keys[:-1], keys[1:]), True]
    return [sk & 0xFF if last and sk >> 8 <= limit else sk for sk, last in zip(seq_kinds, last_of_key)]


class _OutputWriter:
    """Writes merged runs into output tables, cut at user-key boundaries when
    a table reaches target_file_size or overlaps too many grandparent bytes."""

    def __init__(self, job: CompactionJob, fs: FileSystem) -> None:
        self.job = job
        self.fs = fs
        self.outputs: list[CompactionOutput] = []
        self.builder: TableBuilder | None = None
        self.file = None
        self.path = ""
        self.gp_index = 0
        self.gp_overlap = 0
        self.has_keys = False  # whether the current output holds any key yet

    def add(self, keys: list[bytes], seq_kinds: list[int], values: list[bytes]) -> None:
        while keys:
            if self.builder is None:
                self._open()
            cut = min(self._size_cut(keys, values), self._grandparent_cut(keys))
            if cut:
                self.builder.add_sorted(keys[:cut], seq_kinds[:cut], values[:cut])
                self.has_keys = True
            if cut < len(keys):
                self.finish_file()
            keys, seq_kinds, values = keys[cut:], seq_kinds[cut:], values[cut:]

    def _size_cut(self, keys: list[bytes], values: list[bytes]) -> int:
        """Index before which the output stays under target_file_size."""
        builder = self.builder
        written_raw = builder.props.raw_key_bytes + builder.props.raw_value_bytes
        # Estimate the stored size of raw bytes from what this output has written so far.
        ratio = builder.file_size / written_raw if written_raw > 4 * self.job.table.block_size else 1.0
        budget = (self.job.target_file_size - builder.file_size) / max(ratio, 0.05)
        if budget <= 0:
            return self._key_boundary(keys, 0) if not self.has_keys else 0
        cum = list(accumulate(map(add, map(len, keys), map(len, values))))
        j = bisect_left(cum, budget)
        if j >= len(keys):
            return len(keys)
        return self._key_boundary(keys, j)

    @staticmethod
    def _key_boundary(keys: list[bytes], j: int) -> int:
        """The end of the versions of keys[j]: outputs never split a key."""
        n = len(keys)
        end = j + 1
        while end < n and keys[end] == keys[j]:
            end += 1
        return end

    def _grandparent_cut(self, keys: list[bytes]) -> int:
        gps = self.job.grandparents
        limit = self.job.max_grandparent_overlap_bytes
        while self.gp_index < len(gps):
            largest, size = gps[self.gp_index]
            position = bisect_right(keys, largest)
            if position >= len(keys):
                return len(keys)  # this grandparent continues past the run
            self.gp_index += 1
            if position > 0 or self.has_keys:
                self.gp_overlap += size
                if self.gp_overlap > limit and (position > 0 or self.has_keys):
                    self.gp_overlap = 0
                    return position
        return len(keys)

    def _open(self) -> None:
        t = self.job.table
        self.path = os.path.join(self.job.dbpath,
                                 f"compaction-{self.job.job_id}-{len(self.outputs):04d}.sst.tmp")
        self.file = self.fs.create(self.path)
        self.builder = TableBuilder(self.file, block_size=t.block_size, compression=t.compression,
                                    compression_level=t.compression_level,
                                    bloom_bits_per_key=t.bloom_bits_per_key)
        self.has_keys = False

    def finish_file(self) -> None:
        builder, f = self.builder, self.file
        self.builder = self.file = None
        if builder is None:
            return
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


#: Input blocks merged per step (bounds the memory of a compaction).
BLOCKS_PER_CHUNK = 256


def run_compaction(job: CompactionJob, fs: FileSystem | None = None) -> CompactionResult:
    fs = fs or DEFAULT_FS
    started = time.perf_counter()
    result = CompactionResult()
    readers: list[TableReader] = []
    out = _OutputWriter(job, fs)
    try:
        sources = []
        for tables in job.sources:
            source_readers = [TableReader(fs, path, number, cache=None) for path, number in tables]
            readers.extend(source_readers)
            sources.append(_Source(source_readers))
        bottommost = _BottommostTest(job.lower_ranges)
        at_bottom = not any(job.lower_ranges)
        for hi in [*_chunk_bounds(readers, BLOCKS_PER_CHUNK), None]:
            keys, seq_kinds, values = _merge([source.take_below(hi) for source in sources])
            result.entries_read += len(keys)
            if keys:
                keys, seq_kinds, values = _resolve(keys, seq_kinds, values, job.snapshots, bottommost, result)
                if at_bottom and keys:
                    seq_kinds = _zero_sequences(keys, seq_kinds, job.snapshots)
                result.entries_written += len(keys)
                out.add(keys, seq_kinds, values)
        out.finish_file()
    except BaseException:
        out.abort()
        raise
    finally:
        for reader in readers:
            reader.close()
    result.outputs = out.outputs
    result.bytes_read = sum(reader.file_size for reader in readers)
    result.bytes_written = sum(o.size for o in out.outputs)
    result.seconds = time.perf_counter() - started
    return result


# -- talking to a worker process -------------------------------------------
# Each message is a 4-byte big-endian length followed by a pickle.

_LENGTH = struct.Struct(">I")


def send_message(stream: BinaryIO, obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def receive_message(stream: BinaryIO) -> object | None:
    """The next message, or None at end of stream."""
    header = stream.read(4)
    if len(header) < 4:
        return None
    (n,) = _LENGTH.unpack(header)
    data = stream.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)
