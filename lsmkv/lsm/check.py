"""Consistency checks and table dumps behind ``lsmkv check`` and ``lsmkv sst-dump``.

``check_db`` verifies, without modifying anything: CURRENT and every manifest
record's checksum; that every table the manifest names exists, opens, has
intact blocks (every checksum), entries in internal order and the key and
sequence ranges and counts the manifest recorded, and a well-formed
range-tombstone block (range_del_block.py) where one is; that level 1+ tables do not
overlap; and every live log record's checksum. Files the manifest does not
reference are reported as notes (a crash can leave them; open removes them).
"""

from __future__ import annotations

import os

from lsmkv.base.check_report import CheckReport
from lsmkv.base.errors import CorruptionError, LsmkvError
from lsmkv.base.filenames import CURRENT, parse, table_name
from lsmkv.base.fs import DEFAULT_FS, FileSystem
from lsmkv.base.set_aside import LOST_DIR

from .table.format import FOOTER_SIZE, Footer
from .table.reader import TableReader
from .ttl_value import DEADLINE_SIZE, deadline_of
from .version import FileMeta, VersionSet
from .wal import LogReader
from .write_batch import log_batches


def verify_table(fs: FileSystem, path: str, number: int, meta: FileMeta | None = None) -> tuple[list[str], dict]:
    """Problems found in one table file, and counts of what was verified."""
    problems: list[str] = []
    counts = {"blocks": 0, "entries": 0}
    try:
        reader = TableReader(fs, path, number, cache=None)
    except (CorruptionError, LsmkvError) as exc:
        return [str(exc)], counts
    except OSError as exc:
        return [f"{path}: cannot open: {exc}"], counts
    try:
        prev_key = None
        prev_seq = None
        entries = tombstones = ttl_entries = 0
        # Format 3 adds kinds 2 (a value with a ttl) and 4 (a merge operand);
        # kind 3 (metadata) lives in logs and manifests only.
        max_kind = 4 if reader.format_version >= 3 else 1
        smallest = largest = None
        for i in range(reader.num_blocks):
            try:
                block = reader.block(i)
            except CorruptionError as exc:
                problems.append(str(exc))
                continue
            counts["blocks"] += 1
            for j, key in enumerate(block.keys):
                seq = block.seq_kinds[j] >> 8
                kind = block.seq_kinds[j] & 0xFF
                if kind > max_kind or kind == 3:
                    problems.append(f"{path}: block {i} entry {j} has unknown kind {kind} "
                                    f"(table format version {reader.format_version})")
                elif kind == 2:
                    ttl_entries += 1
                    if len(block.value(j)) < DEADLINE_SIZE:
                        problems.append(f"{path}: block {i} entry {j} has a ttl but no room for its deadline")
                if prev_key is not None and (key < prev_key or (key == prev_key and seq >= prev_seq)):
                    problems.append(f"{path}: block {i} entry {j} is out of order (offset {reader.index_offsets[i]})")
                prev_key, prev_seq = key, seq
                entries += 1
                tombstones += kind == 0
                smallest = key if smallest is None else smallest
                largest = key
            if block.keys and block.keys[-1] != reader.index_keys[i]:
                problems.append(f"{path}: index entry {i} does not match its block's last key")
        counts["entries"] = entries
        props = reader.properties
        range_dels = reader.range_dels  # verified when the table opened
        if range_dels is not None:
            counts["range_tombstones"] = range_dels.count()
            end = range_dels.largest_end
            covered = end[:-1] if end.endswith(b"\x00") else end  # as the builder bounds a table
            smallest = range_dels.smallest if smallest is None else min(smallest, range_dels.smallest)
            largest = covered if largest is None else max(largest, covered)
        if entries != props.entries or tombstones != props.tombstones or ttl_entries != props.ttl_entries:
            problems.append(f"{path}: properties say {props.entries} entries/{props.tombstones} tombstones/"
                            f"{props.ttl_entries} with a ttl, blocks hold {entries}/{tombstones}/{ttl_entries}")
        if meta is not None and not problems:
            if (meta.smallest, meta.largest) != (smallest or b"", largest or b""):
                problems.append(f"{path}: key range differs from the manifest's")
            if meta.entries != entries:
                problems.append(f"{path}: manifest says {meta.entries} entries, table holds {entries}")
            if meta.range_tombstones != props.range_tombstones:
                problems.append(f"{path}: manifest says {meta.range_tombstones} range tombstones, table holds "
                                f"{props.range_tombstones}")
            if meta.size != reader.file_size:
                problems.append(f"{path}: manifest says {meta.size} bytes, file has {reader.file_size}")
    finally:
        reader.close()
    return problems, counts


_KIND_NAMES = {0: "delete", 1: "put", 2: "put with ttl", 4: "merge", 5: "delete range"}


def check_db(path: str, fs: FileSystem | None = None) -> CheckReport:
    fs = fs or DEFAULT_FS
    report = CheckReport(engine="lsm", path=path)
    notes: list[str] = []
    report.details["notes"] = notes
    versions = VersionSet(path, fs)
    try:
        versions.recover()
    except (LsmkvError, OSError) as exc:
        report.problems.append(f"manifest: {exc}")
        return report
    version = versions.current
    names = set(fs.listdir(path))
    tables = blocks = entries = range_tombstones = 0
    for level, files in enumerate(version.levels):
        for a, b in zip(files, files[1:]):
            if level > 0 and a.largest >= b.smallest:
                report.problems.append(f"level {level}: tables {a.number} and {b.number} overlap")
        for meta in files:
            name = table_name(meta.number)
            if name not in names:
                report.problems.append(f"{os.path.join(path, name)}: missing (level {level} of the manifest)")
                continue
            problems, counts = verify_table(fs, os.path.join(path, name), meta.number, meta)
            report.problems.extend(problems)
            tables += 1
            blocks += counts["blocks"]
            entries += counts["entries"]
            range_tombstones += counts.get("range_tombstones", 0)
    live = version.numbers()
    log_records = 0
    for name in sorted(names):
        parsed = parse(name)
        if parsed is None:
            if name == LOST_DIR:
                notes.append(f"{name}/: files a repair set aside (lsmkv never reads or removes them)")
            elif name not in (CURRENT, "LOCK"):
                notes.append(f"{name}: not an lsmkv file")
            continue
        kind, number = parsed
        full = os.path.join(path, name)
        if kind == "table" and number not in live:
            notes.append(f"{name}: not referenced by the manifest (left by a crash; removed at next open)")
        elif kind == "log" and number >= versions.log_number:
            reader = LogReader(fs.read_file(full), full, salvage=False)
            try:
                for _ in log_batches(reader):
                    log_records += 1
            except CorruptionError as exc:
                report.problems.append(str(exc))
            if reader.report.torn_tail_bytes:
                notes.append(f"{name}: torn tail of {reader.report.torn_tail_bytes} bytes "
                             "(an unsynced write interrupted by a crash; dropped at open)")
        elif kind == "log":
            notes.append(f"{name}: log already in tables (removed at next open)")
    report.details.update({
        "manifest": f"MANIFEST-{versions.manifest_number:06d}",
        "tables": tables, "blocks": blocks, "entries": entries, "range_tombstones": range_tombstones,
        "log_records": log_records,
        "files_per_level": [len(files) for files in version.levels],
        "last_sequence": versions.last_sequence,
    })
    return report


def dump_table(path: str, fs: FileSystem | None = None, *, entries: bool = True, limit: int | None = None) -> dict:
    """Everything a table says about itself: footer, properties, index, bloom, entries."""
    fs = fs or DEFAULT_FS
    size = fs.file_size(path)
    f = fs.open_readable(path)
    try:
        footer = Footer.decode(f.read_at(max(0, size - FOOTER_SIZE), FOOTER_SIZE), path, size)
    finally:
        f.close()
    base = os.path.basename(path)
    number = int(base.split(".")[0]) if base.split(".")[0].isdigit() else 0
    reader = TableReader(fs, path, number, cache=None)
    try:
        out = {
            "path": path,
            "file_size": size,
            "footer": {"format_version": footer.version, "index": footer.index, "filter": footer.filter,
                       "properties": footer.properties},
            "properties": reader.properties.as_dict(),
            "bloom": {"bits": reader.filter.num_bits, "hashes": reader.filter.k,
                      "bytes": reader.filter.size_bytes},
            "range_tombstones": [{"start": start, "end": end, "seq": seq} for start, end, seq in
                                 (reader.range_dels.tombstones() if reader.range_dels is not None else ())],
            "index": [{"last_key": k, "last_seq": sk >> 8, "offset": off, "size": sz}
                      for k, sk, off, sz in zip(reader.index_keys, reader.index_seq_kinds,
                                                reader.index_offsets, reader.index_sizes)],
        }
        if entries:
            rows = []
            for key, seq_kind, value in reader.entries():
                if limit is not None and len(rows) >= limit:
                    break
                kind = seq_kind & 0xFF
                row = {"key": key, "seq": seq_kind >> 8, "kind": _KIND_NAMES.get(kind, str(kind)), "value": value}
                if kind == 2 and len(value) >= DEADLINE_SIZE:
                    row["deadline_ms"] = deadline_of(value)
                    row["value"] = value[DEADLINE_SIZE:]
                rows.append(row)
            out["entries"] = rows
        return out
    finally:
        reader.close()


__all__ = ["check_db", "dump_table", "verify_table"]
