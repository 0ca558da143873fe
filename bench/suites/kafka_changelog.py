"""Kafka changelog: load throughput with and without ``--changelog``, and
a shard restored from the changelog against one rebuilt from the source
topic, on the embedded broker with real `lsmkv kafka load --partitioned`
processes. docs/kafka.md records its figures:

    lsmkv bench --suite kafka-changelog --records 1000000 --keys 100000 --partitions 1 --engine lsm

Each round, on the same topic (``--records`` records of ``--value-size``
bytes over ``--keys`` keys), one after the other:

1. ``load+changelog``: an empty --db loads the topic with ``--changelog``
   (a new group, so a new changelog), until caught up;
2. ``load``: an empty --db loads it without (another group): the same
   work a rebuild from the source topic does;
3. ``restore``: an empty --db with ``--changelog`` in the group of 1: its
   shards are restored from the changelog 1 wrote (then it is caught up).

``records_per_sec`` of a load counts from the first assignment to caught
up (``assignment_to_caught_up_s``; the group join, about 3 s on the
embedded broker, is left out, the final drain and commit are in);
``restore_records_per_sec`` is the records restored over the seconds the
restore took (``restore_s``: the restore thread's time for the partition,
reading the whole changelog partition and writing it to the shard), and
the restore run's ``assignment_to_caught_up_s`` is its assignment to
caught up. The work directory (a temporary one) is removed at the end.
Rounds alternate which load runs first. The 1-minute load average before
each run is recorded with it (``loadavg_1m_before``).

Each load is a run in results.json (workload ``load+changelog, round N``,
``load, round N`` or ``restore, round N``) holding those figures and
``wall_s``; its operations and seconds are the records stored and
``assignment_to_caught_up_s``, or for a restore the records restored and
``restore_s``. The table shows the figures, and its note what was produced.
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

from . import int_option

NAME = "kafka-changelog"
DESCRIPTION = ("Kafka changelog: load with and without --changelog, and a shard restored from the changelog "
               "against one rebuilt from the topic")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int_option(1), default=1_000_000, help="records of the topic (1000000)")
    parser.add_argument("--keys", type=int_option(1), default=100_000, help="key space (100000)")
    parser.add_argument("--value-size", type=int_option(1), default=100, help="value bytes (100)")
    parser.add_argument("--partitions", type=int_option(1), default=1, help="partitions (1)")
    parser.add_argument("--engine", choices=["lsm", "btree"], default="lsm", help="engine of the shards (lsm)")
    parser.add_argument("--rounds", type=int_option(1), default=2, help="rounds of the three loads (2)")


def _load(bs: str, topic: str, group: str, db: str, engine: str, changelog: bool) -> dict:
    command = [sys.executable, "-m", "lsmkv.cli", "kafka", "load", "--bootstrap-servers", bs, "--topic", topic,
               "--group", group, "--engine", engine, "--db", db, "--partitioned", "--until-caught-up", "--json"]
    if changelog:
        command.append("--changelog")
    out = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def _figures(summary: dict) -> dict:
    parts = summary["partitions"]
    restored = summary["records_restored_from_changelog"]
    restore_s = sum(p["restore_seconds"] or 0.0 for p in parts)
    out = {"assignment_to_caught_up_s": summary["seconds_since_assignment"],
           "records_stored": summary["records_stored"],
           "records_per_sec": summary["records_per_sec_since_assignment"],
           "changelog_records_produced": summary["changelog_records_produced"]}
    if restored:
        out.update(restored=restored, restore_s=round(restore_s, 2),
                   restore_records_per_sec=round(restored / restore_s) if restore_s else None)
    return out


def run(args: argparse.Namespace, rec) -> None:
    work = tempfile.mkdtemp(prefix="lsmkv-changelog-bench-")
    try:
        _rounds(args, work, rec)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _rounds(args: argparse.Namespace, work: str, rec) -> None:
    from lsmkv.kafka.tools.broker import EmbeddedBroker
    from lsmkv.kafka.tools.producer import produce_workload
    from lsmkv.kafka.tools.workload import WorkloadSpec

    rows = []
    rec.progress("starting the embedded broker")
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        spec = WorkloadSpec(records=args.records, keys=args.keys, value_size=args.value_size, seed=1)
        rec.progress(f"producing {args.records:,} records into {args.partitions} partition(s)")
        produced = produce_workload(bs, "bench", spec, partitions=args.partitions)
        setting = {"produced": produced.delivered, "partitions": args.partitions, "engine": args.engine,
                   "loadavg": os.getloadavg()}
        rec.progress(f"produced {produced.delivered:,} records; load average {setting['loadavg'][0]:.2f}")
        for r in range(args.rounds):
            group = f"bench-{r}"
            runs = [("load+changelog", group, True), ("load", f"bench-plain-{r}", False)]
            if r % 2:
                runs.reverse()
            for what, g, changelog in runs + [("restore", group, True)]:
                rec.progress(f"round {r}: {what}")
                loadavg = os.getloadavg()[0]
                started = time.monotonic()
                summary = _load(bs, "bench", g, os.path.join(work, f"{what}-{r}"), args.engine, changelog)
                figures = {"round": r, "run": what, "loadavg_1m_before": round(loadavg, 2),
                           "wall_s": round(time.monotonic() - started, 2), **_figures(summary)}
                # A load's rate is records stored over assignment to caught up; a restore's,
                # records restored over the restore's seconds.
                if figures.get("restored") and figures.get("restore_s"):
                    operations, seconds = figures["restored"], figures["restore_s"]
                else:
                    operations, seconds = figures["records_stored"], figures["assignment_to_caught_up_s"]
                rec.run(args.engine, f"{what}, round {r}", operations, seconds, **figures)
                rows.append([r, what, figures["records_stored"], figures["assignment_to_caught_up_s"],
                             figures["records_per_sec"], figures.get("restored"), figures.get("restore_s"),
                             figures.get("restore_records_per_sec"), figures["changelog_records_produced"],
                             figures["wall_s"], figures["loadavg_1m_before"]])
    rec.table("Kafka changelog: load with and without it, restore against rebuild", [
        "round", "run", "records stored", "assignment to caught up s", "records/s", "restored", "restore s",
        "restored records/s", "changelog records produced", "wall s", "load average before"], rows,
        note=f"{setting['produced']:,} records produced into {args.partitions} partition(s), engine {args.engine}; "
             f"load average before the runs {setting['loadavg'][0]:.2f}")
