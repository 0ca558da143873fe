"""Recovery at open: what a writable open does before the first write.

RocksDB keeps this in db_impl_open.cc. Once the DB (db.py) holds the
directory's lock and its VersionSet has read the manifest, recovery checks
that every table the manifest names is there, replays the logs not yet in
tables into memtables -- writing each to a level-0 table once it passes
write_buffer_size -- and records those tables, the replayed metadata
entries and the number of a new, empty log in a fresh manifest in one step:
the commit point of recovery. The DB then creates that log and starts its
log syncer, flush thread and compactor. A directory a crash left
half-created (a lock and a manifest, no CURRENT) holds no data and is
created afresh.

The functions here take the file system, the directory, the VersionSet and
the options they work on, and the DB's ``write_level0``; they know nothing
else of the DB. They never write to an old log, and a table they write
counts only once the new manifest names it (until then it is an orphan the
next open deletes). A read-only handle recovers nothing: it follows the
writer's files (catch_up.py).
"""

from __future__ import annotations

import logging
import os
from typing import Callable, NamedTuple

from lsmkv.base.errors import CorruptionError
from lsmkv.base.filenames import CURRENT, LOCK, log_name, parse, table_name
from lsmkv.base.fs import FileSystem

from .memtable import MemTable
from .options import Options
from .version import FileMeta, Version, VersionEdit, VersionSet
from .wal import LogReader
from .write_batch import log_batches

#: What recovery logs goes out under the DB's logger name.
log = logging.getLogger("lsmkv.lsm.db")


class Recovered(NamedTuple):
    """What a writable open recovered: the number of the new log the new
    manifest names (the DB creates it), the last sequence number, and the
    report ``stats()["recovery"]`` shows (logs replayed, batches, torn tail
    bytes, damaged records a salvage skipped)."""

    log_number: int
    last_sequence: int
    report: dict


def clear_interrupted_creation(fs: FileSystem, path: str) -> None:
    """A crash while creating a DB can leave LOCK and a manifest but no
    CURRENT; such a directory holds no data and is created afresh."""
    if not fs.isdir(path):
        return
    names = fs.listdir(path)
    if not names or CURRENT in names:
        return
    kinds = [parse(n) for n in names]
    if all(n == LOCK or (k is not None and k[0] in ("manifest", "temp")) for n, k in zip(names, kinds)):
        lock = fs.lock(os.path.join(path, LOCK))
        try:
            for name in names:
                if name != LOCK:
                    fs.remove(os.path.join(path, name))
            fs.remove(os.path.join(path, LOCK))
        finally:
            lock.release()


def check_tables_present(fs: FileSystem, path: str, version: Version) -> None:
    """Raise CorruptionError naming the first table ``version`` records that
    the directory lacks."""
    names = set(fs.listdir(path))
    for level, files in enumerate(version.levels):
        for meta in files:
            if table_name(meta.number) not in names:
                raise CorruptionError(
                    f"table {table_name(meta.number)} (level {level}) recorded in the manifest is missing; "
                    "`lsmkv check` reports the damage", path=os.path.join(path, table_name(meta.number)))


def logs_to_replay(fs: FileSystem, path: str, log_number: int) -> list[int]:
    """Numbers of the logs not yet in tables (``log_number`` and later), ascending."""
    numbers = []
    for name in fs.listdir(path):
        parsed = parse(name)
        if parsed and parsed[0] == "log" and parsed[1] >= log_number:
            numbers.append(parsed[1])
    return sorted(numbers)


def replay_logs(fs: FileSystem, path: str, versions: VersionSet, options: Options,
                on_full: Callable[[MemTable], MemTable] | None = None) -> tuple[MemTable, int, dict]:
    """Apply the logs not yet in tables to a memtable: returns it, the last
    sequence number and the replay report. ``on_full(mem)`` is called when
    the memtable passes write_buffer_size and returns the memtable to
    continue with. Moves ``versions.next_file_number`` past every log."""
    salvage = options.wal_recovery_mode == "salvage"
    mem = MemTable()
    max_seq = versions.last_sequence
    report = {"logs": [], "batches": 0, "torn_tail_bytes": 0, "dropped": []}
    for number in logs_to_replay(fs, path, versions.log_number):
        log_path = os.path.join(path, log_name(number))
        reader = LogReader(fs.read_file(log_path), log_path, salvage=salvage)
        for seq, ops in log_batches(reader):
            if not ops:
                continue
            mem.add_batch(seq, ops)
            max_seq = max(max_seq, seq + len(ops) - 1)
            report["batches"] += 1
            if on_full is not None and mem.size >= options.write_buffer_size:
                mem = on_full(mem)
        report["logs"].append(number)
        report["torn_tail_bytes"] += reader.report.torn_tail_bytes
        report["dropped"].extend((log_path, off, n, why) for off, n, why in reader.report.dropped)
        if reader.report.torn_tail_bytes:
            log.info("%s: dropped a torn tail of %d bytes (never acknowledged as synced)", log_path,
                     reader.report.torn_tail_bytes)
        for off, n, why in reader.report.dropped:
            log.warning("%s: salvage skipped %d damaged bytes at offset %d (%s)", log_path, n, off, why)
        versions.next_file_number = max(versions.next_file_number, number + 1)
    return mem, max_seq, report


def recover_for_writing(fs: FileSystem, path: str, versions: VersionSet, options: Options,
                        write_level0: Callable[[MemTable, list[int]], FileMeta | None]) -> Recovered:
    """Replay the logs into level-0 tables (``write_level0(mem, [])`` writes
    one) and write the new manifest that records them and names a new log:
    from then on the old logs are obsolete. ``versions`` has read the
    manifest; the directory's lock is held."""
    edit = VersionEdit()

    def flush_recovered(mem: MemTable) -> MemTable:
        meta = write_level0(mem, [])
        if meta is not None:
            edit.add_file(0, meta)
        edit.meta.update(mem.meta)
        return MemTable()

    mem, max_seq, report = replay_logs(fs, path, versions, options, flush_recovered)
    if len(mem) or mem.meta:
        flush_recovered(mem)
    new_log = versions.new_file_number()
    edit.log_number = new_log
    edit.last_sequence = max_seq
    edit.next_file_number = versions.next_file_number
    # The new manifest (holding this edit) is the commit point of recovery.
    versions.write_new_manifest(edit)
    return Recovered(new_log, max_seq, report)
