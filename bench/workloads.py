"""Workloads: what each phase does, as a seeded sequence of operations.

A phase's operations are generated from a ``numpy`` generator seeded with the
run's ``--seed`` and the phase's name and position, and from the
:class:`Dataset` (the bench's model of what the database holds), which is the
same for every engine at the start of the same phase. So every engine gets
exactly the same operations, in the same order.

Operations come in :class:`Chunk` s of parallel lists (kinds, keys, args) that
the runner executes; executed chunks are applied to the :class:`Dataset`,
which is how the bench knows the logical live bytes (for space
amplification) without asking any engine.

Workloads:

* db_bench phases (:class:`DbBenchWorkload`): ``fillseq``, ``fillrandom``
  (a fresh database, every record once; in key order or shuffled),
  ``overwrite`` (random existing keys), ``readrandom``, ``readmissing``
  (absent keys that sort between present ones), ``seekrandom`` (a seek to a
  random key and a scan of ``--scan-length`` entries), ``deleterandom``
  (each chosen key once), and the full scans ``readseq``/``readreverse``
  (:class:`FullScanWorkload`, one operation per entry).
* YCSB core workloads (:class:`YcsbWorkload`): A-F built in, or any
  property file; see :mod:`bench.ycsb`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import distributions as dist
from .config import BenchConfig, ConfigError, WorkloadRequest
from .data import DbBenchKeys, KeySpace, ValuePool, YcsbKeys
from .ycsb import YcsbError, YcsbSpec, builtin_spec, load_workload_file

__all__ = ["OP_NAMES", "READ", "UPDATE", "INSERT", "SCAN", "RMW", "DELETE", "WRITE", "SEEK", "NEXT",
           "Chunk", "Dataset", "Workload", "DbBenchWorkload", "FullScanWorkload", "YcsbWorkload",
           "LoadPlan", "make_workloads", "DB_BENCH_PHASES", "CHUNK_SIZE"]

# Operation kinds (indexes into OP_NAMES).
READ, UPDATE, INSERT, SCAN, RMW, DELETE, WRITE, SEEK, NEXT = range(9)
OP_NAMES = ["read", "update", "insert", "scan", "readmodifywrite", "delete", "write", "seek", "next"]
_WRITES = {UPDATE, INSERT, RMW, WRITE}

#: Operations per chunk (the unit the runner hands to a thread and reports progress by).
CHUNK_SIZE = 1024
#: Scan phases (seekrandom, ycsb-e) run --operations / SCAN_DIVISOR operations unless told
#: otherwise, since each operation reads many entries.
SCAN_DIVISOR = 10

DB_BENCH_PHASES = ["fillseq", "fillrandom", "overwrite", "readrandom", "readmissing", "readseq",
                   "readreverse", "seekrandom", "deleterandom"]


@dataclass
class Chunk:
    """Operations ``kinds[i]`` on ``keys[i]`` with ``args[i]`` (a value, a scan length, or None).

    ``nums[i]`` is the record number and ``value_lens[i]`` the length written
    (0 for operations that write nothing), for the dataset model.
    """

    kinds: list[int]
    keys: list[bytes]
    args: list
    nums: np.ndarray
    value_lens: np.ndarray

    def __len__(self) -> int:
        return len(self.kinds)

    def user_bytes_written(self) -> int:
        """Key plus value bytes of every write, key bytes of every delete."""
        total = 0
        for kind, key, n in zip(self.kinds, self.keys, self.value_lens.tolist()):
            if kind in _WRITES:
                total += len(key) + n
            elif kind == DELETE:
                total += len(key)
        return total


class Dataset:
    """The bench's model of the database's contents: which records are live,
    and their key and value lengths. Identical for every engine at the same
    point of a run."""

    def __init__(self) -> None:
        self.reset(None, "empty")

    def reset(self, keyspace: KeySpace | None, origin: str) -> None:
        self.keyspace = keyspace
        #: What created the data (e.g. "fillrandom", "ycsb load ..."); YCSB workloads need their own.
        self.origin = origin
        self._live = np.zeros(0, dtype=bool)
        self._klen = np.zeros(0, dtype=np.int32)
        self._vlen = np.zeros(0, dtype=np.int32)
        self.next_insert = 0
        self.deleted = 0

    def _grow(self, top: int) -> None:
        if top < len(self._live):
            return
        size = max(top + 1, 2 * len(self._live), 1024)
        for name in ("_live", "_klen", "_vlen"):
            old = getattr(self, name)
            new = np.zeros(size, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def apply(self, chunk: Chunk) -> None:
        """Record the effect of an executed chunk."""
        kinds = np.asarray(chunk.kinds, dtype=np.int8)
        writes = np.isin(kinds, list(_WRITES))
        deletes = kinds == DELETE
        if writes.any():
            nums = chunk.nums[writes]
            self._grow(int(nums.max()))
            klens = np.fromiter((len(k) for k, w in zip(chunk.keys, writes) if w), dtype=np.int32)
            self._live[nums] = True
            self._klen[nums] = klens
            self._vlen[nums] = chunk.value_lens[writes]
            self.next_insert = max(self.next_insert, int(nums.max()) + 1)
        if deletes.any():
            nums = chunk.nums[deletes]
            self._grow(int(nums.max()))
            self.deleted += int(self._live[nums].sum())
            self._live[nums] = False

    @property
    def live_count(self) -> int:
        return int(self._live.sum())

    def live_nums(self) -> np.ndarray:
        return np.flatnonzero(self._live)

    def live_bytes(self) -> int:
        """Logical bytes of the live data: key plus value length of every live record."""
        live = self._live
        return int(self._klen[live].sum(dtype=np.int64) + self._vlen[live].sum(dtype=np.int64))


class Workload:
    """One phase. Subclasses generate the operations.

    Attributes read by the runner:

    * ``name``: as given in ``--workloads``; ``family``: "db_bench" or "ycsb".
    * ``fresh``: the phase starts from an empty database (fills).
    * ``reads``: the phase reads, so an untimed warm-up precedes it.
    * ``write_fraction``: share of operations that write (for "write-heavy").
    * ``operations``: the phase's operation budget; ``ops_explicit``: it was
      given on the command line; ``bounded``: the phase ends by itself (fills,
      deletes, full scans), even with --duration.
    * ``scans``: the phase reads ranges in key order (skipped on engines
      that keep no order, such as diskcache and dbm).
    """

    name = "?"
    family = "db_bench"
    fresh = False
    reads = True
    write_fraction = 0.0
    full_scan = False
    scans = False
    reverse = False
    operations = 0
    ops_explicit = False
    bounded = False

    def load_plan(self, dataset: Dataset) -> LoadPlan | None:
        """The load this phase needs before it can run on ``dataset`` (None: run as is)."""
        return None

    def keyspace(self) -> KeySpace:
        raise NotImplementedError

    def stream(self, dataset: Dataset, rng: np.random.Generator, values: ValuePool,
               budget: int | None) -> OpStream:
        """The phase's operations, ``budget`` of them (None: as many as asked for)."""
        raise NotImplementedError

    def warmup(self, dataset: Dataset, rng: np.random.Generator, count: int) -> Chunk | None:
        """``count`` reads from the phase's own key distribution (untimed warm-up)."""
        return None

    def describe(self) -> str:
        return self.name


class OpStream:
    """Produces a phase's chunks in order; ``remaining`` is None when unbounded."""

    def __init__(self, budget: int | None) -> None:
        self.remaining = budget

    def next_chunk(self, size: int = CHUNK_SIZE) -> Chunk | None:
        if self.remaining is not None:
            if self.remaining <= 0:
                return None
            size = min(size, self.remaining)
        chunk = self._make(size)
        if chunk is not None and self.remaining is not None:
            self.remaining -= len(chunk)
        return chunk

    def _make(self, size: int) -> Chunk | None:
        raise NotImplementedError


@dataclass
class LoadPlan:
    """An untimed load: a fresh database holding ``records`` records (YCSB's load phase)."""

    origin: str
    keyspace: KeySpace
    nums: np.ndarray
    value_lengths: np.ndarray

    def chunks(self, values: ValuePool, size: int = CHUNK_SIZE):
        for lo in range(0, len(self.nums), size):
            nums = self.nums[lo:lo + size]
            lens = self.value_lengths[lo:lo + size]
            keys = self.keyspace.keys(nums)
            yield Chunk([WRITE] * len(nums), keys, values.take(lens), nums, lens)


def _dbbench_load(records: int, key_size: int, value_size: int) -> LoadPlan:
    return LoadPlan(origin=f"load:{records} records", keyspace=DbBenchKeys(key_size),
                    nums=np.arange(records, dtype=np.int64),
                    value_lengths=np.full(records, value_size, dtype=np.int64))


class _ArrayStream(OpStream):
    """A stream over precomputed record numbers, all of one kind."""

    def __init__(self, kind: int, nums: np.ndarray | None, keyspace: KeySpace, values: ValuePool,
                 value_size: int, budget: int | None, arg=None, missing: bool = False,
                 draw=None) -> None:
        super().__init__(budget if nums is None else min(len(nums), budget or len(nums)))
        self.kind, self.nums, self.keyspace, self.values = kind, nums, keyspace, values
        self.value_size, self.arg, self.missing, self.draw = value_size, arg, missing, draw
        self._pos = 0

    def _make(self, size: int) -> Chunk | None:
        if self.nums is not None:
            nums = self.nums[self._pos:self._pos + size]
            self._pos += len(nums)
        else:
            nums = self.draw(size)
        if not len(nums):
            return None
        keys = self.keyspace.missing_keys(nums) if self.missing else self.keyspace.keys(nums)
        if self.kind == WRITE:
            lens = np.full(len(nums), self.value_size, dtype=np.int64)
            args = self.values.take(lens)
        else:
            lens = np.zeros(len(nums), dtype=np.int64)
            args = [self.arg] * len(nums)
        return Chunk([self.kind] * len(nums), keys, args, np.asarray(nums, dtype=np.int64), lens)


class DbBenchWorkload(Workload):
    """The db_bench phases except the full scans."""

    def __init__(self, name: str, config: BenchConfig, operations: int | None) -> None:
        self.name = name
        self.config = config
        self.fresh = name in ("fillseq", "fillrandom")
        self.reads = name in ("readrandom", "readmissing", "seekrandom")
        self.scans = name == "seekrandom"
        self.write_fraction = 1.0 if name in ("fillseq", "fillrandom", "overwrite", "deleterandom") else 0.0
        self.bounded = self.fresh or name == "deleterandom"
        self.ops_explicit = operations is not None or (not self.fresh and "operations" in config.explicit)
        if self.fresh:
            self.operations = operations or config.records
        elif operations:
            self.operations = operations
        elif name == "seekrandom":
            self.operations = max(1, config.operations // SCAN_DIVISOR)
        else:
            self.operations = config.operations

    def keyspace(self) -> KeySpace:
        return DbBenchKeys(self.config.key_size)

    def load_plan(self, dataset: Dataset) -> LoadPlan | None:
        if self.fresh or dataset.live_count:
            return None
        return _dbbench_load(self.config.records, self.config.key_size, self.config.value_size)

    def stream(self, dataset: Dataset, rng: np.random.Generator, values: ValuePool,
               budget: int | None) -> OpStream:
        cfg, name = self.config, self.name
        if self.fresh:
            n = self.operations
            if n > self.keyspace().max_records():
                raise ConfigError(f"--key-size {cfg.key_size} is too small for {n} records")
            nums = np.arange(n, dtype=np.int64) if name == "fillseq" else rng.permutation(n)
            return _ArrayStream(WRITE, nums, self.keyspace(), values, cfg.value_size, budget)
        keyspace = dataset.keyspace
        live = dataset.live_nums()
        if name == "deleterandom":
            # Unless told otherwise, keep half of the data, so space can still be measured.
            count = len(live) if self.ops_explicit else len(live) // 2
            nums = rng.permutation(live)[: min(count, budget or count)]
            return _ArrayStream(DELETE, nums, keyspace, values, 0, budget)
        draw = lambda size: live[rng.integers(0, len(live), size=size)]  # noqa: E731
        if name == "overwrite":
            return _ArrayStream(WRITE, None, keyspace, values, cfg.value_size, budget, draw=draw)
        if name == "readrandom":
            return _ArrayStream(READ, None, keyspace, values, 0, budget, draw=draw)
        if name == "readmissing":
            return _ArrayStream(READ, None, keyspace, values, 0, budget, draw=draw, missing=True)
        if name == "seekrandom":
            return _ArrayStream(SEEK, None, keyspace, values, 0, budget, arg=cfg.scan_length, draw=draw)
        raise AssertionError(name)

    def warmup(self, dataset: Dataset, rng: np.random.Generator, count: int) -> Chunk | None:
        live = dataset.live_nums()
        if not count or not len(live):
            return None
        nums = live[rng.integers(0, len(live), size=count)]
        keys = dataset.keyspace.keys(nums)
        return Chunk([READ] * count, keys, [None] * count, nums, np.zeros(count, dtype=np.int64))

    def describe(self) -> str:
        what = {
            "fillseq": "write every record once, in key order, into an empty database",
            "fillrandom": "write every record once, in random order, into an empty database",
            "overwrite": "overwrite random existing keys",
            "readrandom": "get random existing keys",
            "readmissing": "get absent keys (each sorts next to a present one)",
            "seekrandom": f"seek to a random key, read {self.config.scan_length} entries",
            "deleterandom": "delete random existing keys, each once (at most half, unless a count is given)",
        }
        return what[self.name]


class FullScanWorkload(Workload):
    """``readseq``/``readreverse``: one pass over the database; one operation per entry."""

    full_scan = True
    scans = True
    bounded = True

    def __init__(self, name: str, config: BenchConfig, operations: int | None) -> None:
        self.name = name
        self.config = config
        self.reverse = name == "readreverse"
        self.reads = True
        #: Entries to read at most (None: the whole database).
        self.operations = operations or 0

    def keyspace(self) -> KeySpace:
        return DbBenchKeys(self.config.key_size)

    def load_plan(self, dataset: Dataset) -> LoadPlan | None:
        if dataset.live_count:
            return None
        return _dbbench_load(self.config.records, self.config.key_size, self.config.value_size)

    def entries(self, dataset: Dataset) -> int:
        live = dataset.live_count
        return min(live, self.operations) if self.operations else live

    def warmup(self, dataset: Dataset, rng: np.random.Generator, count: int) -> Chunk | None:
        return None

    def describe(self) -> str:
        return "scan the whole database " + ("backwards" if self.reverse else "in key order")


class YcsbWorkload(Workload):
    """A YCSB core workload (built in or from a property file)."""

    family = "ycsb"

    def __init__(self, spec: YcsbSpec, ops_explicit: bool = False) -> None:
        self.spec = spec
        self.ops_explicit = ops_explicit
        self.name = spec.name
        self.operations = spec.operationcount
        p = spec.proportions
        self.reads = p["read"] + p["scan"] + p["readmodifywrite"] > 0
        self.scans = p["scan"] > 0
        self.write_fraction = spec.write_fraction
        self._kinds = np.array([READ, UPDATE, INSERT, SCAN, RMW])
        self._probs = np.array([p["read"], p["update"], p["insert"], p["scan"], p["readmodifywrite"]])

    def keyspace(self) -> KeySpace:
        return YcsbKeys(self.spec.hashed, self.spec.zeropadding)

    def _origin(self) -> str:
        s = self.spec
        return (f"ycsb load:{s.recordcount} records,{s.insertstart}+{s.insertcount},"
                f"{self.keyspace().identity},fields={s.fieldcount}x{s.fieldlength}/{s.fieldlengthdistribution}")

    def load_plan(self, dataset: Dataset) -> LoadPlan | None:
        if dataset.origin == self._origin() and not dataset.deleted:
            return None
        s = self.spec
        nums = np.arange(s.insertstart, s.insertstart + s.insertcount, dtype=np.int64)
        rng = np.random.default_rng([len(nums), 0x6C6F6164])
        return LoadPlan(origin=self._origin(), keyspace=self.keyspace(), nums=nums,
                        value_lengths=self._value_lengths(rng, len(nums)))

    def _value_lengths(self, rng: np.random.Generator, n: int) -> np.ndarray:
        s = self.spec
        if s.fieldlengthdistribution == "constant":
            return np.full(n, s.fieldcount * s.fieldlength, dtype=np.int64)
        if s.fieldlengthdistribution == "uniform":
            per_field = rng.integers(s.minfieldlength, s.fieldlength + 1, size=(n, s.fieldcount))
        else:
            z = dist.Zipfian(s.fieldlength - s.minfieldlength + 1, base=s.minfieldlength)
            per_field = z.sample(rng, n * s.fieldcount).reshape(n, s.fieldcount)
        return per_field.sum(axis=1).astype(np.int64)

    def _chooser(self, dataset: Dataset) -> dist.KeyChooser:
        s = self.spec
        lo, hi = s.insertstart, s.insertstart + s.insertcount - 1
        d = s.requestdistribution
        if d == "uniform":
            return dist.Uniform(lo, hi)
        if d == "zipfian":
            expected_new = int(s.operationcount * s.proportions["insert"] * 2.0)
            return dist.ScrambledZipfian(lo, hi + expected_new + 1)
        if d == "latest":
            return dist.SkewedLatest(dataset.next_insert - 1)
        if d == "hotspot":
            return dist.Hotspot(lo, hi, s.hotspotdatafraction, s.hotspotopnfraction)
        if d == "sequential":
            return dist.Sequential(lo, hi)
        if d == "exponential":
            return dist.Exponential(s.exponential_percentile, s.recordcount * s.exponential_frac)
        raise YcsbError(f"unknown request distribution {d}")

    def stream(self, dataset: Dataset, rng: np.random.Generator, values: ValuePool,
               budget: int | None) -> OpStream:
        return _YcsbStream(self, dataset, rng, values, budget)

    def warmup(self, dataset: Dataset, rng: np.random.Generator, count: int) -> Chunk | None:
        if not count:
            return None
        chooser = self._chooser(dataset)
        limit = np.full(count, dataset.next_insert - 1, dtype=np.int64)
        nums = chooser.sample(rng, count, limit)
        keys = self.keyspace().keys(nums)
        return Chunk([READ] * count, keys, [None] * count, nums, np.zeros(count, dtype=np.int64))

    def describe(self) -> str:
        s = self.spec
        mix = ", ".join(f"{int(round(v * 100))}% {k}" for k, v in s.proportions.items() if v > 0)
        extra = f", scans of {s.minscanlength}-{s.maxscanlength} ({s.scanlengthdistribution})" \
            if s.proportions["scan"] > 0 else ""
        return f"{mix}; {s.requestdistribution}{extra}"


class _YcsbStream(OpStream):
    def __init__(self, workload: YcsbWorkload, dataset: Dataset, rng: np.random.Generator,
                 values: ValuePool, budget: int | None) -> None:
        super().__init__(budget)
        self.w, self.rng, self.values = workload, rng, values
        self.keyspace = workload.keyspace()
        self.chooser = workload._chooser(dataset)
        self.next_insert = dataset.next_insert
        s = workload.spec
        self.scan_zipf = (dist.Zipfian(s.maxscanlength - s.minscanlength + 1, base=s.minscanlength)
                          if s.scanlengthdistribution == "zipfian" else None)

    def _make(self, size: int) -> Chunk | None:
        w, rng, s = self.w, self.rng, self.w.spec
        kinds = w._kinds[rng.choice(len(w._kinds), size=size, p=w._probs)]
        inserts = kinds == INSERT
        n_ins = int(inserts.sum())
        # The newest record number that exists when each operation runs.
        inserted_before = np.cumsum(inserts) - inserts
        limit = self.next_insert - 1 + inserted_before
        nums = np.empty(size, dtype=np.int64)
        nums[inserts] = self.next_insert + np.arange(n_ins)
        others = ~inserts
        if others.any():
            nums[others] = self.chooser.sample(rng, int(others.sum()), limit[others])
        self.next_insert += n_ins
        keys = self.keyspace.keys(nums)
        writes = np.isin(kinds, [UPDATE, INSERT, RMW])
        lens = np.zeros(size, dtype=np.int64)
        args: list = [None] * size
        n_writes = int(writes.sum())
        if n_writes:
            lens[writes] = w._value_lengths(rng, n_writes)
            for i, v in zip(np.flatnonzero(writes).tolist(), self.values.take(lens[writes])):
                args[i] = v
        scans = np.flatnonzero(kinds == SCAN)
        if scans.size:
            if self.scan_zipf is not None:
                lengths = self.scan_zipf.sample(rng, scans.size)
            else:
                lengths = rng.integers(s.minscanlength, s.maxscanlength + 1, size=scans.size)
            for i, n in zip(scans.tolist(), lengths.tolist()):
                args[i] = n
        return Chunk(kinds.tolist(), keys, args, nums, lens)


def make_workloads(config: BenchConfig) -> list[Workload]:
    """The run's phases, in order: ``--workloads`` then each ``--ycsb-workload`` file."""
    out: list[Workload] = []
    for req in config.workloads:
        out.append(_make_one(req, config))
    for path in config.ycsb_files:
        spec = load_workload_file(path)
        _apply_overrides(spec, config)
        out.append(YcsbWorkload(spec, ops_explicit="operations" in config.explicit))
    return out


def _make_one(req: WorkloadRequest, config: BenchConfig) -> Workload:
    name = req.name
    if name in ("readseq", "readreverse"):
        return FullScanWorkload(name, config, req.operations)
    if name in DB_BENCH_PHASES:
        return DbBenchWorkload(name, config, req.operations)
    if name.startswith("ycsb-") and len(name) == 6:
        default_ops = config.operations // SCAN_DIVISOR if name == "ycsb-e" else config.operations
        spec = builtin_spec(name[-1], config.records, req.operations or max(1, default_ops))
        if "value_size" in config.explicit:
            spec.fieldcount, spec.fieldlength = 1, config.value_size
        return YcsbWorkload(spec, ops_explicit=req.operations is not None or "operations" in config.explicit)
    known = ", ".join(DB_BENCH_PHASES + [f"ycsb-{c}" for c in "abcdef"])
    raise ConfigError(f"unknown workload {name!r}; choose from {known} (or --ycsb-workload FILE)")


def _apply_overrides(spec: YcsbSpec, config: BenchConfig) -> None:
    """Knobs given on the command line override the file, as YCSB's -p does."""
    if "records" in config.explicit:
        spec.recordcount = config.records
        spec.insertstart, spec.insertcount = 0, config.records
    if "operations" in config.explicit:
        spec.operationcount = config.operations
    if "value_size" in config.explicit:
        spec.fieldcount, spec.fieldlength = 1, config.value_size
        spec.fieldlengthdistribution = "constant"

