"""``lsmkv crashtest``: the crash-test driver (lsmkv/crashtest/) run on one
or both engines, its figures printed; exit 1 at the first recovered
database that breaks the contract.
"""

from __future__ import annotations

import os
import sys
import tempfile

from lsmkv.base.errors import LsmkvError


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
    row("acknowledged, by kind", counts(fig.acked_kinds))
    row("merges, range deletes", f"{fig.acked_items['merge']:,} merges, {fig.acked_items['range delete']:,} range "
        "deletes (alone, in batches, in transactions)")
    row("keys compared", f"{fig.keys_checked:,} (the whole key space after every crash)")
    in_flight = sum(fig.in_flight.values())
    row("in flight at the kills", f"{in_flight:,} writes: {counts(fig.in_flight)}")
    row("in flight, by kind", counts(fig.in_flight_by_kind))
    row("maintenance at the kills", counts(fig.killed_in_maintenance))
    row("crashed directory showed", counts(fig.evidence))
    row("shape reached", ", ".join(f"{k} {v:,}" for k, v in sorted(fig.facts.items())) or "-")
    row("live keys at the end", f"{fig.live_keys:,}")
    if fig.stragglers:
        row("stragglers", f"{fig.stragglers} processes outlived the killed child (then killed)")
    row("elapsed", f"{fig.elapsed:,.0f} s")
    row("failures", str(fig.failures))


def cmd_crashtest(args) -> int:
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
