"""The database object: locking, the write and read paths, log checkpoints.

This module owns the protocol that ties the pieces together (docs/btree.md
describes it at length):

* a write goes through the write queue (lsmkv/base/write_queue.py): the log
  writer of the moment appends the records of every write queued (one
  record per batch, one ``write`` to the OS for the group) and applies them
  to the tree in the buffer pool; a ``sync=True`` writer then waits until
  the log syncer (lsmkv/base/log_syncer.py) has fsynced the log past its record
  -- one fsync for everyone waiting -- or ``sync_timeout`` passes;
* a checkpoint (``flush()``, log size, dirty-page pressure, ``close()``)
  fsyncs the log, writes every dirty page to a slot the last checkpoint
  does not use (the page map, btree/pagemap.py: nothing durable is
  overwritten and no journal is written), then the meta page recording the
  log position, and starts a new log;
* open loads the tree as of the last checkpoint (a format-3 file's
  journal, left by a crash, is applied first) and replays the log past it
  (the steps are btree/recovery.py's; ``_load_state`` runs them).

The rest of the DB's work has a module of its own, to which its methods
delegate: options (btree/options.py), write batches (btree/write_batch.py),
merges folded by the log writer (btree/merging.py), range deletes on the
tree (btree/range_delete.py), failures and ``resume()``
(btree/error_handler.py), ``compact_range()`` (btree/vacuum.py),
``ingest()`` (btree/ingest.py), ``checkpoint(dest)`` and ``split_keys()``
(btree/checkpoint.py), a scan's chunks (btree/scan.py), ``multi_get()``
(btree/multi_get.py), the views snapshots read and the reads through them
(btree/snapshot_views.py, btree/snapshot_reads.py), the sweep of expired
keys (btree/sweep.py), ``stats()`` (btree/stats.py) and
``check_invariants()`` (btree/check.py). Each is handed the DB or the
callables it needs; none imports this module.

One re-entrant lock guards every DB object: readers and writers of one
handle never run at the same time, so readers always see whole batches.
Writers first take the log writer's role (the write queue's lock), then
this lock; ``_log_sync_lock`` is held while the log is fsynced or replaced.
Snapshots (:class:`Snapshot`) are point-in-time views kept by saving nodes'
pre-images before writers change them (see btree.tree); when the handle
replaces its tree (a vacuum, a read-only handle's reload) the old tree
stays with its snapshots (``_views``, btree/snapshot_views.py), and a
read-only handle registers the checkpoint they read in the reader table
(btree/readers.py), whose slots the writer then keeps.
Another process that opens the directory for writing gets a LockError;
read-only handles take no lock and follow a writer in another process by
reloading when they meet a page newer than their view.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from functools import partial
from itertools import chain
from typing import Callable, Iterator

try:
    import cython
except ImportError:
    from lsmkv.base.compile_hints import cython

from lsmkv.base.cache_size import default_capacity
from lsmkv.base.conflicts import ConflictTracker
from lsmkv.base.cursor import Cursor
from lsmkv.base.dbdir import prepare_directory
from lsmkv.base.errors import (BackgroundError, ClosedError, CorruptionError, InvalidArgumentError,
                               InvalidDatabaseError, LsmkvError, ReadOnlyError, SnapshotEndedError)
from lsmkv.base.fs import DEFAULT_FS, FileSystem
from lsmkv.base.group_commit import GroupCommit
from lsmkv.base.keys import MAX_KEY_SIZE, MAX_VALUE_SIZE, as_key, as_value, scan_bounds
from lsmkv.base.mapping import KeyValueMapping
from lsmkv.base.merge_operators import check_operand
from lsmkv.base.timer import Timer, TimerHandle
from lsmkv.base.transaction import Transaction
from lsmkv.base.ttl import check_ttl, deadline_ms
from lsmkv.base.write_queue import Writer

from .check import verify_hash_index, verify_tree
from .checkpoint import copy_tree, split_keys, write_checkpoint
from .cursor import snapshot_source
from .error_handler import fail, resume_writes
from .ingest import ingest_files
from .leaf_runs import LeafRuns
from .node import DEADLINE_SIZE, Expiring, Node, encode_node, encode_overflow
from .merging import MergeOperand, resolve_group
from .multi_get import multi_get
from .options import (DEFAULT_CACHE_SIZE, DEFAULT_CHECKPOINT_LOG_BYTES, DEFAULT_TTL_SWEEP_INTERVAL, check_option_names,
                      check_options)
from .pager import PAGES_FILE, Meta, Pager, StaleView, encode_meta_entries
from .point_get import NOT_SERVED, PointGet
from .range_delete import delete_range
from .readers import ReaderTable
from .recovery import (concurrent_checkpoint, load_checkpoint, open_log, open_pager, read_log,
                       replay_log, retry_while_checkpointing)
from .scan import SCAN_FIRST_CHUNK, SCAN_MAX_CHUNK, scan_chunks  # noqa: F401 - the sizes stay btree.db's names
from .snapshot import Snapshot
from .snapshot_reads import (check_snapshot, chunk_reader, snapshot_get, snapshot_iterator, snapshot_multi_get,
                             snapshot_scan)
from .snapshot_views import drop_view, end_snapshot, end_view, pin_view, read_snapshot
from .stats import collect_stats
from .sweep import SWEEP_CHUNK, run_sweep, schedule_sweep  # noqa: F401 - SWEEP_CHUNK stays btree.db's name
from .transactions import (TransactionHost, TransactionSnapshot, recorded_writes, screen_group,
                           transaction_limits)
from .tree import Tree
from .vacuum import compact_file, vacuum
from .wal import LogWriter, MetaEntry, RangeDelete, encode_batch, encode_delete, encode_put, encode_put_ttl
from .write_batch import QueuedWrite, WriteBatch, check_range, queued_batch

log = logging.getLogger(__name__)



class DB(KeyValueMapping):
    """An open btree database. Use :func:`btree.open` to get one."""

    def __init__(self, path: str | bytes | os.PathLike, *, page_size: int | None = None, cache_size: int | None = DEFAULT_CACHE_SIZE,
                 read_only: bool = False, fs: FileSystem | None = None,
                 checkpoint_log_bytes: int = DEFAULT_CHECKPOINT_LOG_BYTES, hash_index: bool = True,
                 group_commit: bool = True, sync_timeout: float | None = 30.0, commit_delay: float = 0.0,
                 ttl_clock: Callable[[], float] = time.time,
                 ttl_sweep_interval: float = DEFAULT_TTL_SWEEP_INTERVAL,
                 merge_operator: Callable | None = None) -> None:
        check_options(page_size, cache_size, read_only, fs, checkpoint_log_bytes, hash_index, group_commit,
                      sync_timeout, commit_delay, ttl_clock, ttl_sweep_interval, merge_operator)
        #: Folds merge operands at write (btree/merging.py); None: merges refused.
        self._merge_operator = merge_operator
        self._ttl_clock = ttl_clock
        self._ttl_sweep_interval = ttl_sweep_interval
        #: The next sweep of expired keys on the timing wheel, and keys swept so far.
        self._sweep: TimerHandle | None = None
        self._ttl_swept = 0
        #: Set when close() begins: no timer is made or used after it.
        self._closing = False
        self.path = os.fsdecode(path)  # str, bytes or os.PathLike
        self._fs = fs = fs or DEFAULT_FS
        self._read_only = read_only
        self._cache_size = default_capacity() if cache_size is None else cache_size
        self._ckpt_log_bytes = checkpoint_log_bytes
        self._hash_index = hash_index
        self._lock = threading.RLock()
        #: A get's state and counters (btree/point_get.py); ``_usable`` is its ``usable``.
        self._point = PointGet(self._lock, read_only)
        self._writable = False
        #: Log bytes appended since the last checkpoint.
        self._log_pending = 0
        #: The write queue and the log syncer (lsmkv/base/group_commit.py):
        #: the log writer takes ``_lock`` to append and apply its group.
        self._commits = GroupCommit(self._append_and_apply, group_commit=group_commit, sync_timeout=sync_timeout,
                                    check_writable=self._check_writable, lock=self._lock, name=self.path)
        #: Writers queue here; the one holding its lock is the log writer.
        self._writes = self._commits.writes
        self._group_commit = group_commit
        #: Held while the log is synced or replaced (the log syncer never
        #: syncs a log a checkpoint is closing).
        self._log_sync_lock = threading.Lock()
        self._timer: Timer | None = None
        self._timer_lock = threading.Lock()
        self._closed = True
        #: The failure state (btree/error_handler.py is what changes it):
        #: the failure that stopped writes (None while writable); see resume().
        self._failed: BaseException | None = None
        #: Set when a failure interrupted a change of the tree in memory: the
        #: tree is rebuilt from the disk and the log up to ``_replay_until``
        #: (the failed record's LSN); reads wait for that when it failed too.
        self._tree_lost = False
        self._replay_until = 0
        self._resumes = 0
        self._filelock = None
        self._log: LogWriter | None = None
        self._pager: Pager | None = None
        # Counters for stats() (a get's are the PointGet's).
        self._puts = 0
        self._deletes = 0
        self._batches = 0
        self._user_bytes = 0
        self._log_bytes_done = 0
        self._log_bytes_read = 0
        self._checkpoints = 0
        self._vacuums = 0
        self._ingests = 0
        self._vacuum_pages_freed = 0
        self._merges = 0
        self._range_deletes = 0
        self._range_delete_pages_freed = 0
        self._replayed = 0
        self._fill_cache: tuple[int, list, list] | None = None
        self._version = 0
        self._snap_ids = 0
        #: Chunks that scan iterators are yielding, with their snapshot or None
        #: (emptied by close() of the DB or of that snapshot).
        self._chunks: dict[int, tuple[LeafRuns, Snapshot | None]] = {}
        #: Open snapshots, held weakly: one dropped unclosed is closed by
        #: its __del__, which lets go of the pre-images it kept.
        self._live_snaps: weakref.WeakValueDictionary[int, Snapshot] = weakref.WeakValueDictionary()
        #: Bumped when the handle rebuilds its tree after a failed write (its
        #: snapshots and cursors end), and why it last did (SnapshotEndedError
        #: says it). A reload that keeps them (refresh, compact_range, ingest) does not.
        self._view_gen = 0
        #: The trees open snapshots read, by id: [tree, snapshots, reader-table
        #: slot or None]. A tree the handle replaced lives on here, with its
        #: page file, until its last snapshot closes.
        self._views: dict[int, list] = {}
        #: The reader table (btree/readers.py): a writer's from open, a
        #: read-only handle's from its first snapshot; why a read-only
        #: handle could not open it, if it could not.
        self._readers: ReaderTable | None = None
        self._readers_unusable: str | None = None
        self._view_reason = ""
        #: Set to [False] at close: the transactions' streams look at it.
        self._alive = [True]
        #: Commits' keys while transactions are open, and their validation
        #: (btree/transactions.py; ``active`` is the one test on the write path).
        self._conflicts = ConflictTracker()

        exists = prepare_directory(self.path, "btree", fs, create=not read_only)
        if read_only and not exists:
            raise InvalidDatabaseError(f"{self.path} holds no btree database (read_only=True does not create one)")
        pages_path = os.path.join(self.path, PAGES_FILE)
        if not read_only:
            self._filelock = fs.lock(pages_path)  # creates the (empty) page file of a new database
        try:
            if not read_only:
                self._readers = ReaderTable(self.path, create=True)
            self._pager = open_pager(fs, self.path, read_only=read_only, page_size=page_size)
            self._pager.readers = self._readers
            if read_only:
                self._load_view()
            else:
                self._load_state()
            if not read_only:
                # (A failed sync stops writes without _lock: close() holds it while it waits for the syncer.)
                self._commits.start_syncer(self._sync_log,
                                           on_sync_failure=partial(self._fail, "syncing the log", applied=True),
                                           durable=self._log.end_lsn, commit_delay=commit_delay,
                                           timer=self._get_timer)
            self._txn_limits = None if read_only else transaction_limits(self._max_key)
            self._closed = False
            self._usable = True
            self._writable = not read_only
            schedule_sweep(self)
        except BaseException:
            self._release()
            raise

    # ---- opening and recovery ----------------------------------------------------------

    def _load_state(self, replay_until: int | None = None) -> None:
        """Build the in-memory state (btree/recovery.py): the checkpointed
        tree plus the log replayed (only the records that start before
        ``replay_until``, if given: a writer rebuilding its tree after a
        failed write, which then leaves the files as they are)."""
        fs, pager = self._fs, self._pager
        writer = not self._read_only
        loaded = load_checkpoint(fs, pager, self.path, writer=writer, rebuilding=replay_until is not None,
                                 cache_size=self._cache_size, hash_index=self._hash_index, ttl_clock=self._ttl_clock)
        self._pool, self._tree = pool, tree = loaded.pool, loaded.tree
        self._point.bind(tree, pool)
        self._max_key = tree.max_key
        self._meta_chain, self._meta = loaded.meta_chain, loaded.meta
        self._meta_dirty = False
        data = read_log(fs, self.path)
        if data is not None:
            self._log_bytes_read += len(data)
        replayed = replay_log(data, self.path, pager.meta.ckpt_lsn, self._apply, replay_until=replay_until,
                              stale=None if writer else self._concurrent_checkpoint)
        self._replayed = replayed.records
        self._view_lsn = replayed.end_lsn
        if writer and replay_until is None:
            if replayed.records:
                self._write_checkpoint(replayed.end_lsn)
            self._log = open_log(fs, self.path, replayed, pager.meta.ckpt_lsn)

    def refresh(self) -> bool:
        """Read-only handles: move the view forward to what the writer has
        made visible (its last checkpoint plus its log); True if writes the
        handle did not see before became visible. A read-only handle also
        does this by itself when it meets a page newer than its view. On a
        writable handle it does nothing and returns False."""
        with self._lock:
            self._check_open()
            if not self._read_only:
                return False
            before = self._view_lsn
            self._refresh("refresh() moved it to the writer's newest data")
            return self._view_lsn != before

    def _concurrent_checkpoint(self) -> bool:
        """Read-only handles: is a writer in another process checkpointing
        under this view (btree/recovery.py)? Then a bad page is no corruption."""
        return concurrent_checkpoint(self._fs, self._pager)

    def _reread_meta(self) -> None:
        """Read the meta page again, from the page file now at the path: a
        writer's compact_range() may have renamed a rewritten one over the
        one open here (read-only handles), or this handle's own vacuum did."""
        old = self._pager
        kept = any(view[0].pager is old for view in self._views.values())
        if kept or old.replaced():
            # Snapshots still read the old view: it keeps its Pager (and
            # the file it has open) and the handle opens the file afresh.
            self._pager = Pager(self._fs, self.path, read_only=self._read_only)
            self._pager.readers = self._readers
            if not kept:
                old.close()
        self._pager.read_meta()

    def _load_view(self) -> None:
        """Read-only handles: load a consistent view, retrying while a writer
        in another process is in the middle of a checkpoint."""
        retry_while_checkpointing(self._load_state, self._concurrent_checkpoint, self._reread_meta, self.path)

    def _refresh(self, reason: str) -> None:
        """Read-only handles: reload the view (a writer elsewhere checkpointed,
        or rewrote the page file with compact_range()); ``reason`` is what
        the handle's snapshots are told."""
        end_view(self, reason)
        self._load_view()
        self._fill_cache = None

    # ---- vacuum, ingest, checkpoint copies -------------------------------------------------------

    def compact_range(self, start: object = None, end: object = None) -> None:
        """Vacuum: rewrite the page file densely and give the space of
        freed pages back to the file system (sqlite3's VACUUM, bbolt's
        compact). ``start``/``end`` are checked and accepted for the API
        both engines share; btree always rewrites the whole file.

        How: a checkpoint (the log is then empty), the live entries written
        bottom-up into a new file beside the old one (full leaves, values
        whose ttl has expired left out, the metadata entries kept), fsynced,
        renamed over the page file, the directory fsynced. A crash before
        the rename leaves the old file (the new one is removed at the next
        open), after it the new one: either holds every acknowledged write.

        It holds this handle's lock throughout: this handle's reads and
        writes wait for it. Its snapshots and cursors read on in the old
        file, which stays open until the last of them closes. Read-only
        handles in other processes keep reading the file they have open
        (the data as of the vacuum) until they refresh() or meet a change,
        and then open the new file (their snapshots stay on the old one).
        Needs free disk space for a second copy of the live data."""
        vacuum(self, start, end)

    def ingest(self, paths, *, move: bool = False, fill_factor: float = 1.0) -> None:
        """Take table files written by :class:`lsmkv.TableWriter` into the
        tree (a bulk load): the tree's live entries and the files' entries
        are merged in key order -- a file's value replaces the tree's, a
        file's tombstone deletes the key -- and the new tree is built bottom
        up into a new page file (``fill_factor`` of each leaf filled, 0.5 to
        1.0), which replaces the old one as compact_range's vacuum does:
        all of the ingest or none of it survives a crash, and it needs free
        space for a second copy. The files must not overlap each other;
        keys above this page size's key limit, and any other bad input,
        raise before the store changes. ``move=True`` removes the source
        files once the ingest is durable. Far faster than a put per key:
        no page is written twice (docs/btree.md)."""
        ingest_files(self, paths, move=move, fill_factor=fill_factor)

    def checkpoint(self, dest: str | bytes | os.PathLike) -> None:
        """Write a consistent, openable copy of the tree as it is now into
        the new directory ``dest``: its live entries and metadata built
        bottom up into a new page file (dense, like compact_range's) and an
        empty log. A page file is updated in place, so unlike lsmkv's
        hard-linked checkpoint this copies every live byte: O(size). On a
        writable handle writers wait for the copy; on a read-only handle (a
        store another process writes to: :func:`btree.checkpoint`) the copy
        starts over whenever the writer checkpoints under it."""
        self._check_open()

        def write_pages(path: str) -> None:
            def copy(tree: Tree) -> None:
                copy_tree(self._fs, path, tree, self._pager.page_size, self._meta)

            if self._read_only:
                self._read(copy)
            else:
                with self._lock:
                    self._check_open()
                    copy(self._tree)

        write_checkpoint(self._fs, dest, write_pages)

    def split_keys(self, parts: int) -> list[bytes]:
        """At most ``parts - 1`` ascending keys that cut the tree into
        ranges of about equal size, for reading it in parallel: separators
        of the highest internal level that has at least ``parts - 1`` of
        them (or of the lowest one), evenly spaced. ``[]`` for a tree of
        one leaf or parts <= 1."""
        self._check_open()
        if type(parts) is not int or parts < 1:
            raise ValueError(f"parts must be a positive int, not {parts!r}")
        with self._lock:
            self._check_open()
            return self._read(split_keys, parts)

    def _release(self) -> None:
        self._stop_syncer()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._pager is not None:
            self._pager.close()
        for view in list(self._views.values()):
            drop_view(self, view)
        if self._readers is not None:
            self._readers.close()
            self._readers = None
        if self._filelock is not None:
            self._filelock.release()
            self._filelock = None

    # ---- guards and failures (btree/error_handler.py) ----------------------------------------

    def _check_open(self) -> None:
        """Raise unless reads can be served: ClosedError after close(),
        BackgroundError while a failed write's tree could not be rebuilt."""
        if self._closed:
            raise ClosedError(f"the btree database {self.path} is closed")
        if self._tree_lost:
            raise BackgroundError(f"the btree database {self.path}: a failed write ({self._failed}) left the tree "
                                  "in memory incomplete and reloading it failed too; call db.resume() once the "
                                  "cause is fixed") from self._failed

    def _check_writable(self) -> None:
        if not self._writable:
            self._check_open()
            if self._read_only:
                raise ReadOnlyError(f"the btree database {self.path} was opened with read_only=True")
            raise BackgroundError(f"the btree database {self.path}: writes are stopped after an earlier failure "
                                  f"({self._failed}); call db.resume() once the cause is fixed, or reopen "
                                  "(reads keep working)") from self._failed

    def _fail(self, what: str, exc: BaseException, *, applied: bool = False,
              replay_until: int | None = None) -> BaseException:
        """Stop writes after ``what`` failed with ``exc`` (btree/error_handler.py);
        return the error the failing call raises."""
        return fail(self, what, exc, applied=applied, replay_until=replay_until)

    def resume(self) -> None:
        """Leave the error state once the cause of a failure is gone.

        After a failed log write, tree change or checkpoint, writes are
        stopped (reads go on). resume() makes the page file hold one whole
        checkpoint again (finishing or discarding a checkpoint cut short),
        writes a checkpoint of the tree in memory (which holds exactly the
        acknowledged writes) whose LSN lies past everything the old log
        holds, and starts a fresh log: a write that failed never reappears.
        If the cause persists, raises BackgroundError naming it and writes
        stay stopped. Does nothing when writes are not stopped."""
        with self._lock:
            resume_writes(self)

    def _read(self, fn, *args, snap: "Snapshot | None" = None):
        """Run ``fn(tree, *args)``; read-only handles reload their view and
        retry when a writer in another process changed pages under it. A
        snapshot reads the tree it was taken on, which the writer keeps
        whole for it (btree/readers.py)."""
        if snap is not None:
            return read_snapshot(self, fn, args, snap)
        if not self._read_only:
            return fn(self._tree, *args)
        for attempt in range(200):
            try:
                return fn(self._tree, *args)
            except StaleView:
                pass
            except CorruptionError:
                if not self._concurrent_checkpoint():
                    raise
            if attempt:
                time.sleep(0.01)
            self._refresh("a writer checkpointed pages its view needed, so it moved to the writer's newest data")
        raise LsmkvError(f"{self.path}: could not get a consistent read-only view while another process "
                         f"kept checkpointing; retry")

    # ---- writes --------------------------------------------------------------------------------

    def _apply(self, ops: list[tuple[bytes, bytes | None]]) -> None:
        tree = self._tree
        for key, value in ops:
            if value is None:
                tree.delete(key)
            elif type(value) is MetaEntry:
                self._meta = {**self._meta, key: value.value}  # replaced whole: readers hold the old one
                self._meta_dirty = True
            elif type(value) is RangeDelete:
                cut = delete_range(tree, key, value.end)
                self._range_delete_pages_freed += cut.pages_freed
            else:
                tree.put(key, value)

    def put(self, key, value, sync: bool = False, ttl: float | None = None) -> None:
        """Store ``value`` under ``key``. With ``sync=True`` the write is
        durable (log fsynced) before this returns (or SyncTimeoutError is
        raised after ``sync_timeout``). With ``ttl`` (seconds), the key
        expires that long after this call (lsmkv/base/ttl.py); its key may then
        be 8 bytes shorter than the page size's limit (the deadline shares
        the cell)."""
        if sync is not False and sync is not True:
            raise TypeError(f"sync must be True or False, not {type(sync).__name__}")
        if ttl is not None:
            self._put_with_ttl(key, value, sync, ttl)
            return
        if type(key) is not bytes or len(key) > self._max_key:
            key = as_key(key, self._max_key)
        if type(value) is not bytes or len(value) > MAX_VALUE_SIZE:
            value = as_value(value)
        rec = encode_put(key, value)
        writes = self._writes
        if sync and self._group_commit:
            self._commits.write_synced(QueuedWrite("put", [(key, value)], rec, len(key) + len(value)))
        elif writes.try_lead():
            # Nobody else is writing: commit it here, a group of one.
            try:
                with self._lock:
                    if not self._writable:
                        self._check_writable()
                    wal = self._log
                    try:
                        wal.append(rec)
                        if sync and not self._group_commit:
                            wal.sync()
                    except BaseException as exc:
                        raise self._fail("writing the log", exc) from exc
                    try:
                        self._tree.put(key, value)
                    except BaseException as exc:
                        raise self._fail("changing the tree", exc, replay_until=wal.end_lsn - len(rec)) from exc
                    if self._conflicts.active:
                        self._conflicts.record((key,))
                    self._puts += 1
                    self._user_bytes += len(key) + len(value)
                    pending = self._log_pending = self._log_pending + len(rec)
                    pool = self._pool
                    if (len(pool.dirty) > pool.dirty_limit or len(pool.pages) > pool.capacity
                            or pending >= self._ckpt_log_bytes or pool.raw_dirty):
                        self._after_write()
            finally:
                writes.release()
        else:
            self._commits.write(QueuedWrite("put", [(key, value)], rec, len(key) + len(value)), sync)

    def _put_with_ttl(self, key, value, sync: bool, ttl) -> None:
        key = as_key(key, self._max_key - DEADLINE_SIZE)
        value = as_value(value)
        ttl = check_ttl(ttl)
        expiring = Expiring(deadline_ms(self._ttl_clock(), ttl), value)
        self._commits.write(QueuedWrite("put", [(key, expiring)], encode_put_ttl(key, expiring), len(key) + len(value)),
                            sync)

    def delete(self, key, sync: bool = False) -> None:
        """Remove ``key``; deleting a missing key is not an error."""
        if sync is not False and sync is not True:
            raise TypeError(f"sync must be True or False, not {type(sync).__name__}")
        key = as_key(key)
        if len(key) > self._max_key:
            # Longer than any stored key: nothing to delete or log.
            queued = QueuedWrite("delete", [], b"", len(key))
        else:
            queued = QueuedWrite("delete", [(key, None)], encode_delete(key), len(key))
        self._commits.write(queued, sync)

    def merge(self, key, operand, sync: bool = False) -> None:
        """Merge ``operand`` into ``key``'s value with the merge operator the
        database was opened with (``merge_operator=``): the log writer folds
        it onto the current value (None if absent or expired; a deadline is
        kept) and writes the folded value (btree/merging.py)."""
        if sync is not False and sync is not True:
            raise TypeError(f"sync must be True or False, not {type(sync).__name__}")
        operator = self._merge_operator
        if operator is None:
            raise InvalidArgumentError(f"merge needs a merge operator: open the btree database {self.path} "
                                       "with merge_operator=")
        key = as_key(key, self._max_key)
        operand = as_value(operand)
        check_operand(operator, operand)
        self._commits.write(QueuedWrite("merge", [(key, MergeOperand((operand,)))], b"", len(key) + len(operand),
                                        merges=1), sync)

    def delete_range(self, start, end, sync: bool = False) -> None:
        """Delete every key k with start <= k < end (end exclusive), in bulk:
        leaves wholly inside the range go back to the free list without
        their keys being visited, the two edge leaves are trimmed
        (btree/range_delete.py); one log record. start == end deletes
        nothing; start > end raises InvalidArgumentError."""
        if sync is not False and sync is not True:
            raise TypeError(f"sync must be True or False, not {type(sync).__name__}")
        start, end = check_range(start, end)
        if start == end:
            self._check_writable()
            return
        ops = [(start, RangeDelete(end))]
        self._commits.write(QueuedWrite("delete_range", ops, encode_batch(ops), len(start) + len(end)), sync)

    def write_batch(self, sync: bool = False) -> WriteBatch:
        """A batch to fill inside a ``with`` block; committed atomically at its end."""
        if type(sync) is not bool:
            raise TypeError(f"sync must be True or False, not {type(sync).__name__}")
        self._check_writable()
        return WriteBatch(self._commit, self._max_key, sync, self._ttl_clock, self._merge_operator)

    def _commit(self, batch: WriteBatch, sync: bool) -> None:
        """Write a batch (the end of a WriteBatch's block)."""
        self._commits.write(queued_batch(batch, self._max_key), sync)

    def transaction(self, sync: bool = False) -> Transaction:
        """An optimistic, serializable transaction (lsmkv/base/transaction.py),
        reading a snapshot taken now; committed at the end of its ``with``
        block through the write queue, like a write batch, unless another
        commit since its snapshot changed what it read or wrote
        (ConflictError; btree/transactions.py). On a read-only handle its
        reads work and its first write raises ReadOnlyError."""
        host = TransactionHost(self._txn_limits, self._conflicts, self._commits.write, self._transaction_snapshot,
                               max_key=self._max_key, clock=self._ttl_clock, path=self.path,
                               merge_operator=self._merge_operator)
        return Transaction.begin(host, self._conflicts, host.snapshot, sync=sync)

    def _transaction_snapshot(self) -> TransactionSnapshot:
        snap = self.snapshot()
        return TransactionSnapshot(snap, self._alive, get=partial(snapshot_get, self),
                                   multi_get=partial(snapshot_multi_get, self), read_chunk=chunk_reader(self, snap),
                                   check=partial(self._check_transaction_snapshot, snap))

    def _check_transaction_snapshot(self, snap: "Snapshot") -> None:
        self._check_open()  # (close() closes the snapshot too: the closed database is the news)
        check_snapshot(self, snap)

    def _snapshot_ended(self) -> SnapshotEndedError:
        """What the commit of a transaction whose snapshot ended raises."""
        return SnapshotEndedError(f"the transaction's snapshot ended: this handle of {self.path} reloaded its "
                                  f"view ({self._view_reason}), which ends every snapshot taken before; nothing "
                                  "of the transaction was written: run it again")

    def _append_and_apply(self, group: list[Writer], sync_now: bool) -> None:
        """The log writer's work on a group, under ``_lock`` (lsmkv/base/group_commit.py):
        the group's records go to the log in one append (fsynced if
        ``sync_now``), then into the tree, in order. While a transaction
        is open, the group's transaction batches are validated first (one
        that fails gets its error and is left out) and the keys applied are
        recorded after (btree/transactions.py)."""
        conflicts = self._conflicts
        if conflicts.active:
            group = screen_group(group, conflicts, self._view_gen, self._snapshot_ended)
            if not group:
                return
        for writer in group:
            if writer.batch.merges:
                tree = self._tree
                group = resolve_group(group, tree.get_entry, tree.now_ms, self._merge_operator)
                if not group:
                    return
                break
        wal = self._log
        records = [w.batch.record for w in group]
        data = records[0] if len(records) == 1 else b"".join(records)
        lsn = wal.end_lsn
        try:
            if data:
                wal.append(data)
            if sync_now:
                wal.sync()
        except BaseException as exc:
            raise self._fail("writing the log", exc) from exc
        changed = False
        for writer in group:
            queued = writer.batch
            try:
                self._apply(queued.ops)
            except BaseException as exc:
                raise self._fail("changing the tree", exc, replay_until=lsn) from exc
            lsn += len(queued.record)
            writer.position = lsn
            writer.committed = True
            self._user_bytes += queued.user_bytes
            if queued.kind == "put":
                self._puts += 1
            elif queued.kind == "delete":
                self._deletes += 1
            elif queued.kind == "batch" or queued.kind == "transaction":
                self._batches += 1
            elif queued.kind == "merge":
                self._merges += 1
            elif queued.kind == "delete_range":
                self._range_deletes += 1
            changed = changed or bool(queued.ops)
        if conflicts.active:
            conflicts.record(*recorded_writes(group))
        if changed:
            self._log_pending += len(data)
            self._version += 1
            self._after_write()
            if self._sweep is None and self._tree.ttl_entries:
                schedule_sweep(self)

    def _sync_log(self) -> int:
        """The log syncer's work: fsync the log; returns the LSN everything
        before which is now durable."""
        with self._log_sync_lock:
            wal = self._log
            if wal is None:
                raise ClosedError(f"the btree database {self.path} is closed")
            return wal.sync()

    def _get_timer(self) -> Timer:
        """The timing wheel of this database (sync timeouts, sweeps of
        expired keys), made on first use."""
        with self._timer_lock:
            if self._closing:
                raise ClosedError(f"the btree database {self.path} is closed")
            if self._timer is None:
                self._timer = Timer(executor_threads=2, name=f"btree-timer:{self.path}")
            return self._timer

    def _stop_timer(self) -> None:
        """No more sweeps or timeouts: the timer stops (waiting for a sweep
        chunk that is running: call without holding _lock)."""
        with self._timer_lock:
            self._closing = True
            timer, self._timer = self._timer, None
            self._sweep = None
        if timer is not None:
            timer.close()

    def _stop_syncer(self) -> None:
        self._commits.close()
        self._stop_timer()

    def _after_write(self) -> None:
        """Checkpoint when dirty pages or the log ask for it. The write that
        called this is logged and applied already: if the checkpoint fails,
        writes stop (the next one raises) but this one stands."""
        pool = self._pool
        try:
            if pool.dirty_count() > pool.dirty_limit or self._log_pending >= self._ckpt_log_bytes:
                self._checkpoint()
            if len(pool.pages) > pool.capacity and not pool.trim():
                self._checkpoint()
                pool.trim()
        except BackgroundError:
            pass  # _checkpoint() stopped writes and logged why

    # ---- sweeping expired keys (btree/sweep.py) -------------------------------------------

    def _run_sweep(self) -> None:
        """Sweep expired keys now (btree/sweep.py; what the timing wheel runs)."""
        run_sweep(self)

    # ---- checkpoints -----------------------------------------------------------------------------

    def flush(self) -> None:
        """Checkpoint: write every changed page to the page file and start a
        new log; then give back the room earlier checkpoints left in the
        file, if it is more than a little (btree/vacuum.py: compact_file)."""
        with self._lock:
            self._check_writable()
            self._checkpoint()
            compact_file(self)

    def _checkpoint(self) -> None:
        wal = self._log
        try:
            lsn = wal.sync()
            if self._commits.syncer is not None:
                self._commits.syncer.mark_durable(lsn)
            pool, pager = self._pool, self._pager
            if not pool.dirty and not pool.raw_dirty and not pager.free_changed and lsn == pager.meta.ckpt_lsn:
                return
            self._write_checkpoint(lsn)
            new_log = LogWriter.create(self._fs, wal.file.path, lsn, self.path)
            with self._log_sync_lock:
                self._log = new_log
            self._log_pending = 0
            self._log_bytes_done += wal.bytes_written
            wal.close()
        except BaseException as exc:
            raise self._fail("a checkpoint", exc, applied=True) from exc

    def _write_checkpoint(self, ckpt_lsn: int, compact: bool = False) -> None:
        pool, pager, tree = self._pool, self._pager, self._tree
        ps = pager.page_size
        epoch = pager.meta.epoch + 1
        if self._meta_dirty:
            # The metadata entries go to a new chain of overflow pages (the
            # old one is freed like an overwritten value's).
            if self._meta_chain is not None:
                tree.free_overflow(self._meta_chain)
            self._meta_chain = tree.write_overflow(encode_meta_entries(self._meta)) if self._meta else None
            self._meta_dirty = False
        pool.observe_checkpoint()
        # Images are made by the pager a chunk at a time (Pager.commit).
        images: list = [(node.pgno, partial(encode_node, node, ps, epoch)) for node in pool.dirty.values()]
        for pg, (data, nxt) in pool.raw_dirty.items():
            images.append((pg, partial(encode_overflow, pg, data, nxt, ps, epoch)))
        # Overflow pages held back for live snapshots are free as far as the
        # page file is concerned (after a crash no snapshot is left).
        deferred = set(tree.deferred)
        chain = self._meta_chain
        meta = Meta(epoch, ps, tree.root, pager.page_count, 0, len(pager.free) + len(deferred), ckpt_lsn,
                    tree.entries, tree.height, tree.ttl_entries, chain.page if chain else 0,
                    chain.length if chain else 0)
        pager.commit(images, meta, deferred, compact)
        pool.mark_all_clean()
        pager.free_changed = False
        self._checkpoints += 1
        self._fill_cache = None

    # ---- reads ------------------------------------------------------------------------------------

    @cython.locals(point=PointGet)
    def get(self, key, default=None):
        """The value stored under ``key``, or ``default``."""
        if type(key) is not bytes:
            key = as_key(key, MAX_KEY_SIZE)
        point = self._point
        value = point.get(key)
        if value is None:
            return default
        if value is not NOT_SERVED:
            return value
        return self._get_in_view(key, default)

    def _get_in_view(self, key: bytes, default):
        """get() on a read-only handle (its reads retried while a writer
        elsewhere checkpoints, DB._read), or the error of one not usable."""
        point = self._point
        with self._lock:
            if not self._usable:
                self._check_open()
            point.gets += 1
            ahi = point.ahi
            if ahi:
                value = ahi.get(key)
                if value is not None:
                    point.count_hash_hits((key,), 1)
                    return value
            pager = self._pager
            reads = pager.page_reads
            value = self._read(Tree.get, key)
            if pager.page_reads != reads:
                point.page_reads += pager.page_reads - reads
                self._trim_after_read()
        return default if value is None else value

    @property
    def _usable(self) -> bool:
        """True while the handle may be used (open, not failed): the one
        test of hot paths, kept by the PointGet, whose get tests it too."""
        return self._point.usable

    @_usable.setter
    def _usable(self, usable: bool) -> None:
        self._point.usable = usable

    #: multi_get(keys): the value of each key, read in one consistent view (btree/multi_get.py).
    multi_get = multi_get

    def _trim_after_read(self) -> None:
        pool = self._pool
        if len(pool.pages) > pool.capacity:
            pool.trim()

    def __delitem__(self, key) -> None:
        """Like delete(), but a missing key raises KeyError (as for a dict);
        the check and the delete are one step under the lock."""
        key = as_key(key)
        with self._writes.exclusive():
            with self._lock:
                self._check_writable()
                if self._tree.get(key) is None:
                    raise KeyError(key)
                writer = Writer(QueuedWrite("delete", [(key, None)], encode_delete(key), len(key)), False)
                self._append_and_apply([writer], False)

    def _live_count(self) -> int:
        """len(db): the keys a read finds (Tree.live_count): the entry count
        the meta page keeps, less the values whose ttl has expired."""
        with self._lock:
            self._check_open()
            count = self._read(Tree.live_count)
            self._trim_after_read()
            return count

    def scan(self, start=None, end=None, reverse: bool = False, prefix=None) -> Iterator[tuple[bytes, bytes]]:
        """Iterate (key, value) over keys in [start, end) (and starting with
        ``prefix``), ascending, or descending with ``reverse=True``.

        The iterator reads the tree in chunks under the lock; a chunk goes
        on where the last one stopped if nothing was written in between, and
        otherwise seeks again after the last key returned, so it stays valid
        while writes go on: it returns each key at most once, in order; a key
        written (or deleted) during the scan is seen (or not) if it lies
        ahead of the iterator's position. Each chunk is one consistent read
        of the tree.
        """
        if type(start) is bytes and end is None and prefix is None:
            lo, hi = start, None  # (what scan_bounds makes of them, without the calls)
        else:
            lo, hi = scan_bounds(start, end, prefix)
        if not self._usable:
            self._check_open()
        return self._scan(lo, hi, bool(reverse))

    def _scan(self, lo: bytes | None, hi: bytes | None, reverse: bool,
              snap: "Snapshot | None" = None) -> Iterator[tuple[bytes, bytes]]:
        if lo is not None and hi is not None and lo >= hi:
            return iter(())
        # The items of each chunk are yielded by chain's C loop: the
        # generator runs once per chunk, not once per item.
        return chain.from_iterable(scan_chunks(self, lo, hi, reverse, snap))

    def get_meta(self, name: str) -> bytes | None:
        """The value of the metadata entry ``name`` (``batch.set_meta``), or None."""
        if not isinstance(name, str):
            raise TypeError(f"metadata name must be str, not {type(name).__name__}")
        with self._lock:
            self._check_open()
            return self._meta.get(name.encode("utf-8"))

    def meta(self) -> dict[str, bytes]:
        """Every metadata entry, name -> value."""
        with self._lock:
            self._check_open()
            return {name.decode("utf-8", "replace"): value for name, value in sorted(self._meta.items())}

    def approximate_size(self, start=None, end=None) -> int:
        """Bytes of the page file that keys in [start, end) take (None: an
        open end), estimated from the internal pages: each bound's share of
        the leaves (Tree.position) times the bytes of pages in use, rounded
        to a byte offset, and the range the difference of its bounds'
        offsets. No leaf is read; the estimates of adjacent ranges add up
        to the byte (each bound is rounded once, whichever range it ends)."""
        lo, hi = scan_bounds(start, end, None)
        with self._lock:
            self._check_open()
            tree = self._tree
            if tree.entries == 0 or (lo is not None and hi is not None and lo >= hi):
                return 0
            a = 0.0 if lo is None else self._read(Tree.position, lo)
            b = self._read(Tree.position, hi)
            pager = self._pager
            in_use = (pager.page_count - len(pager.free)) * pager.page_size
        return max(0, round(b * in_use) - round(a * in_use))

    def iterator(self, lower_bound=None, upper_bound=None) -> Cursor:
        """A cursor over the database as it is now (btree/cursor.py): keys
        in [lower_bound, upper_bound); writes made after it was created are
        not seen (it reads through a snapshot of its own, closed with it)."""
        snap = self.snapshot()
        try:
            return Cursor([snapshot_source(chunk_reader(self, snap))], lower_bound, upper_bound,
                          check=partial(check_snapshot, self, snap), pinned=snap, on_close=snap.close)
        except BaseException:
            snap.close()
            raise

    def snapshot(self) -> "Snapshot":
        """A point-in-time, read-only view (``get``/``scan``/``close``; a
        context manager). Writes go on meanwhile; the snapshot keeps seeing
        the database as it was when it was taken (see docs/btree.md)."""
        with self._lock:
            self._check_open()
            self._snap_ids += 1
            sid = self._snap_ids
            view = pin_view(self)
            tree = self._tree
            overlay: dict[int, Node] = {}
            tree.snaps[sid] = overlay
            tree.snap_seq = sid
            snap = Snapshot(sid, (tree.root, tree.height, overlay), self._view_gen, get=partial(snapshot_get, self),
                            multi_get=partial(snapshot_multi_get, self), scan=partial(snapshot_scan, self),
                            iterator=partial(snapshot_iterator, self), end=partial(end_snapshot, self))
            snap._source = tree
            view[1] += 1
            self._live_snaps[sid] = snap
            return snap

    # ---- lifecycle and statistics -----------------------------------------------------------------

    def close(self) -> None:
        """Checkpoint (writers) and release everything. Closing twice is harmless."""
        if self._closed:
            return
        self._stop_timer()  # a sweep chunk under way ends first (it needs _lock)
        with self._lock:
            if self._closed:
                return
            try:
                for snap in list(self._live_snaps.values()):
                    snap.close()
                if not self._read_only and self._failed is None:
                    self._checkpoint()
                    compact_file(self)
            finally:
                self._closed = True
                self._usable = self._writable = False
                self._alive[0] = False
                for chunk, _ in self._chunks.values():
                    chunk.clear()
                if self._log is not None:
                    self._log_bytes_done += self._log.bytes_written
                self._release()
                self._pool.clear()

    @property
    def closed(self) -> bool:
        return self._closed

    def _simulate_crash(self) -> None:
        """Tests: drop the handle as a killed process would (no checkpoint)."""
        self._stop_timer()
        with self._lock:
            self._closed = True
            self._usable = self._writable = False
            self._alive[0] = False
            self._release()

    def __enter__(self) -> "DB":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("read-only" if self._read_only else "open")
        return f"<btree.DB {self.path!r} {state}>"

    def stats(self) -> dict:
        """Counters and shape of the database, as a plain dict (see docs/btree.md)."""
        with self._lock:
            self._check_open()
            return collect_stats(self)

    # ---- invariant checking (tests and btree.check) --------------------------------------------------

    def check_invariants(self) -> list[str]:
        """Verify the in-memory tree (dirty pages included): key order,
        separator bounds, sibling links, free list disjoint from the tree,
        every page accounted for. Returns a list of problems (empty if fine)."""
        with self._lock:
            self._check_open()
            pager = self._pager
            problems = self._read(lambda tree: verify_tree(tree, pager, self._meta_chain))
            problems += verify_hash_index(self._tree, self._pool.pages)
            self._pool.trim()
            return problems


def open(path: str | bytes | os.PathLike, **options) -> DB:  # noqa: A001 - the API's name
    """Open (creating if missing) the btree database in directory ``path``.

    Options: page_size (default 4096, fixed at creation), cache_size (bytes of
    memory for decoded pages and the hash index;
    default None: 1/16 of physical memory, 32 MiB to 1 GiB), read_only (default False), fs (an lsmkv.base.fs.FileSystem),
    checkpoint_log_bytes (default 256 MiB), hash_index (default True).
    """
    check_option_names(options)
    return DB(path, **options)
