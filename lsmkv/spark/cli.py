"""``lsmkv spark``: the command line of the Spark jobs (it owns their terminal).

* ``lsmkv spark load --input PATH --key-col K --value-col V --engine lsm|btree --db PATH``
  (jobs.py): the input, store and engine checked before Spark starts, a
  progress line per stage, the count check; exit 1 if the counts do not agree.
* ``lsmkv spark bench --rows N --engine lsm,btree --out DIR``: the same as
  ``lsmkv bench --suite spark ...`` (bench/suites/spark.py); the ``lsmkv``
  command (lsmkv/cli/) hands it to the bench before this module is reached,
  so it is listed here and never run here.

Errors are one line on stderr (exit 1; usage errors exit 2); a closed
stdout ends quietly with exit 0 (lsmkv/terminal/closed_pipe.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from lsmkv.terminal.closed_pipe import exits_quietly_on_closed_stdout
from lsmkv.terminal.command_errors import run_command


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


#: What ``lsmkv spark bench`` is: the DESCRIPTION of bench/suites/spark.py (this
#: module does not import the bench, which imports the Spark integration).
BENCH_HELP = ("Spark bulk ingest against the put loop (write_batch of 1,000) into each engine, then parallel "
              "gets/scans in Spark tasks and a full read back through the data source (lsmkv bench --suite spark)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="lsmkv spark", description="Spark jobs over lsmkv and btree stores (docs/spark.md).")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    load = sub.add_parser("load", help="load a Parquet, CSV or JSON file into a store by bulk ingest")
    load.add_argument("--input", required=True, help="input file or directory (parquet, csv with a header, json lines)")
    load.add_argument("--format", choices=["parquet", "csv", "json"], help="input format (default: from the extension)")
    load.add_argument("--key-col", required=True, help="the input column that becomes the key")
    load.add_argument("--value-col", required=True, help="the input column that becomes the value")
    load.add_argument("--engine", choices=["lsm", "btree"], default=None,
                      help="engine of the store (default: the existing store's, else lsm)")
    load.add_argument("--db", required=True, help="the store's directory (created if missing)")
    load.add_argument("--mode", choices=["append", "overwrite"], default="append", help="append (default) or overwrite")
    load.add_argument("--partitions", type=int, help="Spark partitions of the write (default: the default parallelism)")
    load.add_argument("--master", default=None, help="Spark master (default: local[2], or what spark-submit set)")
    load.set_defaults(func=_cmd_load)
    # `lsmkv spark bench ARGS` is `lsmkv bench --suite spark ARGS` (lsmkv/cli/ hands it over).
    sub.add_parser("bench", help=BENCH_HELP, add_help=False)
    return p


def _say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)


def _session(master: str | None):
    from . import register, session
    if master is None and os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Under spark-submit (the JVM started first): its master and settings.
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.appName("lsmkv-spark-load").getOrCreate()
        register(spark)
        return spark
    return session(app_name="lsmkv-spark-load", master=master or "local[2]")


def _cmd_load(args) -> int:
    from .jobs import check_request, engine_for, load
    # Before Spark starts: a wrong input, store or engine is one line in a moment.
    engine = engine_for(args.db, args.engine)
    check_request(args.input, args.format, args.db, engine, args.mode)
    spark = _session(args.master)
    result = load(spark, args.input, key_col=args.key_col, value_col=args.value_col, db=args.db,
                  engine=engine, mode=args.mode, fmt=args.format, num_partitions=args.partitions,
                  progress=_say)
    if not result.ok:
        print(f"lsmkv spark load: error: count check failed: {result.check}", file=sys.stderr)
        return 1
    _say(f"done in {result.seconds:.1f} s: {result.input_rows:,} input rows, "
         f"{result.distinct_keys:,} distinct keys into {args.db}")
    return 0


@exits_quietly_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        print("lsmkv spark: error: the Spark benchmark is a suite of the bench: run it as lsmkv spark bench "
              "or lsmkv bench --suite spark", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return run_command("lsmkv spark", lambda: args.func(args), extra="spark", also=(ValueError,))
