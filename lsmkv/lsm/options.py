"""Options: every knob of the LSM engine, its default and its validation.

``lsmkv.open(path, **options)`` builds an :class:`Options` from keyword
arguments; an unknown name or a bad value raises OptionError naming it, before
anything on disk is touched.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable

from lsmkv.base.errors import OptionError
from lsmkv.base.fs import DEFAULT_FS, FileSystem
from lsmkv.base.log_syncer import check_sync_options

KiB = 1024
MiB = 1024 * 1024
#: Largest block_size (readers refuse larger blocks as damaged: table/format.py).
MAX_BLOCK_SIZE = 64 * MiB
#: zstandard's compression levels: its fastest mode and its smallest output.
MIN_COMPRESSION_LEVEL = -(1 << 17)
MAX_COMPRESSION_LEVEL = 22


@dataclass
class Options:
    #: Create the directory and an empty database if missing.
    create_if_missing: bool = True
    #: Fail if the database already exists.
    error_if_exists: bool = False
    #: Open without writing anything (no lock, no recovery flush, no file
    #: deletion); any number of read-only handles may coexist. The handle sees
    #: the database as it was when opened.
    read_only: bool = False

    #: Bytes a memtable accepts before it becomes immutable and is flushed to
    #: a level-0 table, counted as key + value + 16 bytes per write. Memory
    #: use is higher: Python objects add about 150 bytes per write, so a
    #: 4 MiB memtable of 100-byte values takes about 8 MiB of RAM (and up to
    #: 1 + max_immutable_memtables of them exist at once).
    write_buffer_size: int = 4 * MiB
    #: Immutable memtables allowed to wait for flushing; writers stall (and the
    #: stall is counted) when this many are queued.
    max_immutable_memtables: int = 2

    #: Target uncompressed size of a table's data block.
    block_size: int = 4 * KiB
    #: "zstd" or None.
    compression: str | None = "zstd"
    #: zstandard level of the tables at the bottom of the tree, where most
    #: data lives and stays: compactions with no data below their output
    #: (negative levels are zstd's fast modes; 22 is the smallest).
    compression_level: int = 3
    #: zstandard level of every other table: flushes (level 0) and
    #: compactions with data below their output. That data is merged again
    #: soon, so these tables favour speed (as RocksDB's bottommost_compression
    #: does); None uses compression_level everywhere.
    upper_compression_level: int | None = -1
    #: Bloom filter bits per key (10 gives about 1% false positives; 0 disables).
    bloom_bits_per_key: int = 10
    #: Bytes of table blocks kept in the block cache (charged by their
    #: uncompressed size plus the objects a decoded block needs). None: 1/16
    #: of physical memory, at least 32 MiB, at most 1 GiB (DEFAULT_RULE of
    #: lsmkv/base/cache_size.py; stats()["block_cache"] shows the size in
    #: use); 0: no cache.
    block_cache_size: int | None = None
    #: Table files kept open (readers with their decoded index and filter).
    max_open_files: int = 1000

    #: Leveled compaction (compaction.py): level 1's target size; each deeper
    #: level's target is level_size_multiplier times the one above.
    level1_max_bytes: int = 16 * MiB
    level_size_multiplier: int = 10
    #: Compaction outputs are cut at about this size.
    target_file_size: int = 2 * MiB
    #: Level-0 table counts: compact at the first, slow writers down at the
    #: second, stop them (until compaction catches up) at the third.
    l0_compaction_trigger: int = 4
    l0_slowdown_trigger: int = 8
    l0_stop_trigger: int = 12
    #: While slowed down, writers are held to at most this many bytes per
    #: second; the rate drops further while level 0 keeps growing and
    #: recovers as it shrinks (write_controller.py).
    delayed_write_rate: int = 16 * MiB
    #: Outputs are also cut before they overlap more than this many times
    #: target_file_size bytes of the level below them.
    max_grandparent_overlap_factor: int = 10
    #: Turn off background compaction (tables accumulate in level 0;
    #: compact_range() still works).
    disable_auto_compactions: bool = False
    #: Where merges run: "process" (a worker process, so compaction does not
    #: compete with writers for the GIL) or "thread". A custom ``fs`` always
    #: uses "thread", since the worker does its own I/O.
    compaction_executor: str = "process"

    #: How log corruption found at open is handled: "strict" raises
    #: CorruptionError for any damaged record except a torn tail (which was
    #: never acknowledged as synced); "salvage" skips damaged records, keeps
    #: every intact batch, and reports what was dropped in stats()["recovery"].
    wal_recovery_mode: str = "strict"

    #: Group commit (lsmkv/base/write_queue.py, lsmkv/base/log_syncer.py): concurrent writers
    #: share one log append, and ``sync=True`` writers one fsync, done by
    #: the log syncer thread while they wait (at most ``sync_timeout``).
    #: False: each sync=True write fsyncs the log itself while holding off
    #: every other writer (one fsync per write; sync_timeout does not apply).
    group_commit: bool = True
    #: Longest wait, in seconds, of a ``sync=True`` write for the log to be
    #: durable; then it raises SyncTimeoutError (the write stays applied; see
    #: docs/reliability.md for what is and is not promised). None: no limit.
    sync_timeout: float | None = 30.0
    #: Seconds the log syncer lingers before each fsync so that more sync
    #: writers share it (like a Kafka producer's linger.ms): raises sync
    #: latency by up to this much, lowers fsyncs per write under load.
    commit_delay: float = 0.0

    #: How ``db.merge(key, operand)`` operands fold into a value: a callable
    #: ``(key, existing value or None, operands oldest first) -> bytes``
    #: (lsmkv/base/merge_operators.py: UInt64Add, Append, Max). A store
    #: that holds operands records the operator's name; opening it without
    #: an operator, or with one of another name, raises OptionError.
    merge_operator: Callable | None = field(default=None, repr=False)

    #: The file-system layer (swap for fault injection in tests).
    fs: FileSystem = field(default=DEFAULT_FS, repr=False)
    #: The wall clock that dates puts with a ttl and judges expiry: seconds
    #: since the Unix epoch (tests pass a clock they control).
    ttl_clock: Callable[[], float] = field(default=time.time, repr=False)

    @property
    def upper_level(self) -> int:
        """The zstandard level of tables written above the bottom of the tree."""
        return self.compression_level if self.upper_compression_level is None else self.upper_compression_level

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> "Options":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise OptionError(f"unknown option {unknown[0]!r} for lsmkv.open(); known options: {', '.join(sorted(known))}")
        opts = cls(**kwargs)
        opts.validate()
        return opts

    def validate(self) -> None:
        def positive_int(name: str, minimum: int = 1) -> None:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise OptionError(f"option {name} must be an integer >= {minimum}, got {value!r}")

        for name in ("create_if_missing", "error_if_exists", "read_only", "disable_auto_compactions",
                     "group_commit"):
            if not isinstance(getattr(self, name), bool):
                raise OptionError(f"option {name} must be True or False, got {getattr(self, name)!r}")
        positive_int("write_buffer_size", 1)
        positive_int("max_immutable_memtables", 1)
        positive_int("block_size", 64)
        if self.block_size > MAX_BLOCK_SIZE:
            raise OptionError(f"option block_size must be at most {MAX_BLOCK_SIZE}, got {self.block_size!r}")
        if self.block_cache_size is not None:
            positive_int("block_cache_size", 0)
        positive_int("max_open_files", 10)
        positive_int("bloom_bits_per_key", 0)
        positive_int("level1_max_bytes", 1)
        positive_int("level_size_multiplier", 2)
        positive_int("target_file_size", 1)
        positive_int("l0_compaction_trigger", 1)
        positive_int("l0_slowdown_trigger", 1)
        positive_int("l0_stop_trigger", 1)
        positive_int("delayed_write_rate", 1)
        positive_int("max_grandparent_overlap_factor", 1)
        if not self.l0_compaction_trigger <= self.l0_slowdown_trigger <= self.l0_stop_trigger:
            raise OptionError("options must satisfy l0_compaction_trigger <= l0_slowdown_trigger <= "
                              f"l0_stop_trigger, got {self.l0_compaction_trigger}, "
                              f"{self.l0_slowdown_trigger}, {self.l0_stop_trigger}")
        if self.compaction_executor not in ("process", "thread"):
            raise OptionError(f"option compaction_executor must be 'process' or 'thread', "
                              f"got {self.compaction_executor!r}")
        if self.compression not in ("zstd", None):
            raise OptionError(f"option compression must be 'zstd' or None, got {self.compression!r}")
        for name in ("compression_level", "upper_compression_level"):
            level = getattr(self, name)
            if level is None and name == "upper_compression_level":
                continue
            if (not isinstance(level, int) or isinstance(level, bool)
                    or not MIN_COMPRESSION_LEVEL <= level <= MAX_COMPRESSION_LEVEL):
                raise OptionError(f"option {name} must be an integer from {MIN_COMPRESSION_LEVEL} to "
                                  f"{MAX_COMPRESSION_LEVEL} (zstandard levels; negative ones are its fast "
                                  f"modes), got {level!r}")
        if self.wal_recovery_mode not in ("strict", "salvage"):
            raise OptionError(f"option wal_recovery_mode must be 'strict' or 'salvage', got {self.wal_recovery_mode!r}")
        check_sync_options(self.sync_timeout, self.commit_delay)
        if not callable(self.ttl_clock):
            raise OptionError(f"option ttl_clock must be a callable returning seconds since the epoch, "
                              f"got {type(self.ttl_clock).__name__}")
        if self.merge_operator is not None and not callable(self.merge_operator):
            raise OptionError(f"option merge_operator must be a callable (key, existing, operands) -> bytes, "
                              f"got {type(self.merge_operator).__name__}")
        if not isinstance(self.fs, FileSystem):
            raise OptionError(f"option fs must be a lsmkv.base.fs.FileSystem, got {type(self.fs).__name__}")


def parse_option_text(text: str) -> tuple[str, Any]:
    """``name=value`` as typed on a command line (``lsmkv bench --lsm-opt``,
    ``lsmkv crashtest -o``) -> (name, value): an int (``1_048_576``,
    ``0x100``), a float, a bool (true/false/yes/no/on/off), None (none/null)
    or else the string. For either engine's options; OptionError (a
    ValueError) if it is not of that form."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise OptionError(f"engine option {text!r} is not of the form name=value")
    return name, _typed(value.strip())


def _typed(value: str) -> Any:
    low = value.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("none", "null"):
        return None
    try:
        return int(value.replace("_", ""), 0)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value
