"""Compactor: runs leveled compaction for one DB, in the background and on demand.

It owns the compaction thread, the optional worker process that does the
merging (compaction_job.py), and the install step: output files are renamed
to their table numbers and fsynced into the directory, then one manifest edit
removes the inputs and adds the outputs, and the DB's read state switches to
the new Version. Input files are deleted later, when no live Version (an open
scan, say) still references them.

One compaction runs at a time (``_lock``): the background loop and
``compact_range`` take turns. Compaction never blocks reads; writers are
only slowed or stopped by the level-0 triggers (db.py). When no score asks
for a compaction, a table whose values with a ttl have begun to expire is
compacted (compaction.pick_expired).

It sees its database only through a :class:`CompactionHost`, built by the
database with exactly what compaction needs; it must never import or reach
into db.py.
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

from lsmkv.base.errors import BackgroundError
from lsmkv.base.filenames import table_name
from lsmkv.base.fs import DEFAULT_FS, FileSystem
from lsmkv.base.ttl import now_ms

from .compaction import (Compaction, CompactionLimits, deepest_level_with_data, pick_compaction, pick_expired,
                         pick_manual)
from .compaction_job import (CompactionJob, CompactionResult, TableOptions, receive_message, run_compaction,
                             send_message)
from .options import Options
from .version import NUM_LEVELS, FileMeta, Version, VersionEdit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactionHost:
    """Everything a Compactor needs from the database it compacts -- and
    all it gets (the database builds one; the compactor never sees the DB).

    ``cond`` is the database's background condition: the compaction thread
    waits on it, and ``stopped()`` (writes stopped after a failure) and
    ``shutting_down()`` are read under it. ``install(edit)`` records an
    edit in the manifest and makes the new Version the one readers see;
    ``pending_outputs`` holds numbers of tables written but not yet
    installed (obsolete-file sweeps leave them alone)."""

    path: str
    fs: FileSystem
    options: Options
    cond: threading.Condition
    stopped: Callable[[], bool]
    shutting_down: Callable[[], bool]
    current_version: Callable[[], Version]
    live_snapshots: Callable[[], list[int]]
    new_file_number: Callable[[], int]
    pending_outputs: set[int]
    install: Callable[[VersionEdit], object]
    delete_obsolete_files: Callable[[], None]
    failed: Callable[[str, BaseException], None]
    #: Seconds since the Unix epoch, for expiring values with a TTL.
    wall_clock: Callable[[], float] = time.time


class CompactionStats:
    """Compaction counters: totals, and per output level (the level a
    compaction wrote into) the compactions, bytes read and written and
    bytes moved in by trivial moves, as RocksDB's per-level compaction stats."""

    __slots__ = ("compactions", "trivial_moves", "bytes_read", "bytes_written", "entries_read",
                 "entries_written", "versions_dropped", "tombstones_dropped", "ttl_expired", "range_covered_dropped",
                 "range_tombstones_dropped", "merges_folded", "merge_failures", "seconds", "cpu_seconds",
                 "compactions_into", "bytes_read_into", "bytes_written_into", "bytes_moved_into")

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, [0] * NUM_LEVELS if name.endswith("_into") else 0)

    def add(self, result: CompactionResult, output_level: int) -> None:
        self.compactions += 1
        self.bytes_read += result.bytes_read
        self.bytes_written += result.bytes_written
        self.entries_read += result.entries_read
        self.entries_written += result.entries_written
        self.versions_dropped += result.versions_dropped
        self.tombstones_dropped += result.tombstones_dropped
        self.ttl_expired += result.ttl_expired
        self.range_covered_dropped += result.range_covered_dropped
        self.range_tombstones_dropped += result.range_tombstones_dropped
        self.merges_folded += result.merges_folded
        self.merge_failures += result.merge_failures
        self.seconds += result.seconds
        self.cpu_seconds += result.cpu_seconds
        self.compactions_into[output_level] += 1
        self.bytes_read_into[output_level] += result.bytes_read
        self.bytes_written_into[output_level] += result.bytes_written

    def add_trivial_move(self, size: int, output_level: int) -> None:
        self.trivial_moves += 1
        self.bytes_moved_into[output_level] += size

    def as_dict(self) -> dict:
        return {name: (list(v) if isinstance(v := getattr(self, name), list) else v) for name in self.__slots__}


def _worker_environment() -> dict:
    """Import this very lsmkv in the worker (also when it runs from a source
    tree), and never modules that happen to sit in the current directory;
    tell the worker which process it serves (it exits if that one is gone)."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONSAFEPATH": "1", "LSMKV_COMPACTION_PARENT": str(os.getpid()),
            "PYTHONPATH": package_root + (os.pathsep + path if path else "")}


class CompactionWorker:
    """The DB side of the worker process (compaction_worker.py): started on
    first use, restarted if it died, stopped at close."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def run(self, job: CompactionJob) -> CompactionResult:
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                proc = self._proc = subprocess.Popen(
                    [sys.executable, "-m", "lsmkv.lsm.compaction_worker"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, env=_worker_environment())
            cause: BaseException | None = None
            try:
                send_message(proc.stdin, job)
                reply = receive_message(proc.stdout)
            except OSError as exc:
                reply, cause = None, exc
            if reply is None:
                proc.kill()
                self._proc = None
                raise BackgroundError(f"the compaction worker process exited (code {proc.wait()})") from cause
            status, value = reply
            if status == "error":
                raise value
            return value

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.stdin.close()
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            proc.stdout.close()


class Compactor:
    """Leveled compaction for one database, through its CompactionHost."""

    def __init__(self, host: CompactionHost) -> None:
        self.host = host
        opts = host.options
        self.limits = self.limits_for(opts)
        self.table_options = TableOptions(opts.block_size, opts.compression, opts.compression_level,
                                          opts.upper_level, opts.bloom_bits_per_key)
        self.use_process = opts.compaction_executor == "process" and opts.fs is DEFAULT_FS
        self.stats = CompactionStats()
        self._lock = threading.Lock()
        self._worker: CompactionWorker | None = CompactionWorker() if self.use_process else None
        self._job_ids = 0
        self._thread: threading.Thread | None = None
        #: Bumped (under the DB's _bg_cond) whenever the tree changes shape.
        self.changes = 0

    @staticmethod
    def limits_for(opts) -> CompactionLimits:
        return CompactionLimits(
            level1_max_bytes=opts.level1_max_bytes, level_size_multiplier=opts.level_size_multiplier,
            target_file_size=opts.target_file_size, l0_compaction_trigger=opts.l0_compaction_trigger,
            max_grandparent_overlap_bytes=opts.max_grandparent_overlap_factor * opts.target_file_size)

    @staticmethod
    def empty_stats() -> dict:
        return CompactionStats().as_dict()

    # -- background loop ----------------------------------------------------

    def start(self) -> None:
        if self.host.options.disable_auto_compactions:
            return
        self._thread = threading.Thread(target=self._loop, name=f"lsmkv-compact:{self.host.path}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        """The compaction thread. It idles while writes are stopped after a
        failure (the DB's resume() wakes it) and exits at close."""
        host = self.host
        cond, stopped, shutting_down = host.cond, host.stopped, host.shutting_down
        seen = -1
        while True:
            with cond:
                while (self.changes == seen or stopped()) and not shutting_down():
                    cond.wait()
                if shutting_down():
                    return
                seen = self.changes
            try:
                while not shutting_down() and not stopped() and self._run_one_scored():
                    pass
            except BaseException as exc:  # noqa: BLE001 - any failure stops writes
                host.failed("compaction", exc)

    def _run_one_scored(self) -> bool:
        """Run the compaction the scores ask for, else one for a table with
        expired values; False if there is none."""
        with self._lock:
            version = self.host.current_version()
            compaction = pick_compaction(version, self.limits)
            if compaction is None:
                compaction = pick_expired(version, now_ms(self.host.wall_clock()))
            version = None  # (held across the compaction, it would pin its files)
            if compaction is None:
                return False
            self._run(compaction)
            return True

    @contextmanager
    def paused(self):
        """Hold off compactions (after the running one, if any, ends)."""
        with self._lock:
            yield

    # -- on demand ----------------------------------------------------------

    def compact_range(self, start: bytes | None, end: bytes | None) -> None:
        """Compact every table overlapping [start, end] down to the deepest
        level holding data in that range, dropping overwritten versions and
        tombstones there."""
        current = self.host.current_version
        with self._lock:
            # (No Version is kept in a local across compactions: it would
            # keep the files it names from being deleted.)
            last = max(1, deepest_level_with_data(current(), start, end))
            for level in range(last):
                compaction = pick_manual(current(), level, start, end)
                if compaction is not None:
                    self._run(compaction)
            # Tables already in the last level can still hold tombstones,
            # range tombstones (a level-0 table moved down whole, say, or
            # ones a snapshot kept) or expired values: rewrite
            # those in place.
            now = now_ms(self.host.wall_clock())
            if any(f.tombstones or f.range_tombstones or (f.earliest_deadline and f.earliest_deadline <= now)
                   for f in current().overlapping(last, start, end)):
                compaction = pick_manual(current(), last, start, end, bottommost=True)
                if compaction is not None:
                    self._run(compaction)
            compaction = None
        self.host.delete_obsolete_files()

    # -- running and installing -----------------------------------------------

    def _run(self, c: Compaction) -> None:
        for f in c.all_inputs:
            f.being_compacted = True
        try:
            if c.is_trivial_move(self.limits):
                self._install_trivial_move(c)
            else:
                result = self._merge(c)
                self._install(c, result)
        finally:
            for f in c.all_inputs:
                f.being_compacted = False

    def _job(self, c: Compaction) -> CompactionJob:
        host = self.host
        path = host.path

        def source(files: list[FileMeta]) -> list[tuple[str, int, int]]:
            return [(os.path.join(path, table_name(f.number)), f.number, f.global_seq) for f in files]

        if c.level == 0:
            sources = [source([f]) for f in c.inputs]  # overlapping: one source each, newest first
        else:
            sources = [source(c.inputs)]
        if c.next_inputs:
            sources.append(source(c.next_inputs))
        lo, hi = c.key_range()
        version = host.current_version()
        lower = [[(f.smallest, f.largest) for f in version.overlapping(level, lo, hi)]
                 for level in range(c.output_level + 1, NUM_LEVELS)]
        self._job_ids += 1
        return CompactionJob(
            dbpath=path, job_id=f"{os.getpid()}-{self._job_ids}", sources=sources, output_level=c.output_level,
            snapshots=host.live_snapshots(), lower_ranges=lower,
            grandparents=[(f.largest, f.size) for f in c.grandparents],
            target_file_size=self.limits.target_file_size,
            max_grandparent_overlap_bytes=self.limits.max_grandparent_overlap_bytes,
            table=self.table_options, now_ms=now_ms(host.wall_clock()),
            merge_operator=host.options.merge_operator)

    def _merge(self, c: Compaction) -> CompactionResult:
        job = self._job(c)
        if self._worker is not None and job.merge_operator is not None:
            # The worker gets the operator pickled; one that does not pickle
            # (a lambda, a closure) folds in this process instead.
            try:
                job.merge_operator = pickle.dumps(job.merge_operator, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 - whatever pickling raises
                return run_compaction(job, self.host.fs)
        if self._worker is not None:
            return self._worker.run(job)
        return run_compaction(job, self.host.fs)

    def _install_trivial_move(self, c: Compaction) -> None:
        meta = c.inputs[0]
        edit = VersionEdit()
        edit.delete_file(c.level, meta.number)
        moved = FileMeta(meta.number, meta.size, meta.smallest, meta.largest, meta.smallest_seq,
                         meta.largest_seq, meta.entries, meta.tombstones, meta.ttl_entries,
                         meta.earliest_deadline, meta.global_seq, meta.range_tombstones)
        moved.reader = meta.reader
        edit.add_file(c.output_level, moved)
        self.host.install(edit)
        self.stats.add_trivial_move(meta.size, c.output_level)
        log.debug("%s: moved table %d from level %d to %d", self.host.path, meta.number, c.level, c.output_level)

    def _install(self, c: Compaction, result: CompactionResult) -> None:
        host = self.host
        fs = host.fs
        edit = VersionEdit()
        for f in c.inputs:
            edit.delete_file(c.level, f.number)
        for f in c.next_inputs:
            edit.delete_file(c.output_level, f.number)
        renamed = []
        try:
            for out in result.outputs:
                number = host.new_file_number()
                host.pending_outputs.add(number)
                renamed.append(number)
                fs.rename(out.tmp_path, os.path.join(host.path, table_name(number)))
                edit.add_file(c.output_level, FileMeta(number, out.size, out.smallest, out.largest,
                                                       out.smallest_seq, out.largest_seq, out.entries,
                                                       out.tombstones, out.ttl_entries, out.earliest_deadline,
                                                       range_tombstones=out.range_tombstones))
            fs.sync_dir(host.path)
            host.install(edit)
        except BaseException:
            for out in result.outputs:
                try:
                    fs.remove(out.tmp_path)
                except OSError:
                    pass
            raise
        finally:
            for number in renamed:
                host.pending_outputs.discard(number)
        self.stats.add(result, c.output_level)
        log.debug("%s: compacted %d+%d tables of level %d into %d tables of level %d (%.2fs)", host.path,
                  len(c.inputs), len(c.next_inputs), c.level, len(result.outputs), c.output_level,
                  result.seconds)
        host.delete_obsolete_files()

    def stop(self) -> None:
        """Wait for the running compaction (if any) and release the worker."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            if self._worker is not None:
                self._worker.close()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no compaction is due (scores below 1) or the timeout passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        host = self.host
        while True:
            with self._lock:
                due = pick_compaction(host.current_version(), self.limits)
            if due is None or host.stopped():
                return due is None
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.01)
