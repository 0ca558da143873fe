"""Which versions of a key must survive a flush or compaction.

Snapshots split the sequence space into *stripes*: a version with sequence s
belongs to the stripe of the oldest snapshot whose sequence is >= s, or to
the top stripe (what current readers see) if there is none. A reader at a
snapshot sees the newest version of its own stripe or older, so within one
stripe only the newest version is ever visible; all older versions in the
same stripe can be dropped.

Merge operands (kind 4) are not values on their own: what a reader sees
at one is the operator folded over the operands down to the next value,
tombstone or the end of the key's versions. So below a kept operand, the
versions of its stripe are kept down to and including the first that is
not an operand (compaction may then fold them into one value:
compaction_job.py).

Tombstones are handled by the caller: a tombstone can only be dropped where
nothing older can exist below the output (the bottommost data).
"""

from __future__ import annotations

from bisect import bisect_left

#: write_batch.MERGE (not imported: this module depends on nothing).
_MERGE = 4


def retained(versions: list[tuple[int, int, bytes]], snapshots: list[int]) -> list[tuple[int, int, bytes]]:
    """The versions (seq, kind, value), newest first, that some reader can see.

    ``snapshots`` is the ascending list of live snapshot sequences.
    """
    if len(versions) == 1:
        return versions
    if not snapshots:
        if versions[0][1] != _MERGE:
            return versions[:1]
        return _with_bases(versions)
    out = []
    last_stripe = None
    collecting = False  # the last version kept is an operand: keep its stripe's next one too
    for version in versions:
        stripe = bisect_left(snapshots, version[0])
        if stripe != last_stripe:
            out.append(version)
            last_stripe = stripe
            collecting = version[1] == _MERGE
        elif collecting:
            out.append(version)
            collecting = version[1] == _MERGE
    return out


def _with_bases(versions: list[tuple[int, int, bytes]]) -> list[tuple[int, int, bytes]]:
    """The leading operands of one stripe and the first version below them."""
    for i, version in enumerate(versions):
        if version[1] != _MERGE:
            return versions[:i + 1]
    return versions
