"""``lsmkv repair DB`` for the LSM engine: rebuild from what verifies.

What a repair does, in order (holding the database's lock all along, so it
refuses to run while another process has the database open for writing):

1. Replay the manifest. If it replays, its tables are the database and
   tables it does not name are leftovers of a crash (their data is in the
   named tables or the logs); if it does not, every table file found is a
   candidate and the manifest's damage is reported.
2. Verify every candidate table completely (``check.verify_table``: every
   block checksum, the index, bloom filter, properties and footer, entry
   order, and the manifest's record of it). A table that fails is salvaged
   (``table/salvage.py``): every data block that verifies is kept, found
   through the index or, when the index or footer is damaged, by scanning
   the file for blocks; each damaged data block is reported with the keys
   it may have held (between the last key of the block before it and the
   last key of its own, as the index says, or the first key of the next
   block that verifies). A damaged filter, properties or index block or
   footer costs no entries when the data blocks are found without it. The
   damaged file is copied into ``lost/N/``.
3. Read every log not yet in tables with salvage semantics: intact batches
   are kept, damaged byte ranges are reported (which keys they held is
   unknown) and the log is copied aside.
4. Merge everything that survived (whole tables and salvaged blocks, each
   entry with its own sequence number and kind, an ingested table's at the
   sequence the manifest gave it) into fresh tables at one level: per key,
   the newest version by sequence number and, for equal sequences (a
   compaction with nothing below writes sequence 0), by read order: level 0
   newest first, then levels 1..6, then (without a manifest) the higher
   file number. That is the version a read would have returned. Tombstones
   and older versions are dropped (nothing is left below them), so no
   deleted key comes back and level 0's order no longer matters. Below a
   merge operand (kind 4) the older versions are kept down to the first
   that is not one (a tombstone there is dropped: an operand with nothing
   below folds as one over a tombstone does), so that a read folds what it
   folded before; the manifest's merge operator name is carried over.
5. Commit: a new manifest naming just the new tables, with a log number
   past every old log, becomes current by the atomic rename of CURRENT.
   A crash before that leaves the old database as it was (plus unreferenced
   tables, removed at open); then the old tables, logs and manifests are
   removed (the damaged ones are already copied aside).

Keys outside every reported loss have exactly the value a read of the
undamaged database would have returned. Library code: it never prints.
"""

from __future__ import annotations

import heapq
import logging
import os
from typing import Iterator

from lsmkv.base.dbdir import engine_of_damaged
from lsmkv.base.errors import CorruptionError, InvalidDatabaseError, LsmkvError
from lsmkv.base.filenames import CURRENT, LOCK, log_name, parse, table_name
from lsmkv.base.fs import DEFAULT_FS, FileSystem
from lsmkv.base.repair_report import Loss, RepairReport
from lsmkv.base.set_aside import copy_aside, new_set_aside_dir

from .check import verify_table
from .flush import write_table
from .options import Options
from .range_tombstones import FragmentedTombstones
from .table.format import FOOTER_SIZE, Footer, decode_stored_block
from .table.properties import TableProperties
from .table.reader import TableReader
from .table.salvage import SalvagedTable, salvage_table
from .version import NUM_LEVELS, FileMeta, Version, VersionSet
from .wal import LogReader
from .write_batch import MERGE, META, RANGE_DELETE, TOMBSTONE, log_batches

log = logging.getLogger(__name__)

_MAX_SEQ = (1 << 56) - 1


class _Candidate:
    """A table file repair may keep: its number, what the manifest says of it
    (None without a manifest) and its precedence for equal sequence numbers
    (lower wins)."""

    __slots__ = ("number", "meta", "level", "precedence", "salvaged")

    def __init__(self, number: int, meta: FileMeta | None, level: int | None, precedence: int) -> None:
        self.number = number
        self.meta = meta
        self.level = level
        self.precedence = precedence
        #: What was recovered of a table that failed verification (None: it verified).
        self.salvaged: SalvagedTable | None = None

    @property
    def global_seq(self) -> int:
        """The sequence an ingested table's entries read as (the manifest's
        record; 0 for other tables and without a manifest)."""
        return self.meta.global_seq if self.meta is not None else 0


def repair_db(path: str | os.PathLike, fs: FileSystem | None = None, **options) -> RepairReport:
    """Repair the lsmkv database in ``path``; returns what was kept and lost.

    ``options`` are lsmkv.open() options for the tables repair writes
    (block_size, compression, target_file_size, level sizes...). Raises
    LockError if another process has the database open for writing and
    InvalidDatabaseError if ``path`` is not an lsmkv database (or one of a
    newer format); changes nothing then.
    """
    fs = fs or DEFAULT_FS
    path = os.fspath(path)
    opts = Options.from_kwargs(dict(options, fs=fs))
    engine = engine_of_damaged(path, fs)
    if engine != "lsm":
        raise InvalidDatabaseError(f"{path} is a {engine} database; repair it as one (lsmkv repair detects it)")
    lock = fs.lock(os.path.join(path, LOCK))
    try:
        return _Repair(path, fs, opts).run()
    finally:
        lock.release()


class _Repair:
    def __init__(self, path: str, fs: FileSystem, options: Options) -> None:
        self.path = path
        self.fs = fs
        self.options = options
        self.report = RepairReport(engine="lsm", path=path)
        self.names = sorted(fs.listdir(path))
        #: Files to copy into lost/N before the commit.
        self.damaged_files: list[str] = []
        self.max_number = 1
        self.max_seq = 0
        #: Metadata entries (set_meta) found in the logs, name -> newest value.
        self.meta: dict[bytes, bytes] = {}
        #: Range tombstones of the tables kept or salvaged, and of the logs
        #: (start, end, seq): applied to what is written, then dropped.
        self.range_dels: list[FragmentedTombstones] = []
        self.log_range_dels: list[tuple[bytes, bytes, int]] = []

    def _full(self, name: str) -> str:
        return os.path.join(self.path, name)

    def run(self) -> RepairReport:
        report = self.report
        for name in self.names:
            parsed = parse(name)
            if parsed is not None and parsed[0] != "temp":
                self.max_number = max(self.max_number, parsed[1])
        versions = self._read_manifest()
        candidates = self._candidates(versions)
        survivors = self._verify_tables(candidates)
        log_floor = versions.log_number if versions is not None else 0
        newest_in_logs = self._read_logs(log_floor)
        metas = self._write_merged(survivors, newest_in_logs)
        if self.damaged_files:
            report.set_aside = new_set_aside_dir(self.fs, self.path)
            for full in self.damaged_files:
                copy_aside(self.fs, full, report.set_aside)
        self._commit(metas, versions)
        self._remove_replaced({m.number for _, m in metas})
        return report

    # -- 1. the manifest ------------------------------------------------------

    def _read_manifest(self) -> VersionSet | None:
        versions = VersionSet(self.path, self.fs)
        try:
            versions.recover()
        except InvalidDatabaseError:
            raise  # a newer format: not ours to rewrite
        except (CorruptionError, OSError) as exc:
            self.report.notes.append(f"manifest could not be replayed ({exc}); every table file found is used, "
                                     "ordered by sequence number and then file number")
            for name in self.names:
                parsed = parse(name)
                if name == CURRENT or (parsed is not None and parsed[0] == "manifest"):
                    self.damaged_files.append(self._full(name))
            return None
        finally:
            versions.close()
        self.max_number = max(self.max_number, versions.next_file_number)
        self.max_seq = versions.last_sequence
        return versions

    # -- 2. tables --------------------------------------------------------------

    def _candidates(self, versions: VersionSet | None) -> list[_Candidate]:
        present = {p[1] for p in map(parse, self.names) if p is not None and p[0] == "table"}
        out: list[_Candidate] = []
        if versions is None:
            for rank, number in enumerate(sorted(present, reverse=True)):
                out.append(_Candidate(number, None, None, rank))
            return out
        rank = 0
        named = set()
        for level, files in enumerate(versions.current.levels):
            for meta in files:  # read order: level 0 newest first, then by level
                named.add(meta.number)
                if meta.number not in present:
                    self.report.lost.append(Loss(
                        f"{self._full(table_name(meta.number))}: missing (level {level} of the manifest)",
                        meta.smallest, meta.largest, entries=meta.entries))
                    continue
                out.append(_Candidate(meta.number, meta, level, rank))
                rank += 1
        for number in sorted(present - named):
            self.report.notes.append(f"{table_name(number)}: not named by the manifest (left by a crash; its data "
                                     "is in the named tables or the logs), removed")
        return out

    def _verify_tables(self, candidates: list[_Candidate]) -> list[_Candidate]:
        survivors = []
        kept = salvaged = entries = salvaged_entries = spans_lost = 0
        for cand in candidates:
            full = self._full(table_name(cand.number))
            problems, counts = verify_table(self.fs, full, cand.number, cand.meta)
            if not problems:
                kept += 1
                entries += counts["entries"]
                survivors.append(cand)
                continue
            self.damaged_files.append(full)
            cand.salvaged = self._salvage(full, cand, problems)
            if cand.salvaged is not None and cand.salvaged.range_dels is not None:
                self.range_dels.append(cand.salvaged.range_dels)
            if cand.salvaged is not None and cand.salvaged.blocks:
                salvaged += 1
                salvaged_entries += cand.salvaged.entries_kept
                spans_lost += len(cand.salvaged.lost)
                survivors.append(cand)
        self.report.details.update(tables_verified=len(candidates), tables_kept=kept, tables_salvaged=salvaged,
                                   tables_lost=len(candidates) - kept - salvaged, table_entries_read=entries,
                                   table_entries_salvaged=salvaged_entries, damaged_spans_lost=spans_lost)
        return survivors

    def _where(self, full: str, cand: _Candidate) -> str:
        return full if cand.level is None else f"{full} (level {cand.level})"

    def _salvage(self, full: str, cand: _Candidate, problems: list[str]) -> SalvagedTable | None:
        """Recover what verifies of a damaged table and report the rest;
        None if nothing of it could be read."""
        where = self._where(full, cand)
        meta = cand.meta
        try:
            data = self.fs.read_file(full)
            salvaged = salvage_table(data, full, global_seq=cand.global_seq,
                                     smallest=meta.smallest if meta is not None else None,
                                     largest=meta.largest if meta is not None else None)
        except (LsmkvError, OSError) as exc:
            loss = self._table_loss(full, cand, problems)
            loss.what += f"; nothing salvaged ({exc})"
            self.report.lost.append(loss)
            return None
        kept = salvaged.entries_kept
        props = salvaged.properties
        total = meta.entries if meta is not None else props.entries if props is not None else None
        lost_entries = total - kept if total is not None and total >= kept else None
        for note in salvaged.notes:
            self.report.notes.append(f"{where}: {note}")
        if salvaged.range_dels_lost is not None and (meta is None or meta.range_tombstones):
            self.report.lost.append(Loss(
                f"{where}: range tombstones lost: {salvaged.range_dels_lost}; keys they deleted may reappear",
                meta.smallest if meta is not None else None, meta.largest if meta is not None else None,
                keys_known=meta is not None))
        for span in salvaged.lost:
            self.report.lost.append(Loss(f"{where}: {span.what}", span.first, span.last, span.first_inclusive,
                                         span.last_inclusive,
                                         entries=lost_entries if len(salvaged.lost) == 1 else None))
        if not salvaged.lost and not salvaged.notes:
            # Every block verifies, yet the table is not what the manifest
            # recorded: keys may be missing anywhere in its range. What it
            # holds is kept.
            loss = self._table_loss(full, cand, problems)
            loss.what += " (every block verifies; its entries were kept)"
            loss.entries = lost_entries or None
            self.report.lost.append(loss)
        of = f" of {total}" if total is not None else ""
        self.report.notes.append(f"{where}: kept {kept}{of} entries from {len(salvaged.blocks)} data blocks that "
                                 f"verify (found by {'its index' if salvaged.found_by == 'index' else 'scanning'})")
        return salvaged

    def _table_loss(self, full: str, cand: _Candidate, problems: list[str]) -> Loss:
        what = f"{self._where(full, cand)}: {problems[0]}" + (
            f" and {len(problems) - 1} more problem(s)" if len(problems) > 1 else "")
        if cand.meta is not None:
            return Loss(what, cand.meta.smallest, cand.meta.largest, entries=cand.meta.entries)
        props = _readable_properties(self.fs, full)
        if props is None:
            return Loss(what, keys_known=False)
        return Loss(what, props.smallest_key, props.largest_key, entries=props.entries)

    # -- 3. logs ------------------------------------------------------------------

    def _read_logs(self, floor: int) -> dict[bytes, list[tuple[int, int, bytes]]]:
        """key -> [(sequence, kind, value)] of the newest version in the logs
        and, below a merge operand, the versions down to the first that is
        not one (newest first)."""
        newest: dict[bytes, list[tuple[int, int, bytes]]] = {}
        batches = 0
        numbers = sorted(p[1] for p in map(parse, self.names) if p is not None and p[0] == "log" and p[1] >= floor)
        for number in numbers:
            full = self._full(log_name(number))
            reader = LogReader(self.fs.read_file(full), full, salvage=True)
            for seq, ops in log_batches(reader):
                batches += 1
                for kind, key, value in ops:
                    if kind == META:  # metadata, not a key: kept for the new manifest
                        self.meta[key] = value
                        seq += 1
                        continue
                    if kind == RANGE_DELETE:  # a range tombstone: applied when the tables are written
                        self.log_range_dels.append((key, value, seq))
                        seq += 1
                        continue
                    old = newest.get(key)
                    if old is None or old[0][0] <= seq:
                        newest[key] = [(seq, kind, value), *old] if kind == MERGE and old else [(seq, kind, value)]
                    seq += 1
                self.max_seq = max(self.max_seq, seq - 1)
            for offset, size, why in reader.report.dropped:
                self.report.lost.append(Loss(f"{full}: {size} damaged bytes at offset {offset} dropped ({why})",
                                             keys_known=False))
            if reader.report.dropped:
                self.damaged_files.append(full)
            if reader.report.torn_tail_bytes:
                self.report.notes.append(f"{log_name(number)}: torn tail of {reader.report.torn_tail_bytes} bytes "
                                         "dropped (a write cut short by a crash, never acknowledged as synced)")
        self.report.details.update(logs_read=len(numbers), log_batches_kept=batches)
        return newest

    # -- 4. merge and write -------------------------------------------------------

    def _write_merged(self, survivors: list[_Candidate],
                      newest_in_logs: dict[bytes, list[tuple[int, int, bytes]]]) -> list[tuple[int, FileMeta]]:
        readers = []
        try:
            sources = []
            for c in survivors:
                if c.salvaged is not None:
                    sources.append(_newest_per_key(c.salvaged.entries(), c.precedence + 1))
                    self.max_seq = max(self.max_seq, c.salvaged.largest_seq)
                    continue
                r = TableReader(self.fs, self._full(table_name(c.number)), c.number, cache=None,
                                global_seq=c.global_seq)
                readers.append(r)
                if r.range_dels is not None:
                    self.range_dels.append(r.range_dels)
                sources.append(_newest_per_key(r.entries(), c.precedence + 1))
                self.max_seq = max(self.max_seq, r.properties.largest_seq)
            sources.append(iter(sorted((key, -seq, 0, kind, value)
                                       for key, chain in newest_in_logs.items() for seq, kind, value in chain)))
            return self._write_tables(heapq.merge(*sources))
        finally:
            for r in readers:
                r.close()

    def _write_tables(self, merged: Iterator[tuple[bytes, int, int, int, bytes]]) -> list[tuple[int, FileMeta]]:
        opts = self.options
        outputs: list[FileMeta] = []
        keys: list[bytes] = []
        seq_kinds: list[int] = []
        values: list[bytes] = []
        pending = 0
        prev = None
        live = dropped = 0
        # Every range tombstone applies here (the new tables are the only
        # level and no snapshot exists): what one covers goes, and so do they.
        range_dels = FragmentedTombstones.merged([*self.range_dels,
                                                  FragmentedTombstones.build(self.log_range_dels)])
        newest_covering = _newest_covering(range_dels)
        #: The last version kept of ``prev`` is a merge operand: keep older
        #: ones (a lower sequence) down to the first that is not one.
        collecting = False
        last_seq = 0

        def cut() -> None:
            nonlocal keys, seq_kinds, values, pending
            if keys:
                self.max_number += 1
                meta = write_table(self.fs, self.path, self.max_number, [(keys, seq_kinds, values)], opts)
                if meta is not None:
                    outputs.append(meta)
            keys, seq_kinds, values, pending = [], [], [], 0

        for key, neg_seq, _rank, kind, value in merged:
            if key == prev and not (collecting and -neg_seq < last_seq):
                dropped += 1
                continue  # an older version, or the same one from a lower-precedence source
            prev = key
            collecting = kind == MERGE
            last_seq = -neg_seq
            if kind == TOMBSTONE or (range_dels and newest_covering(key) > -neg_seq):
                dropped += 1
                continue  # nothing older survives below the new tables
            keys.append(key)
            seq_kinds.append(-neg_seq << 8 | kind)
            values.append(value)
            live += 1
            pending += len(key) + len(value) + 16
            if pending >= opts.target_file_size:
                cut()
        cut()
        total = sum(m.size for m in outputs)
        level = next((lv for lv in range(1, NUM_LEVELS)
                      if opts.level1_max_bytes * opts.level_size_multiplier ** (lv - 1) >= total), NUM_LEVELS - 1)
        self.report.details.update(keys_kept=live, versions_and_tombstones_dropped=dropped,
                                   tables_written=len(outputs), level=level, bytes_written=total)
        return [(level, m) for m in outputs]

    # -- 5. commit ------------------------------------------------------------------

    def _commit(self, metas: list[tuple[int, FileMeta]], old: VersionSet | None) -> None:
        levels: list[list[FileMeta]] = [[] for _ in range(NUM_LEVELS)]
        for level, meta in metas:
            levels[level].append(meta)
        versions = VersionSet(self.path, self.fs)
        self.max_number += 1
        versions.log_number = self.max_number  # past every old log: none is replayed again
        versions.next_file_number = self.max_number + 1
        versions.last_sequence = min(max(self.max_seq, old.last_sequence if old is not None else 0), _MAX_SEQ)
        versions._install(Version(levels))
        # Metadata: the old manifest's (if it could be read), then the logs' (newer).
        versions.meta = {**(old.meta if old is not None else {}), **self.meta}
        versions.merge_operator = old.merge_operator if old is not None else None
        if old is None and self.meta:
            self.report.notes.append("metadata entries were recovered from the logs only (the manifest that held "
                                     "the older ones could not be read)")
        try:
            versions.write_new_manifest()
        finally:
            versions.close()
        self.report.details["manifest"] = f"MANIFEST-{versions.manifest_number:06d}"

    def _remove_replaced(self, keep: set[int]) -> None:
        removed = 0
        for name in self.names:
            parsed = parse(name)
            if parsed is None or (parsed[0] == "table" and parsed[1] in keep):
                continue
            try:
                self.fs.remove(self._full(name))
                removed += 1
            except FileNotFoundError:
                pass
        self.fs.sync_dir(self.path)
        self.report.details["old_files_removed"] = removed


def _newest_covering(fragments: FragmentedTombstones):
    """key -> the newest sequence of a range tombstone covering it (0: none)."""
    def newest(key: bytes) -> int:
        return fragments.covering_seq(key, _MAX_SEQ)
    return newest


def _newest_per_key(entries: Iterator[tuple[bytes, int, bytes]],
                    precedence: int) -> Iterator[tuple[bytes, int, int, int, bytes]]:
    """(key, -sequence, precedence, kind, value) of each key's newest version
    among a table's ``entries`` (in internal order)."""
    prev = None
    collecting = False  # the last version yielded is a merge operand: the next one of its key is needed too
    for key, seq_kind, value in entries:
        if key != prev or collecting:
            prev = key
            kind = seq_kind & 0xFF
            collecting = kind == MERGE
            yield key, -(seq_kind >> 8), precedence, kind, value


def _readable_properties(fs: FileSystem, path: str) -> TableProperties | None:
    """A damaged table's properties block, if its footer and that block still read."""
    try:
        data = fs.read_file(path)
        if len(data) < FOOTER_SIZE:
            return None
        footer = Footer.decode(data[-FOOTER_SIZE:], path, len(data))
        off, size = footer.properties
        return TableProperties.decode(decode_stored_block(data[off:off + size + 5], path, off), path, off)
    except (LsmkvError, OSError):
        return None


__all__ = ["repair_db"]
