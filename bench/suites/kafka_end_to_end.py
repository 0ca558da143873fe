"""A Kafka load as a user runs it: ``lsmkv kafka load --until-caught-up``
from start to exit, beside a bare confluent-kafka consumer reading the same
topic to its end (the ceiling: no store, no offsets kept).

One topic of ``--records`` (1,000,000) keyed records over ``--keys``
(100,000) keys and ``--partitions`` (4) partitions is produced once to the
embedded broker (or ``--bootstrap-servers``). Then, for each engine, the
loader runs as a command in a process of its own (``python -m lsmkv.cli
kafka load ... --until-caught-up --json`` into a fresh store, a fresh
group), and the bare consumer (bench/kafka_bare_consumer.py) reads the
topic in a process of its own, a fresh group too. Each is timed from
spawn to exit: the interpreter's start, the imports, the group join, the
reading and (for the loader) the writes, the final commit and the close
are all in. Peak RSS is each child's own (``wait4``).

``start-up s`` splits the loader's time: from spawn to the moment its own
clock starts (interpreter, imports, opening the store), the rest in the
loader's ``elapsed_s``; ``join s`` is the bare consumer's wait for its first
assignment, which the loader pays too.

The table gives records/s end to end of both and their ratio (target: the
loader at least 0.6x the bare consumer), and the loader's peak RSS
(target: under 300 MiB).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ..report import fmt_ratio
from . import engine_list, int_option

NAME = "kafka-e2e"
DESCRIPTION = ("Kafka load end to end: lsmkv kafka load --until-caught-up from start to exit, beside a bare "
               "consumer reading the topic to its end; peak RSS")

ENGINES = ("lsm", "btree")
TARGET_RATIO = 0.6
TARGET_RSS_MIB = 300


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-servers", default=None,
                        help="a running cluster (default: start the embedded broker for the run)")
    parser.add_argument("--engines", type=engine_list(ENGINES), default="lsm,btree", help="engines to load (lsm,btree)")
    parser.add_argument("--records", type=int_option(1), default=1_000_000, help="records of the topic (1000000)")
    parser.add_argument("--keys", type=int_option(1), default=100_000, help="key space (100000)")
    parser.add_argument("--partitions", type=int_option(1), default=4, help="partitions (4)")
    parser.add_argument("--value-size", type=int_option(1), default=100, help="value bytes (100)")
    parser.add_argument("--dir", default=None, help="where the stores go (a temporary directory)")


def run_child(command: list[str]) -> tuple[float, int, str]:
    """Run ``command`` to its exit: its wall seconds from spawn, its own peak
    RSS in KiB and what it printed. A failed command raises with its
    error output."""
    with tempfile.TemporaryFile() as err_file:
        started = time.monotonic()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err_file)
        try:
            out = proc.stdout.read()  # to the child's exit: it prints its figures last
        finally:
            proc.stdout.close()
            _, status, usage = os.wait4(proc.pid, 0)  # its own rusage, not all children's
            proc.returncode = os.waitstatus_to_exitcode(status)
            wall = time.monotonic() - started
        err_file.seek(0)
        err = err_file.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:6])} ... exited {proc.returncode}: "
                           f"{err.decode(errors='replace').strip()[-500:]}")
    return wall, usage.ru_maxrss, out.decode()


def run(args: argparse.Namespace, rec) -> None:
    from lsmkv.kafka.tools.broker import EmbeddedBroker
    from lsmkv.kafka.tools.producer import produce_workload
    from lsmkv.kafka.tools.workload import WorkloadSpec

    engines = args.engines
    work = tempfile.mkdtemp(prefix="lsmkv-kafka-e2e-", dir=args.dir)
    broker = None
    try:
        bs = args.bootstrap_servers
        if bs is None:
            rec.progress("starting the embedded broker")
            broker = EmbeddedBroker().start()
            bs = broker.bootstrap_servers
        topic = f"e2e-{os.getpid()}-{int(time.time())}"
        rec.progress(f"producing {args.records:,} records into {args.partitions} partitions")
        produce_workload(bs, topic, WorkloadSpec(records=args.records, keys=args.keys, value_size=args.value_size,
                                                 seed=1), partitions=args.partitions)
        rows = []
        for engine in engines:
            rec.progress(f"lsmkv kafka load --until-caught-up into {engine}, start to exit")
            wall, rss_kib, out = run_child(
                [sys.executable, "-m", "lsmkv.cli", "kafka", "load", "--bootstrap-servers", bs, "--topic", topic,
                 "--group", f"{topic}-{engine}", "--engine", engine, "--db", os.path.join(work, engine),
                 "--until-caught-up", "--json"])
            summary = json.loads(out)
            stored = summary["records_stored"]
            if stored != args.records:
                raise RuntimeError(f"the loader stored {stored:,} records of {args.records:,}")
            rec.run(engine, "kafka-load-end-to-end", stored, wall, peak_rss_mb=round(rss_kib / 1024, 1),
                    loader_elapsed_s=summary["elapsed_s"], startup_s=round(wall - summary["elapsed_s"], 2),
                    since_assignment_s=summary["seconds_since_assignment"])
            rec.progress("the bare consumer reads the topic to its end")
            bwall, brss_kib, bout = run_child([sys.executable, "-m", "bench.kafka_bare_consumer", bs, topic,
                                               f"{topic}-bare-{engine}"])
            bare = json.loads(bout)
            if bare["records"] != args.records:
                raise RuntimeError(f"the bare consumer read {bare['records']:,} records of {args.records:,}")
            rec.run("bare-consumer", "kafka-read-end-to-end", bare["records"], bwall,
                    peak_rss_mb=round(brss_kib / 1024, 1), join_s=bare["join_s"], beside=engine)
            ours, ceiling = stored / wall, bare["records"] / bwall
            rss = rss_kib / 1024
            rows.append([engine, round(wall, 2), round(wall - summary["elapsed_s"], 2),
                         summary["seconds_since_assignment"], round(ours), round(bwall, 2), bare["join_s"],
                         round(ceiling), fmt_ratio(ours, ceiling),
                         f">= {TARGET_RATIO}x " + ("met" if ours / ceiling >= TARGET_RATIO else "missed"),
                         round(rss, 1), round(brss_kib / 1024, 1),
                         f"< {TARGET_RSS_MIB} " + ("met" if rss < TARGET_RSS_MIB else "missed")])
        rec.table("Kafka load end to end: the loader against a bare consumer",
                  ["engine", "loader s", "start-up s", "since assignment s", "loader records/s", "bare s",
                   "bare join s", "bare records/s", "ratio", "target", "loader peak RSS MiB",
                   "bare peak RSS MiB", "RSS target"],
                  rows, note=f"{args.records:,} records, {args.keys:,} keys, {args.partitions} partitions, "
                             f"{args.value_size}-byte values; each side a process of its own, timed from spawn "
                             "to exit. start-up: spawn to the loader's own clock (interpreter, imports, store "
                             "open); since assignment: the loader's reading and writing after its group join.")
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
