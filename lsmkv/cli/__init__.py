"""The ``lsmkv`` command. Parses arguments, calls the library, prints.

The library never prints; this module owns the terminal. Exit codes:

* 0 success, also when the reader of stdout goes away
  (``lsmkv scan DB | head``; lsmkv/terminal/closed_pipe.py);
* 1 a failure, as one line on stderr: every LsmkvError and OSError, ``get``
  of a missing key, ``check`` finding a problem;
* 2 a usage error, as one line on stderr: what argparse rejects (an unknown
  command or option, a missing argument, a malformed or negative number),
  a key or value argument that is not a valid encoding;
* 3 ``repair`` had to give up data (``EXIT_DATA_LOST``);
* 130 interrupted.

Database commands work on both engines: the engine is detected from the
directory. Only ``put`` creates a database (``--engine`` chooses its engine
then, and must match an existing one); every other command fails on a
missing one and creates nothing. Keys and values are typed and printed in
one lossless encoding (lsmkv/terminal/textcodec.py, lsmkv/terminal/cli_entries.py).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile

from lsmkv.base.dbdir import detect_engine, engine_of_damaged
from lsmkv.base.errors import LsmkvError
from lsmkv.base.fs import DEFAULT_FS
from lsmkv.lsm.check import check_db, dump_table
from lsmkv.terminal.cli_entries import bytes_from_arg, entry_object, jsonable, print_entries, shown
from lsmkv.terminal.closed_pipe import exits_quietly_on_closed_stdout, is_closed_stdout
from lsmkv.terminal.textcodec import TextDecodeError

#: Exit code of ``lsmkv repair`` when the database was repaired but data was lost.
EXIT_DATA_LOST = 3


def _open_db(path: str, *, write: bool = False, create: bool = False, engine: str | None = None):
    """The database at ``path`` (read-only unless ``write``), of the engine
    its directory shows; only with ``create`` a new one (of ``engine``,
    default lsm) where there is none. An ``engine`` that is not the
    directory's is an error."""
    found = detect_engine(path, DEFAULT_FS)
    if found is None and not create:
        why = "the directory is empty" if os.path.isdir(path) else "no such directory"
        raise LsmkvError(f"{path}: no database here ({why})")
    if found is not None and engine is not None and engine != found:
        raise LsmkvError(f"{path} is {'an' if found == 'lsm' else 'a'} {found} database, not {engine} "
                         f"as --engine {engine} says")
    kind = found or engine or "lsm"
    if kind == "btree":
        try:
            import btree
            opener = btree.open
        except (ImportError, AttributeError):
            raise LsmkvError(f"{path} is a btree database, but the btree engine is not available") from None
        return opener(path, read_only=not (write or create))
    import lsmkv
    return lsmkv.open(path, read_only=not (write or create))


def _cmd_get(args) -> int:
    with _open_db(args.db) as db:
        value = db.get(args.key)
    if args.json:
        print(json.dumps(entry_object(args.key, value, hex=args.hex)))
    elif value is None:
        print(f"lsmkv: {shown(args.key, args.hex)}: not found", file=sys.stderr)
    else:
        print(shown(value, args.hex))
    return 0 if value is not None else 1


def _cmd_put(args) -> int:
    with _open_db(args.db, write=True, create=True, engine=args.engine) as db:
        db.put(args.key, args.value, sync=True)
    return 0


def _cmd_delete(args) -> int:
    # A delete writes, but never creates: a missing database is an error.
    with _open_db(args.db, write=True, engine=args.engine) as db:
        db.delete(args.key, sync=True)
    return 0


def _cmd_scan(args) -> int:
    with _open_db(args.db) as db:
        entries = db.scan(start=args.start, end=args.end, reverse=args.reverse, prefix=args.prefix)
        print_entries(itertools.islice(entries, args.limit), hex=args.hex, as_json=args.json)
    return 0


def _shard_directory(args, *flags: str) -> int | None:
    """A shard directory of `lsmkv kafka load --partitioned` (one store per
    partition) is listed, and with --check verified, shard by shard, as
    `lsmkv kafka shards` does; None for any other path."""
    from lsmkv.kafka.shards import is_shard_directory
    if not is_shard_directory(args.db):
        return None
    from lsmkv.kafka.cli import main as kafka_main
    return kafka_main(["shards", args.db, *flags, *(["--json"] if getattr(args, "json", False) else [])])


def _cmd_stats(args) -> int:
    shards = _shard_directory(args)
    if shards is not None:
        return shards
    with _open_db(args.db) as db:
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


def _cmd_sst_dump(args) -> int:
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
    if "entries" in info:
        print("entries:")
        for row in info["entries"]:
            value = "" if row["kind"] == "delete" else " " + shown(row["value"], args.hex)
            print(f"  {shown(row['key'], args.hex)} @{row['seq']} {row['kind']}{value}")
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
    from lsmkv.crashtest.engines import ENGINES
    from lsmkv.lsm.options import parse_option_text
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

    from lsmkv.crashtest.driver import CrashTestConfig, run_crashtest
    from lsmkv.crashtest.engines import ENGINES

    if args.cycles is None and args.duration is None:
        args.cycles = 20
    engines = list(ENGINES) if not args.engine or "all" in args.engine else list(dict.fromkeys(args.engine))
    configs = {}
    for name in engines:  # every value checked before anything is created
        try:
            configs[name] = CrashTestConfig(engine=name, workdir=name, cycles=args.cycles,
                                            duration=args.duration, seed=args.seed, threads=args.threads,
                                            keys=args.keys, options=_crashtest_options(args.option, name),
                                            max_delay=args.max_delay, keep_logs=args.keep_logs,
                                            sabotage=args.sabotage, sync_threads=args.sync_threads)
            configs[name].validate()
        except ValueError as exc:
            raise LsmkvError(str(exc)) from None
    workdir = args.workdir or tempfile.mkdtemp(prefix="lsmkv-crashtest-")
    results = []
    for name, config in configs.items():
        config.workdir = os.path.join(workdir, name)
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


def _count(text: str) -> int:
    """An argument that counts things: an integer, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("lsmkv")
    except PackageNotFoundError:
        return "unknown (the lsmkv package is not installed)"


#: Arguments that are keys or values: typed in the text encoding, or hex with --hex.
_ENCODED_ARGUMENTS = {"key": "KEY", "value": "VALUE", "start": "--start", "end": "--end", "prefix": "--prefix"}

_KEY_FORM = "escaped text: printable ASCII as is, \\\\ \\t \\n \\r \\xNN for other bytes; hex with --hex"


def _decode_arguments(args: argparse.Namespace) -> None:
    """Turn the key and value arguments into bytes; one that is not a valid encoding is a usage error."""
    for name, shown_as in _ENCODED_ARGUMENTS.items():
        text = getattr(args, name, None)
        if text is None:
            continue
        try:
            setattr(args, name, bytes_from_arg(text, args.hex))
        except TextDecodeError as exc:
            args.parser.error(f"argument {shown_as}: {exc}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="lsmkv", description="lsmkv: an LSM-tree and a B+tree key-value "
                                     "engine, and a bench to compare them.")
    parser.add_argument("--version", action="version", version=f"lsmkv {_version()}",
                        help="print the version of lsmkv and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("bench", help="run the comparison benchmark (see `lsmkv bench --help`)", add_help=False)
    sub.add_parser("kafka", help="load Kafka topics into a store, produce workloads, run a broker "
                   "(see `lsmkv kafka --help`)", add_help=False)
    sub.add_parser("spark", help="Spark jobs: bulk-load a file into a store, benchmark both engines "
                   "(see `lsmkv spark --help`)", add_help=False)

    def db_cmd(name, func, help_text):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("db", help="database directory")
        p.add_argument("--hex", action="store_true",
                       help="keys and values are hexadecimal, typed and printed (default: escaped text)")
        p.set_defaults(func=func, parser=p)
        return p

    p = db_cmd("get", _cmd_get, "print the value of a key (exit 1 if it has none)")
    p.add_argument("key", help=f"the key ({_KEY_FORM})")
    p.add_argument("--json", action="store_true",
                   help='print {"key": KEY, "value": VALUE} (null if absent), strings encoded as without --json')
    p = db_cmd("put", _cmd_put, "set a key (synced); creates the database if there is none")
    p.add_argument("key", help=f"the key ({_KEY_FORM})")
    p.add_argument("value", help="the value (encoded as the key)")
    p.add_argument("--engine", choices=["lsm", "btree"],
                   help="engine of a new database (default lsm); for an existing one, it must be its engine")
    p = db_cmd("delete", _cmd_delete, "delete a key (synced) of an existing database")
    p.add_argument("key", help=f"the key ({_KEY_FORM})")
    p.add_argument("--engine", choices=["lsm", "btree"], help="fail unless the database is of this engine")
    p = db_cmd("scan", _cmd_scan, "print keys and values in order, KEY<TAB>VALUE a line")
    p.add_argument("--start", help="first key (inclusive; encoded as keys are)")
    p.add_argument("--end", help="end key (exclusive; encoded as keys are)")
    p.add_argument("--prefix", help="only keys that start with this (encoded as keys are)")
    p.add_argument("--reverse", action="store_true", help="from the last key to the first")
    p.add_argument("--limit", type=_count, help="print at most this many entries")
    p.add_argument("--json", action="store_true",
                   help='one JSON object a line, {"key": KEY, "value": VALUE}, strings encoded as without --json')
    p = sub.add_parser("stats", help="print a database's statistics")
    p.add_argument("db", help="database directory (or a shard directory of lsmkv kafka load --partitioned)")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.add_argument("--space-amp", action="store_true",
                   help="also scan the database to measure live data and space amplification")
    p.set_defaults(func=_cmd_stats)
    p = sub.add_parser("check", help="verify every checksum and the manifest (exit 1 on corruption)")
    p.add_argument("db", help="database directory (or a shard directory of lsmkv kafka load --partitioned)")
    p.set_defaults(func=_cmd_check)
    p = sub.add_parser("repair", help="rebuild a damaged database from what verifies; report what was lost "
                       f"(exit {EXIT_DATA_LOST} if anything was)")
    p.add_argument("db", help="database directory (damaged files are kept in DB/lost/)")
    p.set_defaults(func=_cmd_repair)
    p = sub.add_parser("sst-dump", help="print a table file: footer, properties, index, bloom, entries")
    p.add_argument("file", help="a table file (NNNNNN.sst) of an lsm database")
    p.add_argument("--no-entries", action="store_true", help="leave out the entries")
    p.add_argument("--limit", type=_count, help="print at most this many entries")
    p.add_argument("--hex", action="store_true", help="keys and values in hexadecimal (default: escaped text)")
    p.add_argument("--json", action="store_true", help="print it all as JSON (keys and values encoded the same)")
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
    p.add_argument("--keys", type=_count, default=20000, help="keys to write (default 20000)")
    p.set_defaults(func=_cmd_demo)
    return parser


def _describe(exc: BaseException) -> str:
    """One line for a failure (an OSError names its file, which str() may not)."""
    if isinstance(exc, OSError) and exc.strerror:
        names = [os.fsdecode(n) for n in (exc.filename, exc.filename2) if n is not None]
        return ": ".join([*names, exc.strerror]) if names else exc.strerror
    return str(exc)


@exits_quietly_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        from bench.cli import main as bench_main
        return bench_main(argv[1:])
    if argv and argv[0] == "kafka":
        from lsmkv.kafka.cli import main as kafka_main
        return kafka_main(argv[1:])
    if argv and argv[0] == "spark":
        from lsmkv.spark.cli import main as spark_main
        return spark_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if getattr(args, "parser", None) is not None:
        _decode_arguments(args)
    try:
        return args.func(args)
    except (LsmkvError, OSError) as exc:
        if is_closed_stdout(exc):
            raise
        print(f"lsmkv: error: {_describe(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
