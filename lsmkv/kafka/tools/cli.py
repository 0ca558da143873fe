"""``lsmkv kafka load|produce|broker|demo``: the terminal side of lsmkv.kafka.

Parses arguments, calls the library, prints (with rich: a live display of
a running load on a terminal, tables for summaries). The library never
prints; this module does. ``lsmkv kafka ...`` reaches :func:`main` through
a thin dispatch in lsmkv/cli/. Errors are one line on stderr: exit 1 for
a failure (LsmkvError, OSError), 2 for usage, 130 after a second Ctrl-C; a
closed stdout (``lsmkv kafka query --scan | head``) ends quietly with 0.
Keys and values are typed and printed as ``lsmkv scan`` does
(lsmkv/terminal/cli_entries.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading

from lsmkv.base.errors import LsmkvError, OptionError
from lsmkv.lsm.options import parse_option_text
from lsmkv.terminal.cli_entries import bytes_from_arg, entry_object, print_entries, shown
from lsmkv.terminal.closed_pipe import exits_quietly_on_closed_stdout, pipe_aware_console
from lsmkv.terminal.command_errors import run_command
from lsmkv.terminal.textcodec import TextDecodeError

#: Default broker address (the embedded broker's default port).
DEFAULT_BOOTSTRAP = "localhost:9092"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _client_config(args) -> dict:
    """-X name=value settings (and --client-config-file lines), passed to librdkafka as strings."""
    out: dict[str, str] = {}
    lines = []
    if getattr(args, "client_config_file", None):
        with open(args.client_config_file) as f:
            lines += [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    lines += args.client_config or []
    for text in lines:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise OptionError(f"client setting {text!r} is not of the form name=value")
        out[name.strip()] = value.strip()
    return out


def _add_client(p) -> None:
    p.add_argument("--bootstrap-servers", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT[,...]",
                   help=f"Kafka cluster or embedded broker (default {DEFAULT_BOOTSTRAP})")
    p.add_argument("-X", "--client-config", action="append", metavar="NAME=VALUE",
                   help="librdkafka setting passed through (repeatable), e.g. -X security.protocol=SASL_SSL")
    p.add_argument("--client-config-file", metavar="FILE",
                   help="file of librdkafka settings, one NAME=VALUE a line (keeps secrets off the command line)")


# -- load --------------------------------------------------------------------------------------------

#: The flags of InstanceSettings' knobs whose flag is not ``--`` and the knob's name dashed.
_LOAD_FLAGS = {"topics": "--topic", "store_options": "-o", "client_config": "-X"}


def _load_flag(knob: str) -> str:
    """The flag of `lsmkv kafka load` that sets InstanceSettings' ``knob``."""
    return _LOAD_FLAGS.get(knob, "--" + knob.replace("_", "-"))


def _load_parser(sub) -> None:
    from ..partitioners import NAMES as partitioners
    from ..scaleout.instance_settings import (DEFAULT_ACCEPTABLE_RECOVERY_LAG, DEFAULT_MAX_WARMUP_REPLICAS,
                                              DEFAULT_PROBING_INTERVAL, InstanceSettings)
    from ..settings import DEFAULT_STARTUP_TIMEOUT

    def default(knob: str) -> str:
        return f"{InstanceSettings.__dataclass_fields__[knob].default:g}"

    # The knobs' defaults are InstanceSettings': a flag not given is left out (None).
    p = sub.add_parser("load", help="consume topics into an lsmkv or btree store",
                       description="Consume keyed topics into a store: a value puts, a null value deletes, a record "
                       "without a key is dead-lettered. Offsets live in the store (exactly-once effect). "
                       "See docs/kafka.md.")
    _add_client(p)
    p.add_argument("--topic", action="append", required=True, help="topic to load (repeatable)")
    p.add_argument("--group", required=True, help="consumer group id")
    p.add_argument("--engine", choices=["lsm", "btree"], help="engine of a new store (default lsm)")
    p.add_argument("--db", required=True, help="store directory (created if missing)")
    p.add_argument("-o", "--store-option", action="append", default=[], metavar="NAME=VALUE",
                   help="engine option for opening the store (repeatable)")
    p.add_argument("--until-caught-up", action="store_true",
                   help="exit once every assigned partition reaches the end it had when assigned")
    p.add_argument("--startup-timeout", type=float, metavar="SECONDS",
                   help="seconds to wait for the servers to answer and every --topic to exist before giving up "
                   f"(exit 1, no store created); default {DEFAULT_STARTUP_TIMEOUT:g} with --until-caught-up, else "
                   "wait as long as it takes")
    p.add_argument("--processor", metavar="MODULE:FUNCTION", help="transform each record before it is stored")
    p.add_argument("--concurrency", type=int, help=f"processor units per partition (default {default('concurrency')})")
    p.add_argument("--max-pending", type=int,
                   help="records fetched, not yet stored, per partition before it is paused "
                   f"(default {default('max_pending')})")
    p.add_argument("--batch-records", type=int,
                   help=f"records per store write batch (default {default('batch_records')})")
    p.add_argument("--batch-bytes", type=int,
                   help=f"bytes per store write batch (default {InstanceSettings.batch_bytes >> 20} MiB)")
    p.add_argument("--linger-ms", type=float, help=f"wait for a batch to fill, ms (default {default('linger_ms')})")
    p.add_argument("--commit-interval", type=float,
                   help=f"seconds between Kafka commits (default {default('commit_interval')})")
    p.add_argument("--max-retries", type=int,
                   help=f"retries of a failing record before the DLQ (default {default('max_retries')})")
    p.add_argument("--retry-backoff-ms", type=float,
                   help=f"first retry delay, ms (default {default('retry_backoff_ms')})")
    p.add_argument("--dlq-topic", help="dead-letter topic (default: <topic>.dlq)")
    p.add_argument("--revoke-timeout", type=float,
                   help="seconds in-flight records may take when partitions are revoked "
                   f"(default {default('revoke_timeout')})")
    p.add_argument("--session-timeout-ms", type=int,
                   help=f"group session timeout (default {default('session_timeout_ms')})")
    p.add_argument("--heartbeat-interval-ms", type=int,
                   help=f"group heartbeat interval (default {default('heartbeat_interval_ms')})")
    p.add_argument("--partitioned", action="store_true",
                   help="partitioned state: --db is a directory of shards, one store per partition of the topic "
                   "(implied by --serve; docs/kafka.md, 'Scale-out')")
    p.add_argument("--serve", metavar="HOST:PORT",
                   help="serve get/scan/status of the partitions held over HTTP and announce this instance on "
                   "the <group>-members topic (implies --partitioned)")
    p.add_argument("--changelog", action="store_true",
                   help="write what each shard applies to the topic <group>-<topic>-changelog and restore shards "
                   "from it instead of reprocessing the topic (needs --partitioned or --serve; docs/kafka.md)")
    p.add_argument("--partitioner", choices=list(partitioners), metavar="NAME",
                   help="with partitioned state: the partitioner the topic's producers use, for routing reads "
                   f"({', '.join(partitioners)}; default: found from the keys; docs/kafka.md, 'Routing')")
    p.add_argument("--standby-replicas", type=int, metavar="N",
                   help="keep warm copies of up to N other instances' partitions (needs --serve; default "
                   f"{default('standby_replicas')})")
    p.add_argument("--advertise", metavar="URL",
                   help="address clients reach --serve at (default http://HOST:PORT)")
    p.add_argument("--acceptable-recovery-lag", type=int, metavar="RECORDS",
                   help="with --serve: a copy at most this many records behind a partition's end counts as caught "
                   f"up and may take it active (default {DEFAULT_ACCEPTABLE_RECOVERY_LAG})")
    p.add_argument("--max-warmup-replicas", type=int, metavar="N",
                   help="with --serve: warm-up copies the whole group keeps at once for partitions waiting to move "
                   f"to an instance that is not caught up (default {DEFAULT_MAX_WARMUP_REPLICAS})")
    p.add_argument("--probing-rebalance-interval", type=float, metavar="SECONDS",
                   help="with --serve: seconds between rebalances while warm-ups exist, moving caught-up warm-ups "
                   f"to active (default {DEFAULT_PROBING_INTERVAL:g})")
    p.add_argument("--quiet", action="store_true", help="no live display, only the summary")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_cmd_load)


def _instance_settings(args):
    """The InstanceSettings of `lsmkv kafka load`'s arguments (the flags not
    given left out: InstanceSettings' defaults apply)."""
    from ..scaleout.instance_settings import InstanceSettings
    given = {knob: getattr(args, knob) for knob in (
        "engine", "startup_timeout", "processor", "concurrency", "max_pending", "batch_records", "batch_bytes",
        "linger_ms", "commit_interval", "max_retries", "retry_backoff_ms", "dlq_topic", "revoke_timeout",
        "session_timeout_ms", "heartbeat_interval_ms", "serve", "advertise", "partitioner", "standby_replicas",
        "acceptable_recovery_lag", "max_warmup_replicas", "probing_rebalance_interval")}
    return InstanceSettings(
        topics=args.topic, group=args.group, db=args.db, bootstrap_servers=args.bootstrap_servers,
        store_options=dict(parse_option_text(o) for o in args.store_option), client_config=_client_config(args),
        until_caught_up=args.until_caught_up, partitioned=args.partitioned, changelog=args.changelog,
        **{knob: value for knob, value in given.items() if value is not None})


def _partition_table(snapshot: dict, title: str):
    from rich.table import Table
    table = Table(title=title, title_justify="left")
    for col in ("partition", "stored", "end", "lag", "pending", "paused", "retries", "dlq"):
        table.add_column(col, justify="right")
    for p in snapshot["partitions"]:
        table.add_row(f"{p['topic']}[{p['partition']}]", _n(p["stored"]), _n(p["end"]), _n(p["lag"]),
                      _n(p["pending"]), "yes" if p["paused"] else "", _n(p["retries"]), _n(p["dead_letters"]))
    return table


def _n(value) -> str:
    return "-" if value is None else f"{value:,}"


def _headline(s: dict) -> str:
    changelog = ""
    if s["changelog_records_produced"] or s["records_restored_from_changelog"]:
        changelog = (f", changelog: {s['changelog_records_produced']:,} written, "
                     f"{s['records_restored_from_changelog']:,} restored")
    return (f"{s['records_stored']:,} stored ({s['records_per_sec_now']:,.0f}/s now, {s['records_per_sec']:,.0f}/s "
            f"overall), lag {s['lag']:,}, {s['dead_letters']:,} dead letters, {s['retries']:,} retries, "
            f"{s['pauses']:,} pauses, {s['commits']:,} commits ({s['commit_latency_ms_mean']:.1f} ms), "
            f"{s['rebalances']} rebalances{changelog}")


def _cmd_load(args) -> int:
    from rich.console import Group as RichGroup
    from rich.live import Live
    from rich.text import Text

    from ..errors import SettingError, SettingUsageError
    from ..runtime.instance import ServingInstance
    try:
        settings = _instance_settings(args)
    except SettingError as exc:
        # Checked before anything is opened or created; the settings named as the flags that set them.
        print(f"lsmkv kafka load: error: {exc.worded(_load_flag)}", file=sys.stderr)
        return 2 if isinstance(exc, SettingUsageError) else 1
    instance = ServingInstance(settings).open()
    if instance.url is not None:
        print(f"serving {instance.url} (group {settings.group}, announced on {instance.members_topic})", flush=True)
    console = pipe_aware_console(stderr=False)
    interrupted = []

    def on_signal(signum, frame) -> None:
        if interrupted:
            raise KeyboardInterrupt
        interrupted.append(signum)
        instance.stop(f"signal {signal.Signals(signum).name}: drained and committed")

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    live = None
    stop_display = threading.Event()
    if not args.quiet and not args.json and console.is_terminal:
        live = Live(Text("joining the group ..."), console=console, refresh_per_second=4)
        live.start()

        def refresh() -> None:
            while not stop_display.wait(0.5):
                snap = instance.snapshot()
                live.update(RichGroup(Text(_headline(snap)), _partition_table(snap, "partitions")))

        threading.Thread(target=refresh, daemon=True).start()
    try:
        summary = instance.run()   # closes the instance's parts as it ends
    finally:
        stop_display.set()
        if live is not None:
            live.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    snap = summary.metrics
    if args.json:
        print(json.dumps({"reason": summary.reason, "elapsed_s": round(summary.elapsed, 3), **snap}, indent=2))
        return 0
    console.print(f"{summary.reason} after {summary.elapsed:,.1f} s: {_headline(snap)}")
    console.print(_partition_table(snap, f"partitions of {args.db}"))
    return 0


# -- query -------------------------------------------------------------------------------------------

def _query_parser(sub) -> None:
    p = sub.add_parser("query", help="read a serving loader group's partitioned state",
                       description="Ask the instances of a loader group (lsmkv kafka load --serve) for a key, a "
                       "range, or who owns which partition. Owners are found on the <group>-members topic.")
    _add_client(p)
    p.add_argument("--group", required=True, help="the loaders' consumer group id")
    p.add_argument("key", nargs="?", help="the key to get (escaped text as lsmkv get takes it, or hex with --hex)")
    p.add_argument("--scan", action="store_true",
                   help="list every partition's entries in key order, KEY<TAB>VALUE a line as lsmkv scan does")
    p.add_argument("--start", help="--scan: first key (inclusive)")
    p.add_argument("--end", help="--scan: end key (exclusive)")
    p.add_argument("--owners", action="store_true", help="which instance holds which partition")
    p.add_argument("--hex", action="store_true",
                   help="keys and values are hexadecimal, typed and printed (default: escaped text)")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds to find a serving owner (default 15)")
    p.add_argument("--json", action="store_true",
                   help='print JSON: --scan one {"key": KEY, "value": VALUE} a line, as lsmkv scan --json')
    p.set_defaults(func=_cmd_query, parser=p)


def _cmd_query(args) -> int:
    from ..scaleout.client import StoreClient
    modes = sum([args.key is not None, args.scan, args.owners])
    if modes != 1:
        args.parser.error("lsmkv kafka query needs exactly one of KEY, --scan or --owners")
    if (args.start is not None or args.end is not None) and not args.scan:
        args.parser.error("--start and --end go with --scan")

    def arg(text, shown_as):
        if text is None:
            return None
        try:
            return bytes_from_arg(text, args.hex)
        except TextDecodeError as exc:
            args.parser.error(f"argument {shown_as}: {exc}")

    key, start, end = arg(args.key, "KEY"), arg(args.start, "--start"), arg(args.end, "--end")

    client = StoreClient(args.bootstrap_servers, args.group, timeout=args.timeout,
                         client_config=_client_config(args))
    if args.owners:
        owners = client.owners()
        if args.json:
            print(json.dumps({str(p): {"url": o.url, "stored": o.stored, "restoring": o.restoring}
                              for p, o in owners.items()}))
        else:
            for p, o in owners.items():
                print(f"{p}\t{o.url}\tstored {_n(o.stored)}{'  (restoring)' if o.restoring else ''}")
        return 0
    if args.scan:
        print_entries(client.scan(start, end), hex=args.hex, as_json=args.json)
        return 0
    found = client.lookup(key)
    if args.json:
        print(json.dumps({**entry_object(found.key, found.value, hex=args.hex),
                          "partition": found.partition, "url": found.url, "role": found.role,
                          "stored": found.stored, "behind": found.behind, "routed_by": found.routed_by,
                          "route": found.route, "found_in": list(found.found_in)}))
        return 0 if found.found else 1
    if found.value is None:
        where = (f"partition {found.partition}" if found.routed_by else "every partition") + \
            f", asked {', '.join(found.asked)}"
        print(f"lsmkv kafka query: {shown(key, args.hex)}: not found ({where}; {found.route})", file=sys.stderr)
        return 1
    print(shown(found.value, args.hex))
    return 0


# -- shards ------------------------------------------------------------------------------------------

def _shards_parser(sub) -> None:
    p = sub.add_parser("shards", help="list (and check) the shards of a partitioned store",
                       description="The shard directory of `lsmkv kafka load --partitioned`: each partition's "
                       "store, its engine and applied offset; --check verifies every shard as `lsmkv check` does.")
    p.add_argument("db", help="the shard directory (--db of the loader)")
    p.add_argument("--check", action="store_true", help="verify every checksum of every shard")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_shards)


def _cmd_shards(args) -> int:
    from ..scaleout.shards import ShardedStore
    rows = []
    with ShardedStore(args.db, None, read_only=True) as store:
        offsets = store.offsets()
        engine, topic, partitions = store.engine, store.topic, store.partitions
    for p, offset in sorted(offsets.items()):
        row = {"partition": p, "path": store.shard_path(p), "offset": offset}
        if args.check:
            if engine == "btree":
                import btree
                report = btree.check(row["path"])
            else:
                from lsmkv.lsm.check import check_db
                report = check_db(row["path"])
            row["ok"] = report.ok
            row["problems"] = list(report.problems)
        rows.append(row)
    ok = all(r.get("ok", True) for r in rows)
    if args.json:
        print(json.dumps({"engine": engine, "topic": topic, "partitions": partitions, "shards": rows}, indent=2))
        return 0 if ok else 1
    print(f"{args.db}: {engine} shards of topic {topic!r} ({_n(partitions)} partitions, {len(rows)} shards here)")
    for r in rows:
        verdict = "" if "ok" not in r else ("  OK" if r["ok"] else f"  FAILED: {'; '.join(r['problems'])}")
        print(f"  {topic}-{r['partition']}: offset {_n(r['offset'])}{verdict}")
    return 0 if ok else 1


# -- produce -----------------------------------------------------------------------------------------

def _produce_parser(sub) -> None:
    from .producer import COMPRESSION
    from .workload import DISTRIBUTIONS
    p = sub.add_parser("produce", help="publish a seeded keyed workload",
                       description="Publish a seeded stream of keyed records (the same stream for the same "
                       "arguments), keys placed on partitions by murmur2.")
    _add_client(p)
    p.add_argument("--topic", required=True, help="topic to publish to")
    p.add_argument("--records", type=int, default=100_000, help="records to publish (default 100000)")
    p.add_argument("--keys", type=int, default=10_000, help="size of the key space (default 10000)")
    p.add_argument("--distribution", choices=DISTRIBUTIONS, default="uniform", help="key choice (default uniform)")
    p.add_argument("--value-size", type=int, default=100, help="value bytes (default 100)")
    p.add_argument("--compressibility", type=float, default=0.5,
                   help="share of each value that compresses (default 0.5)")
    p.add_argument("--tombstone-ratio", type=float, default=0.0, help="share of null values, deletes (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the stream (default 0)")
    p.add_argument("--rate", type=float, help="records per second (default: as fast as possible)")
    p.add_argument("--partitions", type=int, help="create the topic with this many partitions if it is missing")
    p.add_argument("--linger-ms", type=float, default=20.0, help="producer linger.ms (default 20)")
    p.add_argument("--batch-bytes", type=int, default=1 << 20, help="producer batch.size (default 1 MiB)")
    p.add_argument("--compression", choices=COMPRESSION, default="lz4", help="compression.type (default lz4)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_cmd_produce)


def _cmd_produce(args) -> int:
    from .producer import produce_workload
    from .workload import WorkloadSpec
    try:
        spec = WorkloadSpec(records=args.records, keys=args.keys, distribution=args.distribution,
                            value_size=args.value_size, compressibility=args.compressibility,
                            tombstone_ratio=args.tombstone_ratio, seed=args.seed)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    quiet = args.json or not sys.stderr.isatty()
    result = produce_workload(
        args.bootstrap_servers, args.topic, spec, partitions=args.partitions, rate=args.rate,
        linger_ms=args.linger_ms, batch_bytes=args.batch_bytes, compression=args.compression,
        client_config=_client_config(args),
        progress=None if quiet else lambda n, t: print(f"\r{n:,} records, {n / t:,.0f}/s", end="",
                                                       file=sys.stderr, flush=True))
    if not quiet:
        print(file=sys.stderr)
    if args.json:
        print(json.dumps({"topic": result.topic, "records": result.records, "delivered": result.delivered,
                          "errors": result.errors, "bytes": result.bytes, "elapsed_s": round(result.elapsed, 3),
                          "records_per_sec": round(result.records_per_sec, 1), "error_samples": result.error_samples}))
    else:
        print(f"{result.delivered:,} of {result.records:,} records delivered to {result.topic} in "
              f"{result.elapsed:,.2f} s ({result.records_per_sec:,.0f} records/s, "
              f"{result.bytes / max(result.elapsed, 1e-9) / 1e6:,.1f} MB/s); {result.errors} delivery errors")
        for sample in result.error_samples:
            print(f"  error: {sample}")
    return 1 if result.errors else 0


# -- broker ------------------------------------------------------------------------------------------

def _broker_parser(sub) -> None:
    p = sub.add_parser("broker", help="run the embedded broker on loopback until Ctrl-C",
                       description="Start the embedded Kafka-protocol broker (Tansu, memory only: everything is "
                       "gone when it stops) on 127.0.0.1.")
    p.add_argument("--port", type=int, default=9092, help="port (default 9092; 0: a free one)")
    p.set_defaults(func=_cmd_broker)


def _cmd_broker(args) -> int:
    from .broker import EmbeddedBroker
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda s, f: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with EmbeddedBroker(port=args.port) as broker:
            print(f"embedded broker listening on {broker.bootstrap_servers} (memory only; Ctrl-C stops it)",
                  flush=True)
            while not stop.wait(0.5):
                if not broker.running:
                    raise LsmkvError(f"the broker exited; its output is in {broker.log_path}")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("broker stopped")
    return 0


# -- demo --------------------------------------------------------------------------------------------

def _demo_parser(sub) -> None:
    p = sub.add_parser("demo", help="broker, workload, load into both engines, verify",
                       description="Start the embedded broker, publish a seeded workload, load it into an lsmkv "
                       "and a btree store and check both hold exactly the expected table.")
    p.add_argument("--records", type=int, default=200_000, help="records (default 200000)")
    p.add_argument("--keys", type=int, default=20_000, help="key space (default 20000)")
    p.add_argument("--partitions", type=int, default=8, help="partitions (default 8)")
    p.add_argument("--tombstone-ratio", type=float, default=0.05, help="share of deletes (default 0.05)")
    p.add_argument("--seed", type=int, default=0, help="seed of the workload (default 0)")
    p.add_argument("--dir", help="where the stores go, and stay (default: a new temporary directory, removed at "
                   "the end unless --keep)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory and its stores")
    p.set_defaults(func=_cmd_demo)


def _cmd_demo(args) -> int:
    from rich.table import Table

    from .demo import run_demo
    from .workload import WorkloadSpec
    try:
        spec = WorkloadSpec(records=args.records, keys=args.keys, tombstone_ratio=args.tombstone_ratio,
                            seed=args.seed)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    console = pipe_aware_console()
    result = run_demo(spec, partitions=args.partitions, workdir=args.dir, keep=args.keep,
                      progress=lambda text: console.print(f"[dim]{text}[/dim]"))
    table = Table(title=f"{spec.records:,} records over {spec.keys:,} keys, {args.partitions} partitions",
                  title_justify="left")
    for col in ("engine", "records/s", "after the join", "seconds", "keys", "expected", "table"):
        table.add_column(col, justify="right" if col not in ("engine", "table") else "left")
    for run in result.runs:
        m = run.summary.metrics
        table.add_row(run.engine, f"{run.summary.records_per_sec:,.0f}",
                      f"{m['records_per_sec_since_assignment']:,.0f}", f"{run.summary.elapsed:,.1f}",
                      f"{run.keys:,}", f"{run.expected_keys:,}",
                      "[green]exactly as expected[/green]" if run.equal else "[red]DIFFERS[/red]")
    console.print(table)
    console.print(f"produced {result.produced.delivered:,} records at {result.produced.records_per_sec:,.0f}/s; "
                  "records/s and seconds include joining the group (about 3 s on the embedded broker), "
                  "'after the join' counts from the first assignment")
    if result.kept:
        for run in result.runs:
            console.print(f"{run.engine} store: {run.path}")
    else:
        console.print(f"the stores were in {result.workdir}, removed (--keep keeps them)")
    for run in result.runs:
        for key, want, got in run.wrong:
            console.print(f"  {run.engine}: {key!r}: expected {want!r:.60}, found {got!r:.60}")
    return 0 if result.ok else 1


# -- main --------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="lsmkv kafka", description="Kafka topics into lsmkv or btree stores (docs/kafka.md).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _load_parser(sub)
    _query_parser(sub)
    _shards_parser(sub)
    _produce_parser(sub)
    _broker_parser(sub)
    _demo_parser(sub)
    return parser


@exits_quietly_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run_command("lsmkv kafka", lambda: args.func(args), extra="kafka")


if __name__ == "__main__":
    sys.exit(main())
