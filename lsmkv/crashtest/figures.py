"""The crash test's results: counters of one engine's run, and the report of
a failure (what differed, where the evidence is kept).

Plain data: the driver fills it in, the CLI prints it, tests assert on it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .oracle import Mismatch


@dataclass
class Failure:
    """Why a cycle failed; the database and the oracle are left in ``workdir``."""

    cycle: int
    reason: str
    mismatches: list[Mismatch] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    workdir: str = ""
    child_stderr: str = ""

    def lines(self, limit: int = 40) -> list[str]:
        out = [f"cycle {self.cycle}: {self.reason}"]
        for problem in self.problems[:limit]:
            out.append(f"  {problem}")
        for mismatch in self.mismatches[:limit]:
            out.append(f"  {mismatch}")
        hidden = max(0, len(self.problems) - limit) + max(0, len(self.mismatches) - limit)
        if hidden:
            out.append(f"  ... and {hidden} more (all in {self.workdir}/failure.txt)")
        if self.child_stderr.strip():
            out.append("child's stderr:")
            out.extend("  " + line for line in self.child_stderr.rstrip().splitlines()[-30:])
        out.append(f"database and oracle kept in {self.workdir}")
        return out


@dataclass
class Figures:
    """Counters of one engine's crash test."""

    engine: str
    seed: int
    #: Cycles whose crash was survived: recovered, verified, checked.
    cycles: int = 0
    #: SIGKILLs delivered, by when they were aimed ("during open", "at a random
    #: moment", "during maintenance"); one per cycle.
    kills: Counter = field(default_factory=Counter)
    #: Kills that landed before the child finished opening (during recovery).
    killed_during_open: int = 0
    acked_writes: int = 0
    acked_synced: int = 0
    #: Put items with a ttl among the acknowledged writes.
    acked_ttl: int = 0
    acked_maintenance: int = 0
    #: Acknowledged operations by kind (put, delete, merge, delete_range,
    #: batch, txn, rollback, ingest, maintenance kinds; "txn refused": a
    #: commit that conflicted with an ingest and wrote nothing).
    acked_kinds: Counter = field(default_factory=Counter)
    #: Merge and range-delete items among the acknowledged writes (single,
    #: in batches and in transactions).
    acked_items: Counter = field(default_factory=Counter)
    #: Keys compared with the oracle (key-space size per cycle).
    keys_checked: int = 0
    #: In-flight writes at the kills by outcome (applied, not applied, no visible effect).
    in_flight: Counter = field(default_factory=Counter)
    #: The same by kind of write: "txn applied", "delete_range not applied", ...
    in_flight_by_kind: Counter = field(default_factory=Counter)
    #: Maintenance calls (flush, compact, checkpoint) in progress at the kills, by kind.
    killed_in_maintenance: Counter = field(default_factory=Counter)
    #: What crashed directories showed in progress (engine-specific labels), in how many cycles.
    evidence: Counter = field(default_factory=Counter)
    #: Oracle lines cut by the kill (ignored).
    torn_lines: int = 0
    #: Processes of the child's group (its compaction worker) still alive
    #: 10 s after the child died, which the driver then killed.
    stragglers: int = 0
    #: Largest engine facts seen after recovery (deepest_level, tables, height, pages).
    facts: dict = field(default_factory=dict)
    live_keys: int = 0
    elapsed: float = 0.0
    failure: Failure | None = None

    @property
    def failures(self) -> int:
        return 0 if self.failure is None else 1

    @property
    def faults_injected(self) -> int:
        return sum(self.kills.values())

    def note_facts(self, facts: dict) -> None:
        for name, value in facts.items():
            if isinstance(value, (int, float)):
                self.facts[name] = max(self.facts.get(name, value), value)
