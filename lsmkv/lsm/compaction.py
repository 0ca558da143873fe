"""Leveled compaction: which tables to merge next, and the shape it keeps.

Shape of the tree: level 0 holds flushed tables that may overlap; levels 1..6
hold non-overlapping tables sorted by key. Level n >= 1 aims at
``level1_max_bytes * level_size_multiplier ** (n - 1)`` bytes.

Scores (the highest >= 1 runs first):
* level 0: number of tables / ``l0_compaction_trigger``;
* levels 1..5: bytes in the level / its target. The last level has no target.

Picking (LevelDB's design, with RocksDB's choice of table in levels >= 1):
* a level >= 1 takes the table whose overlap with the next level, in bytes
  per byte of its own, is smallest (RocksDB's kMinOverlappingRatio): the
  merge that moves the most data down per byte rewritten;
* level 0 takes the oldest table and every level-0 table overlapping it,
  repeatedly, until the set's key range is closed under overlap;
* the overlapping tables of the next level join;
* in levels >= 1 the level's own inputs then grow to every table inside the
  key range already chosen, if that adds no table of the next level and
  stays under EXPANDED_COMPACTION_FILES target files (LevelDB's expansion:
  those tables ride along for free);
* the tables of the level after (the *grandparents*) overlapping the whole
  range are recorded, to cut outputs before they overlap too many
  grandparent bytes;
* one input table with nothing overlapping below and few grandparent bytes
  is moved by a manifest edit alone (a *trivial move*).

When no score asks for a compaction, a table holding a value whose ttl has
expired (its earliest deadline has passed) is compacted anyway
(``pick_expired``): merged into the next level, or rewritten in place where
nothing lies below it, so the space of expired values comes back.

This module decides; compaction_job.py merges; db.py runs and installs.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from .version import NUM_LEVELS, FileMeta, Version

#: A compaction's inputs are expanded (see above) only while they stay under
#: this many times target_file_size bytes (LevelDB's limit).
EXPANDED_COMPACTION_FILES = 25


@dataclass
class CompactionLimits:
    """The knobs of Options that shape compaction (copied, so a job is self-contained)."""

    level1_max_bytes: int
    level_size_multiplier: int
    target_file_size: int
    l0_compaction_trigger: int
    #: Outputs are cut before they overlap more than this many grandparent bytes.
    max_grandparent_overlap_bytes: int

    def max_bytes_for_level(self, level: int) -> float:
        return self.level1_max_bytes * self.level_size_multiplier ** (level - 1)


@dataclass
class Compaction:
    """One compaction: inputs from ``level`` (and ``level + 1``) into ``output_level``."""

    level: int
    output_level: int
    inputs: list[FileMeta]
    next_inputs: list[FileMeta]
    grandparents: list[FileMeta] = field(default_factory=list)
    #: Why it runs: "score", "manual" or "bottommost" (rewriting the last level in place).
    reason: str = "score"
    score: float = 0.0

    @property
    def all_inputs(self) -> list[FileMeta]:
        return self.inputs + self.next_inputs

    @property
    def input_bytes(self) -> int:
        return sum(f.size for f in self.all_inputs)

    def key_range(self) -> tuple[bytes, bytes]:
        files = self.all_inputs
        return min(f.smallest for f in files), max(f.largest for f in files)

    def is_trivial_move(self, limits: CompactionLimits) -> bool:
        return (self.reason == "score" and self.output_level == self.level + 1 and len(self.inputs) == 1
                and not self.next_inputs
                and sum(f.size for f in self.grandparents) <= limits.max_grandparent_overlap_bytes)


def level_scores(version: Version, limits: CompactionLimits) -> list[float]:
    """Compaction score of each level (0.0 for the last)."""
    scores = []
    for level in range(NUM_LEVELS):
        if level == 0:
            files = [f for f in version.levels[0] if not f.being_compacted]
            scores.append(len(files) / limits.l0_compaction_trigger)
        elif level == NUM_LEVELS - 1:
            scores.append(0.0)
        else:
            size = sum(f.size for f in version.levels[level] if not f.being_compacted)
            scores.append(size / limits.max_bytes_for_level(level))
    return scores


def _range_of(files: list[FileMeta]) -> tuple[bytes, bytes]:
    return min(f.smallest for f in files), max(f.largest for f in files)


def _level0_closure(version: Version, seed: list[FileMeta]) -> list[FileMeta]:
    """``seed`` plus every level-0 table overlapping it, transitively."""
    chosen = {f.number: f for f in seed}
    while True:
        lo, hi = _range_of(list(chosen.values()))
        grown = [f for f in version.overlapping(0, lo, hi) if f.number not in chosen]
        if not grown:
            break
        for f in grown:
            chosen[f.number] = f
    return sorted(chosen.values(), key=lambda f: (f.largest_seq, f.number), reverse=True)


def _with_next_level(version: Version, level: int, inputs: list[FileMeta], output_level: int,
                     reason: str, score: float, expand_limit: int = 0) -> Compaction | None:
    lo, hi = _range_of(inputs)
    next_inputs = version.overlapping(output_level, lo, hi) if output_level != level else []
    if any(f.being_compacted for f in inputs + next_inputs):
        return None
    if expand_limit and level > 0 and next_inputs:
        inputs = _expanded(version, level, inputs, next_inputs, expand_limit)
        lo, hi = _range_of(inputs)
    if next_inputs:
        lo = min(lo, next_inputs[0].smallest)
        hi = max(hi, next_inputs[-1].largest)
    grandparent_level = output_level + 1
    grandparents = version.overlapping(grandparent_level, lo, hi) if grandparent_level < NUM_LEVELS else []
    return Compaction(level, output_level, inputs, next_inputs, grandparents, reason, score)


def _least_overlapping(version: Version, level: int, files: list[FileMeta]) -> FileMeta:
    """The table of ``files`` (in ``level`` >= 1) with the fewest bytes in the
    next level overlapping it per byte of its own (the first on a tie)."""
    below = version.levels[level + 1]
    smallest = [f.smallest for f in below]
    ends = [0]
    for f in below:
        ends.append(ends[-1] + f.size)

    def ratio(f: FileMeta) -> float:
        # Tables of a level are sorted and disjoint: those overlapping f are
        # the ones from the first ending at or after f.smallest to the last
        # starting at or before f.largest.
        first = bisect_left(version.largest_keys[level + 1], f.smallest)
        last = bisect_right(smallest, f.largest)
        return (ends[max(last, first)] - ends[first]) / max(f.size, 1)

    return min(files, key=ratio)


def _expanded(version: Version, level: int, inputs: list[FileMeta], next_inputs: list[FileMeta],
              limit: int) -> list[FileMeta]:
    """``inputs`` grown to every table of ``level`` within the key range of
    inputs and next_inputs together, if that needs no more tables of the
    next level and stays under ``limit`` bytes; else ``inputs``."""
    lo, hi = _range_of(inputs + next_inputs)
    grown = version.overlapping(level, lo, hi)
    if len(grown) <= len(inputs) or any(f.being_compacted for f in grown):
        return inputs
    if sum(f.size for f in grown) + sum(f.size for f in next_inputs) > limit:
        return inputs
    grown_lo, grown_hi = _range_of(grown)
    if len(version.overlapping(level + 1, grown_lo, grown_hi)) != len(next_inputs):
        return inputs
    return grown


def pick_compaction(version: Version, limits: CompactionLimits) -> Compaction | None:
    """The compaction the scores ask for, or None when every score is below 1."""
    scores = level_scores(version, limits)
    for level in sorted(range(NUM_LEVELS - 1), key=lambda lv: scores[lv], reverse=True):
        score = scores[level]
        if score < 1.0:
            return None
        files = [f for f in version.levels[level] if not f.being_compacted]
        if not files:
            continue
        if level == 0:
            oldest = min(files, key=lambda f: (f.largest_seq, f.number))
            inputs = _level0_closure(version, [oldest])
        else:
            inputs = [_least_overlapping(version, level, files)]
        picked = _with_next_level(version, level, inputs, level + 1, "score", score,
                                  EXPANDED_COMPACTION_FILES * limits.target_file_size)
        if picked is not None:
            return picked
    return None


def pick_expired(version: Version, now_ms: int) -> Compaction | None:
    """A compaction for a table holding a value whose ttl has expired by
    ``now_ms`` (its earliest deadline has passed), so that the space comes
    back even where nothing else would rewrite the table: merged into the
    next level, or rewritten in place when no deeper level overlaps it."""
    for level in range(NUM_LEVELS):
        for f in version.levels[level]:
            if not f.earliest_deadline or f.earliest_deadline > now_ms or f.being_compacted:
                continue
            below = any(version.overlapping(deeper, f.smallest, f.largest) for deeper in range(level + 1, NUM_LEVELS))
            if not below:
                inputs = _level0_closure(version, [f]) if level == 0 else [f]
                picked = _with_next_level(version, level, inputs, level, "ttl", 0.0)
            elif level == 0:
                picked = _with_next_level(version, 0, _level0_closure(version, [f]), 1, "ttl", 0.0)
            else:
                picked = _with_next_level(version, level, [f], level + 1, "ttl", 0.0)
            if picked is not None:
                return picked
    return None


def earliest_deadline(version: Version) -> int:
    """The earliest deadline of a value with a ttl in any table (0: none)."""
    deadlines = [f.earliest_deadline for files in version.levels for f in files if f.earliest_deadline]
    return min(deadlines, default=0)


def pick_manual(version: Version, level: int, start: bytes | None, end: bytes | None,
                bottommost: bool = False) -> Compaction | None:
    """Every table of ``level`` overlapping [start, end] into ``level + 1``, or,
    with ``bottommost``, the last level's overlapping tables rewritten in place."""
    files = version.overlapping(level, start, end)
    if not files:
        return None
    if bottommost:
        return _with_next_level(version, level, files, level, "bottommost", 0.0)
    if level == 0:
        files = _level0_closure(version, files)
    return _with_next_level(version, level, files, level + 1, "manual", 0.0)


def deepest_level_with_data(version: Version, start: bytes | None, end: bytes | None) -> int:
    """The deepest level holding a table that overlaps [start, end] (0 if none)."""
    for level in range(NUM_LEVELS - 1, -1, -1):
        if version.overlapping(level, start, end):
            return level
    return 0
