"""The ``lsmkv`` command. Parses arguments, dispatches, prints.

The library never prints; this package owns the terminal. It parses the
command line here and hands it on: the database commands to commands.py,
``lsmkv crashtest`` to crashtest.py, and ``lsmkv bench``, ``lsmkv kafka``
and ``lsmkv spark`` to the command lines of bench/, lsmkv/kafka/ and
lsmkv/spark/. Exit codes:

* 0 success, also when the reader of stdout goes away
  (``lsmkv scan DB | head``; lsmkv/terminal/closed_pipe.py);
* 1 a failure, as one line on stderr: every LsmkvError and OSError, ``get``
  of a missing key, ``check`` finding a problem;
* 2 a usage error, as one line on stderr: what argparse rejects (an unknown
  command or option, a missing argument, a malformed or negative number),
  a key or value argument that is not a valid encoding;
* 3 ``repair`` had to give up data (``EXIT_DATA_LOST``);
* 130 interrupted.

Keys and values are typed and printed in one lossless encoding
(lsmkv/terminal/textcodec.py, lsmkv/terminal/cli_entries.py).
"""

from __future__ import annotations

import argparse
import sys

from lsmkv.base.build import BUILD
from lsmkv.terminal.cli_entries import bytes_from_arg
from lsmkv.terminal.closed_pipe import exits_quietly_on_closed_stdout
from lsmkv.terminal.command_errors import run_command
from lsmkv.terminal.textcodec import TextDecodeError

from .commands import (EXIT_DATA_LOST, cmd_check, cmd_delete, cmd_demo, cmd_get, cmd_put, cmd_repair, cmd_scan,
                       cmd_sst_dump, cmd_stats)
from .crashtest import cmd_crashtest

__all__ = ["main", "spark_main", "build_parser", "EXIT_DATA_LOST"]


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
    parser.add_argument("--version", action="version", version=f"lsmkv {_version()}, {BUILD.describe()}",
                        help="print the version of lsmkv and which build runs (compiled or pure Python), and exit")
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

    p = db_cmd("get", cmd_get, "print the value of a key (exit 1 if it has none)")
    p.add_argument("key", help=f"the key ({_KEY_FORM})")
    p.add_argument("--json", action="store_true",
                   help='print {"key": KEY, "value": VALUE} (null if absent), strings encoded as without --json')
    p = db_cmd("put", cmd_put, "set a key (synced); creates the database if there is none")
    p.add_argument("key", help=f"the key ({_KEY_FORM})")
    p.add_argument("value", help="the value (encoded as the key)")
    p.add_argument("--engine", choices=["lsm", "btree"],
                   help="engine of a new database (default lsm); for an existing one, it must be its engine")
    p = db_cmd("delete", cmd_delete, "delete a key (synced) of an existing database")
    p.add_argument("key", help=f"the key ({_KEY_FORM})")
    p.add_argument("--engine", choices=["lsm", "btree"], help="fail unless the database is of this engine")
    p = db_cmd("scan", cmd_scan, "print keys and values in order, KEY<TAB>VALUE a line")
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
    p.set_defaults(func=cmd_stats)
    p = sub.add_parser("check", help="verify every checksum and the manifest (exit 1 on corruption)")
    p.add_argument("db", help="database directory (or a shard directory of lsmkv kafka load --partitioned)")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("repair", help="rebuild a damaged database from what verifies; report what was lost "
                       f"(exit {EXIT_DATA_LOST} if anything was)")
    p.add_argument("db", help="database directory (damaged files are kept in DB/lost/)")
    p.set_defaults(func=cmd_repair)
    p = sub.add_parser("sst-dump", help="print a table file: footer, properties, index, bloom, entries")
    p.add_argument("file", help="a table file (NNNNNN.sst) of an lsm database")
    p.add_argument("--no-entries", action="store_true", help="leave out the entries")
    p.add_argument("--limit", type=_count, help="print at most this many entries")
    p.add_argument("--hex", action="store_true", help="keys and values in hexadecimal (default: escaped text)")
    p.add_argument("--json", action="store_true", help="print it all as JSON (keys and values encoded the same)")
    p.set_defaults(func=cmd_sst_dump)
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
    p.add_argument("--sabotage", choices=["drop-acked-write", "partial-inflight", "unlogged-write", "child-error"],
                   help="run a child that breaks the contract on purpose (shows that the check fails)")
    p.set_defaults(func=cmd_crashtest, engine=None)
    p = sub.add_parser("demo", help="write, read, reopen and print stats")
    p.add_argument("dir", nargs="?", help="database directory (default: a new temporary one)")
    p.add_argument("--keys", type=_count, default=20000, help="keys to write (default 20000)")
    p.set_defaults(func=cmd_demo)
    return parser


def spark_main(argv: list[str]) -> int:
    """``lsmkv spark ARGS``: ``lsmkv spark bench ARGS`` is ``lsmkv bench
    --suite spark ARGS`` (bench/suites/spark.py); everything else is the
    Spark jobs' command line (lsmkv/spark/cli.py)."""
    if argv and argv[0] == "bench":
        from bench.cli import main as bench_main
        return bench_main(["--suite", "spark", *argv[1:]])
    from lsmkv.spark.cli import main as spark_jobs_main
    return spark_jobs_main(argv)


@exits_quietly_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        from bench.cli import main as bench_main
        return bench_main(argv[1:])
    if argv and argv[0] == "kafka":
        from lsmkv.kafka.tools.cli import main as kafka_main
        return kafka_main(argv[1:])
    if argv and argv[0] == "spark":
        return spark_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if getattr(args, "parser", None) is not None:
        _decode_arguments(args)
    return run_command("lsmkv", lambda: args.func(args))
