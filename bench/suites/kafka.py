"""Kafka loading: the loader (lsmkv.kafka) against the naive loop, into
both engines, in the same run, on the embedded broker (or any cluster).

Two cases, each over a topic of its own that is produced once (seeded,
so every run loads the same stream):

* ``store as is``: ``--records`` (2,000,000) keyed records of
  ``--value-size`` (100) bytes over ``--keys`` (200,000) keys and
  ``--partitions`` (8) partitions. The loader runs with
  ``--until-caught-up`` into a fresh store of each engine; the naive loop
  (poll one record, one engine write, a synchronous commit; lsmkv/kafka/
  naive.py) loads the first ``--naive-records`` (50,000) of it -- enough
  to measure its steady rate, which does not depend on the topic's size.
* ``1 ms of I/O``: ``--io-records`` (40,000) records through a processor
  that sleeps ``--io-ms`` (1) per record, the loader with
  ``--io-concurrency`` (32) units per partition against the naive loop
  doing the same sleep (``--io-naive-records``, 3,000).

Rates count from the first assignment, so the group join (about 3 s on
the embedded broker) is left out of both sides. Each load is a run in
results.json (workload ``kafka-load`` or ``kafka-load-io``, engine
``lsm``/``btree`` for the loader, ``lsm-naive``/``btree-naive`` for the
loop); the table gives the loader's rate against the naive loop's
(targets: at least 100K records/s into lsmkv and 2x the loop; over 10x
the loop with 1 ms of I/O).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from ..report import fmt_ratio
from . import engine_list, int_option

NAME = "kafka"
DESCRIPTION = "Kafka topic into each engine: the Decaton-style loader against a naive poll/write/commit loop"

ENGINES = ("lsm", "btree")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-servers", default=None,
                        help="a running cluster (default: start the embedded broker for the run)")
    parser.add_argument("--engines", type=engine_list(ENGINES), default="lsm,btree", help="engines to load (lsm,btree)")
    parser.add_argument("--records", type=int_option(1), default=2_000_000, help="records of the main topic (2000000)")
    parser.add_argument("--keys", type=int_option(1), default=200_000, help="key space (200000)")
    parser.add_argument("--partitions", type=int_option(1), default=8, help="partitions (8)")
    parser.add_argument("--value-size", type=int_option(1), default=100, help="value bytes (100)")
    parser.add_argument("--concurrency", type=int_option(1), default=4, help="loader units per partition (4)")
    parser.add_argument("--naive-records", type=int_option(1), default=50_000,
                        help="records the naive loop loads of the main topic (50000)")
    parser.add_argument("--io-ms", type=float, default=1.0, help="simulated I/O per record, ms (1)")
    parser.add_argument("--io-records", type=int_option(1), default=40_000, help="records of the I/O topic (40000)")
    parser.add_argument("--io-concurrency", type=int_option(1), default=32, help="loader units per partition with I/O (32)")
    parser.add_argument("--io-naive-records", type=int_option(1), default=3_000,
                        help="records the naive loop loads with I/O (3000)")
    parser.add_argument("--dir", default=None, help="where the stores go (a temporary directory)")


class SleepingProcessor:
    """Stores each record as it is after ``seconds`` of sleep (a call to
    another service, as far as the loader can tell)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, record):
        time.sleep(self.seconds)
        return record.key, record.value


def _open(engine: str, path: str):
    from lsmkv.stores import open_store
    return open_store(path, engine=engine)


def run(args: argparse.Namespace, rec) -> None:
    from lsmkv.kafka import EmbeddedBroker, Loader, LoaderSettings, WorkloadSpec
    from lsmkv.kafka.tools.naive import naive_load
    from lsmkv.kafka.tools.producer import produce_workload

    engines = args.engines
    broker = None
    servers = args.bootstrap_servers
    if servers is None:
        rec.progress("starting the embedded broker")
        broker = EmbeddedBroker().start()
        servers = broker.bootstrap_servers
    workdir = tempfile.mkdtemp(prefix="lsmkv-kafka-bench-", dir=args.dir)
    stamp = f"{os.getpid()}-{int(time.time())}"
    rows = []
    try:
        cases = (("kafka-load", "store as is", args.records, args.concurrency, None, args.naive_records),
                 ("kafka-load-io", f"{args.io_ms:g} ms of I/O", args.io_records, args.io_concurrency,
                  args.io_ms / 1000.0, args.io_naive_records))
        for workload, label, records, concurrency, io_delay, naive_records in cases:
            topic = f"bench-{workload}-{stamp}"
            spec = WorkloadSpec(records=records, keys=min(args.keys, records), value_size=args.value_size, seed=1)
            rec.progress(f"{label}: producing {records:,} records into {args.partitions} partitions")
            produced = produce_workload(servers, topic, spec, partitions=args.partitions)
            if produced.errors:
                raise RuntimeError(f"producing {topic} failed for {produced.errors} records: "
                                   f"{produced.error_samples[:3]}")
            for engine in engines:
                path = os.path.join(workdir, f"{engine}-{workload}")
                rec.progress(f"{label}: the loader into {engine}, {concurrency} units per partition")
                settings = LoaderSettings(bootstrap_servers=servers, topics=[topic], group=f"{topic}-{engine}",
                                          concurrency=concurrency, until_caught_up=True,
                                          processor=SleepingProcessor(io_delay) if io_delay else None)
                summary = Loader(settings, path, engine=engine).run()
                m = summary.metrics
                loaded, seconds = m["records_stored"], m["seconds_since_assignment"]
                rec.run(engine, workload, loaded, seconds, partitions=args.partitions, concurrency=concurrency,
                        io_ms=args.io_ms if io_delay else 0, store_writes=m["store_writes"], side="loader")
                shutil.rmtree(path, ignore_errors=True)
                rec.progress(f"{label}: the naive loop into {engine}, {naive_records:,} records")
                db = _open(engine, path)
                try:
                    naive = naive_load(servers, [topic], f"{topic}-{engine}-naive", db, io_delay=io_delay or 0.0,
                                       max_records=naive_records)
                finally:
                    db.close()
                    shutil.rmtree(path, ignore_errors=True)
                rec.run(f"{engine}-naive", workload, naive.records, naive.elapsed_after_assign,
                        partitions=args.partitions, io_ms=args.io_ms if io_delay else 0, commits=naive.commits,
                        side="naive")
                loader_rate = loaded / seconds if seconds > 0 else 0.0
                naive_rate = naive.records / naive.elapsed_after_assign if naive.elapsed_after_assign > 0 else 0.0
                rows.append([label, engine, f"{loaded:,}", f"{loader_rate:,.0f}", f"{naive.records:,}",
                             f"{naive_rate:,.0f}", fmt_ratio(loader_rate, naive_rate)])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if broker is not None:
            broker.close()
    rec.table("Kafka topic into a store: the loader against the naive loop",
              ["case", "engine", "loader records", "loader records/s", "naive records", "naive records/s",
               "loader / naive (targets: >= 2x as is, > 10x with I/O)"], rows,
              note=f"{args.partitions} partitions, {args.value_size}-byte values, keys over {args.keys:,}; "
                   "rates from the first assignment (the group join left out); the loader with "
                   f"--until-caught-up and {args.concurrency} units per partition ({args.io_concurrency} with "
                   "I/O); the naive loop polls one record, writes it, commits synchronously. Target: at least "
                   "100K records/s into lsmkv.")
