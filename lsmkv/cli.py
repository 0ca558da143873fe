"""The ``lsmkv`` command. Parses arguments, calls the library, prints.

The library never prints; this module owns the terminal. Every LsmkvError
(and OSError) becomes one line on stderr and exit code 1; usage errors exit 2;
``repair`` exits 3 when it had to give up data (``EXIT_DATA_LOST``).
Database commands work on both engines: the engine is detected from the
directory (``--engine`` chooses it when a command creates a database).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from .check import check_db, dump_table
from .dbdir import detect_engine, engine_of_damaged
from .errors import LsmkvError
from .fs import DEFAULT_FS

#: Exit code of ``lsmkv repair`` when the database was repaired but data was lost.
EXIT_DATA_LOST = 3


def _bytes_arg(text: str, hex_mode: bool) -> bytes:
    if hex_mode:
        try:
            return bytes.fromhex(text)
        except ValueError:
            raise LsmkvError(f"{text!r} is not hexadecimal") from None
    return text.encode("utf-8", "surrogateescape")


def _show(data: bytes, hex_mode: bool) -> str:
    if hex_mode:
        return data.hex()
    return data.decode("utf-8", "backslashreplace")


def _open_db(path: str, *, read_only: bool, engine: str | None = None):
    found = detect_engine(path, DEFAULT_FS)
    if found is None and read_only:
        raise LsmkvError(f"{path}: no database here")
    kind = found or engine or "lsm"
    if kind == "btree":
        try:
            import btree
            opener = btree.open
        except (ImportError, AttributeError):
            raise LsmkvError(f"{path} is a btree database, but the btree engine is not available") from None
        return opener(path, read_only=read_only)
    import lsmkv
    return lsmkv.open(path, read_only=read_only)


def _cmd_get(args) -> int:
    key = _bytes_arg(args.key, args.hex)
    with _open_db(args.db, read_only=True) as db:
        value = db.get(key)
    if value is None:
        print(f"lsmkv: {args.key}: not found", file=sys.stderr)
        return 1
    print(_show(value, args.hex))
    return 0


def _cmd_put(args) -> int:
    key, value = _bytes_arg(args.key, args.hex), _bytes_arg(args.value, args.hex)
    with _open_db(args.db, read_only=False, engine=args.engine) as db:
        db.put(key, value, sync=True)
    return 0


def _cmd_delete(args) -> int:
    key = _bytes_arg(args.key, args.hex)
    with _open_db(args.db, read_only=False, engine=args.engine) as db:
        db.delete(key, sync=True)
    return 0


def _cmd_scan(args) -> int:
    start = _bytes_arg(args.start, args.hex) if args.start is not None else None
    end = _bytes_arg(args.end, args.hex) if args.end is not None else None
    prefix = _bytes_arg(args.prefix, args.hex) if args.prefix is not None else None
    with _open_db(args.db, read_only=True) as db:
        for n, (key, value) in enumerate(db.scan(start=start, end=end, reverse=args.reverse, prefix=prefix)):
            if args.limit is not None and n >= args.limit:
                break
            print(f"{_show(key, args.hex)}\t{_show(value, args.hex)}")
    return 0


def _jsonable(obj):
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "backslashreplace")
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def _shard_directory(args, *flags: str) -> int | None:
    """A shard directory of `lsmkv kafka load --partitioned` (one store per
    partition) is listed, and with --check verified, shard by shard, as
    `lsmkv kafka shards` does; None for any other path."""
    from .kafka.shards import is_shard_directory
    if not is_shard_directory(args.db):
        return None
    from .kafka.cli import main as kafka_main
    return kafka_main(["shards", args.db, *flags, *(["--json"] if getattr(args, "json", False) else [])])


def _cmd_stats(args) -> int:
    shards = _shard_directory(args)
    if shards is not None:
        return shards
    with _open_db(args.db, read_only=True) as db:
        stats = db.stats(space_amp=True) if args.space_amp else db.stats()
    if args.json:
        print(json.dumps(_jsonable(stats), indent=2))
        return 0
    for key, value in stats.items():
        if key == "levels" and isinstance(value, list):
            print("levels:")
            for row in value:
                print("  " + "  ".join(f"{k}={v}" for k, v in row.items()))
        elif isinstance(value, float):
            print(f"{key}: {value:.4g}")
        else:
            print(f"{key}: {_jsonable(value)}")
    return 0


def _cmd_check(args) -> int:
    shards = _shard_directory(args, "--check")
    if shards is not None:
        return shards
    engine = detect_engine(args.db, DEFAULT_FS)
    if engine is None:
        raise LsmkvError(f"{args.db}: no database here")
    if engine == "btree":
        import btree
        report = btree.check(args.db)
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


def _cmd_repair(args) -> int:
    engine = engine_of_damaged(args.db, DEFAULT_FS)
    if engine == "btree":
        from btree.repair import repair_db
    else:
        from .repair import repair_db
    report = repair_db(args.db)
    for key, value in report.details.items():
        print(f"{key}: {_jsonable(value)}")
    for note in report.notes:
        print(f"note: {note}")
    for loss in report.lost:
        print(f"LOST: {loss}")
    if report.set_aside:
        print(f"damaged and replaced files kept in {report.set_aside}")
    if not report.data_lost:
        print(f"OK: {args.db} ({engine}) repaired, nothing lost")
        return 0
    print(f"REPAIRED: {args.db} ({engine}) opens again; {len(report.lost)} loss(es) listed above")
    return EXIT_DATA_LOST


def _cmd_sst_dump(args) -> int:
    info = dump_table(args.file, entries=not args.no_entries, limit=args.limit)
    if args.json:
        print(json.dumps(_jsonable(info), indent=2))
        return 0
    print(f"file: {info['path']} ({info['file_size']} bytes)")
    footer = info["footer"]
    print(f"footer: format version {footer['format_version']}, index {footer['index']}, "
          f"filter {footer['filter']}, properties {footer['properties']}")
    print("properties:")
    for key, value in info["properties"].items():
        print(f"  {key}: {_show(value, args.hex) if isinstance(value, bytes) else value}")
    bloom = info["bloom"]
    print(f"bloom: {bloom['bits']} bits, {bloom['hashes']} hashes, {bloom['bytes']} bytes")
    print(f"index: {len(info['index'])} data blocks")
    for row in info["index"]:
        print(f"  last_key={_show(row['last_key'], args.hex)} seq={row['last_seq']} "
              f"offset={row['offset']} size={row['size']}")
    if "entries" in info:
        print("entries:")
        for row in info["entries"]:
            value = "" if row["kind"] == "delete" else " " + _show(row["value"], args.hex)
            print(f"  {_show(row['key'], args.hex)} @{row['seq']} {row['kind']}{value}")
    return 0


def _cmd_demo(args) -> int:
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


def _crashtest_options(texts: list[str], engine: str) -> dict:
    """``-o name=value`` applies to every engine, ``-o ENGINE.name=value`` to one."""
    from .crashtest.engines import ENGINES
    from .options import parse_option_text
    options = {}
    for text in texts:
        name, value = parse_option_text(text)
        target, dot, rest = name.partition(".")
        if dot and target in ENGINES:
            if target != engine:
                continue
            name = rest
        options[name] = value
    return options


def _print_crashtest_figures(fig, options: dict) -> None:
    def row(label: str, text: str) -> None:
        print(f"  {label:<28} {text}")

    def counts(counter) -> str:
        return ", ".join(f"{name} {n:,}" for name, n in counter.most_common()) or "none"

    print(f"{fig.engine}: seed {fig.seed}, options {' '.join(f'{k}={v}' for k, v in options.items())}")
    row("crashes survived", f"{fig.cycles:,} (SIGKILL, recovery, every key verified, engine check passed)")
    row("faults injected", f"{fig.faults_injected:,} SIGKILLs, aimed: {counts(fig.kills)}")
    row("killed during open", f"{fig.killed_during_open:,} (before the child reported ready: during recovery)")
    row("operations verified", f"{fig.acked_writes:,} acknowledged writes ({fig.acked_synced:,} synced, "
        f"{fig.acked_ttl:,} puts with a ttl), {fig.acked_maintenance:,} maintenance calls")
    row("keys compared", f"{fig.keys_checked:,} (the whole key space after every crash)")
    in_flight = sum(fig.in_flight.values())
    row("in flight at the kills", f"{in_flight:,} writes: {counts(fig.in_flight)}")
    row("maintenance at the kills", counts(fig.killed_in_maintenance))
    row("crashed directory showed", counts(fig.evidence))
    row("shape reached", ", ".join(f"{k} {v:,}" for k, v in sorted(fig.facts.items())) or "-")
    row("live keys at the end", f"{fig.live_keys:,}")
    if fig.stragglers:
        row("stragglers", f"{fig.stragglers} processes outlived the killed child (then killed)")
    row("elapsed", f"{fig.elapsed:,.0f} s")
    row("failures", str(fig.failures))


def _cmd_crashtest(args) -> int:
    import shutil

    from .crashtest.driver import CrashTestConfig, run_crashtest
    from .crashtest.engines import ENGINES

    if args.cycles is None and args.duration is None:
        args.cycles = 20
    engines = list(ENGINES) if not args.engine or "all" in args.engine else list(dict.fromkeys(args.engine))
    workdir = args.workdir or tempfile.mkdtemp(prefix="lsmkv-crashtest-")
    results = []
    for name in engines:
        try:
            config = CrashTestConfig(engine=name, workdir=os.path.join(workdir, name), cycles=args.cycles,
                                     duration=args.duration, seed=args.seed, threads=args.threads, keys=args.keys,
                                     options=_crashtest_options(args.option, name), max_delay=args.max_delay,
                                     keep_logs=args.keep_logs, sabotage=args.sabotage,
                                     sync_threads=args.sync_threads)
            config.validate()
        except ValueError as exc:
            raise LsmkvError(str(exc)) from None
        last = [0.0]

        def progress(fig, name=name, last=last) -> None:
            if fig.failure is None and fig.elapsed - last[0] < args.progress:
                return
            last[0] = fig.elapsed
            target = f"/{args.cycles}" if args.cycles is not None else ""
            print(f"{name}: cycle {fig.cycles}{target}, {fig.elapsed:.0f} s, {fig.acked_writes:,} writes verified, "
                  f"{fig.failures} failures", file=sys.stderr, flush=True)

        try:
            figures = run_crashtest(config, progress)
        except ValueError as exc:
            raise LsmkvError(str(exc)) from None
        results.append(figures)
        _print_crashtest_figures(figures, {**ENGINES[name].default_options, **config.options})
        if figures.failure is not None:
            print("FAILED: the recovered database broke the contract", file=sys.stderr)
            for line in figures.failure.lines():
                print(line, file=sys.stderr)
            return 1
    if args.workdir is None and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"work directory: {workdir}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line on stderr (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="lsmkv", description="lsmkv: an LSM-tree and a B+tree key-value "
                                     "engine, and a bench to compare them.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("bench", help="run the comparison benchmark (see `lsmkv bench --help`)", add_help=False)
    sub.add_parser("kafka", help="load Kafka topics into a store, produce workloads, run a broker "
                   "(see `lsmkv kafka --help`)", add_help=False)
    sub.add_parser("spark", help="Spark jobs: bulk-load a file into a store, benchmark both engines "
                   "(see `lsmkv spark --help`)", add_help=False)

    def db_cmd(name, func, help_text):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("db", help="database directory")
        p.add_argument("--hex", action="store_true", help="keys and values are hexadecimal")
        p.set_defaults(func=func)
        return p

    p = db_cmd("get", _cmd_get, "print the value of a key")
    p.add_argument("key")
    p = db_cmd("put", _cmd_put, "set a key (synced)")
    p.add_argument("key")
    p.add_argument("value")
    p.add_argument("--engine", choices=["lsm", "btree"], help="engine to create the database with")
    p = db_cmd("delete", _cmd_delete, "delete a key (synced)")
    p.add_argument("key")
    p.add_argument("--engine", choices=["lsm", "btree"], help="engine to create the database with")
    p = db_cmd("scan", _cmd_scan, "print keys and values in order")
    p.add_argument("--start")
    p.add_argument("--end")
    p.add_argument("--prefix")
    p.add_argument("--reverse", action="store_true")
    p.add_argument("--limit", type=int)
    p = sub.add_parser("stats", help="print a database's statistics")
    p.add_argument("db")
    p.add_argument("--json", action="store_true")
    p.add_argument("--space-amp", action="store_true",
                   help="also scan the database to measure live data and space amplification")
    p.set_defaults(func=_cmd_stats)
    p = sub.add_parser("check", help="verify every checksum and the manifest (exit 1 on corruption)")
    p.add_argument("db")
    p.set_defaults(func=_cmd_check)
    p = sub.add_parser("repair", help="rebuild a damaged database from what verifies; report what was lost "
                       f"(exit {EXIT_DATA_LOST} if anything was)")
    p.add_argument("db")
    p.set_defaults(func=_cmd_repair)
    p = sub.add_parser("sst-dump", help="print a table file: footer, properties, index, bloom, entries")
    p.add_argument("file")
    p.add_argument("--no-entries", action="store_true")
    p.add_argument("--limit", type=int, help="print at most this many entries")
    p.add_argument("--hex", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_sst_dump)
    p = sub.add_parser("crashtest", help="SIGKILL a writer again and again, verify every key after each recovery",
                       description="Runs a child process writing from several threads (puts, deletes, batches, "
                       "flushes, compactions, checkpoints), kills it with SIGKILL at random moments, reopens the "
                       "database and verifies every key against a crash-safe log of what was acknowledged and "
                       "what was in flight; then runs the engine's checker and repeats. Exit code 1 on the "
                       "first failure, keeping the database and the oracle. See docs/reliability.md.")
    p.add_argument("--engine", action="append", choices=["lsm", "btree", "all"],
                   help="engine to test (repeatable; default: all)")
    p.add_argument("--cycles", type=int, help="crash cycles per engine (default 20 unless --duration is given)")
    p.add_argument("--duration", type=float, help="seconds per engine (stops at --cycles too if given)")
    p.add_argument("--seed", type=int, default=0, help="seed of kill moments and operations (default 0)")
    p.add_argument("--threads", type=int, default=4, help="writer threads in the child (default 4)")
    p.add_argument("--sync-threads", type=int, default=None,
                   help="of those, threads that write with sync=True nearly always, meeting in group commit "
                        "(default: half of them)")
    p.add_argument("--keys", type=int, default=2000, help="size of the key space (default 2000)")
    p.add_argument("-o", "--option", action="append", default=[], metavar="[ENGINE.]NAME=VALUE",
                   help="engine option over the crash-test defaults, e.g. -o lsm.write_buffer_size=65536")
    p.add_argument("--max-delay", type=float, default=1.0,
                   help="longest time between the child being ready and the kill, seconds (default 1)")
    p.add_argument("--workdir", help="directory for the databases and oracles (kept; default: a temporary "
                   "directory, removed after a successful run)")
    p.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    p.add_argument("--keep-logs", action="store_true", help="keep every cycle's operation logs")
    p.add_argument("--progress", type=float, default=10.0, help="seconds between progress lines (default 10)")
    p.add_argument("--sabotage", choices=["drop-acked-write", "partial-inflight", "child-error"],
                   help="run a child that breaks the contract on purpose (shows that the check fails)")
    p.set_defaults(func=_cmd_crashtest, engine=None)
    p = sub.add_parser("demo", help="write, read, reopen and print stats")
    p.add_argument("dir", nargs="?", help="database directory (default: a new temporary one)")
    p.add_argument("--keys", type=int, default=20000)
    p.set_defaults(func=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        from bench.cli import main as bench_main
        return bench_main(argv[1:])
    if argv and argv[0] == "kafka":
        from .kafka.cli import main as kafka_main
        return kafka_main(argv[1:])
    if argv and argv[0] == "spark":
        from .spark.cli import main as spark_main
        return spark_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except (LsmkvError, OSError) as exc:
        print(f"lsmkv: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
