"""Engine adapters: every engine the bench drives, behind one small interface.

Each engine is ONE :class:`EngineAdapter` subclass, registered under its
``--engines`` name with :func:`register`. The runner never looks at an engine
beyond this interface, so adding an engine means adding one class here.

The interface (all keys and values are ``bytes``):

* ``put(key, value)``, ``get(key) -> bytes | None``, ``delete(key)``: one
  operation each, with the run's durability (``sync``) applied to writes.
* ``scan(start, limit) -> int``: read up to ``limit`` entries from the first
  key >= ``start``; returns how many were read.
* ``iterate(reverse) -> iterator of (key, value)``: the whole database in key
  order (or backwards); an adapter with ``ordered = False`` (no key order:
  no scanning workloads) returns it in its own order.
* ``write_batch(pairs)``: an atomic batch of puts without sync (used only by
  the untimed load).
* ``flush()``: push buffered writes into the engine's files (memtable flush,
  WAL checkpoint...), called untimed at the end of every phase.
* ``stats() -> dict``: the engine's own counters (may be empty).
* ``close()``.

Durability is the same for every engine: without ``--sync`` each write is
handed to the OS before the call returns (it survives a crash of the process,
not of the machine); with ``--sync`` each write is also flushed to stable
storage (fsync/fdatasync) before the call returns. docs/benchmarking.md
lists how each adapter maps that.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, ClassVar

log = logging.getLogger(__name__)

__all__ = ["EngineAdapter", "EngineSettings", "EngineUnavailable", "ENGINES", "register", "get_adapter",
           "availability"]


class EngineUnavailable(Exception):
    """The engine cannot run here; the message is one line with a hint."""


@dataclass
class EngineSettings:
    """What the run asks of every engine."""

    sync: bool = False
    cache_size: int | None = None
    threads: int = 1
    options: dict[str, Any] = field(default_factory=dict)


class EngineAdapter:
    """The interface the runner drives (see the module docstring)."""

    #: The name used in ``--engines``.
    name: ClassVar[str] = "?"
    #: What the engine is, for tables and reports.
    title: ClassVar[str] = "?"
    #: How to get the engine when it is missing.
    install_hint: ClassVar[str] = ""
    #: Whether the engine keeps keys in order (scans, ordered iteration).
    #: Workloads that scan are skipped, with a note, on engines that do not.
    ordered: ClassVar[bool] = True

    @classmethod
    def skip_reason(cls, workload) -> str | None:
        """Why this engine does not run ``workload`` (a note in the results),
        or None: it runs it."""
        if workload.scans and not cls.ordered:
            return f"it scans key ranges; {cls.name} keeps no key order"
        return None

    def __init__(self, path: str, settings: EngineSettings) -> None:
        self.path = path
        self.settings = settings
        #: Things a reader of the results should know about this engine's setup.
        self.notes: list[str] = []
        #: The settings actually applied (recorded in results.json).
        self.applied: dict[str, Any] = {}

    @classmethod
    def check_available(cls) -> None:
        """Raise EngineUnavailable (one line, with a hint) if the engine cannot run."""

    @classmethod
    def version(cls) -> str:
        return "?"

    def put(self, key: bytes, value: bytes) -> None:
        raise NotImplementedError

    def get(self, key: bytes) -> bytes | None:
        raise NotImplementedError

    def delete(self, key: bytes) -> None:
        raise NotImplementedError

    def scan(self, start: bytes, limit: int) -> int:
        raise NotImplementedError

    def iterate(self, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        raise NotImplementedError

    def write_batch(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        for k, v in pairs:
            self.put(k, v)

    def flush(self) -> None:
        pass

    def compact_all(self) -> None:
        """Bring an LSM-tree's data into one sorted run (its compact_range
        over everything), so that a read probes one table; other engines
        have nothing to do."""

    def stats(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        raise NotImplementedError


#: ``--engines`` name -> adapter class, in registration order.
ENGINES: dict[str, type[EngineAdapter]] = {}


def register(cls: type[EngineAdapter]) -> type[EngineAdapter]:
    ENGINES[cls.name] = cls
    return cls


def get_adapter(name: str) -> type[EngineAdapter]:
    try:
        return ENGINES[name]
    except KeyError:
        raise EngineUnavailable(f"{name}: no such engine; choose from {', '.join(ENGINES)}") from None


def availability(name: str) -> str | None:
    """None if the engine can run, else the one-line reason."""
    try:
        get_adapter(name).check_available()
    except EngineUnavailable as exc:
        return str(exc)
    return None


def _import(module: str, engine: str, hint: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise EngineUnavailable(f"{engine}: not installed; {hint}") from None


_REFERENCES_HINT = "pip install 'lsmkv[references]'"


# --- this project's engines ---------------------------------------------------------------------

class _ProjectEngine(EngineAdapter):
    """lsmkv and btree share one API and one open (``lsmkv.stores.open_store``, by the
    adapter's engine name); the subclasses only name the module (checked for availability)
    and the cache knob."""

    module: ClassVar[str] = "?"
    cache_option: ClassVar[str] = "?"

    @classmethod
    def _module(cls):
        mod = _import(cls.module, cls.name, "install this project: pip install -e .")
        if not callable(getattr(mod, "open", None)):
            raise EngineUnavailable(f"{cls.name}: {cls.module}.open() does not exist in this build yet "
                                    f"(the engine has not landed)")
        return mod

    @classmethod
    def check_available(cls) -> None:
        cls._module()

    @classmethod
    def version(cls) -> str:
        from lsmkv.base.build import BUILD
        try:
            from importlib.metadata import version
            number = version("lsmkv")
        except Exception:  # noqa: BLE001 - a version string is best effort
            number = "?"
        return f"{number}, {BUILD.describe()}"

    def __init__(self, path: str, settings: EngineSettings) -> None:
        super().__init__(path, settings)
        self._module()  # EngineUnavailable if it cannot run here
        from lsmkv.stores import open_store
        options = dict(settings.options)
        if settings.cache_size is not None and self.cache_option not in options:
            options[self.cache_option] = settings.cache_size
        self.applied = dict(options)
        self.db = db = open_store(path, engine=self.name, **options)
        sync = settings.sync
        # Bind straight to the engine's methods: no adapter frame per operation.
        self.get = db.get  # type: ignore[method-assign]
        if sync:
            self.put = lambda k, v: db.put(k, v, sync=True)  # type: ignore[method-assign]
            self.delete = lambda k: db.delete(k, sync=True)  # type: ignore[method-assign]
        else:
            self.put = db.put  # type: ignore[method-assign]
            self.delete = db.delete  # type: ignore[method-assign]

    def scan(self, start: bytes, limit: int) -> int:
        n = 0
        for _ in islice(self.db.scan(start=start), limit):
            n += 1
        return n

    def iterate(self, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        return iter(self.db.scan(reverse=reverse))

    def write_batch(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        with self.db.write_batch(sync=False) as batch:
            for k, v in pairs:
                batch.put(k, v)

    def flush(self) -> None:
        self.db.flush()

    def stats(self) -> dict[str, Any]:
        return dict(self.db.stats())

    def close(self) -> None:
        self.db.close()


@register
class LsmAdapter(_ProjectEngine):
    name = "lsm"
    title = "lsmkv (this project's LSM-tree)"
    module = "lsmkv"
    cache_option = "block_cache_size"

    def compact_all(self) -> None:
        self.db.compact_range()


@register
class BtreeAdapter(_ProjectEngine):
    name = "btree"
    title = "btree (this project's B+tree)"
    module = "btree"
    cache_option = "cache_size"


# --- SQLite (standard library) ------------------------------------------------------------------

@register
class SqliteAdapter(EngineAdapter):
    """A WITHOUT ROWID table (a B-tree keyed by the key), WAL journal, one
    autocommit transaction per write; synchronous=NORMAL, or FULL with --sync."""

    name = "sqlite"
    title = "SQLite (stdlib sqlite3, WAL)"

    @classmethod
    def version(cls) -> str:
        import sqlite3
        return sqlite3.sqlite_version

    def __init__(self, path: str, settings: EngineSettings) -> None:
        super().__init__(path, settings)
        import sqlite3
        os.makedirs(path, exist_ok=True)
        self.conn = conn = sqlite3.connect(os.path.join(path, "kv.sqlite"), isolation_level=None,
                                           check_same_thread=False, cached_statements=64)
        conn.execute("PRAGMA journal_mode=WAL")
        synchronous = "FULL" if settings.sync else "NORMAL"
        conn.execute(f"PRAGMA synchronous={synchronous}")
        self.applied = {"journal_mode": "WAL", "synchronous": synchronous}
        if settings.cache_size is not None:
            kib = max(1, settings.cache_size // 1024)
            conn.execute(f"PRAGMA cache_size=-{kib}")
            self.applied["cache_size"] = f"-{kib} (KiB)"
        conn.execute("CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")
        execute = conn.execute
        upsert = "INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v"
        select = "SELECT v FROM kv WHERE k = ?"
        remove = "DELETE FROM kv WHERE k = ?"
        # One connection shared by the worker threads: every statement holds the lock
        # (uncontended with one thread; it costs about 0.1 µs).
        self._lock = lock = threading.Lock()

        def put(k: bytes, v: bytes) -> None:
            with lock:
                execute(upsert, (k, v))

        def get(k: bytes) -> bytes | None:
            with lock:
                row = execute(select, (k,)).fetchone()
            return None if row is None else row[0]

        def delete(k: bytes) -> None:
            with lock:
                execute(remove, (k,))

        self.put, self.get, self.delete = put, get, delete  # type: ignore[method-assign]

    def scan(self, start: bytes, limit: int) -> int:
        with self._lock:
            rows = self.conn.execute("SELECT k, v FROM kv WHERE k >= ? ORDER BY k LIMIT ?",
                                     (start, limit)).fetchall()
        return len(rows)

    def iterate(self, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        order = "DESC" if reverse else "ASC"
        return iter(self.conn.execute(f"SELECT k, v FROM kv ORDER BY k {order}"))

    def write_batch(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        with self._lock:
            self.conn.execute("BEGIN")
            self.conn.executemany(
                "INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v", pairs)
            self.conn.execute("COMMIT")

    def flush(self) -> None:
        with self._lock:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def stats(self) -> dict[str, Any]:
        with self._lock:
            page_size = self.conn.execute("PRAGMA page_size").fetchone()[0]
            page_count = self.conn.execute("PRAGMA page_count").fetchone()[0]
            free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
        return {"engine": "sqlite", "page_size": page_size, "page_count": page_count, "freelist_count": free}

    def close(self) -> None:
        self.conn.close()


# --- RocksDB (rocksdict) ------------------------------------------------------------------------

def _rocksdb_statistics(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(" COUNT : ")
        if sep:
            try:
                out[name.strip()] = int(rest.split()[0])
            except (ValueError, IndexError):
                pass
    return out


@register
class RocksdbAdapter(EngineAdapter):
    """rocksdict in raw (bytes) mode: default options except a 4 MiB memtable, a block
    cache of --cache-size, a 10 bits/key bloom filter, statistics on; WriteOptions.sync = --sync.

    ``settings.options`` (used by bench suites that configure RocksDB like
    lsmkv) override that: each ``name: value`` calls ``Options.set_<name>(value)``,
    except ``compression`` (a ``DBCompressionType`` name such as ``"zstd"``),
    ``statistics`` (False: off) and ``bloom_bits_per_key``."""

    name = "rocksdb"
    title = "RocksDB (rocksdict)"
    install_hint = _REFERENCES_HINT
    WRITE_BUFFER_SIZE = 4 << 20

    @classmethod
    def check_available(cls) -> None:
        _import("rocksdict", cls.name, cls.install_hint)

    @classmethod
    def version(cls) -> str:
        from importlib.metadata import version
        return "rocksdict " + version("rocksdict")

    def __init__(self, path: str, settings: EngineSettings) -> None:
        super().__init__(path, settings)
        rd = _import("rocksdict", self.name, self.install_hint)
        options = dict(settings.options)
        statistics = bool(options.pop("statistics", True))
        bloom_bits = options.pop("bloom_bits_per_key", 10)
        compression = options.pop("compression", None)
        opts = rd.Options(raw_mode=True)
        opts.create_if_missing(True)
        if statistics:
            opts.enable_statistics()
        # The memtable size of lsmkv's and LevelDB's defaults (RocksDB's own is 64 MiB), so
        # that all three LSM-trees flush and compact at the same data sizes.
        opts.set_write_buffer_size(self.WRITE_BUFFER_SIZE)
        self.applied = {"write_buffer_size": self.WRITE_BUFFER_SIZE, "bloom_bits_per_key": bloom_bits,
                        "statistics": statistics, "sync": settings.sync}
        for name, value in options.items():
            setter = getattr(opts, f"set_{name}", None)
            if setter is None:
                raise ValueError(f"rocksdb: no option {name!r} (rocksdict's Options has no set_{name})")
            setter(value)
            self.applied[name] = value
        if compression is not None:
            opts.set_compression_type(getattr(rd.DBCompressionType, compression)())
            self.applied["compression"] = compression
        table = rd.BlockBasedOptions()
        table.set_bloom_filter(bloom_bits, False)
        if settings.cache_size is not None:
            table.set_block_cache(rd.Cache(settings.cache_size))
            self.applied["block_cache"] = settings.cache_size
        opts.set_block_based_table_factory(table)
        self._opts = opts
        self.db = db = rd.Rdict(path, options=opts)
        wo = rd.WriteOptions()
        wo.sync = settings.sync
        db.set_write_options(wo)
        self._rd = rd
        self.put, self.get, self.delete = db.put, db.get, db.delete  # type: ignore[method-assign]

    def scan(self, start: bytes, limit: int) -> int:
        it = self.db.iter()
        it.seek(start)
        n = 0
        while n < limit and it.valid():
            it.key()
            it.value()
            it.next()
            n += 1
        return n

    def iterate(self, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        return iter(self.db.items(backwards=reverse))

    def write_batch(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        wb = self._rd.WriteBatch(raw_mode=True)
        for k, v in pairs:
            wb.put(k, v)
        wo = self._rd.WriteOptions()
        wo.sync = False
        self.db.write(wb, wo)

    def flush(self) -> None:
        self.db.flush(True)

    def compact_all(self) -> None:
        self.db.flush(True)
        self.db.compact_range(None, None)

    def stats(self) -> dict[str, Any]:
        s = _rocksdb_statistics(self._opts.get_statistics() or "")
        gets = s.get("rocksdb.number.keys.read", 0)
        written = s.get("rocksdb.wal.bytes", 0) + s.get("rocksdb.flush.write.bytes", 0) + \
            s.get("rocksdb.compact.write.bytes", 0)
        out: dict[str, Any] = {
            "engine": "rocksdb",
            "user_bytes_written": s.get("rocksdb.bytes.written", 0),
            "bytes_written": written,
            "wal_bytes_written": s.get("rocksdb.wal.bytes", 0),
            "flush_bytes_written": s.get("rocksdb.flush.write.bytes", 0),
            "compaction_bytes_written": s.get("rocksdb.compact.write.bytes", 0),
            "stall_seconds": s.get("rocksdb.stall.micros", 0) / 1e6,
            "gets": gets,
            "blocks_read": s.get("rocksdb.block.cache.miss", 0),
        }
        levels = []
        for level in range(7):
            n = self.db.property_int_value(f"rocksdb.num-files-at-level{level}")
            levels.append(int(n or 0))
        out["files_per_level"] = levels
        return out

    def close(self) -> None:
        self.db.close()


# --- LevelDB (plyvel) ---------------------------------------------------------------------------

@register
class LeveldbAdapter(EngineAdapter):
    """plyvel: an LRU block cache of --cache-size, a 10 bits/key bloom filter; put/delete(sync=--sync).
    ``settings.options`` are further plyvel.DB keyword arguments (``write_buffer_size``,
    ``compression``...), overriding those."""

    name = "leveldb"
    title = "LevelDB (plyvel)"
    install_hint = _REFERENCES_HINT

    @classmethod
    def check_available(cls) -> None:
        _import("plyvel", cls.name, cls.install_hint)

    @classmethod
    def version(cls) -> str:
        import plyvel
        return f"leveldb {plyvel.__leveldb_version__} (plyvel {plyvel.__version__})"

    def __init__(self, path: str, settings: EngineSettings) -> None:
        super().__init__(path, settings)
        plyvel = _import("plyvel", self.name, self.install_hint)
        kwargs: dict[str, Any] = {"create_if_missing": True, "bloom_filter_bits": 10}
        if settings.cache_size is not None:
            kwargs["lru_cache_size"] = settings.cache_size
        kwargs.update(settings.options)
        self.applied = dict(kwargs, sync=settings.sync)
        self.db = db = plyvel.DB(path, **kwargs)
        self.get = db.get  # type: ignore[method-assign]
        if settings.sync:
            self.put = lambda k, v: db.put(k, v, sync=True)  # type: ignore[method-assign]
            self.delete = lambda k: db.delete(k, sync=True)  # type: ignore[method-assign]
        else:
            self.put, self.delete = db.put, db.delete  # type: ignore[method-assign]
        self.notes.append("leveldb: flush() is a no-op (LevelDB has no memtable flush call); "
                          "its write-ahead log holds unflushed writes")

    def scan(self, start: bytes, limit: int) -> int:
        n = 0
        with self.db.iterator(start=start) as it:
            for _ in islice(it, limit):
                n += 1
        return n

    def iterate(self, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        return iter(self.db.iterator(reverse=reverse))

    def write_batch(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        with self.db.write_batch(sync=False) as wb:
            for k, v in pairs:
                wb.put(k, v)

    def compact_all(self) -> None:
        self.db.compact_range()

    def stats(self) -> dict[str, Any]:
        levels = []
        for level in range(7):
            raw = self.db.get_property(f"leveldb.num-files-at-level{level}".encode())
            levels.append(int(raw or 0))
        return {"engine": "leveldb", "files_per_level": levels}

    def close(self) -> None:
        self.db.close()


# --- LMDB (lmdb) --------------------------------------------------------------------------------

@register
class LmdbAdapter(EngineAdapter):
    """py-lmdb: one write transaction per write; sync=metasync=--sync (no fsync
    at commit without it). LMDB has no cache of its own: it reads through mmap,
    so the OS page cache is its cache and --cache-size does not apply."""

    name = "lmdb"
    title = "LMDB (py-lmdb)"
    install_hint = _REFERENCES_HINT
    MAP_SIZE = 64 << 30

    @classmethod
    def check_available(cls) -> None:
        _import("lmdb", cls.name, cls.install_hint)

    @classmethod
    def version(cls) -> str:
        import lmdb
        return "lmdb " + ".".join(map(str, lmdb.version())) + f" (py-lmdb {lmdb.__version__})"

    def __init__(self, path: str, settings: EngineSettings) -> None:
        super().__init__(path, settings)
        lmdb = _import("lmdb", self.name, self.install_hint)
        os.makedirs(path, exist_ok=True)
        self.env = env = lmdb.open(path, map_size=self.MAP_SIZE, sync=settings.sync, metasync=settings.sync,
                                   writemap=False, max_readers=max(126, 2 * settings.threads))
        self.applied = {"map_size": self.MAP_SIZE, "sync": settings.sync, "metasync": settings.sync}
        if settings.cache_size is not None:
            self.notes.append("lmdb: no cache of its own (reads go through mmap and the OS page cache); "
                              "--cache-size does not apply")
        begin = env.begin

        def put(k: bytes, v: bytes) -> None:
            with begin(write=True) as txn:
                txn.put(k, v)

        def get(k: bytes) -> bytes | None:
            with begin() as txn:
                return txn.get(k)

        def delete(k: bytes) -> None:
            with begin(write=True) as txn:
                txn.delete(k)

        self.put, self.get, self.delete = put, get, delete  # type: ignore[method-assign]

    def scan(self, start: bytes, limit: int) -> int:
        n = 0
        with self.env.begin() as txn:
            cur = txn.cursor()
            if cur.set_range(start):
                for _ in islice(cur.iternext(), limit):
                    n += 1
        return n

    def iterate(self, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        txn = self.env.begin()
        try:
            cur = txn.cursor()
            if reverse:
                cur.last()
                yield from cur.iterprev()
            else:
                cur.first()
                yield from cur.iternext()
        finally:
            txn.abort()

    def write_batch(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        with self.env.begin(write=True) as txn:
            for k, v in pairs:
                txn.put(k, v)

    def flush(self) -> None:
        self.env.sync(True)

    def stats(self) -> dict[str, Any]:
        st = self.env.stat()
        return {"engine": "lmdb", "entries": st["entries"], "depth": st["depth"],
                "branch_pages": st["branch_pages"], "leaf_pages": st["leaf_pages"],
                "overflow_pages": st["overflow_pages"]}

    def close(self) -> None:
        self.env.close()


# --- What Python programs use as a persistent dict: diskcache and the stdlib's dbm ---------------

@register
class DiskcacheAdapter(EngineAdapter):
    """diskcache.Cache (SQLite underneath, WAL, synchronous=NORMAL by default;
    FULL with --sync). Keys are kept in insertion order, not key order: no
    scans. The most used disk-backed key-value store for Python."""

    name = "diskcache"
    title = "diskcache (Cache, on SQLite)"
    install_hint = _REFERENCES_HINT
    ordered = False

    @classmethod
    def check_available(cls) -> None:
        _import("diskcache", cls.name, cls.install_hint)

    @classmethod
    def version(cls) -> str:
        import diskcache
        return f"diskcache {diskcache.__version__}"

    def __init__(self, path: str, settings: EngineSettings) -> None:
        super().__init__(path, settings)
        diskcache = _import("diskcache", self.name, self.install_hint)
        options: dict[str, Any] = {}
        if settings.sync:
            options["sqlite_synchronous"] = 2
        if settings.cache_size is not None:
            options["sqlite_cache_size"] = max(1, settings.cache_size // 4096)
        self.cache = cache = diskcache.Cache(path, **options)
        self.applied = dict(options)
        self.get = cache.get  # type: ignore[method-assign]
        self.put = cache.set  # type: ignore[method-assign]
        self.delete = cache.delete  # type: ignore[method-assign]

    def iterate(self, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        # The cache's own order (insertion), as its users iterate it:
        # iterkeys() (key order) slows down as it goes on a large cache
        # (measured at 1,000,000 entries with a read of each: 71,090
        # entries/s over the first 10,000, 21,197 over the fifth, and about
        # 2,000 over a whole scan; iter() held 97,000).
        cache = self.cache
        keys = reversed(cache) if reverse else iter(cache)
        return ((k, cache[k]) for k in keys)

    def write_batch(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        with self.cache.transact():
            for k, v in pairs:
                self.cache.set(k, v)

    def stats(self) -> dict[str, Any]:
        return {"engine": "diskcache", "entries": len(self.cache)}

    def close(self) -> None:
        self.cache.close()


@register
class DbmAdapter(EngineAdapter):
    """The standard library's dbm, in the best module this interpreter has
    (dbm.sqlite3 on Python 3.13+, else dbm.gnu, dbm.ndbm, dbm.dumb), as
    ``dbm.open`` picks for a new file. No key order: no scans. dbm.dumb
    writes each value to its data file and each key to its index file as it
    goes; --sync is not available (dbm has no fsync)."""

    name = "dbm"
    title = "dbm (standard library)"
    ordered = False

    @classmethod
    def module_name(cls) -> str:
        import dbm
        for name in getattr(dbm, "_names", ["dbm.dumb"]):
            try:
                importlib.import_module(name)
                return name
            except ImportError:
                continue
        return "dbm.dumb"  # pragma: no cover - dbm.dumb always imports

    @classmethod
    def version(cls) -> str:
        return cls.module_name()

    @classmethod
    def skip_reason(cls, workload) -> str | None:
        if workload.name == "deleterandom" and cls.module_name() == "dbm.dumb":
            return ("dbm.dumb rewrites its whole index file on every delete, so deleting a share of the "
                    "records takes time quadratic in their number (hours at the default size)")
        return super().skip_reason(workload)

    def __init__(self, path: str, settings: EngineSettings) -> None:
        super().__init__(path, settings)
        if settings.sync:
            raise EngineUnavailable("dbm: no fsync in the dbm interface; run without --sync")
        os.makedirs(path, exist_ok=True)
        module = importlib.import_module(self.module_name())
        self.db = db = module.open(os.path.join(path, "kv"), "c")
        self.applied = {"module": self.module_name()}
        self.get = db.get  # type: ignore[method-assign]
        self.put = db.__setitem__  # type: ignore[method-assign]

        def delete(k: bytes) -> None:
            try:
                del db[k]
            except KeyError:
                pass

        self.delete = delete  # type: ignore[method-assign]

    def iterate(self, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        db = self.db
        return ((k, db[k]) for k in db.keys())

    def flush(self) -> None:
        sync = getattr(self.db, "sync", None)
        if sync is not None:
            sync()

    def stats(self) -> dict[str, Any]:
        return {"engine": "dbm", "module": self.module_name()}

    def close(self) -> None:
        self.db.close()
