"""TableWriter: build table files outside a database, for ``db.ingest()``.

The public face of the table builder (table/builder.py), as RocksDB's
SstFileWriter is of its own: a program (a Spark task, a batch job) writes
sorted key/value pairs into a file of exactly the format a flush writes --
data blocks, bloom filter, index, properties, footer -- and a database takes
the finished file in whole with ``db.ingest([path])`` (lsmkv: one manifest
edit, no rewrite; btree: a bottom-up build). Keys must be strictly
ascending: a table written here holds one version per key, and every entry
carries sequence number 0; the database that ingests it gives the whole
file one sequence number newer than anything it holds (docs/formats.md,
"Ingested tables").

The file appears at its path only when ``finish()`` returns: it is written
under ``path + ".tmp"``, fsynced, renamed and its directory fsynced, so a
crash never leaves a half-written file under the final name.
``read_table`` reads any table file back in key order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from lsmkv.base.errors import SizeLimitError
from lsmkv.base.fs import DEFAULT_FS, FileSystem
from lsmkv.base.keys import MAX_KEY_SIZE, MAX_VALUE_SIZE, as_key, as_value

from .table.builder import TableBuilder
from .table.columns import Columns
from .table.reader import TableReader
from .ttl_value import DEADLINE_SIZE
from .write_batch import MERGE

_PUT = 1  # seq 0, kind 1 (a value)
_DELETE = 0  # seq 0, kind 0 (a tombstone)


@dataclass(frozen=True)
class TableInfo:
    """A finished table file: where it is, how many entries, its size in
    bytes and its smallest and largest key."""

    path: str
    entries: int
    size: int
    smallest: bytes
    largest: bytes


class TableWriter:
    """Write one table file of strictly ascending keys.

    ``put(key, value)`` and ``delete(key)`` (a tombstone, which hides the
    key's older value when ingested) add one entry; ``put_sorted(keys,
    values)`` adds many at once, and ``put_columns`` many given as two
    binary columns (Arrow's layout), without a Python object per entry. ``finish()`` makes the file durable at
    ``path`` and returns its :class:`TableInfo` (again on every later call;
    ``info`` holds it too); ``abort()`` removes what was written. As a
    context manager it finishes on success and aborts on an exception, so
    after a ``with`` block ``w.info`` (or ``w.finish()``) gives the
    finished file's TableInfo. ``path`` must not exist.
    """

    def __init__(self, path: str | bytes | os.PathLike, *, block_size: int = 4096, compression: str | None = "zstd",
                 compression_level: int = 3, bloom_bits_per_key: int = 10, fs: FileSystem | None = None) -> None:
        if compression not in ("zstd", None):
            raise ValueError(f"compression must be 'zstd' or None, not {compression!r}")
        if type(block_size) is not int or not 64 <= block_size <= 64 * 1024 * 1024:
            raise ValueError(f"block_size must be an int from 64 to 64 MiB, not {block_size!r}")
        if type(bloom_bits_per_key) is not int or not 0 <= bloom_bits_per_key <= 64:
            raise ValueError(f"bloom_bits_per_key must be an int from 0 to 64, not {bloom_bits_per_key!r}")
        self.path = os.fsdecode(path)
        self._fs = fs or DEFAULT_FS
        if self._fs.exists(self.path):
            raise FileExistsError(f"{self.path} already exists; a TableWriter writes a new file")
        self._tmp = self.path + ".tmp"
        self._file = self._fs.create(self._tmp)
        self._builder = TableBuilder(self._file, block_size=block_size, compression=compression,
                                     compression_level=compression_level, bloom_bits_per_key=bloom_bits_per_key)
        self._last: bytes | None = None
        #: Whether the last entries came as columns (put_columns): the
        #: builder's block under construction is then held as columns.
        self._columns = False
        self._done = False
        self._info: TableInfo | None = None

    # -- adding entries -------------------------------------------------------

    @property
    def info(self) -> TableInfo | None:
        """The finished file's :class:`TableInfo`; None until ``finish()``
        has returned (and after an abort)."""
        return self._info

    @property
    def entries(self) -> int:
        return self._builder.entries

    @property
    def file_size(self) -> int:
        """Bytes written so far (an estimate of the finished file's size)."""
        return self._builder.file_size

    def put(self, key: object, value: object) -> None:
        self._add(as_key(key), _PUT, as_value(value))

    def delete(self, key: object) -> None:
        self._add(as_key(key), _DELETE, b"")

    def _add(self, key: bytes, seq_kind: int, value: bytes) -> None:
        self._check_open()
        if self._last is not None and key <= self._last:
            raise ValueError(f"keys must be strictly ascending: {key!r} after {self._last!r}")
        if self._columns:
            self._end_columns()
        self._builder.add(key, 0, seq_kind, value)
        self._last = key

    def put_sorted(self, keys: list[bytes], values: list[bytes]) -> None:
        """Add many values at once: ``keys`` strictly ascending (and above
        every key added before), ``values`` of the same length; both lists
        of bytes. The fast path for bulk writers."""
        self._check_open()
        n = len(keys)
        if len(values) != n:
            raise ValueError(f"put_sorted got {n} keys and {len(values)} values")
        if not n:
            return
        if set(map(type, keys)) != {bytes} or set(map(type, values)) != {bytes}:  # C speed for bulk loads
            keys = [as_key(k) for k in keys]
            values = [as_value(v) for v in values]
        if max(map(len, keys)) > MAX_KEY_SIZE:
            raise SizeLimitError(f"a key is {max(map(len, keys))} bytes; the limit is {MAX_KEY_SIZE}")
        if max(map(len, values)) > MAX_VALUE_SIZE:
            raise SizeLimitError(f"a value is {max(map(len, values))} bytes; the limit is {MAX_VALUE_SIZE}")
        if self._columns:
            if self._last is not None and keys[0] <= self._last:  # (refused before the block is cut)
                raise ValueError("keys must be strictly ascending (put_sorted got keys out of order or repeated)")
            self._end_columns()
        try:
            self._builder.add_sorted(keys, [_PUT] * n, values, unique=True)
        except ValueError:
            raise ValueError("keys must be strictly ascending (put_sorted got keys out of order or repeated)") from None
        self._last = keys[-1]

    def put_columns(self, key_offsets, key_data, value_offsets, value_data) -> None:
        """Add many values at once given as two binary columns in Apache
        Arrow's layout: key i is ``key_data[key_offsets[i]:key_offsets[i +
        1]]``, value i likewise. ``*_offsets``: n + 1 non-decreasing
        integers (a numpy array, or the int32/int64 offsets buffer of an
        Arrow binary array viewed as one); ``*_data``: bytes-like. Keys
        strictly ascending and above every key added before. The entries
        are checked, cut into blocks and hashed for the filter with numpy,
        without a Python object per entry: the fast path for columnar
        sources (a Spark task's Arrow batches). Nothing is added if a check
        fails (ValueError, or SizeLimitError for a key or value too long)."""
        self._check_open()
        ko = _offsets(key_offsets, "key_offsets")
        vo = _offsets(value_offsets, "value_offsets")
        if len(ko) != len(vo):
            raise ValueError(f"put_columns got {len(ko) - 1} keys and {len(vo) - 1} values")
        n = len(ko) - 1
        if n < 1:
            return
        key_data = memoryview(key_data).cast("B")
        value_data = memoryview(value_data).cast("B")
        for name, offsets, data in (("key", ko, key_data), ("value", vo, value_data)):
            if offsets[0] < 0 or offsets[-1] > len(data) or np.any(np.diff(offsets) < 0):
                raise ValueError(f"{name} offsets must not decrease and must lie within the {name} data")
        klen = np.diff(ko)
        vlen = np.diff(vo)
        if int(klen.max()) > MAX_KEY_SIZE:
            raise SizeLimitError(f"a key is {int(klen.max())} bytes; the limit is {MAX_KEY_SIZE}")
        if int(vlen.max()) > MAX_VALUE_SIZE:
            raise SizeLimitError(f"a value is {int(vlen.max())} bytes; the limit is {MAX_VALUE_SIZE}")
        k0, kn, v0, vn = int(ko[0]), int(ko[-1]), int(vo[0]), int(vo[-1])
        cols = Columns(b"".join((key_data[k0:kn], value_data[v0:vn])), ko[:-1] - k0, klen,
                       vo[:-1] - v0 + (kn - k0), vlen, np.full(n, _PUT, dtype=np.uint64))
        if not cols.is_strictly_ascending() or (self._last is not None and cols.key(0) <= self._last):
            raise ValueError("keys must be strictly ascending (put_columns got keys out of order or repeated)")
        if not self._columns:
            self._builder.cut_block()
            self._columns = True
        self._builder.add_columns(cols)
        self._last = cols.key(n - 1)

    def _end_columns(self) -> None:
        """Entries come one at a time or as lists again after columns."""
        self._builder.cut_block()
        self._columns = False

    # -- ending ---------------------------------------------------------------

    def finish(self) -> TableInfo:
        """Write the index, filter and footer, fsync, and move the file to
        its path. A writer with no entries cannot finish (ValueError; the
        temporary file is removed): a table holds at least one key. Once
        finished, every call returns the same TableInfo and writes nothing;
        after an abort it raises ValueError."""
        if self._info is not None:
            return self._info
        self._check_open()
        if not self._builder.entries:
            self.abort()
            raise ValueError(f"{self.path}: a table needs at least one entry; nothing was added")
        try:
            props = self._builder.finish()
            self._file.sync()
            size = self._file.size
            self._file.close()
            self._fs.rename(self._tmp, self.path)
            self._fs.sync_dir(os.path.dirname(self.path) or ".")
        except BaseException:
            self.abort()
            raise
        self._done = True
        self._info = TableInfo(self.path, props.entries, size, props.smallest_key, props.largest_key)
        return self._info

    def abort(self) -> None:
        """Stop and remove the partial file. Safe to call more than once."""
        if self._done:
            return
        self._done = True
        self._file.close()
        try:
            self._fs.remove(self._tmp)
        except OSError:
            pass

    def _check_open(self) -> None:
        if self._info is not None:
            raise ValueError(f"{self.path}: this TableWriter has finished; it takes no more entries")
        if self._done:
            raise ValueError(f"{self.path}: this TableWriter was aborted; nothing was written")

    def __enter__(self) -> "TableWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            if not self._done:
                self.finish()
        else:
            self.abort()


def _offsets(offsets, name: str) -> np.ndarray:
    """``offsets`` as a 1-D int64 array (ValueError naming ``name`` if it is not one of integers)."""
    array = np.asarray(offsets)
    if array.ndim != 1 or array.dtype.kind not in "iu" or not len(array):
        raise ValueError(f"{name} must be a 1-D array of n + 1 integers, not {offsets!r:.60}")
    return array.astype(np.int64, copy=False)


def read_table(path: str | bytes | os.PathLike, *, fs: FileSystem | None = None) -> Iterator[tuple[bytes, bytes | None]]:
    """The entries of the table file at ``path`` in key order: ``(key,
    value)``, value None for a tombstone. For a table with several versions
    of a key (one written by a database), each version, newest first; a
    value with a time to live is given without its deadline. A merge
    operand (which only its database can fold) is a ValueError naming it."""
    fs = fs or DEFAULT_FS
    reader = TableReader(fs, os.fsdecode(path), 0, cache=None)
    try:
        for key, seq_kind, value in reader.entries():
            kind = seq_kind & 0xFF
            if kind == 0:
                yield key, None
            elif kind == 2:
                yield key, value[DEADLINE_SIZE:]
            elif kind == MERGE:
                raise ValueError(f"{reader.path}: the entry of key {key[:40]!r} is a merge operand, which only "
                                 "the database that wrote it can fold")
            else:
                yield key, value
    finally:
        reader.close()
