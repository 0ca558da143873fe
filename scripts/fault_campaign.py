#!/usr/bin/env python3
"""Fault campaign: seeded injections per fault kind and engine, and their outcomes.

Run: .venv/bin/python scripts/fault_campaign.py [--injections 50] [--seed 1] [--engines lsm,btree]

For each engine it injects --injections faults of every kind (EIO at a random
call of each file-system operation, then resume() or a reopen; a full disk on
creating, writing and preallocating files, then space freed; a power cut at a
random call, then all, part or none of the unsynced data lost; a bit flip in
a random read of each kind of file) and prints two markdown tables: faults by
kind with their outcomes, and bit flips by file and structure hit, detected
vs harmless vs undetected. Exit status 1 if any injection broke a promise
(the failures are listed). The scenarios are lsmkv/faults/scenarios.py;
docs/reliability.md explains each column.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lsmkv.faults.campaign import (FAULT_COLUMNS, FLIP_COLUMNS, fault_rows, flip_rows,  # noqa: E402
                                   flip_totals, run_campaign)


def markdown(columns, rows) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--injections", type=int, default=50, help="injections per fault kind and engine")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--engines", default="lsm,btree")
    parser.add_argument("--workdir", default="/dev/shm" if os.access("/dev/shm", os.W_OK) else None,
                        help="where the databases go (default /dev/shm: fsync there costs nothing, and the "
                             "fault file system decides what survives a power loss)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lsmkv-campaign-", dir=args.workdir) as workdir:
        campaign = run_campaign(workdir, engines=tuple(args.engines.split(",")), per_kind=args.injections,
                                seed=args.seed,
                                progress=None if args.quiet else lambda line: print(line, file=sys.stderr))
    elapsed = time.perf_counter() - started
    print(f"Fault campaign: seed {args.seed}, {args.injections} injections per kind and engine, "
          f"{len(campaign.outcomes)} runs in {elapsed:.0f} s\n")
    print(markdown(FAULT_COLUMNS, fault_rows(campaign)))
    print()
    print(markdown(FLIP_COLUMNS, flip_rows(campaign)))
    print()
    for engine, c in flip_totals(campaign).items():
        injected = sum(c.values())
        caught = c["detected"] + c["harmless"]
        print(f"{engine}: {injected} bit flips injected, {c['detected']} detected, {c['harmless']} harmless, "
              f"{c['FAILED']} undetected or mishandled ({100 * caught / injected:.1f}% detected or harmless)")
    failures = [o for o in campaign.outcomes if o.failed]
    if failures:
        print(f"\n{len(failures)} injections broke a promise:")
        for o in failures:
            print(f"  {o.engine} {o.kind}: {o.detail}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
