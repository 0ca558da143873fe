"""TableCache: keeps table files open, at most ``max_open_files`` of them.

An open TableReader hangs off its FileMeta (``meta.reader``), so the read path
finds it with one attribute load. When more than the limit are open, the
oldest-opened reader is detached (FIFO). A detached reader is not closed
explicitly: an iterator may still be reading it, and it closes its file when
the last reference goes away.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from lsmkv.base.filenames import table_name
from lsmkv.base.fs import FileSystem

from .cache import BlockCache
from .table.reader import IOStats, TableReader
from .version import FileMeta


class TableCache:
    def __init__(self, dbpath: str, fs: FileSystem, block_cache: BlockCache | None, io: IOStats,
                 capacity: int) -> None:
        self.dbpath = dbpath
        self.fs = fs
        self.block_cache = block_cache
        self.io = io
        self.capacity = capacity
        self._open: OrderedDict[int, FileMeta] = OrderedDict()
        self._lock = threading.Lock()

    def reader(self, meta: FileMeta) -> TableReader:
        reader = meta.reader
        if reader is not None:
            return reader
        with self._lock:
            if meta.reader is not None:
                return meta.reader
            reader = TableReader(self.fs, os.path.join(self.dbpath, table_name(meta.number)), meta.number,
                                 self.block_cache, self.io, global_seq=meta.global_seq)
            meta.reader = reader
            self._open[meta.number] = meta
            while len(self._open) > self.capacity:
                _, old = self._open.popitem(last=False)
                old.reader = None
            return reader

    def evict(self, number: int) -> None:
        """Forget a table (its file is being deleted) and free its cached blocks."""
        with self._lock:
            meta = self._open.pop(number, None)
            reader = meta.reader if meta is not None else None
            if meta is not None:
                meta.reader = None
        if reader is not None and self.block_cache is not None:
            self.block_cache.drop_reader(reader)

    def resident_bytes(self) -> dict[str, int]:
        """What the open tables keep in memory outside the block cache:
        ``{"tables", "index_bytes", "filter_bytes"}`` (TableReader.resident_bytes)."""
        with self._lock:
            readers = [m.reader for m in self._open.values() if m.reader is not None]
        index = filters = 0
        for reader in readers:
            i, f = reader.resident_bytes()
            index += i
            filters += f
        return {"tables": len(readers), "index_bytes": index, "filter_bytes": filters}

    def open_numbers(self) -> list[int]:
        """The numbers of the tables open now."""
        with self._lock:
            return list(self._open)

    def __len__(self) -> int:
        return len(self._open)

    def close(self) -> None:
        with self._lock:
            for meta in self._open.values():
                if meta.reader is not None:
                    meta.reader.close()
                    meta.reader = None
            self._open.clear()
