"""Stand-ins for an engine's snapshot sources: the (after, before) finder
pair a cursor source reads, over a sorted list, a few keys per chunk so
that the readers cross chunk boundaries often."""

from __future__ import annotations

import bisect

from lsmkv.base.cursor import VALUE


def list_finders(entries: list[tuple[bytes, int, bytes]], chunk: int):
    """(after, before) finders over sorted (key, kind, value) entries,
    ``chunk`` entries at the most per answer."""
    keys = [k for k, _, _ in entries]
    kinds = [kind for _, kind, _ in entries]
    values = [v for _, _, v in entries]

    def after(key, inclusive):
        i = 0 if key is None else (bisect.bisect_left if inclusive else bisect.bisect_right)(keys, key)
        return keys[i:i + chunk], kinds[i:i + chunk], values[i:i + chunk]

    def before(key, inclusive):
        j = len(keys) if key is None else (bisect.bisect_right if inclusive else bisect.bisect_left)(keys, key)
        i = max(0, j - chunk)
        return keys[i:j], kinds[i:j], values[i:j]

    return after, before


def value_finders(items, chunk: int):
    """(after, before) finders over (key, value) pairs, all values (no
    tombstones); ``items`` in any order."""
    return list_finders([(k, VALUE, v) for k, v in sorted(items)], chunk)
