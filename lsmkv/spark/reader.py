"""The data source's read side: planning a read into key-range partitions
and reading one partition as Arrow record batches.

Planning (``partitions()``, run once per query on the driver) finds the
store's engine, turns pushed filters into key ranges (filters.py), asks the
store for ``split_keys(n)`` (n: option numPartitions, else Spark's default
parallelism, never more than one per minPartitionBytes of
``approximate_size`` plus one) and cuts the ranges there (ranges.py): a
partition is a list of ranges within one slot between split keys, and
slots no range reaches are dropped, so a point lookup is one partition.
When more than one partition reads a consistent view, planning first takes
a checkpoint (checkpoints.py: the store version's existing one, if any)
and the partitions read it; a single
partition reads the live store through one snapshot, which is already one
version. ``read()`` opens its store read-only, takes a snapshot, walks each
range with a cursor and yields record batches of ``batchRows`` rows built
from lists of bytes (the fast path into Arrow).
"""

from __future__ import annotations

import os
from itertools import islice
from typing import Any, Iterator, Sequence

from pyspark.sql.datasource import DataSourceReader, InputPartition

from lsmkv.base.errors import OptionError

from . import checkpoints
from .filters import key_ranges
from .options import ReadOptions
from .ranges import ALL, Range, split
from .store import existing_engine, open_store

class KeyRangePartition(InputPartition):
    """One task's share of a read: ``ranges`` of the store at ``path``
    (the live store or a checkpoint of it, ``checkpoint`` then being set)."""

    def __init__(self, index: int, path: str, engine: str, ranges: list[Range], checkpoint: str | None) -> None:
        self.index = index
        self.path = path
        self.engine = engine
        self.ranges = ranges
        self.checkpoint = checkpoint


def check_schema(schema: Any, decode: str | None) -> None:
    """A user-given schema must be the source's own: key and value, both
    binary (or both string with decode)."""
    want = "string" if decode else "binary"
    fields = [(f.name, f.dataType.simpleString()) for f in schema.fields]
    if fields != [("key", want), ("value", want)]:
        raise OptionError(f"format lsmkv reads the schema 'key {want}, value {want}'"
                          f"{' (option decode is set)' if decode else ''}, not {schema.simpleString()}")


class LsmkvReader(DataSourceReader):
    """Reads every key (no filter pushdown; option pushdown=false)."""

    def __init__(self, options: ReadOptions, default_partitions: int | None) -> None:
        self.options = options
        self.default_partitions = default_partitions
        self.ranges: list[Range] = list(ALL)

    # -- planning -----------------------------------------------------------------------------

    def partitions(self) -> list[KeyRangePartition]:
        opts = self.options
        engine = existing_engine(opts.path, opts.engine)
        ranges = self.ranges
        if not ranges:
            return [KeyRangePartition(0, opts.path, engine, [], None)]
        wanted = opts.num_partitions or self.default_partitions or os.cpu_count() or 1
        with open_store(opts.path, engine, read_only=True) as db:
            size = sum(db.approximate_size(lo, hi) for lo, hi in ranges)
            n = max(1, min(wanted, size // opts.min_partition_bytes + 1))
            cuts = db.split_keys(n) if n > 1 else []
        parts = split(ranges, cuts)
        if not opts.consistent or len(parts) <= 1:
            return [KeyRangePartition(i, opts.path, engine, p, None) for i, p in enumerate(parts)]
        ckpt = checkpoints.take(opts.path, engine, opts.checkpoint_dir, opts.checkpoint_retention_s,
                                opts.max_checkpoints)
        with open_store(ckpt, engine, read_only=True) as db:
            cuts = db.split_keys(n)
        return [KeyRangePartition(i, ckpt, engine, p, ckpt) for i, p in enumerate(split(ranges, cuts))]

    # -- reading ------------------------------------------------------------------------------

    def read(self, partition: KeyRangePartition) -> Iterator[Any]:
        import pyarrow as pa

        lease = checkpoints.Lease(partition.checkpoint) if partition.checkpoint else None
        try:
            yield from self._batches(partition, pa)
        finally:
            if lease is not None:
                lease.release()

    def _batches(self, partition: KeyRangePartition, pa: Any) -> Iterator[Any]:
        decode = self.options.decode
        kind = pa.string() if decode else pa.binary()
        schema = pa.schema([pa.field("key", kind), pa.field("value", kind)])
        rows = self.options.batch_rows
        convert = _converter(decode, partition.path, pa)
        with open_store(partition.path, partition.engine, read_only=True) as db, db.snapshot() as snap:
            for lo, hi in partition.ranges:
                with snap.iterator(lo, hi) as cursor:
                    stream = iter(cursor)
                    while True:
                        chunk = list(islice(stream, rows))
                        if not chunk:
                            break
                        keys, values = zip(*chunk)
                        yield pa.RecordBatch.from_arrays([convert(keys), convert(values)], schema=schema)


def _converter(decode: str | None, path: str, pa: Any):
    """list of bytes -> an Arrow array (binary, or strings in ``decode``)."""
    if decode is None:
        binary = pa.binary()
        return lambda items: pa.array(items, type=binary)
    import codecs
    charset = codecs.lookup(decode).name

    def bad(exc: Exception):
        return ValueError(f"{path} holds a key or value that is not valid {charset} ({exc}); "
                          f"read it without option decode (binary) or with the right charset")

    if charset == "utf-8":
        binary, string = pa.binary(), pa.string()

        def convert(items: Sequence[bytes]):
            try:
                return pa.array(items, type=binary).cast(string)
            except pa.ArrowInvalid as exc:
                raise bad(exc) from None
        return convert

    def convert_py(items: Sequence[bytes]):
        try:
            return pa.array([b.decode(charset) for b in items], type=pa.string())
        except UnicodeDecodeError as exc:
            raise bad(exc) from None
    return convert_py


class LsmkvPushdownReader(LsmkvReader):
    """Reads the key ranges of the filters on ``key`` it can express
    exactly (filters.py); the rest go back to Spark."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        ranges, rest = key_ranges(filters, self.options.decode)
        self.ranges = ranges
        return iter(rest)
