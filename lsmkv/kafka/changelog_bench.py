"""Changelog figures: load throughput with and without ``--changelog``, and
a shard restored from the changelog vs rebuilt from the source topic, on
the embedded broker with real `lsmkv kafka load --partitioned` processes.
A benchmark, not a test; docs/kafka.md records its figures:

    python -m lsmkv.kafka.changelog_bench --records 1000000 --keys 100000 --partitions 1 --engine lsm

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
caught up. The work directory (a temporary one) is removed at the end. Rounds alternate which load runs first. The
1-minute load average before each run is printed with it.
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

from .broker import EmbeddedBroker
from .producer import produce_workload
from .workload import WorkloadSpec


def _load(bs: str, topic: str, group: str, db: str, engine: str, changelog: bool) -> dict:
    command = [sys.executable, "-m", "lsmkv.cli", "kafka", "load", "--bootstrap-servers", bs, "--topic", topic,
               "--group", group, "--engine", engine, "--db", db, "--partitioned", "--until-caught-up", "--json"]
    if changelog:
        command.append("--changelog")
    out = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{out.stderr[-3000:]}")
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lsmkv.kafka.changelog_bench")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--engine", choices=["lsm", "btree"], default="lsm")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="lsmkv-changelog-bench-")
    try:
        return _rounds(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _rounds(args, work: str) -> int:
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        spec = WorkloadSpec(records=args.records, keys=args.keys, value_size=args.value_size, seed=1)
        produced = produce_workload(bs, "bench", spec, partitions=args.partitions)
        print(json.dumps({"produced": produced.delivered, "partitions": args.partitions, "engine": args.engine,
                          "loadavg": os.getloadavg()}), flush=True)
        for r in range(args.rounds):
            group = f"bench-{r}"
            runs = [("load+changelog", group, True), ("load", f"bench-plain-{r}", False)]
            if r % 2:
                runs.reverse()
            for what, g, changelog in runs + [("restore", group, True)]:
                loadavg = os.getloadavg()[0]
                started = time.monotonic()
                summary = _load(bs, "bench", g, os.path.join(work, f"{what}-{r}"), args.engine, changelog)
                print(json.dumps({"round": r, "run": what, "loadavg_1m_before": round(loadavg, 2),
                                  "wall_s": round(time.monotonic() - started, 2), **_figures(summary)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
