"""Which versions of a key must survive a flush or compaction.

Snapshots split the sequence space into *stripes*: a version with sequence s
belongs to the stripe of the oldest snapshot whose sequence is >= s, or to
the top stripe (what current readers see) if there is none. A reader at a
snapshot sees the newest version of its own stripe or older, so within one
stripe only the newest version is ever visible; all older versions in the
same stripe can be dropped.

Tombstones are handled by the caller: a tombstone can only be dropped where
nothing older can exist below the output (the bottommost data).
"""

from __future__ import annotations

from bisect import bisect_left


def retained(versions: list[tuple[int, int, bytes]], snapshots: list[int]) -> list[tuple[int, int, bytes]]:
    """The versions (seq, kind, value), newest first, that some reader can see.

    ``snapshots`` is the ascending list of live snapshot sequences.
    """
    if len(versions) == 1:
        return versions
    if not snapshots:
        return versions[:1]
    out = []
    last_stripe = None
    for version in versions:
        stripe = bisect_left(snapshots, version[0])
        if stripe != last_stripe:
            out.append(version)
            last_stripe = stripe
    return out
