"""DB: the LSM engine's orchestrator, the only place that knows every part.

DB holds the engine's state and locks, the write path, the read path,
snapshots, the publishing of new Versions, and opening and closing. What
is a concept of its own lives in its own module, as RocksDB splits DBImpl
over several files; the DB keeps the public method and hands the module
what it works on (values, or narrow callables: none of them sees the DB):

* recovery.py: replaying the logs at open into tables and a new manifest;
* error_handler.py: the error that stops writes, and resume()'s commit step;
* background.py: the flush thread, and the compactor's ttl wake-up
  (compactions run in the compactor, compactor.py);
* obsolete_files.py: deleting the files nothing needs any more;
* ingest.py, checkpoint.py: the work of ingest(), checkpoint(), split_keys();
* stats.py: the dict stats() returns;
* read_state.py: ReadState, what a reader sees;
* point_reads.py: get() and multi_get() on any read state at any sequence
  (DB.get writes the common case out itself);
* view_sources.py: scans, cursors and the sources of views on any read state;
* merge_operator_record.py: the merge operator's name in the manifest;
* approximate_size.py: approximate_size()'s estimate;
* snapshot.py: snapshots (a read-only handle's pin its read state);
* transactions.py: the engine's side of ``db.transaction()`` (the
  transaction itself is lsmkv/base/transaction.py's).

Write path (batch -> write queue -> log -> memtable): a writer hands its
batch to the write queue (lsmkv/base/write_queue.py, joined to the log
syncer by lsmkv/base/group_commit.py); the log writer of the moment
takes every batch queued, gives them consecutive sequence numbers, appends
them to the write-ahead log in one write, applies them to the memtable and
only then publishes them (``_last_seq``). A ``sync=True`` writer then waits
until the log syncer (lsmkv/base/log_syncer.py) has made the log durable past its
sequence -- one fsync for everyone waiting -- or ``sync_timeout`` passes. A
full memtable becomes immutable; a background thread writes it to a level-0
table, records the table in the manifest, and then the log it came from is
deleted. While a transaction is open (``_conflicts.active``), the log
writer validates the transaction batches of a group before the append and
records the keys of everything it applied after (transactions.py).

Read path: memtable, immutable memtables (newest first), level-0 tables
(newest first), then at most one table per deeper level; a table is skipped
by key range and bloom filter (point_reads.py). Scans and cursors merge all
sources (view_sources.py, cursor.py). Where the read state holds range
tombstones (``delete_range``), gets, multi_gets and views take
range_del_reads.py's path instead, which honours them.

Read-only handles build their view from the files a writer (in another
process, perhaps) leaves, at open and at each refresh() (catch_up.py).

Concurrency (docs/architecture.md has the full picture):
* the write queue's lock (``_writes``) is held by the log writer:
  sequence assignment, log append, memtable insert, memtable switch; also
  by flush(), resume() and close() to hold writers off (``exclusive()``).
* ``_log_sync_lock`` is held while the log is fsynced or replaced, so the
  log syncer's thread never syncs a log that a memtable switch closes.
* ``_state_lock`` guards replacing ``_state`` (the memtables and Version a
  reader sees) and is the lock of ``_bg_cond``, on which writers stall and
  the flush thread and the compactor wait for work; the error state
  changes under it too (error_handler.py).
* ``_manifest_lock`` serializes manifest edits.
* Readers take no lock: they read ``_last_seq`` and then ``_state`` (in that
  order, so the state holds every write up to that sequence) and work on
  those immutable objects, or on the memtable, which tolerates one writer
  and many readers.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from functools import partial
from typing import Iterable, Iterator as TypingIterator

try:
    import cython
except ImportError:
    from lsmkv.base.compile_hints import cython

from sortedcontainers import SortedList

from lsmkv.base.cache_size import default_capacity as default_cache_capacity
from lsmkv.base.conflicts import ConflictTracker
from lsmkv.base.cursor import Cursor
from lsmkv.base.dbdir import prepare_directory
from lsmkv.base.errors import BackgroundError, ClosedError, InvalidDatabaseError, ReadOnlyError
from lsmkv.base.filenames import LOCK, log_name
from lsmkv.base.group_commit import GroupCommit
from lsmkv.base.key_search import keys_bisect_left
from lsmkv.base.keys import MAX_KEY_SIZE, MAX_VALUE_SIZE, as_key, as_keys, as_optional_key, as_value, scan_bounds
from lsmkv.base.mapping import KeyValueMapping
from lsmkv.base.timer import Timer
from lsmkv.base.transaction import Transaction, TransactionLimits
from lsmkv.base.ttl import check_ttl, deadline_ms
from lsmkv.base.write_queue import WriteQueue, Writer

from .approximate_size import approximate_size
from .background import FlushThread, TtlWakeup
from .cache import BlockCache
from .catch_up import CatchUp, merged_memtable
from .checkpoint import split_keys, write_checkpoint
from .compactor import CompactionHost, Compactor
from .error_handler import ErrorHandler, flush_to_fresh_manifest
from .flush import write_table
from .ingest import IngestTable, inspect_tables, link_tables, remove_sources
from .memtable import MemTable
from .merge_operator_record import MergeOperatorRecord
from .obsolete_files import delete_obsolete_files
from .options import Options
from .point_reads import PointReads
from .read_state import ReadState
from .recovery import check_tables_present, clear_interrupted_creation, recover_for_writing
from .snapshot import Snapshot, pinned_snapshot
from .stats import lsm_stats
from .table.reader import IOStats, TableReader
from .table_cache import TableCache
from .transactions import (LsmTransactionHost, TransactionBatch, TransactionSnapshot, group_keys,
                           group_range_deletes, settle_group, validate_group)
from .ttl_value import with_deadline
from .version import FileMeta, Version, VersionEdit, VersionSet
from .view_sources import Views
from .wal import HEADER_SIZE as LOG_HEADER_SIZE, LogWriter
from .write_batch import (MAX_BATCH_BYTES, MERGE, OP_HEADER, TOMBSTONE, VALUE, VALUE_TTL, WriteBatch, encode_batch,
                          encode_single, encode_single_framed)
from .write_controller import WriteController

log = logging.getLogger(__name__)


class DB(KeyValueMapping):
    """An open lsmkv database. Create with :func:`lsmkv.open`. A
    ``collections.abc.MutableMapping`` of bytes to bytes (lsmkv/base/mapping.py)."""

    def __init__(self, path: str | bytes | os.PathLike, options: Options) -> None:
        self.path = os.fsdecode(path)  # str, bytes or os.PathLike
        self.options = options
        #: options.write_buffer_size, read by every write (a C integer, compiled).
        self._write_buffer_size = options.write_buffer_size
        self._fs = options.fs
        self._read_only = options.read_only
        self._closed = False
        #: [False] once closed: scans and cursors check it before each entry.
        self._alive = [True]
        self._lock_file = None
        self._log: LogWriter | None = None
        #: The write queue and the log syncer (lsmkv/base/group_commit.py).
        self._commits = GroupCommit(self._append_and_apply, group_commit=options.group_commit,
                                    sync_timeout=options.sync_timeout,
                                    check_writable=self._raise_not_writable,  # (only a read-only handle has no syncer)
                                    name=self.path)
        #: Writers queue here; the one holding its lock is the log writer.
        self._writes = self._commits.writes
        self._group_commit = options.group_commit
        self._ttl_clock = options.ttl_clock
        #: Folds merge operands (None: the handle refuses merges).
        self._merge_operator = options.merge_operator
        #: Held while the log is synced, or replaced: the syncer never syncs
        #: a log a memtable switch is closing.
        self._log_sync_lock = threading.Lock()
        #: Sequence of the last write appended to the log (handed to the OS).
        self._logged_seq = 0
        self._timer: Timer | None = None
        self._timer_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._bg_cond = threading.Condition(self._state_lock)
        self._manifest_lock = threading.Lock()
        #: Writes immutable memtables to tables (background.py); None on a
        #: read-only handle.
        self._flusher: FlushThread | None = None
        #: The background error: set when a failure stops writes (error_handler.py).
        self._errors = ErrorHandler(self.path, self._bg_cond)
        self._shutting_down = False
        self._snapshots: SortedList = SortedList()
        self._snapshot_lock = threading.Lock()
        self._pending_outputs: set[int] = set()
        self._io = IOStats()
        cache_size = default_cache_capacity() if options.block_cache_size is None else options.block_cache_size
        self._block_cache = BlockCache(cache_size) if cache_size else None
        self._tables = TableCache(self.path, self._fs, self._block_cache, self._io,
                                  1 << 62 if self._read_only else options.max_open_files)
        self._versions = VersionSet(self.path, self._fs)
        self._last_seq = 0
        self._state: ReadState = ReadState(MemTable(), (), self._versions.current)
        # Counters reported by stats().
        self._user_bytes_written = 0
        self._wal_bytes_written = 0
        self._flush_bytes_written = 0
        self._flush_count = 0
        self._ingest_count = 0
        self._ingest_bytes = 0
        self._gets = 0
        self._stall_count = 0
        self._stall_seconds = 0.0
        #: Level-0 pressure, updated whenever a Version is installed (the
        #: controller's verdicts are mirrored in two plain flags for the put path).
        self._write_control = WriteController(options.delayed_write_rate, options.l0_slowdown_trigger,
                                              options.l0_stop_trigger)
        self._l0_slowdown = False
        self._l0_stop = False
        self._compactor: Compactor | None = None
        #: Wakes the compactor at the earliest ttl deadline of the tables.
        self._ttl_wakeup = TtlWakeup(self._get_timer, self._ttl_clock, self._wake_compactor)
        self._recovery: dict = {}
        #: The operator's name in the manifest: checked at open, recorded
        #: before the first operand is written (merge_operator_record.py).
        self._merge_record = MergeOperatorRecord(self.path, self._merge_operator, self._versions, self._read_only,
                                                 self._check_open, self._check_writable, self._apply_edit)
        #: Read-only handles: follows the writer's manifest and logs
        #: (catch_up.py); refresh() runs it under ``_refresh_lock``.
        self._catch_up: CatchUp | None = None
        self._refresh_lock = threading.Lock()
        #: The commits' writes while transactions are open (lsmkv/base/conflicts.py).
        self._conflicts = ConflictTracker()
        refused = (f"{self.path} was opened with read_only=True; a transaction on it may read but not write"
                   if self._read_only else None)
        #: get() and multi_get() on any read state (point_reads.py); DB.get
        #: writes the common case out itself.
        self._reads = PointReads(self.path, self._alive, self._tables.reader, self._ttl_clock, self._merge_operator)
        self._get_in = self._reads.get_in
        self._multi_get_in = self._reads.multi_get_in
        self._merged = self._reads.merged
        self._unexpired = self._reads.unexpired
        #: Scans, cursors and view sources on any read state (view_sources.py).
        self._views = Views(self.path, self._alive, self._tables.reader, self._ttl_clock,
                            None if self._merge_operator is None else self._merged)
        self._view_finders = self._views.finders
        self._scan_in = self._views.scan_in
        self._iterator_in = self._views.cursor_in
        self._transaction_host = LsmTransactionHost(
            TransactionLimits(max_write_bytes=MAX_BATCH_BYTES, entry_overhead=OP_HEADER.size, writes_refused=refused),
            self.write, self._ttl_clock, self._conflicts, self._merge_operator)
        self._open()

    # ------------------------------------------------------------------
    # Opening and recovery
    # ------------------------------------------------------------------

    def _open(self) -> None:
        fs = self._fs
        opts = self.options
        if not self._read_only:
            clear_interrupted_creation(fs, self.path)
        exists = prepare_directory(self.path, "lsm", fs, create=opts.create_if_missing and not self._read_only)
        if exists and opts.error_if_exists:
            raise InvalidDatabaseError(f"{self.path} already exists and error_if_exists=True")
        try:
            if not self._read_only:
                self._lock_file = fs.lock(os.path.join(self.path, LOCK))
            if self._read_only:
                self._catch_up = CatchUp(self.path, fs, self._versions, self._tables,
                                         salvage=opts.wal_recovery_mode == "salvage")
                self._install_caught_up()
                self._merge_record.check_at_open()
                return
            if not exists:
                self._versions.write_new_manifest()
            self._versions.recover()
            self._merge_record.check_at_open()
            check_tables_present(fs, self.path, self._versions.current)
            recovered = recover_for_writing(fs, self.path, self._versions, opts, self._write_level0)
            self._recovery = recovered.report
            self._start_writing(recovered.log_number, recovered.last_sequence)
        except BaseException:
            self._release_resources()
            raise

    def _start_writing(self, new_log: int, max_seq: int) -> None:
        """After recovery (recovery.py): create the log the new manifest
        names, start the log syncer, publish the recovered state, delete what
        recovery made obsolete, and start the flush thread and the compactor."""
        versions = self._versions
        self._pending_outputs.clear()
        self._log = self._create_log(new_log)
        self._fs.sync_dir(self.path)
        self._last_seq = self._logged_seq = max_seq
        self._commits.start_syncer(self._sync_log,
                                   on_sync_failure=partial(self._errors.fail_writes, "syncing the log"),
                                   durable=max_seq, commit_delay=self.options.commit_delay, timer=self._get_timer)
        self._state = ReadState(MemTable(new_log), (), versions.current)
        self._delete_obsolete_files(at_open=True)
        self._update_write_pressure(versions.current)
        self._flusher = FlushThread(f"lsmkv-flush:{self.path}", self._bg_cond, self._oldest_immutable,
                                    lambda: self._errors.error, lambda: self._shutting_down,
                                    self._flush_immutable, self._errors.stop_writes)
        self._flusher.start()
        self._compactor = Compactor(CompactionHost(
            path=self.path, fs=self._fs, options=self.options, cond=self._bg_cond,
            stopped=lambda: self._errors.error is not None, shutting_down=lambda: self._shutting_down,
            current_version=lambda: self._state.version, live_snapshots=self._live_snapshots,
            new_file_number=self._versions.new_file_number, pending_outputs=self._pending_outputs,
            install=self._apply_edit, delete_obsolete_files=self._delete_obsolete_files,
            failed=self._errors.stop_writes, wall_clock=self._ttl_clock))
        self._compactor.start()
        self._wake_compactor()  # look at the scores once at open
        self._schedule_ttl_compaction(versions.current)

    # ------------------------------------------------------------------
    # Read-only handles: following the writer
    # ------------------------------------------------------------------

    def refresh(self) -> bool:
        """Read-only handles: move the view forward to what the writer (in
        another process) has written since the open or the last refresh:
        its manifest's new edits, then what its logs gained (catch_up.py).
        Returns True when writes this handle did not see before became
        visible (``stats()["last_sequence"]`` moved), False otherwise.
        Snapshots, scans and cursors taken before keep reading the view
        they started on, whatever the writer has deleted since. Never
        writes or removes a file; when it raises (CorruptionError naming
        the file, or LsmkvError if the writer kept replacing files), the
        view is unchanged. A writable handle's view is always current:
        there it does nothing and returns False."""
        self._check_open()
        if not self._read_only:
            return False
        with self._refresh_lock:
            self._check_open()
            before = self._last_seq
            self._install_caught_up()
            return self._last_seq > before

    def _install_caught_up(self) -> None:
        """Run the catch-up and publish its view: the state first, then the
        sequence (readers read them in the other order; the state's floor
        covers a reader that read the old sequence). Then forget the tables
        no Version in use references any more (their files close once the
        last reader lets go)."""
        caught = self._catch_up.run()
        seq = max(self._last_seq, caught.last_sequence)
        mems = caught.memtables
        with self._state_lock:
            self._state = ReadState(mems[0], mems[1:], caught.version, floor=seq, meta=caught.meta)
        self._last_seq = seq
        self._recovery = self._catch_up.report.as_dict()
        live = self._versions.live_table_numbers()
        for number in self._tables.open_numbers():
            if number not in live:
                self._tables.evict(number)

    # ------------------------------------------------------------------
    # Writes
    # ------------------------------------------------------------------

    def _create_log(self, number: int) -> LogWriter:
        # A log holds somewhat less than its memtable's charged size (which
        # counts per-entry overhead); it grows if a big batch needs it to.
        capacity = self.options.write_buffer_size + (self.options.write_buffer_size >> 3)
        return LogWriter(self._fs.create_log(os.path.join(self.path, log_name(number)), capacity))

    def put(self, key: object, value: object, sync: bool = False, ttl: float | None = None) -> None:
        """Set ``key`` to ``value``. With sync=True, returns once the write is
        durable (or raises SyncTimeoutError after ``sync_timeout``). With
        ``ttl`` (seconds), the key expires that long after this call: from
        then on it reads as absent (lsmkv/base/ttl.py)."""
        k = key if type(key) is bytes and len(key) <= MAX_KEY_SIZE else as_key(key)
        v = value if type(value) is bytes and len(value) <= MAX_VALUE_SIZE else as_value(value)
        if ttl is None:
            self._write_one(VALUE, k, v, sync)
        else:
            ttl = check_ttl(ttl)
            self._write_one(VALUE_TTL, k, with_deadline(deadline_ms(self._ttl_clock(), ttl), v), sync,
                            len(k) + len(v))

    def delete(self, key: object, sync: bool = False) -> None:
        """Remove ``key`` (not an error if it is absent)."""
        k = key if type(key) is bytes and len(key) <= MAX_KEY_SIZE else as_key(key)
        self._write_one(TOMBSTONE, k, b"", sync)

    def delete_range(self, start: object, end: object, sync: bool = False) -> None:
        """Delete every key k with start <= k < end (end exclusive, as
        RocksDB's DeleteRange): one range tombstone in the log and the
        memtable, whatever the number of keys it covers; reads honour it
        at once, compactions drop what it covers (range_tombstones.py).
        start == end deletes nothing; start > end raises InvalidArgumentError."""
        self._check_open()
        if self._read_only:
            raise ReadOnlyError(f"{self.path} was opened with read_only=True; writes are not allowed")
        if sync is not False and sync is not True:
            raise TypeError(f"sync must be True or False, not {type(sync).__name__}")
        batch = WriteBatch()
        batch.delete_range(start, end)
        self.write(batch, sync)

    def merge(self, key: object, operand: object, sync: bool = False) -> None:
        """Merge ``operand`` into ``key``: reads see the merge operator
        (``merge_operator=`` at open) folded over the key's value and its
        operands, oldest first (lsmkv/base/merge_operators.py). The operand
        is checked before anything is written (InvalidArgumentError);
        with sync=True, returns once the write is durable."""
        k = key if type(key) is bytes and len(key) <= MAX_KEY_SIZE else as_key(key)
        v = operand if type(operand) is bytes and len(operand) <= MAX_VALUE_SIZE else as_value(operand)
        if sync is not False and sync is not True:
            raise TypeError(f"sync must be True or False, not {type(sync).__name__}")
        self._merge_record.prepare(((MERGE, k, v),))
        self._write_one(MERGE, k, v, sync)

    def _write_one(self, kind: int, key: bytes, value: bytes, sync: bool, user_bytes: int = -1) -> None:
        if sync is not False and sync is not True:
            raise TypeError(f"sync must be True or False, not {type(sync).__name__}")
        if user_bytes < 0:
            user_bytes = len(key) + len(value)
        if self._l0_slowdown:
            self._write_control.delay(user_bytes)
        writes = self._writes
        if sync and self._group_commit:
            batch = WriteBatch()
            batch.ops.append((kind, key, value))
            batch.user_bytes = user_bytes
            self._commits.write_synced(batch)
        elif writes.try_lead():
            # Nobody else is writing: commit it here, a group of one (the
            # uncontended put's path, kept free of queue entries).
            try:
                mem = self._memtable_for_writing()
                log = self._log
                seq = self._last_seq + 1
                try:
                    if cython.compiled:  # (the record made in the buffer the log frames it in)
                        self._wal_bytes_written += log.add_framed(
                            encode_single_framed(seq, kind, key, value, LOG_HEADER_SIZE))
                    else:
                        self._wal_bytes_written += log.add_record(encode_single(seq, kind, key, value))
                    if sync and not self._group_commit:
                        log.sync()
                except BaseException as exc:
                    raise self._errors.fail_writes("writing the log", exc) from exc
                self._logged_seq = seq
                mem.add(seq, kind, key, value)
                self._last_seq = seq
                self._user_bytes_written += user_bytes
                if self._conflicts.active:  # (looked at after the write is published)
                    self._conflicts.record((key,))
            finally:
                writes.release()
        else:
            batch = WriteBatch()
            batch.ops.append((kind, key, value))
            batch.user_bytes = user_bytes
            self._commits.write(batch, sync)

    def write_batch(self, sync: bool = False) -> WriteBatch:
        """A batch to fill in a ``with`` block; written atomically when it exits."""
        if type(sync) is not bool:
            raise TypeError(f"sync must be True or False, not {type(sync).__name__}")
        self._check_open()
        if self._read_only:
            raise ReadOnlyError(f"{self.path} was opened with read_only=True; writes are not allowed")
        return WriteBatch(self.write, sync, self._ttl_clock, self._merge_operator)

    def write(self, batch: WriteBatch, sync: bool = False) -> None:
        """Apply ``batch`` atomically. With sync=True, returns once it is
        durable (or raises SyncTimeoutError after ``sync_timeout``)."""
        if sync is not False and sync is not True:
            raise TypeError(f"sync must be True or False, not {type(sync).__name__}")
        if not batch.ops:
            return
        if batch.merges or (type(batch) is TransactionBatch and any(op[0] == MERGE for op in batch.ops)):
            self._merge_record.prepare(batch.ops)
        if self._l0_slowdown:
            self._write_control.delay(batch.user_bytes)
        self._commits.write(batch, sync)

    def _memtable_for_writing(self) -> MemTable:
        """The memtable the next write goes to (a full one is switched for a
        new one first); raises while writes are stopped. The caller holds the
        log writer's role."""
        if self._log is None or self._errors.error is not None:
            self._raise_not_writable()
        mem = self._state.mem
        if mem.size >= self._write_buffer_size:
            self._switch_memtable()
            mem = self._state.mem
        return mem

    def _append_and_apply(self, group: list[Writer], sync_now: bool, validated: bool = False) -> None:
        """The log writer's work on a group (lsmkv/base/group_commit.py): the
        batches go to the log in one append (fsynced if ``sync_now``), then
        into the memtable, in order; then they are published. A group
        holding a transaction's batch is validated first (``validated``:
        it was): see _append_and_apply_validated."""
        if not validated:
            for writer in group:
                if type(writer.batch) is TransactionBatch:
                    self._append_and_apply_validated(group, sync_now)
                    return
        mem = self._memtable_for_writing()
        if mem.range_deletes_full:  # (only batches carry range tombstones)
            self._switch_memtable()
            mem = self._state.mem
        first = seq = self._last_seq + 1
        records = []
        user_bytes = 0
        for writer in group:
            batch = writer.batch
            records.append(encode_batch(seq, batch.ops))
            seq += len(batch.ops)
            writer.position = seq - 1
            user_bytes += batch.user_bytes
        try:
            self._wal_bytes_written += self._log.add_records(records)
            if sync_now:
                self._log.sync()
        except BaseException as exc:
            raise self._errors.fail_writes("writing the log", exc) from exc
        self._logged_seq = seq - 1
        for writer in group:
            ops = writer.batch.ops
            mem.add_batch(first, ops)
            first += len(ops)
            writer.committed = True
        self._last_seq = seq - 1
        self._user_bytes_written += user_bytes
        if self._conflicts.active:  # (looked at after the writes are published)
            self._conflicts.record(group_keys(group), group_range_deletes(group))

    def _append_and_apply_validated(self, group: list[Writer], sync_now: bool) -> None:
        """A group holding transaction batches: each is validated, in order,
        against the commits since its snapshot and the batches kept ahead of
        it; a refused one is left out (its writer gets the ConflictError), the
        rest are appended and applied as any group, and each transaction
        batch is told how it went (transactions.py)."""
        try:
            kept = validate_group(self._conflicts, group)
            if kept:
                self._append_and_apply(kept, sync_now, validated=True)
        except BaseException as exc:
            settle_group(group, exc)
            raise
        settle_group(group, None)

    def _sync_log(self) -> int:
        """The log syncer's work: fsync the log; returns the sequence that
        everything up to is now durable."""
        with self._log_sync_lock:
            log_writer = self._log
            if log_writer is None:
                raise ClosedError(f"{self.path}: database is closed")
            seq = self._logged_seq
            log_writer.sync()
            return seq

    def _get_timer(self) -> Timer:
        """The timing wheel of this database (sync timeouts), made on first use."""
        with self._timer_lock:
            if self._timer is None:
                self._timer = Timer(executor_threads=1, name=f"lsmkv-timer:{self.path}")
            return self._timer

    def _update_write_pressure(self, version: Version) -> None:
        if self.options.disable_auto_compactions:
            return
        control = self._write_control
        control.update(len(version.levels[0]), self._user_bytes_written, time.monotonic())
        self._l0_slowdown = control.slowdown
        self._l0_stop = control.stop

    def _check_writable(self) -> None:
        """Raises unless the handle can write now (open, writable, writes not stopped)."""
        if self._log is None or self._errors.error is not None:
            self._raise_not_writable()

    def _raise_not_writable(self) -> None:
        if self._closed:
            raise ClosedError(f"{self.path}: database is closed")
        if self._read_only:
            raise ReadOnlyError(f"{self.path} was opened with read_only=True; writes are not allowed")
        self._errors.raise_stopped()

    def _switch_memtable(self) -> None:
        """Make the memtable immutable and start a new one with a new log.
        Called with the write lock held; stalls while too many immutable
        memtables wait for flushing."""
        limit = self.options.max_immutable_memtables
        with self._bg_cond:
            if len(self._state.imms) >= limit or self._l0_stop:
                self._stall_count += 1
                started = time.perf_counter()
                while (len(self._state.imms) >= limit or self._l0_stop) and self._errors.error is None:
                    self._bg_cond.wait()
                self._stall_seconds += time.perf_counter() - started
            if self._errors.error is not None:
                self._raise_not_writable()
        number = self._versions.new_file_number()
        new_log = None
        try:
            new_log = self._create_log(number)
            # The new log's name is made durable before a synced write relies
            # on it, and the old log is synced so that a later synced write in
            # the new log can never survive a crash that loses earlier writes.
            self._fs.sync_dir(self.path)
            with self._log_sync_lock:
                self._log.sync()
                old_log, self._log = self._log, new_log
        except BaseException as exc:
            if new_log is not None:
                new_log.abandon()
            raise self._errors.fail_writes("starting a new log", exc) from exc
        old_log.close()
        # Everything written so far was in the old log: durable now.
        self._commits.syncer.mark_durable(self._logged_seq)
        with self._bg_cond:
            st = self._state
            self._state = ReadState(MemTable(number), (st.mem,) + st.imms, st.version)
            self._bg_cond.notify_all()

    # ------------------------------------------------------------------
    # Reads
    # ------------------------------------------------------------------

    @cython.locals(st=ReadState, mem=MemTable, imm=MemTable, reader=TableReader)
    def get(self, key: object, default: bytes | None = None) -> bytes | None:
        """The value of ``key``, or ``default`` if it is absent."""
        if self._closed:
            raise ClosedError(f"{self.path}: database is closed")
        seq = self._last_seq
        st = self._state
        if seq < st.floor:
            seq = st.floor
        k = key if type(key) is bytes else as_key(key)
        mem = st.mem
        if mem.range_dels is not None or st.range_dels:
            return self._get_in(st, k, seq, default)
        # The common case is written out here rather than shared with
        # point_reads.py through calls, and the memtable is looked at before
        # the loop over the immutable ones: each call, and each step of a
        # loop, is a measurable share of a get.
        version = mem._latest.get(k)
        if version is not None:
            while version is not None and version[0] > seq:
                version = version[3]
            if version is not None:
                kind = version[1]
                if kind == VALUE:
                    return version[2]
                if kind == MERGE:
                    return self._merged(st, k, seq)
                return default if kind == TOMBSTONE else self._unexpired(version[2], default)
        for imm in st.imms:
            version = imm._latest.get(k)
            while version is not None and version[0] > seq:
                version = version[3]
            if version is not None:
                kind = version[1]
                if kind == VALUE:
                    return version[2]
                if kind == MERGE:
                    return self._merged(st, k, seq)
                return default if kind == TOMBSTONE else self._unexpired(version[2], default)
        self._gets += 1
        h = None  # the bloom hash: computed by a table only when its key index misses
        found = None
        for meta in st.version.levels[0]:
            if meta.smallest <= k <= meta.largest:
                reader = meta.reader or self._tables.reader(meta)
                found = reader.get(k, h, seq)
                if found is not None:
                    break
        else:
            version = st.version
            levels = version.levels
            largest_keys = version.largest_keys
            for level in version.deep_levels:  # (the levels >= 1 that hold tables)
                files = levels[level]
                i = keys_bisect_left(largest_keys[level], k)
                if i < len(files):
                    meta = files[i]
                    if meta.smallest <= k:
                        reader = meta.reader or self._tables.reader(meta)
                        found = reader.get(k, h, seq)
                        if found is not None:
                            break
        if found is None:
            return default
        kind = found[0]
        if kind == VALUE:
            return found[1]
        if kind == TOMBSTONE:
            return default
        if kind == VALUE_TTL:
            return self._unexpired(found[1], default)
        return self._merged(st, k, seq)

    def multi_get(self, keys: Iterable[object]) -> list[bytes | None]:
        """The value of each of ``keys`` (None where absent), in the order
        given, duplicates allowed, all read at one sequence (a consistent
        view, which a loop of get() is not). Every key is checked before
        anything is read. The lookups run sorted, source by source, so that
        a data block is fetched once for all the keys it holds (multi_get.py)."""
        if self._closed:
            raise ClosedError(f"{self.path}: database is closed")
        checked = as_keys(keys)
        seq = self._last_seq
        return self._multi_get_in(self._state, checked, seq)

    def _multi_get_at(self, keys: Iterable[object], seq: int) -> list[bytes | None]:
        """multi_get() at an explicit read sequence (snapshots)."""
        return self._multi_get_in(self._state, as_keys(keys), seq)

    def _get_at(self, key: object, seq: int, default: bytes | None) -> bytes | None:
        """get() at an explicit read sequence (snapshots)."""
        return self._get_in(self._state, key, seq, default)

    def _live_count(self) -> int:
        """len(db): the live keys, counted by a scan (an LSM-tree cannot know
        without reading which writes overwrite or delete existing keys)."""
        n = 0
        for _ in self.scan():
            n += 1
        return n

    def scan(self, start: object = None, end: object = None, reverse: bool = False,
             prefix: object = None) -> TypingIterator[tuple[bytes, bytes]]:
        """(key, value) pairs with start <= key < end (and key starting with
        ``prefix``), ascending or, with reverse=True, descending.

        The iterator reads the database as it was when scan() was called;
        writes, flushes and file deletions that happen meanwhile do not
        disturb it."""
        if self._closed:
            raise ClosedError(f"{self.path}: database is closed")
        return self._scan_in(self._state, start, end, reverse, prefix, self._last_seq)

    def _scan(self, start: object, end: object, reverse: bool, prefix: object,
              seq: int | None) -> TypingIterator[tuple[bytes, bytes]]:
        if self._closed:
            raise ClosedError(f"{self.path}: database is closed")
        if seq is None:
            seq = self._last_seq
        return self._scan_in(self._state, start, end, reverse, prefix, seq)

    def get_meta(self, name: str) -> bytes | None:
        """The value of the metadata entry ``name`` (``batch.set_meta``), or None."""
        if not isinstance(name, str):
            raise TypeError(f"metadata name must be str, not {type(name).__name__}")
        self._check_open()
        key = name.encode("utf-8")
        st = self._state
        for mem in st.memtables:
            value = mem.meta.get(key)
            if value is not None:
                return value
        return (self._versions.meta if st.meta is None else st.meta).get(key)

    def meta(self) -> dict[str, bytes]:
        """Every metadata entry, name -> value."""
        self._check_open()
        st = self._state
        merged = dict(self._versions.meta if st.meta is None else st.meta)
        for mem in (*reversed(st.imms), st.mem):  # oldest first: newer values win
            merged.update(mem.meta)
        return {name.decode("utf-8", "replace"): value for name, value in sorted(merged.items())}

    def approximate_size(self, start: object = None, end: object = None) -> int:
        """Bytes of table files that keys in [start, end) take (None: an open
        end), from the tables' key ranges and index blocks: a table inside
        the range counts whole, one it cuts counts from the block holding
        ``start`` to the block holding ``end``. No data block is read; the
        memtables (not on disk yet) are not counted; estimates of adjacent
        ranges add up exactly (RocksDB's GetApproximateSizes)."""
        self._check_open()
        lo, hi = scan_bounds(start, end, None)
        return approximate_size(self._state.version, self._tables.reader, lo, hi)

    def iterator(self, lower_bound: object = None, upper_bound: object = None) -> Cursor:
        """A cursor over the database as it is now (lsmkv/base/cursor.py):
        seek, seek_for_prev, seek_to_first, seek_to_last, next, prev, key,
        value, valid; keys in [lower_bound, upper_bound). Writes made after
        it was created are not seen."""
        self._check_open()
        return self._iterator(self._last_seq, lower_bound, upper_bound, self._check_open)

    def _iterator(self, seq: int, lower_bound: object, upper_bound: object, check) -> Cursor:
        """iterator() at an explicit read sequence (snapshots)."""
        return self._iterator_in(self._state, seq, lower_bound, upper_bound, check)

    def snapshot(self) -> Snapshot:
        """A point-in-time view (use in a ``with`` block or close() it)."""
        if self._closed:
            raise ClosedError(f"{self.path}: database is closed")
        seq, pinned = self._register_snapshot()
        if pinned is not None:
            return pinned_snapshot(seq, pinned, self._get_in, self._scan_in, self._iterator_in, self._multi_get_in,
                                   self._release_snapshot)
        return Snapshot(seq, self._get_at, self._scan, self._iterator, self._release_snapshot,
                        multi_get_at=self._multi_get_at)

    def _register_snapshot(self) -> tuple[int, ReadState | None]:
        """The read sequence of a snapshot taken now, joined to the live
        snapshots, and on a read-only handle the read state it pins (its
        reads stay on it: snapshot.pinned_snapshot); None on a writable one."""
        with self._snapshot_lock:
            seq = self._last_seq
            pinned = self._state if self._read_only else None
            if pinned is not None:
                seq = max(seq, pinned.floor)
            self._snapshots.add(seq)
        return seq, pinned

    def transaction(self, sync: bool = False) -> Transaction:
        """An optimistic, serializable transaction beginning now
        (lsmkv/base/transaction.py; docs/api.md, "Transactions")::

            with db.transaction() as txn:
                txn.put(b"k", b"%d" % (int(txn.get(b"k", b"0")) + 1))

        It reads a snapshot taken now with its own writes over it, and
        writes them atomically when the block ends (or at ``commit()``),
        unless a commit since its snapshot changed what it read, scanned or
        wrote: then ConflictError, and nothing is written. With sync=True,
        the commit returns once it is durable."""
        self._check_open()
        return Transaction.begin(self._transaction_host, self._conflicts, self._transaction_snapshot, sync=sync)

    def _transaction_snapshot(self) -> TransactionSnapshot:
        """A transaction's snapshot, taken now (transactions.py): its
        sequence joins the live snapshots; a read-only handle's also pins
        the read state of the moment (as its snapshots do)."""
        self._check_open()
        seq, pinned = self._register_snapshot()
        return TransactionSnapshot(seq, pinned, alive=self._alive, current_state=lambda: self._state,
                                   get_in=self._get_in, multi_get_in=self._multi_get_in, view_finders=self._view_finders,
                                   check_open=self._check_open, release=self._release_snapshot)

    def _release_snapshot(self, seq: int) -> None:
        with self._snapshot_lock:
            self._snapshots.discard(seq)

    def _live_snapshots(self) -> list[int]:
        with self._snapshot_lock:
            return list(self._snapshots)

    # ------------------------------------------------------------------
    # Background work: flushes, installing Versions, compactions
    # ------------------------------------------------------------------

    def flush(self) -> None:
        """Write the memtable to a table now and wait until it is recorded."""
        with self._writes.exclusive():
            self._check_writable()
            if len(self._state.mem):
                self._switch_memtable()
        error = self._flusher.wait_until_flushed()
        if error is not None:
            self._errors.raise_failed("flush", error)

    def _wait_for_flushes(self) -> None:
        if self._flusher.wait_until_flushed() is not None:
            self._raise_not_writable()

    def _oldest_immutable(self) -> MemTable | None:
        """The immutable memtable the flush thread writes next, or None."""
        imms = self._state.imms
        return imms[-1] if imms else None

    def _write_level0(self, mem: MemTable, snapshots: list[int]) -> FileMeta | None:
        """Write ``mem`` as a new table; the caller records it in the manifest
        and then discards its number from ``_pending_outputs``."""
        number = self._versions.new_file_number()
        self._pending_outputs.add(number)
        try:
            meta = write_table(self._fs, self.path, number, mem.sorted_runs(snapshots), self.options,
                               mem.range_dels)
        except BaseException:
            self._pending_outputs.discard(number)
            raise
        if meta is None:
            self._pending_outputs.discard(number)
        else:
            self._flush_bytes_written += meta.size
            self._flush_count += 1
        return meta

    def _flush_immutable(self, imm: MemTable) -> None:
        meta = self._write_level0(imm, self._live_snapshots())
        edit = VersionEdit()
        edit.meta = dict(imm.meta)
        if meta is not None:
            edit.add_file(0, meta)
        with self._state_lock:
            st = self._state
            remaining = st.imms[:-1]
            edit.log_number = remaining[-1].log_number if remaining else st.mem.log_number
        self._apply_edit(edit, flushed=imm)
        if meta is not None:
            self._pending_outputs.discard(meta.number)
        self._delete_obsolete_files()

    def _apply_edit(self, edit: VersionEdit, flushed: MemTable | None = None) -> Version:
        """Record ``edit`` in the manifest and make the resulting Version the
        one readers see (dropping ``flushed``, the immutable memtable the edit
        put in a table, in the same step)."""
        with self._manifest_lock:
            version = self._versions.log_and_apply(edit, last_sequence=self._last_seq)
            with self._bg_cond:
                st = self._state
                imms = st.imms
                if flushed is not None:
                    assert imms and imms[-1] is flushed
                    imms = imms[:-1]
                self._state = ReadState(st.mem, imms, version)
                self._update_write_pressure(version)
                if self._compactor is not None:
                    self._compactor.changes += 1
                self._bg_cond.notify_all()
        self._schedule_ttl_compaction(version)
        return version

    def _delete_obsolete_files(self, at_open: bool = False) -> None:
        """Remove the files nothing needs any more (obsolete_files.py)."""
        delete_obsolete_files(self._fs, self.path, self._versions, self._pending_outputs, self._tables.evict,
                              at_open)

    def _schedule_ttl_compaction(self, version: Version) -> None:
        """Wake the compaction thread, on the timing wheel, when the earliest
        ttl deadline in ``version``'s tables passes (pick_expired then finds
        the table), so expired values' space comes back without writes."""
        if self.options.disable_auto_compactions or self._read_only or self._closed:
            return
        self._ttl_wakeup.schedule(version)

    def _wake_compactor(self) -> None:
        """Have the compaction thread look at the scores again."""
        with self._bg_cond:
            if self._compactor is not None:
                self._compactor.changes += 1
            self._bg_cond.notify_all()

    def compact_range(self, start: object = None, end: object = None) -> None:
        """Compact the tables holding keys in [start, end] (None: unbounded)
        down to the deepest level with data there, dropping overwritten
        versions and (where no snapshot needs them) tombstones. Flushes the
        memtable first. Returns when done."""
        lo = as_optional_key(start, "start")
        hi = as_optional_key(end, "end")
        self.flush()
        try:
            self._compactor.compact_range(lo, hi)
        except BaseException as exc:
            if not isinstance(exc, Exception) or isinstance(exc, BackgroundError):
                raise
            self._errors.stop_writes("compaction", exc)
            self._errors.raise_failed("compaction", exc)

    # ------------------------------------------------------------------
    # Leaving the error state
    # ------------------------------------------------------------------

    def resume(self) -> None:
        """Leave the error state once the cause of a failure is gone.

        After a failed log write, flush or compaction, writes are stopped
        (reads go on). resume() writes every memtable (which hold exactly the
        acknowledged writes) to level-0 tables, starts a fresh log and
        records both in a fresh manifest in one step, so the log whose tail
        is unknown and a manifest that may end in a damaged record become
        obsolete and are deleted: a write that failed never reappears. Then
        flushes and compactions go on. If the cause persists, raises
        BackgroundError naming it and writes stay stopped. Does nothing
        when writes are not stopped."""
        self._check_open()
        if self._read_only:
            raise ReadOnlyError(f"{self.path} was opened with read_only=True; there is nothing to resume")
        with self._writes.exclusive():
            self._check_open()
            if self._errors.error is None:
                return
            with self._compactor.paused():
                self._flusher.wait_idle()
                self._errors.resume(self._restart_writes)
                self._wake_compactor()
                # Every acknowledged write is in a table of the new manifest.
                self._commits.syncer.reset(self._last_seq)
        log.info("%s: resumed writes", self.path)

    def _restart_writes(self) -> None:
        """resume()'s work, with writers, flushes and compactions held off:
        the memtables go to tables recorded with a new log in a fresh
        manifest (error_handler.py), then the new log and an empty memtable
        replace the old ones and the files that made obsolete are deleted."""
        versions = self._versions
        st = self._state
        snapshots = self._live_snapshots()
        number, new_log = flush_to_fresh_manifest(
            versions, (*reversed(st.imms), st.mem), self._last_seq, lambda mem: self._write_level0(mem, snapshots),
            self._create_log, self._manifest_lock, self._pending_outputs)
        with self._log_sync_lock:
            old_log, self._log = self._log, new_log
        self._logged_seq = self._last_seq
        with self._bg_cond:
            self._state = ReadState(MemTable(number), (), versions.current)
            self._update_write_pressure(versions.current)
        if old_log is not None:
            old_log.abandon()  # obsolete; deleted just below
        # No flush or compaction is under way: outputs of failed ones are garbage now.
        self._pending_outputs.clear()
        self._delete_obsolete_files(at_open=True)

    # ------------------------------------------------------------------
    # Ingest, checkpoints, split keys
    # ------------------------------------------------------------------

    def ingest(self, paths, *, move: bool = False) -> None:
        """Take table files written by :class:`lsmkv.TableWriter` into the
        database whole (RocksDB's IngestExternalFile; lsmkv/lsm/ingest.py):
        all of them or none, in one manifest edit. The ingested data is newer
        than everything the database held when the call began (it replaces
        those keys' values). The files must not overlap each other; each goes
        to the deepest level it can without overlapping a table above it, so
        a bulk load into empty key ranges is not rewritten by compaction.
        Files are hard-linked in (copied where links are impossible); with
        ``move=True`` the source files are removed once the ingest is durable.
        Bad input (a missing or damaged file, overlapping files, a table with
        several versions of a key) raises before anything changes."""
        self._check_open()
        if type(move) is not bool:
            raise TypeError(f"move must be True or False, not {move!r}")
        if self._read_only:
            raise ReadOnlyError(f"{self.path}: opened read-only; ingest needs a writable database")
        tables = inspect_tables(self._fs, paths)
        if not tables:
            return
        with self._writes.exclusive():
            self._check_writable()
            st = self._state
            if any(mem.has_key_in(t.smallest, t.largest) for mem in st.memtables for t in tables):
                # The memtables are read before the tables: a key of an
                # ingested range there would hide the ingested value.
                if len(st.mem):
                    self._switch_memtable()
                self._wait_for_flushes()
            with self._compactor.paused():
                self._install_ingested(tables)
            if self._conflicts.active:  # (looked at after the tables are published)
                self._conflicts.record((), [(t.smallest, t.largest + b"\x00") for t in tables])
        if move:
            remove_sources(self._fs, tables)

    def _install_ingested(self, tables: list[IngestTable]) -> None:
        """Link ``tables`` in and record them in one edit, all with one new
        sequence number (ingest.py). Writers are held off and compactions
        paused by the caller."""
        seq = self._last_seq + 1

        def install(edit: VersionEdit) -> None:
            self._last_seq = seq
            self._apply_edit(edit)

        link_tables(self._fs, self.path, tables, self._state.version, seq, self._versions.new_file_number,
                    self._pending_outputs, install)
        self._ingest_count += 1
        self._ingest_bytes += sum(t.size for t in tables)

    def checkpoint(self, dest: str | bytes | os.PathLike) -> None:
        """Write a consistent, openable copy of the database as it is now
        into the new directory ``dest`` (RocksDB's Checkpoint): the tables
        hard-linked (copied across file systems), what only the memtables
        hold written as one table, and a manifest of its own. The copy is
        independent: later writes, compactions or a destroy of either do not
        touch the other. On a writable database the memtable is flushed
        first and writers wait only for that; on a read-only one (a store
        another process writes to: :func:`lsmkv.checkpoint`), tables the
        writer has deleted since the open are copied from the open files."""
        self._check_open()
        dest = os.path.abspath(os.fsdecode(dest))
        if self._fs.exists(dest):
            raise FileExistsError(f"{dest} already exists; a checkpoint goes to a new directory")
        if self._read_only:
            with self._refresh_lock:  # the memtables and the metadata stay as published
                seq = self._last_seq
                st = self._state
                seq = max(seq, st.floor)
                write_checkpoint(self._fs, dest, self.path, st.version, merged_memtable(st.memtables, seq),
                                 seq, dict(st.meta), self.options, self._tables.reader,
                                 merge_operator=self._versions.merge_operator)
            return
        with self._writes.exclusive():
            if self._log is not None and self._errors.error is None and len(self._state.mem):
                self._switch_memtable()
            self._wait_for_flushes()
            st = self._state
            last_seq = self._last_seq
            meta = dict(self._versions.meta)
        write_checkpoint(self._fs, dest, self.path, st.version, None, last_seq, meta, self.options,
                         self._tables.reader, merge_operator=self._versions.merge_operator)

    def split_keys(self, parts: int) -> list[bytes]:
        """At most ``parts - 1`` ascending keys that cut the database into
        ranges of about equal size on disk, for reading it in parallel
        (the Spark data source's partitions): cuts fall on block boundaries
        of the deepest level that holds data, weighed by block size; what
        the memtables and upper levels hold falls in whichever range owns
        its keys. ``[]`` for a database with no tables or parts <= 1."""
        self._check_open()
        return split_keys(self._state.version, self._tables.reader, parts)

    # ------------------------------------------------------------------
    # Stats
    # ------------------------------------------------------------------

    def stats(self, space_amp: bool = False) -> dict:
        """A plain dict of counters and shape; see docs/architecture.md for each key.

        With ``space_amp=True`` it also scans the whole database to measure the
        live data (key + value bytes of every live key) and reports
        ``live_bytes`` and ``space_amp`` (bytes on disk / live bytes)."""
        self._check_open()
        result = lsm_stats(
            path=self.path, fs=self._fs, options=self.options, state=self._state, last_sequence=self._last_seq,
            counters={"user_bytes_written": self._user_bytes_written, "wal_bytes_written": self._wal_bytes_written,
                      "flush_bytes_written": self._flush_bytes_written, "flush_count": self._flush_count,
                      "ingest_count": self._ingest_count, "ingest_bytes": self._ingest_bytes,
                      "gets": self._gets + self._reads.gets,
                      "stall_count": self._stall_count, "stall_seconds": self._stall_seconds},
            manifest_bytes_written=self._versions.manifest_bytes_written, compactor=self._compactor, io=self._io,
            commits=self._commits.stats(), write_control=self._write_control, block_cache=self._block_cache,
            tables=self._tables, snapshots=len(self._snapshots), meta=self.meta(), recovery=self._recovery,
            errors=self._errors)
        if space_amp:
            live = sum(len(k) + len(v) for k, v in self._scan(None, None, False, None, None))
            result["live_bytes"] = live
            result["space_amp"] = result["disk_bytes"] / live if live else 0.0
        return result

    # ------------------------------------------------------------------
    # Closing
    # ------------------------------------------------------------------

    def _simulate_crash(self) -> None:
        """Tests: drop the handle as a killed process would, without
        finishing queued flushes or writing anything more (cut the fault
        file system's power first, so work in flight stops too; then its
        power_loss() or power_on() decides what the disk keeps)."""
        with self._writes.exclusive():
            with self._bg_cond:
                self._closed = True
                self._alive[0] = False
                self._shutting_down = True
                self._errors.keep(ClosedError(f"{self.path}: the process crashed"))
                self._bg_cond.notify_all()
        self._stop_background()
        self._stop_syncer()
        if self._log is not None:
            self._log.abandon()
            self._log = None
        self._versions.abandon()
        self._tables.close()
        self._release_lock()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"{self.path}: database is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Finish queued flushes, sync the log and release the directory."""
        if self._closed:
            return
        with self._writes.exclusive():
            self._closed = True
            self._alive[0] = False
            with self._bg_cond:
                self._shutting_down = True
                self._bg_cond.notify_all()
        self._stop_background()
        with self._refresh_lock:
            pass  # a refresh under way finishes before the files are closed
        # A read-only handle removes nothing: another process may be writing,
        # and tables newer than this handle's view look obsolete from here.
        if self._errors.error is None and not self._read_only:
            try:
                self._delete_obsolete_files()
            except OSError as exc:  # leftovers are removed at the next open
                log.warning("%s: could not remove obsolete files at close: %s", self.path, exc)
        self._release_resources()

    def _release_resources(self) -> None:
        self._closed = True
        self._alive[0] = False
        try:
            if self._log is not None:
                try:
                    if self._errors.error is None:
                        with self._log_sync_lock:
                            try:
                                self._log.sync()
                            except Exception as exc:
                                raise BackgroundError(
                                    f"{self.path}: the last log sync at close() failed ({exc}); the database is "
                                    "closed, and writes not synced before may be lost if the machine fails "
                                    "before the file system writes them (they are in the log; the next open "
                                    "replays what reached the disk)") from exc
                        self._commits.syncer.mark_durable(self._logged_seq)
                finally:
                    self._stop_syncer()
                    self._log.close()
                    self._log = None
        finally:
            self._stop_syncer()
            self._versions.close()
            self._tables.close()
            self._release_lock()

    def _stop_background(self) -> None:
        """Wait for the flush thread to end, and stop the compactor."""
        if self._flusher is not None:
            self._flusher.join()
        if self._compactor is not None:
            self._compactor.stop()

    def _release_lock(self) -> None:
        """Let go of the directory's lock file."""
        if self._lock_file is not None:
            self._lock_file.release()
            self._lock_file = None

    def _stop_syncer(self) -> None:
        """Stop the log syncer (its waiters, if any are left, get ClosedError)
        and the timer."""
        self._commits.close()
        with self._timer_lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.close()

    def __enter__(self) -> "DB":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("read-only" if self._read_only else "open")
        return f"<lsmkv.DB {self.path!r} {state}>"
