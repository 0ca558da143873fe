"""What a compaction does with range tombstones (compaction_job.py calls it).

* :func:`drop_covered`: the versions of a merged run that a range
  tombstone deletes for every reader -- the current one and each live
  snapshot -- are dropped; a version some snapshot still sees stays.
* :func:`surviving_range_dels`: a tombstone whose range nothing lies below
  (no table of a deeper level meets it) and that no snapshot predates is
  dropped: everything it covered is gone with it. The rest go on.
* :func:`output_range_dels`: each output carries the part of the
  fragments its key range owns: from where the previous output's share
  ended up to just past its last key (``last + b"\\x00"``, the smallest key
  above it), the last output to their end. So outputs of one level never
  overlap, and every stretch a tombstone covers -- between outputs'
  entries too -- belongs to exactly one output.

Vectorized over the run's columns: the cost is in the entries a fragment
spans, which the compaction reads anyway; nothing here touches a file.
"""

from __future__ import annotations

import numpy as np

from .range_tombstones import FragmentedTombstones
from .table.columns import Columns


def drop_covered(run: Columns, fragments: FragmentedTombstones, snapshots: list[int]) -> tuple[Columns, int]:
    """``run`` without the versions no reader can see because of
    ``fragments``, and how many were dropped. A version of sequence s under
    a fragment is dropped when a covering tombstone t > s exists and the
    oldest snapshot at or above s (if any) is at or above the oldest such t."""
    keep = None
    snaps = np.array(snapshots, dtype=np.uint64) if snapshots else None
    for start, end, seqs in zip(fragments.starts, fragments.ends, fragments.seqs):
        i0 = run.bisect_left(start)
        i1 = run.bisect_left(end, i0)
        if i0 >= i1:
            continue
        versions = run.seq_kinds[i0:i1] >> np.uint64(8)
        ascending = np.array(sorted(seqs), dtype=np.uint64)
        above = np.searchsorted(ascending, versions, side="right")
        covered = above < len(ascending)
        if snaps is not None:
            oldest_tombstone = ascending[np.minimum(above, len(ascending) - 1)]
            j = np.searchsorted(snaps, versions, side="left")
            unseen = (j >= len(snaps)) | (oldest_tombstone <= snaps[np.minimum(j, len(snaps) - 1)])
            covered &= unseen
        if covered.any():
            if keep is None:
                keep = np.ones(len(run), dtype=bool)
            keep[i0:i1] &= ~covered
    if keep is None:
        return run, 0
    dropped = int(len(run) - np.count_nonzero(keep))
    return run.take(keep), dropped


def surviving_range_dels(fragments: FragmentedTombstones, snapshots: list[int],
                         lower_ranges: list[list[tuple[bytes, bytes]]]) -> tuple[FragmentedTombstones, int]:
    """The tombstones that must go on into the outputs, and how many
    (fragment, sequence) records were dropped. ``lower_ranges``: per level
    below the output, its tables' (smallest, largest), sorted."""
    oldest_snapshot = snapshots[0] if snapshots else None
    ranges = [r for level in lower_ranges for r in level]
    starts: list[bytes] = []
    ends: list[bytes] = []
    seqs: list[tuple[int, ...]] = []
    dropped = 0
    for start, end, covering in zip(fragments.starts, fragments.ends, fragments.seqs):
        below = any(lo < end and hi >= start for lo, hi in ranges)
        if below:
            kept = covering
        else:
            kept = tuple(t for t in covering if oldest_snapshot is not None and oldest_snapshot < t)
        dropped += len(covering) - len(kept)
        if kept:
            starts.append(start)
            ends.append(end)
            seqs.append(kept)
    return FragmentedTombstones(starts, ends, seqs), dropped


def output_range_dels(fragments: FragmentedTombstones, lower: bytes | None,
                      last_key: bytes | None) -> tuple[FragmentedTombstones, bytes | None]:
    """(the share of ``fragments`` of an output whose share begins at
    ``lower`` and whose last key is ``last_key`` -- None for the last
    output --, where the next output's share begins)."""
    upper = None if last_key is None else last_key + b"\x00"
    return fragments.clipped(lower, upper), upper
