"""The fault campaign: many seeded injections per kind and engine, tallied.

For each engine, :func:`run_campaign` injects ``per_kind`` faults of every
kind -- EIO at a random call of each file-system operation (then resume(),
or a reopen), a full disk (sticky ENOSPC on creating, writing and
preallocating files, then space freed), a power cut at a random call (then
the unsynced data lost, a random part of it lost, or a process kill), and a
bit flip in a random read of each kind of file -- and returns every
:class:`~lsmkv.faults.scenarios.Outcome`. :func:`fault_rows` and
:func:`flip_rows` tally them into the tables of docs/reliability.md. Every
injection is reproducible from the campaign's seed. Nothing here prints.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import shutil
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from . import scenarios
from .workload import engine as engine_profile
from .workload import keys_of, make_ops

#: (operation, errno, sticky, torn, resume) of each I/O-error kind; "torn"
#: lets a random prefix of the failed write land.
IO_KINDS = [(op, errno.EIO, False, False, True) for op in
            ("open", "write", "sync", "rename", "remove", "read", "dirsync", "fallocate")] + \
           [("write", errno.EIO, False, True, True), ("write", errno.EIO, False, True, False)] + \
           [(op, errno.EIO, False, False, False) for op in ("write", "sync", "read")] + \
           [(op, errno.ENOSPC, True, False, True) for op in ("open", "write", "fallocate")]

TORN_SIZES = (None, 1, 3, 9, 40, 200)


@dataclass
class Campaign:
    seed: int
    per_kind: int
    outcomes: list = field(default_factory=list)


def run_campaign(workdir: str, *, engines: tuple[str, ...] = ("lsm", "btree"), per_kind: int = 50,
                 seed: int = 1, ops_count: int = 120,
                 progress: Callable[[str], None] | None = None) -> Campaign:
    """Run the campaign in ``workdir`` (emptied as it goes); ``progress``
    is called with a line per finished kind."""
    campaign = Campaign(seed, per_kind)
    logging.disable(logging.CRITICAL)  # every injected failure is logged by the engines
    try:
        for name in engines:
            engine = engine_profile(name)
            rng = random.Random(f"{seed}-{name}")
            ops = make_ops(rng.randrange(1 << 30), ops_count)

            def scratch() -> str:
                path = os.path.join(workdir, "run")
                shutil.rmtree(path, ignore_errors=True)
                os.makedirs(path)
                return path

            calls = scenarios.count_calls(engine, scratch(), ops)
            for operation, error, sticky, torn, resume in IO_KINDS:
                # A full disk fails only the opens that create a file.
                count = calls["create"] if (operation, error) == ("open", errno.ENOSPC) else calls[operation]
                if not count:
                    continue
                for _ in range(per_kind):
                    nth = rng.randrange(1, count + 1)
                    campaign.outcomes.append(scenarios.io_error(
                        engine, scratch(), ops, operation, nth, error, sticky=sticky, resume=resume,
                        torn=rng.choice(TORN_SIZES[1:]) if torn else None, seed=rng.randrange(1 << 30)))
                _report(progress, campaign.outcomes[-1])
            total = scenarios.count_calls(engine, scratch(), ops, with_open=True)["all"]
            for mode in scenarios.POWER_MODES:
                for _ in range(per_kind):
                    campaign.outcomes.append(scenarios.power_cut(
                        engine, scratch(), ops, rng.randrange(1, total + 1), torn=rng.choice(TORN_SIZES),
                        mode=mode, seed=rng.randrange(1 << 30)))
                _report(progress, campaign.outcomes[-1])
            keys = keys_of(ops) + [b"unflushed%02d" % i for i in range(12)]
            for target in scenarios.FLIP_TARGETS[name]:
                base = scratch()
                pristine = os.path.join(base, "pristine")
                expected = scenarios.make_pristine(engine, pristine, ops, target.pristine)
                work = os.path.join(base, "work")
                os.makedirs(work)
                reads = scenarios.count_reads(engine, pristine, work, target)
                for _ in range(per_kind):
                    campaign.outcomes.append(scenarios.bit_flip(
                        engine, pristine, work, target, rng.randrange(1, reads + 1), expected, keys,
                        seed=rng.randrange(1 << 30)))
                _report(progress, campaign.outcomes[-1])
    finally:
        logging.disable(logging.NOTSET)
        shutil.rmtree(os.path.join(workdir, "run"), ignore_errors=True)
    return campaign


def _report(progress, outcome) -> None:
    if progress is not None:
        progress(f"{outcome.engine} {outcome.kind}: done")


FAULT_COLUMNS = ("engine", "fault", "injected", "clear error, recovered, data verified", "tolerated",
                 "not reached", "failed")


def fault_rows(campaign: Campaign) -> list[tuple]:
    """One row per engine and fault kind (I/O errors and power cuts)."""
    tally: dict[tuple[str, str], Counter] = {}
    for o in campaign.outcomes:
        if o.scenario == "bit-flip":
            continue
        kind = o.kind.split(":torn")[0] if o.scenario == "power-loss" else o.kind
        tally.setdefault((o.engine, _fault_label(o.scenario, kind)), Counter())[o.result] += 1
    return [(engine, label, sum(c.values()), c[scenarios.RECOVERED], c[scenarios.TOLERATED],
             c[scenarios.NOT_REACHED], c[scenarios.FAILED]) for (engine, label), c in tally.items()]


def _fault_label(scenario: str, kind: str) -> str:
    if scenario == "power-loss":
        return {"power-loss": "power cut, unsynced data lost", "partial-power-loss":
                "power cut, part of the unsynced data lost", "kill": "process killed"}[kind]
    operation, error, *rest = kind.split(":")
    if "sticky" in rest:
        return f"disk full (sticky {error}) on {operation}, then space freed, resume()"
    what = f"torn write ({error} after a prefix)" if "torn" in rest else f"{error} on {operation}"
    return f"{what}, then " + ("reopen" if "reopen" in rest else "resume()")


FLIP_COLUMNS = ("engine", "file", "flipped byte in", "injected", "detected (CorruptionError)", "harmless",
                "undetected")


def flip_rows(campaign: Campaign) -> list[tuple]:
    """One row per engine, file kind and structure hit (reached flips only)."""
    tally: dict[tuple[str, str, str], Counter] = {}
    for o in campaign.outcomes:
        if o.scenario != "bit-flip" or o.result == scenarios.NOT_REACHED:
            continue
        target = o.kind.split(":", 1)[1]
        tally.setdefault((o.engine, target, o.structure or "?"), Counter())[o.result] += 1
    return [(engine, target, structure, sum(c.values()), c[scenarios.DETECTED], c[scenarios.HARMLESS],
             c[scenarios.FAILED]) for (engine, target, structure), c in sorted(tally.items())]


def flip_totals(campaign: Campaign) -> dict:
    """Bit flips injected (that reached their read), detected, harmless, undetected, per engine."""
    totals: dict[str, Counter] = {}
    for o in campaign.outcomes:
        if o.scenario == "bit-flip" and o.result != scenarios.NOT_REACHED:
            totals.setdefault(o.engine, Counter())[o.result] += 1
    return totals
