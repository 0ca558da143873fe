"""Kafka scale-out: aggregate load throughput with N instances, and
failover time (SIGKILL of one instance to its partitions caught up on the
survivors), on the embedded broker with real `lsmkv kafka load --serve`
processes. docs/kafka.md records its figures:

    lsmkv bench --suite kafka-scaleout --records 400000 --keys 40000 --partitions 4 --instances 1
    lsmkv bench --suite kafka-scaleout --records 400000 --keys 40000 --partitions 4 --instances 2 --kill
    lsmkv bench --suite kafka-scaleout ... --instances 2 --kill --standby-replicas 1
    lsmkv bench --suite kafka-scaleout ... --instances 3 --kill --standby-replicas 1

Serving instances share the partitions by the lag-aware assignment
(lsmkv/kafka/coordination.py), so with more instances than standbys + 1 a
killed owner's partitions go to the instances holding their copies
(``takeover_starts``: where each new owner started; null: rebuilt).

Throughput counts from the first assignment any instance reports to the
moment every partition's shard holds its end (the group join, about 3 s
on the embedded broker, is left out and reported apart; with several
instances, the cooperative rounds that spread the partitions are in).

One run in results.json (workload ``kafka-scaleout``) holds the figures:
``instances``, ``records``, ``partitions``, ``join_s``, ``load_s``,
``records_per_sec``, ``owners`` and, with ``--kill``, ``failover_s``,
``moved_partitions``, ``moved_records``, ``takeover_starts`` (and
``standby_warm_s`` with standbys); the table shows them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from . import int_option

NAME = "kafka-scaleout"
DESCRIPTION = ("Kafka scale-out: load throughput with N serving instances, and failover time after a SIGKILL "
               "(lsmkv kafka load --serve processes)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int_option(1), default=400_000, help="records of the topic (400000)")
    parser.add_argument("--keys", type=int_option(1), default=40_000, help="key space (40000)")
    parser.add_argument("--partitions", type=int_option(1), default=4, help="partitions (4)")
    parser.add_argument("--instances", type=int_option(1), default=1, help="serving instances (1)")
    parser.add_argument("--engine", choices=["lsm", "btree"], default="lsm", help="engine of the shards (lsm)")
    parser.add_argument("--kill", action="store_true", help="then SIGKILL one instance and time the takeover")
    parser.add_argument("--standby-replicas", type=int_option(0), default=0, help="standby replicas per partition (0)")


def _status(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url + "/v1/status", timeout=5) as resp:
            return json.loads(resp.read())
    except OSError:
        return None


def _held(urls: list[str]) -> dict[int, tuple[str, int | None]]:
    out = {}
    for url in urls:
        st = _status(url) or {}
        for p, stored in st.get("active", {}).items():
            if int(p) not in st.get("restoring", []) or stored is not None:
                out[int(p)] = (url, stored)
    return out


def _wait(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.1)


def run(args: argparse.Namespace, rec) -> None:
    from lsmkv.kafka.admin import partition_count
    from lsmkv.kafka.runtime.end_offsets import observe_end_offsets
    from lsmkv.kafka.tools.broker import EmbeddedBroker, free_port
    from lsmkv.kafka.tools.producer import produce_workload
    from lsmkv.kafka.tools.workload import WorkloadSpec

    work = tempfile.mkdtemp(prefix="lsmkv-scaleout-")
    procs = []
    rec.progress("starting the embedded broker")
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        spec = WorkloadSpec(records=args.records, keys=args.keys, seed=1)
        rec.progress(f"producing {args.records:,} records into {args.partitions} partitions")
        produce_workload(bs, "bench", spec, partitions=args.partitions)
        ends = {p: e for (_, p), e in observe_end_offsets(bs, [("bench", p) for p in range(
            partition_count(bs, "bench"))]).items()}
        urls = []
        rec.progress(f"starting {args.instances} instance(s) of lsmkv kafka load --serve ({args.engine})")
        started = time.monotonic()
        try:
            for i in range(args.instances):
                port = free_port()
                urls.append(f"http://127.0.0.1:{port}")
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "lsmkv.cli", "kafka", "load", "--bootstrap-servers", bs, "--topic",
                     "bench", "--group", "bench-g", "--engine", args.engine, "--db", os.path.join(work, f"i{i}"),
                     "--serve", f"127.0.0.1:{port}", "--quiet", "--standby-replicas", str(args.standby_replicas)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            _wait(lambda: len(_held(urls)) > 0, 120, "a first assignment")
            assigned = time.monotonic()
            final = _wait(lambda: (lambda h: h if len(h) == args.partitions and all(h[p][1] == ends[p] for p in h)
                                   else None)(_held(urls)), 600, "every partition at its end")
            done = time.monotonic()
            figures = {"instances": args.instances, "records": args.records, "partitions": args.partitions,
                       "engine": args.engine, "join_s": round(assigned - started, 2),
                       "load_s": round(done - assigned, 2),
                       "records_per_sec": round(args.records / (done - assigned)),
                       "owners": sorted(u[-5:] for u, _ in final.values())}
            if args.kill and args.instances > 1:
                rec.progress(f"loaded in {figures['load_s']} s; killing one instance")
                victim = procs[-1]
                gone = [p for p, (u, _) in _held(urls).items() if u == urls[-1]]
                if args.standby_replicas:
                    def warm():
                        copies = {}
                        for u in urls[:-1]:
                            for p, o in ((_status(u) or {}).get("standby") or {}).items():
                                copies[int(p)] = max(copies.get(int(p), -1), o if o is not None else -1)
                        return all(copies.get(p) == ends[p] for p in gone)
                    _wait(warm, 600, "warm standbys of the victim's partitions")
                    figures["standby_warm_s"] = round(time.monotonic() - done, 2)
                victim.send_signal(signal.SIGKILL)
                victim.wait()
                killed = time.monotonic()
                alive = urls[:-1]
                _wait(lambda: (lambda h: len(h) == args.partitions and all(h[p][1] == ends[p] for p in h)
                               and not any(p in (_status(u) or {}).get("restoring", []) for u in alive for p in h))
                      (_held(alive)), 600, "the survivors holding every partition at its end")
                figures.update(failover_s=round(time.monotonic() - killed, 2), moved_partitions=gone,
                               moved_records=sum(ends[p] for p in gone))
                # Where each moved partition's new owner started (null: rebuilt from the topic).
                starts = {}
                for u in alive:
                    for p, start in ((_status(u) or {}).get("starts") or {}).items():
                        if int(p) in gone:
                            starts[int(p)] = start
                figures["takeover_starts"] = starts
            _record(rec, figures, done - assigned)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
            shutil.rmtree(work, ignore_errors=True)


def _record(rec, figures: dict, load_seconds: float) -> None:
    """The figures as the suite's run and table."""
    fields = {k: v for k, v in figures.items() if k != "engine"}
    rec.run(figures["engine"], "kafka-scaleout", figures["records"], load_seconds, **fields)
    columns = {"instances": "instances", "engine": "engine", "records": "records", "partitions": "partitions",
               "join_s": "join s", "load_s": "load s", "records_per_sec": "records/s", "failover_s": "failover s",
               "moved_partitions": "moved partitions", "moved_records": "moved records",
               "standby_warm_s": "standby warm s", "takeover_starts": "takeover starts"}
    shown = {k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in figures.items()}
    row = [shown.get(c) for c in columns]
    rec.table("Kafka scale-out: load throughput and failover", list(columns.values()), [row],
              note="load_s and records_per_sec from the first assignment to every partition at its end; "
                   "failover_s from the SIGKILL to the survivors holding every partition at its end; "
                   "takeover_starts: where each moved partition's new owner started (null: rebuilt)")
