"""The database commands of ``lsmkv``: get, put, delete, scan, stats,
check, repair, sst-dump and demo. Each takes the parsed arguments, calls
the library, prints, and returns its exit code; lsmkv/cli/__init__.py
parses and dispatches.

Database commands work on both engines: the engine is detected from the
directory, and a store is opened with ``lsmkv.stores.open_store`` (an lsmkv
store of merge operands with the built-in operator its manifest names). Only
``put`` creates a database (``--engine`` chooses its engine then, and must
match an existing one); every other command fails on a missing one and
creates nothing.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import tempfile

from lsmkv.base.dbdir import engine_of_damaged
from lsmkv.base.errors import LsmkvError
from lsmkv.base.fs import DEFAULT_FS
from lsmkv.base.merge_operators import builtin_operator
from lsmkv.lsm import recorded_merge_operator
from lsmkv.lsm.check import check_db, dump_table
from lsmkv.stores import engine_module, open_store, which_engine
from lsmkv.terminal.cli_entries import entry_object, jsonable, print_entries, shown

#: Exit code of ``lsmkv repair`` when the database was repaired but data was lost.
EXIT_DATA_LOST = 3


def open_db(path: str, *, write: bool = False, create: bool = False, engine: str | None = None):
    """The database at ``path`` (read-only unless ``write``), of the engine
    its directory shows; only with ``create`` a new one (of ``engine``,
    default lsm) where there is none. An ``engine`` that is not the
    directory's is an error."""
    found = which_engine(path)
    if found is None and not create:
        why = "the directory is empty" if os.path.isdir(path) else "no such directory"
        raise LsmkvError(f"{path}: no database here ({why})")
    if found is not None and engine is not None and engine != found:
        raise LsmkvError(f"{path} is {'an' if found == 'lsm' else 'a'} {found} database, not {engine} "
                         f"as --engine {engine} says")
    kind = found or engine or "lsm"
    if kind == "btree":
        try:
            engine_module("btree")
        except ImportError:
            raise LsmkvError(f"{path} is a btree database, but the btree engine is not available") from None
    options = {}
    if kind == "lsm" and found is not None:
        # A store of merge operands opens only with its operator: the
        # built-in one its manifest names, if it is one (else the open says
        # which operator it needs).
        name = recorded_merge_operator(path)
        operator = builtin_operator(name) if name is not None else None
        if operator is not None:
            options["merge_operator"] = operator
    return open_store(path, engine=kind, read_only=not (write or create), **options)


def cmd_get(args) -> int:
    with open_db(args.db) as db:
        value = db.get(args.key)
    if args.json:
        print(json.dumps(entry_object(args.key, value, hex=args.hex)))
    elif value is None:
        print(f"lsmkv: {shown(args.key, args.hex)}: not found", file=sys.stderr)
    else:
        print(shown(value, args.hex))
    return 0 if value is not None else 1


def cmd_put(args) -> int:
    with open_db(args.db, write=True, create=True, engine=args.engine) as db:
        db.put(args.key, args.value, sync=True)
    return 0


def cmd_delete(args) -> int:
    # A delete writes, but never creates: a missing database is an error.
    with open_db(args.db, write=True, engine=args.engine) as db:
        db.delete(args.key, sync=True)
    return 0


def cmd_scan(args) -> int:
    with open_db(args.db) as db:
        entries = db.scan(start=args.start, end=args.end, reverse=args.reverse, prefix=args.prefix)
        print_entries(itertools.islice(entries, args.limit), hex=args.hex, as_json=args.json)
    return 0


def shard_directory(args, *flags: str) -> int | None:
    """A shard directory of `lsmkv kafka load --partitioned` (one store per
    partition) is listed, and with --check verified, shard by shard, as
    `lsmkv kafka shards` does; None for any other path."""
    from lsmkv.kafka.store import is_shard_directory
    if not is_shard_directory(args.db):
        return None
    from lsmkv.kafka.tools.cli import main as kafka_main
    return kafka_main(["shards", args.db, *flags, *(["--json"] if getattr(args, "json", False) else [])])


def cmd_stats(args) -> int:
    shards = shard_directory(args)
    if shards is not None:
        return shards
    with open_db(args.db) as db:
        stats = db.stats(space_amp=True) if args.space_amp else db.stats()
    if args.json:
        print(json.dumps(jsonable(stats), indent=2))
        return 0
    for key, value in stats.items():
        if key == "levels" and isinstance(value, list):
            print("levels:")
            for row in value:
                print("  " + "  ".join(f"{k}={v}" for k, v in row.items()))
        elif isinstance(value, float):
            print(f"{key}: {value:.4g}")
        else:
            print(f"{key}: {jsonable(value)}")
    return 0


def cmd_check(args) -> int:
    shards = shard_directory(args, "--check")
    if shards is not None:
        return shards
    engine = which_engine(args.db)
    if engine is None:
        raise LsmkvError(f"{args.db}: no database here")
    if engine == "btree":
        report = engine_module("btree").check(args.db)
    else:
        report = check_db(args.db)
    for key, value in report.details.items():
        if key == "notes":
            for note in value:
                print(f"note: {note}")
        else:
            print(f"{key}: {value}")
    if report.ok:
        print(f"OK: {args.db} ({engine}) verified, no problems found")
        return 0
    for problem in report.problems:
        print(f"PROBLEM: {problem}")
    print(f"FAILED: {len(report.problems)} problem(s) in {args.db}")
    return 1


def cmd_repair(args) -> int:
    engine = engine_of_damaged(args.db, DEFAULT_FS)
    if engine == "btree":
        from btree.repair import repair_db
    else:
        from lsmkv.lsm.repair import repair_db
    report = repair_db(args.db)
    for key, value in report.details.items():
        print(f"{key}: {jsonable(value)}")
    for note in report.notes:
        print(f"note: {note}")
    for loss in report.lost:
        print(f"LOST: {loss}")
    if report.set_aside:
        print(f"what repair gave up is kept in {report.set_aside}")
    if not report.data_lost:
        print(f"OK: {args.db} ({engine}) repaired, nothing lost")
        return 0
    print(f"REPAIRED: {args.db} ({engine}) opens again; {len(report.lost)} loss(es) listed above")
    return EXIT_DATA_LOST


def cmd_sst_dump(args) -> int:
    if os.path.isdir(args.file):
        raise LsmkvError(f"{args.file} is a directory, not a table file (lsmkv check verifies a whole database)")
    info = dump_table(args.file, entries=not args.no_entries, limit=args.limit)
    if args.json:
        print(json.dumps(jsonable(info, args.hex), indent=2))
        return 0
    print(f"file: {info['path']} ({info['file_size']} bytes)")
    footer = info["footer"]
    print(f"footer: format version {footer['format_version']}, index {footer['index']}, "
          f"filter {footer['filter']}, properties {footer['properties']}")
    print("properties:")
    for key, value in info["properties"].items():
        print(f"  {key}: {shown(value, args.hex) if isinstance(value, bytes) else value}")
    bloom = info["bloom"]
    print(f"bloom: {bloom['bits']} bits, {bloom['hashes']} hashes, {bloom['bytes']} bytes")
    print(f"index: {len(info['index'])} data blocks")
    for row in info["index"]:
        print(f"  last_key={shown(row['last_key'], args.hex)} seq={row['last_seq']} "
              f"offset={row['offset']} size={row['size']}")
    if info["range_tombstones"]:
        print(f"range tombstones: {len(info['range_tombstones'])} (fragment, sequence) records")
        for row in info["range_tombstones"]:
            print(f"  [{shown(row['start'], args.hex)}, {shown(row['end'], args.hex)}) @{row['seq']} delete range")
    if "entries" in info:
        print("entries:")
        for row in info["entries"]:
            value = "" if row["kind"] == "delete" else " " + shown(row["value"], args.hex)
            print(f"  {shown(row['key'], args.hex)} @{row['seq']} {row['kind']}{value}")
    return 0


def cmd_demo(args) -> int:
    """Write, read, reopen and print stats: a minute's tour of the engine."""
    import lsmkv
    path = args.dir or tempfile.mkdtemp(prefix="lsmkv-demo-")
    n = args.keys
    with lsmkv.open(path, write_buffer_size=1 << 20) as db:
        for i in range(n):
            db.put(b"user:%08d" % i, b"value-%d" % i)
        with db.write_batch() as batch:
            batch.put(b"user:extra", b"1")
            batch.delete(b"user:00000000")
        db.flush()
        print(f"wrote {n} keys to {path}; get user:00000001 -> {db.get(b'user:00000001')!r}")
    with lsmkv.open(path) as db:
        first = list(db.scan(prefix=b"user:", end=b"user:00000004"))
        print(f"reopened; first keys: {[k.decode() for k, _ in first]}")
        stats = db.stats()
    print(f"files per level {stats['files_per_level']}, write amplification {stats['write_amp']:.2f}, "
          f"disk bytes {stats['disk_bytes']}")
    return 0
