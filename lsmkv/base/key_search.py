"""Binary searches over an ascending list of bytes keys, shared by both
engines' hot paths: the memtable's index insert (lsmkv/lsm/memtable.py) and
the B+tree's descent (btree/tree.py); and the order check of a sorted run
a table builder is given (``new_key_flags``: a flush's or a compaction's).

``keys_bisect_left``, ``keys_bisect_right`` and ``keys_insort`` answer what
``bisect``'s functions of the same names answer. In the compiled build each
is a loop in C whose comparisons run over the two keys' bytes (typed
pointers: the first bytes compared directly, the rest by libc's memcmp),
with no Python call and no rich comparison: at 16-byte keys a
probe costs about a quarter of what a rich comparison costs, and a module
that cimports them (the ``.pxd`` beside this file) calls them as C
functions. Run as Python, that loop is slower than ``bisect``'s C
functions, so the pure build binds the three names to ``bisect``'s own
(at the end of this file), and ``new_key_flags`` to two maps of bytes'
comparisons. Both forms refuse a key that is not bytes
(TypeError), as bisect refuses to compare bytes with str. The loops stay
reachable under their ``byte_loop_`` names, which neither build rebinds, so
that the tests can hold each build's loop to bisect's answers.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort

try:
    import cython
except ImportError:  # (no Cython: the module runs as Python)
    from lsmkv.base.compile_hints import cython


def _below(a: bytes, b: bytes) -> bool:
    """``a < b``, compared byte by byte (compiled: the first bytes in C,
    and past an equal first byte libc's memcmp, which compares a word at a
    time: random keys mostly differ at once, while keys that share a long
    prefix, as numbered keys do, cost a few steps instead of one a byte)."""
    n = len(a)
    m = len(b)
    ap = a
    bp = b
    stop = n if n < m else m
    if cython.compiled and stop > 0:
        if ap[0] != bp[0]:
            return ap[0] < bp[0]
        c = memcmp(ap, bp, stop)  # noqa: F821 - cimported from libc.string in the .pxd
        return c < 0 if c != 0 else n < m
    j = 0
    while j < stop and ap[j] == bp[j]:
        j += 1
    return (ap[j] < bp[j]) if j < stop else n < m


def keys_bisect_right(keys: list[bytes], key: bytes) -> int:
    """``bisect_right(keys, key)``: the index after the last key <= ``key``."""
    lo = 0
    hi = len(keys)
    while lo < hi:
        mid = (lo + hi) >> 1
        if _below(key, keys[mid]):
            hi = mid
        else:
            lo = mid + 1
    return lo


def keys_bisect_left(keys: list[bytes], key: bytes) -> int:
    """``bisect_left(keys, key)``: the index of the first key >= ``key``."""
    lo = 0
    hi = len(keys)
    while lo < hi:
        mid = (lo + hi) >> 1
        if _below(keys[mid], key):
            lo = mid + 1
        else:
            hi = mid
    return lo


def keys_insort(keys: list[bytes], key: bytes) -> None:
    """``insort(keys, key)``: ``key`` inserted after any equal keys."""
    keys.insert(keys_bisect_right(keys, key), key)


def new_key_flags(keys: list[bytes], last: bytes) -> list[bool] | None:
    """For a run of keys meant to ascend from ``last`` (a table builder's
    sorted run, lsmkv/lsm/table/builder.py): None if a key is below the one
    before it, else, for each key, whether it is above the one before it
    (False: the same key again, an older version of it)."""
    flags = []
    previous = last
    for key in keys:
        if _below(key, previous):
            return None
        flags.append(_below(previous, key))
        previous = key
    return flags


def _new_key_flags_by_map(keys: list[bytes], last: bytes) -> list[bool] | None:
    """new_key_flags as the pure build runs it: two maps of bytes'
    comparisons over the run and the run shifted by one (C loops there)."""
    previous = [last, *keys[:-1]]
    if any(map(bytes.__lt__, keys, previous)):
        return None
    return list(map(bytes.__ne__, keys, previous))


#: The loops above under names no build rebinds (the tests hold them to
#: bisect's answers: compiled in the compiled build, as Python in the pure one).
byte_loop_bisect_right = keys_bisect_right
byte_loop_bisect_left = keys_bisect_left
byte_loop_insort = keys_insort
byte_loop_new_key_flags = new_key_flags
if not cython.compiled:
    keys_bisect_right = bisect_right
    keys_bisect_left = bisect_left
    keys_insort = insort
    new_key_flags = _new_key_flags_by_map
