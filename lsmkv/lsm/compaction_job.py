"""Running one compaction: merge input tables, write output tables.

``run_compaction(job)`` is a plain function of a picklable CompactionJob, so
it runs equally in the DB's compaction thread or in a worker process (where
it does not compete with the DB's writers for the GIL). It reads the input
tables, merges them, keeps per user key only the versions some reader can
see (retention.py), drops tombstones where nothing older can exist below the
output (the *bottommost* data for that key), and writes outputs under
temporary names, fsynced. A value whose ttl has expired by the job's
``now_ms`` becomes a tombstone first (and then goes as tombstones go). It
never touches the manifest: the DB renames the
outputs to their table numbers and records the change in one edit.

Merge operands (kind 4) are folded where a key's operands meet their base
within one snapshot stripe of the inputs -- a value, a tombstone or, at the
bottommost data, nothing -- into one value with the newest operand's
sequence (:func:`_fold_merges`); elsewhere they are kept as they are, as
they are when the operator raises or the job has none (its operator could
not be pickled to the worker, or unpickled there). A value with a ttl still
live is not folded onto: the fold would outlive its deadline. Keys without
operands never reach this code.

Merge order: sources are given newest first (each level-0 table is a
source; a deeper level's tables, concatenated, are one). For equal user keys
the merge yields entries in source order, which is newest-version-first,
because a newer source always holds the newer versions of a key.

Outputs are cut at user-key boundaries (so tables in a level never share a
key) when they reach ``target_file_size``, when they would overlap more
than ``max_grandparent_overlap_bytes`` of the level below the output, or,
past half the target size, where a table of that level ends.

Range tombstones (range_tombstones.py) of the inputs are fragmented
together: a version they cover that no live snapshot can see is dropped
(range_del_compaction.py), and the fragments go into the outputs, each
output carrying the part of them its key range owns. Where nothing lies
below them and no snapshot is older, they are dropped too. Outputs are
compressed at ``compression_level`` when nothing lies below the output
(the bottom of the tree, where data stays), else at the faster
``upper_compression_level`` (that data is merged again soon).
"""

from __future__ import annotations

import os
import pickle
import struct
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import chain
from typing import BinaryIO, Callable

import numpy as np

from lsmkv.base.errors import MergeError
from lsmkv.base.fs import DEFAULT_FS, FileSystem
from lsmkv.base.merge_operators import fold

from .range_del_compaction import drop_covered, output_range_dels, surviving_range_dels
from .range_tombstones import FragmentedTombstones
from .retention import retained
from .table.builder import TableBuilder
from .table.columns import Columns
from .table.reader import TableReader
from .ttl_value import DEADLINE_SIZE
from .write_batch import MERGE, TOMBSTONE, VALUE, VALUE_TTL


@dataclass
class TableOptions:
    block_size: int
    compression: str | None
    #: zstandard level of outputs with no data below them (the bottom of the tree).
    compression_level: int
    #: zstandard level of outputs with data below them (merged again soon).
    upper_compression_level: int
    bloom_bits_per_key: int


@dataclass
class CompactionJob:
    dbpath: str
    #: Unique among live processes: names the temporary output files.
    job_id: str
    #: Newest first; each source is a list of (path, number) read one after another.
    #: Per source, its tables as (path, number, global_seq); global_seq is
    #: the sequence an ingested table's entries read as (0: their own).
    sources: list[list[tuple[str, int, int]]]
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
    #: Wall-clock time of the job, in ms since the epoch: values with a ttl
    #: whose deadline is at or before it become tombstones (0: none do).
    now_ms: int = 0
    #: The database's merge operator, or its pickle (for a worker process),
    #: or None: merge operands are then kept as they are.
    merge_operator: Callable | bytes | None = None


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
    ttl_entries: int = 0
    earliest_deadline: int = 0
    range_tombstones: int = 0


@dataclass
class CompactionResult:
    outputs: list[CompactionOutput] = field(default_factory=list)
    entries_read: int = 0
    entries_written: int = 0
    #: Versions dropped because no reader can see them.
    versions_dropped: int = 0
    #: Tombstones dropped at the bottommost data.
    tombstones_dropped: int = 0
    #: Values with a ttl found expired (turned into tombstones).
    ttl_expired: int = 0
    #: Versions dropped because a range tombstone covers them for every reader.
    range_covered_dropped: int = 0
    #: Range tombstone records dropped where nothing lies below them.
    range_tombstones_dropped: int = 0
    #: Merge operands folded into values.
    merges_folded: int = 0
    #: Keys whose operands the merge operator failed on (kept unfolded).
    merge_failures: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    seconds: float = 0.0
    #: CPU time of the thread that ran the merge (the worker's, in a worker process).
    cpu_seconds: float = 0.0


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
        self.pending = Columns.empty()
        #: Last key of the last block read (None before any).
        self.read_up_to: bytes | None = None

    def take_below(self, hi: bytes | None) -> list[Columns]:
        """Every remaining entry with key < hi (all of them when hi is None),
        as runs in key order."""
        parts = [self.pending]
        while hi is None or self.read_up_to is None or self.read_up_to < hi:
            if self.table >= len(self.readers):
                break
            reader = self.readers[self.table]
            if self.block >= reader.num_blocks:
                self.table += 1
                self.block = 0
                continue
            # Every block of this table up to the first whose last key reaches hi.
            first = self.block
            last = reader.num_blocks if hi is None else min(bisect_left(reader.index_keys, hi, lo=first) + 1,
                                                            reader.num_blocks)
            raws = reader.raw_blocks(first, last)
            parts.append(Columns.from_blocks(raws, reader.path, reader.index_offsets[first:last], reader.codec))
            self.block = last
            self.read_up_to = reader.index_keys[last - 1]
        # Blocks are read only while the last one read ends below hi, so only
        # the last run can hold keys >= hi.
        run = parts.pop()
        cut = len(run) if hi is None else run.bisect_left(hi)
        self.pending = run.slice(cut, len(run)).compacted() if cut < len(run) else Columns.empty()
        parts.append(run.slice(0, cut))
        return [part for part in parts if len(part)]


def _chunk_bounds(readers: list[TableReader], blocks_per_chunk: int) -> list[bytes]:
    """Keys that split the merge into ranges of about ``blocks_per_chunk``
    input blocks, so memory stays bounded whatever the compaction's size."""
    ends = sorted(set(chain.from_iterable(r.index_keys for r in readers)))
    return ends[blocks_per_chunk::blocks_per_chunk]


def _merge(sources: list[list[Columns]]) -> Columns:
    """One run in internal order from each source's runs, sources given
    newest first.

    A stable sort by user key keeps, for equal keys, the order of the
    concatenation: newer sources first, and within a source newer first."""
    sources = [runs for runs in sources if runs]
    run = Columns.concat([part for runs in sources for part in runs])
    if len(sources) <= 1:
        return run  # one source's runs follow each other in key order
    return run.take(run.stable_order())


def _expire(run: Columns, now_ms: int, result: CompactionResult) -> Columns:
    """Turn every value with a ttl whose deadline is at or before ``now_ms``
    into a tombstone of the same sequence: no reader can see it any more,
    and it must still hide the older versions of its key until those are
    gone (then _resolve drops it, as any tombstone)."""
    if not now_ms or not len(run):
        return run
    ttl = np.flatnonzero(((run.seq_kinds & np.uint64(0xFF)) == VALUE_TTL) & (run.vlen >= DEADLINE_SIZE))
    if not len(ttl):
        return run
    buf = np.frombuffer(run.data, dtype=np.uint8)
    deadlines = buf[run.voff[ttl][:, None] + np.arange(DEADLINE_SIZE)].copy().view("<u8").ravel()
    expired = ttl[deadlines <= np.uint64(now_ms)]
    if not len(expired):
        return run
    result.ttl_expired += len(expired)
    seq_kinds = run.seq_kinds.copy()
    seq_kinds[expired] &= ~np.uint64(0xFF)
    vlen = run.vlen.copy()
    vlen[expired] = 0
    return Columns(run.data, run.koff, run.klen, run.voff, vlen, seq_kinds, run._padded)


def _resolve(run: Columns, snapshots: list[int], bottommost: _BottommostTest,
             result: CompactionResult, operator: Callable | None = None) -> tuple[Columns, np.ndarray]:
    """Drop the versions no reader can see and the tombstones nothing older
    lies under; fold merge operands where they meet their base
    (_fold_merges). Only keys with several versions, a tombstone or an
    operand are looked at one by one; the rest pass through in bulk.
    Returns the kept run and its same-key-as-previous flags."""
    n = len(run)
    same = run.same_as_previous()
    kinds = run.seq_kinds & np.uint64(0xFF)
    tombstone = kinds == 0
    merge = kinds == MERGE
    has_merges = bool(merge.any())
    interesting = np.flatnonzero(same | tombstone | merge) if has_merges else np.flatnonzero(same | tombstone)
    if not len(interesting):
        return run, same
    group_starts = np.flatnonzero(~same)
    group_of = np.cumsum(~same) - 1
    keep = np.ones(n, dtype=bool)
    seq_kinds = run.seq_kinds
    #: index in run -> the value a merge fold put there.
    folded: dict[int, bytes] = {}
    for g in np.unique(group_of[interesting]).tolist():
        start = int(group_starts[g])
        end = int(group_starts[g + 1]) if g + 1 < len(group_starts) else n
        group = [(sk >> 8, sk & 0xFF, start + x) for x, sk in enumerate(seq_kinds[start:end].tolist())]
        kept = retained(group, snapshots) if len(group) > 1 else group
        result.versions_dropped += len(group) - len(kept)
        at_bottom = None
        if has_merges and any(version[1] == MERGE for version in kept):
            at_bottom = bottommost(run.key(start))
            kept = _fold_merges(run, kept, snapshots, at_bottom, operator, folded, result)
        if kept[-1][1] == TOMBSTONE and (bottommost(run.key(start)) if at_bottom is None else at_bottom):
            while kept and kept[-1][1] == TOMBSTONE:
                kept = kept[:-1]
                result.tombstones_dropped += 1
        if len(kept) < len(group):
            keep[start:end] = False
            for _, _, x in kept:
                keep[x] = True
    if folded:
        run = _with_values(run, folded)
    if keep.all():
        return run, same
    groups = group_of[keep]
    return run.take(keep), np.concatenate(([False], groups[1:] == groups[:-1]))


def _value(run: Columns, i: int) -> bytes:
    o = int(run.voff[i])
    return run.data[o: o + int(run.vlen[i])]


def _fold_merges(run: Columns, kept: list[tuple[int, int, int]], snapshots: list[int], at_bottom: bool,
                 operator: Callable | None, folded: dict[int, bytes],
                 result: CompactionResult) -> list[tuple[int, int, int]]:
    """The versions ``kept`` (newest first, (seq, kind, index in run)) of one
    key with each snapshot stripe's leading merge operands folded onto the
    version below them in the stripe (retained() kept it): a value, or a
    tombstone (folded onto None); or onto None when the operands are the
    key's oldest versions and the output is the bottommost data. The fold
    takes the newest operand's place as a VALUE (its new value recorded in
    ``folded``). Operands whose base is elsewhere, a value with a ttl still
    live, or an operator that raises (or is missing) leave them as they are."""
    if operator is None:
        return kept
    out: list[tuple[int, int, int]] = []
    i = 0
    n = len(kept)
    while i < n:
        seq, kind, x = kept[i]
        if kind != MERGE:
            out.append(kept[i])
            i += 1
            continue
        stripe = bisect_left(snapshots, seq)
        j = i
        while j < n and kept[j][1] == MERGE and bisect_left(snapshots, kept[j][0]) == stripe:
            j += 1
        # kept[i:j]: the stripe's leading operands, newest first.
        base_in_stripe = j < n and bisect_left(snapshots, kept[j][0]) == stripe
        if base_in_stripe:
            base_kind = kept[j][1]
            if base_kind == VALUE:
                base = _value(run, kept[j][2])
            elif base_kind == TOMBSTONE:
                base = None
            else:  # a value with a ttl still live (expired ones are tombstones by now)
                out.extend(kept[i:j + 1])
                i = j + 1
                continue
            consumed = j + 1
        elif j == n and at_bottom:
            base = None
            consumed = j
        else:
            out.extend(kept[i:j])
            i = j
            continue
        operands = [_value(run, kept[k][2]) for k in range(j - 1, i - 1, -1)]
        try:
            value = fold(operator, run.key(x), base, operands)
        except MergeError:
            result.merge_failures += 1
            out.extend(kept[i:consumed])
            i = consumed
            continue
        folded[x] = value
        result.merges_folded += j - i
        out.append((seq, VALUE, x))
        i = consumed
    return out


def _with_values(run: Columns, folded: dict[int, bytes]) -> Columns:
    """``run`` with the entries at the indexes of ``folded`` turned into
    values holding the folded bytes (appended to a copy of its buffer)."""
    index = np.fromiter(folded, dtype=np.int64, count=len(folded))
    values = list(folded.values())
    lengths = np.array([len(v) for v in values], dtype=np.int64)
    voff = run.voff.copy()
    vlen = run.vlen.copy()
    seq_kinds = run.seq_kinds.copy()
    voff[index] = len(run.data) + np.cumsum(lengths) - lengths
    vlen[index] = lengths
    seq_kinds[index] = (seq_kinds[index] & ~np.uint64(0xFF)) | np.uint64(VALUE)
    return Columns(run.data + b"".join(values), run.koff, run.klen, voff, vlen, seq_kinds, run._padded)


def _zero_sequences(run: Columns, same: np.ndarray, snapshots: list[int]) -> Columns:
    """At the bottom of the tree, a key's last version that every reader can
    see gets sequence 0 (as RocksDB does): nothing older exists to order it
    against, and a column of zeros compresses to nearly nothing."""
    seq_kinds = run.seq_kinds
    if not snapshots and not same.any():
        # Retention left one version per key: every one of them qualifies.
        zeroed = seq_kinds & np.uint64(0xFF)
    else:
        # (Without snapshots, a key keeps several versions only where merge
        # operands could not be folded.)
        last_of_key = np.ones(len(run), dtype=bool)
        last_of_key[:-1] = ~same[1:]
        if snapshots:
            visible_to_all = (seq_kinds >> np.uint64(8)) <= np.uint64(snapshots[0])
            last_of_key &= visible_to_all
        zeroed = np.where(last_of_key, seq_kinds & np.uint64(0xFF), seq_kinds)
    return run.with_seq_kinds(zeroed)


class _OutputWriter:
    """Writes merged runs into output tables, cut at user-key boundaries when
    a table reaches target_file_size, when it would overlap more than
    max_grandparent_overlap_bytes of the level below the output, or, once it
    holds half the target size or more, where a table of that level ends
    (see _grandparent_cut)."""

    def __init__(self, job: CompactionJob, fs: FileSystem, compression_level: int) -> None:
        self.job = job
        self.fs = fs
        self.compression_level = compression_level
        self.outputs: list[CompactionOutput] = []
        self.builder: TableBuilder | None = None
        self.file = None
        self.path = ""
        self.gp_index = 0
        self.gp_overlap = 0  # grandparent bytes the current output overlaps
        self.gp_boundaries = 0  # grandparent ends the current output has passed
        self.has_keys = False  # whether the current output holds any key yet
        #: The range tombstones the outputs carry, and where the next
        #: output's share of them begins (None: from the first).
        self.range_dels: FragmentedTombstones | None = None
        self.range_lower: bytes | None = None

    def add(self, run: Columns) -> None:
        while len(run):
            if self.builder is None:
                self._open()
            raw_end = np.cumsum(run.klen + run.vlen)  # raw bytes of run[:i + 1]
            stored_per_raw = self._stored_per_raw()
            cut = self._size_cut(run, raw_end, stored_per_raw)
            cut = self._grandparent_cut(run, raw_end, stored_per_raw, cut)
            if cut:
                self.builder.add_columns(run.slice(0, cut))
                self.has_keys = True
            if cut < len(run):
                self.finish_file(last=False)
            run = run.slice(cut, len(run))

    def _stored_per_raw(self) -> float:
        """Stored bytes per raw key and value byte, estimated from what this
        output has written so far (1.0 until it has written a few blocks)."""
        builder = self.builder
        written_raw = builder.props.raw_key_bytes + builder.props.raw_value_bytes
        return builder.file_size / written_raw if written_raw > 4 * self.job.table.block_size else 1.0

    def _size_cut(self, run: Columns, raw_end, stored_per_raw: float) -> int:
        """Index before which the output stays under target_file_size."""
        budget = (self.job.target_file_size - self.builder.file_size) / max(stored_per_raw, 0.05)
        if budget <= 0:
            return self._key_boundary(run, 0) if not self.has_keys else 0
        j = int(np.searchsorted(raw_end, budget, side="left"))
        if j >= len(run):
            return len(run)
        return self._key_boundary(run, j)

    @staticmethod
    def _key_boundary(run: Columns, j: int) -> int:
        """The end of the versions of the key at j: outputs never split a key."""
        key = run.key(j)
        end = j + 1
        while end < len(run) and run.key(end) == key:
            end += 1
        return end

    def _grandparent_cut(self, run: Columns, raw_end, stored_per_raw: float, end: int) -> int:
        """Index (at most ``end``) before which the output should end because
        of the level below its own (the grandparents), which the output's
        future compaction will have to merge with:

        * when the grandparent bytes it overlaps would pass
          max_grandparent_overlap_bytes (LevelDB's rule);
        * at the end of a grandparent table, once the output holds at least
          half of target_file_size: 50% at the first such end, 5% more for
          each end already passed, at most 90% (as RocksDB's dynamic file
          size does). An output that ends where a grandparent ends spares
          its future compaction a grandparent that it would overlap only in
          part, and rewrite whole."""
        gps = self.job.grandparents
        limit = self.job.max_grandparent_overlap_bytes
        target = self.job.target_file_size
        while self.gp_index < len(gps):
            largest, size = gps[self.gp_index]
            position = run.bisect_right(largest)  # run[:position] <= largest: no key is split
            if position >= end:
                return end
            self.gp_index += 1
            if position == 0 and not self.has_keys:
                continue  # ends before this output's first key
            self.gp_overlap += size
            if self.gp_overlap > limit:
                return position
            stored = self.builder.file_size + (stored_per_raw * int(raw_end[position - 1]) if position else 0)
            if stored >= target * min(50 + 5 * self.gp_boundaries, 90) // 100:
                return position
            self.gp_boundaries += 1
        return end

    def _open(self) -> None:
        t = self.job.table
        self.path = os.path.join(self.job.dbpath,
                                 f"compaction-{self.job.job_id}-{len(self.outputs):04d}.sst.tmp")
        self.file = self.fs.create(self.path)
        self.builder = TableBuilder(self.file, block_size=t.block_size, compression=t.compression,
                                    compression_level=self.compression_level,
                                    bloom_bits_per_key=t.bloom_bits_per_key)
        self.has_keys = False
        self.gp_overlap = 0
        self.gp_boundaries = 0

    def finish_file(self, last: bool = True) -> None:
        """Finish the current output; ``last``: no output follows it (it
        carries the range tombstones from its lower end on, unclipped above)."""
        if self.builder is None and last and self.range_dels:
            self._open()  # the tombstones outlive every entry: an output of their own
        builder, f = self.builder, self.file
        self.builder = self.file = None
        if builder is None:
            return
        if self.range_dels:
            share, self.range_lower = output_range_dels(self.range_dels, self.range_lower,
                                                        builder.last_key if not last else None)
            builder.set_range_tombstones(share)
        if builder.empty:
            f.close()
            self.fs.remove(self.path)
            return
        props = builder.finish()
        f.sync()
        size = f.size
        f.close()
        self.outputs.append(CompactionOutput(self.path, size, props.smallest_key, props.largest_key,
                                             props.smallest_seq, props.largest_seq, props.entries,
                                             props.tombstones, props.ttl_entries, props.earliest_deadline,
                                             props.range_tombstones))

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


#: Input blocks merged per step: bounds the memory of a compaction (a few
#: MiB of blocks and their copies) while amortizing the per-step overhead
#: over many sources (a level-0 compaction reads a dozen tables at once).
BLOCKS_PER_CHUNK = 1024


def run_compaction(job: CompactionJob, fs: FileSystem | None = None) -> CompactionResult:
    fs = fs or DEFAULT_FS
    started = time.perf_counter()
    cpu_started = time.thread_time()
    result = CompactionResult()
    readers: list[TableReader] = []
    at_bottom = not any(job.lower_ranges)
    level = job.table.compression_level if at_bottom else job.table.upper_compression_level
    out = _OutputWriter(job, fs, level)
    operator = _job_operator(job.merge_operator)
    try:
        sources = []
        for tables in job.sources:
            source_readers = [TableReader(fs, path, number, cache=None, global_seq=global_seq)
                              for path, number, global_seq in tables]
            readers.extend(source_readers)
            sources.append(_Source(source_readers))
        bottommost = _BottommostTest(job.lower_ranges)
        range_dels = FragmentedTombstones.merged(reader.range_dels for reader in readers)
        if range_dels:
            out.range_dels, dropped = surviving_range_dels(range_dels, job.snapshots, job.lower_ranges)
            result.range_tombstones_dropped += dropped
        for hi in [*_chunk_bounds(readers, BLOCKS_PER_CHUNK), None]:
            run = _merge([source.take_below(hi) for source in sources])
            result.entries_read += len(run)
            if len(run) and range_dels:
                run, covered = drop_covered(run, range_dels, job.snapshots)
                result.range_covered_dropped += covered
            if len(run):
                run = _expire(run, job.now_ms, result)
                run, same = _resolve(run, job.snapshots, bottommost, result, operator)
                if at_bottom and len(run):
                    run = _zero_sequences(run, same, job.snapshots)
                result.entries_written += len(run)
                out.add(run)
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
    result.cpu_seconds = time.thread_time() - cpu_started
    return result


def _job_operator(operator: Callable | bytes | None) -> Callable | None:
    """The job's merge operator; a pickled one that does not unpickle here
    is None (operands are kept, never lost)."""
    if not isinstance(operator, bytes):
        return operator
    try:
        return pickle.loads(operator)
    except Exception:  # noqa: BLE001 - any failure: fold nothing
        return None


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
