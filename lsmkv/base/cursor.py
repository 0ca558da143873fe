"""Cursors: positioned, bidirectional iteration over a point-in-time view,
the machinery both engines' cursors and scans are built from.

``db.iterator(lower_bound=None, upper_bound=None)`` (and
``snapshot.iterator(...)``) returns a :class:`Cursor` in RocksDB's
vocabulary: ``seek(key)`` (first key >= key), ``seek_for_prev(key)`` (last
key <= key), ``seek_to_first()``, ``seek_to_last()``, ``valid()``,
``key()``, ``value()``, ``next()``, ``prev()``, ``close()``; it is also a
context manager, and iterating it yields ``(key, value)`` from its current
entry to the end of its range. A cursor that was positioned (by a seek, or
by ``next``/``prev``) and is not on an entry -- a seek past the last key,
a ``next()`` off the end -- yields nothing, as RocksDB's invalid iterator
does; one never positioned yields from the first key, as plyvel's does.

How it works (LevelDB's MergingIterator and DBIter in one): a view is a
list of sources, newest first, each read through two *finders* (the next
chunk after a key, the last chunk before one) and moved by a
:class:`SourceCursor` a *chunk* at a time: a run of keys ascending, each
with the kind (:data:`VALUE` or :data:`TOMBSTONE`) and value of its
visible version. The merging cursor shows, at each step, the smallest
(moving forward) or largest (moving backward) key among the sources; for a
key in several sources the newest source's version wins; tombstones are
stepped over. A change of direction re-seeks each source once around the
current key: a few binary searches, not a re-scan. Bounds (lower
inclusive, upper exclusive) hold in both directions: a seek below the lower
bound lands on the first key in range and nothing outside is ever shown.
:func:`stream_view` is the same merge without cursor objects (``scan()``).

The engines make the sources: the LSM one per memtable, level-0 table and
deeper level (lsmkv/lsm/cursor.py), the B+tree one over its tree
(btree/cursor.py). This module reads sources only through the finders
handed to it; it never touches a DB object.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left
from heapq import heapify as heapify_min, heappop as heappop_min, heapreplace as heapreplace_min
from itertools import compress
from typing import Callable, Iterator as TypingIterator

try:
    import cython
except ImportError:  # pragma: no cover - the pure build without Cython installed
    from lsmkv.base.compile_hints import cython

try:  # max-heap helpers: public since Python 3.14, private (and C-level) before
    from heapq import heapify_max as _heapify_max, heappop_max as _heappop_max, heapreplace_max as _heapreplace_max
except ImportError:  # pragma: no cover - depends on the Python version
    from heapq import _heapify_max, _heappop_max, _heapreplace_max  # type: ignore[attr-defined]

from .errors import ClosedError, CorruptionError
from .keys import as_key, as_optional_key

#: The kinds in a chunk: a tombstone hides older sources' versions of its
#: key and is never shown; a value is shown. They are the LSM's own entry
#: kinds (lsmkv/lsm/write_batch.py), so its chunks need no translation.
TOMBSTONE = 0
VALUE = 1

#: A chunk: keys ascending, with the kind and value of each one's visible version.
Chunk = tuple[list[bytes], list[int], list[bytes]]
#: The chunk of a source with nothing more in that direction.
EMPTY: Chunk = ([], [], [])
#: after(key, inclusive) -> the first chunk of entries with keys > key (>= if
#: inclusive; key None: from the start); before(key, inclusive) -> the last
#: chunk of entries with keys < key (<=; key None: to the end). Empty: none.
Finder = Callable[[bytes | None, bool], Chunk]


class SourceCursor:
    """A position in one source, moving a chunk at a time."""

    __slots__ = ("after", "before", "keys", "kinds", "values", "pos", "cur")

    def __init__(self, after: Finder, before: Finder) -> None:
        self.after = after
        self.before = before
        self.keys: list[bytes] = []
        self.kinds: list[int] = []
        self.values: list[bytes] = []
        self.pos = 0
        #: The current key, None when the cursor is off either end.
        self.cur: bytes | None = None

    def _take(self, chunk: Chunk, at_end: bool) -> None:
        keys = self.keys = chunk[0]
        self.kinds, self.values = chunk[1], chunk[2]
        if keys:
            self.pos = len(keys) - 1 if at_end else 0
            self.cur = keys[self.pos]
        else:
            self.pos = 0
            self.cur = None

    @property
    def valid(self) -> bool:
        return self.cur is not None

    def seek(self, key: bytes | None, inclusive: bool = True) -> None:
        """To the first key >= key (> key if not inclusive; None: the first)."""
        self._take(self.after(key, inclusive), False)

    def seek_for_prev(self, key: bytes | None, inclusive: bool = True) -> None:
        """To the last key <= key (< key if not inclusive; None: the last)."""
        self._take(self.before(key, inclusive), True)

    def next(self) -> None:
        pos = self.pos = self.pos + 1
        keys = self.keys
        if pos < len(keys):
            self.cur = keys[pos]
        elif keys:
            last = keys[-1]
            self._take(_ascending_after(self.after(last, False), last), False)

    def prev(self) -> None:
        pos = self.pos = self.pos - 1
        if pos >= 0:
            self.cur = self.keys[pos]
        elif self.keys:
            first = self.keys[0]
            self._take(_descending_before(self.before(first, False), first), True)


def _ascending_after(chunk: Chunk, key: bytes) -> Chunk:
    """``chunk``, which must hold keys above ``key``: a source whose keys are
    out of order (a damaged table that passed its checksums) would
    otherwise send a cursor round in circles."""
    if chunk[0] and not (chunk[0][0] > key and chunk[0][-1] > key):
        raise CorruptionError(f"keys out of order: {chunk[0][0]!r} follows {key!r}")
    return chunk


def _descending_before(chunk: Chunk, key: bytes) -> Chunk:
    if chunk[0] and not (chunk[0][-1] < key and chunk[0][0] < key):
        raise CorruptionError(f"keys out of order: {chunk[0][-1]!r} precedes {key!r}")
    return chunk


def filtered(chunk: Chunk, key: bytes | None, inclusive: bool, above: bool) -> Chunk:
    """The part of a chunk above ``key`` (or below it)."""
    keys = chunk[0]
    if key is None or not keys:
        return chunk
    if above:
        i = bisect_left(keys, key)
        if i < len(keys) and not inclusive and keys[i] == key:
            i += 1
        return chunk if i == 0 else (keys[i:], chunk[1][i:], chunk[2][i:])
    j = bisect_left(keys, key)
    if inclusive and j < len(keys) and keys[j] == key:
        j += 1
    return chunk if j == len(keys) else (keys[:j], chunk[1][:j], chunk[2][:j])


#: jump(key, inclusive) -> where a finder's search goes on from, past a
#: stretch of keys known to be hidden ((key, inclusive) itself if none; None:
#: everything that way is hidden).
Jump = Callable[[bytes | None, bool], "tuple[bytes | None, bool] | None"]


def hiding(finders: tuple[Finder, Finder], kept: Callable[[Chunk], Chunk], jump_after: Jump | None,
           jump_before: Jump | None) -> tuple[Finder, Finder]:
    """The (after, before) finders of a source with some of its entries
    hidden (those a range delete covers): ``kept(chunk)`` is a chunk
    without its hidden entries; before each read, ``jump_after`` (or
    ``jump_before``) moves the search past a stretch it knows is hidden,
    so a range covering many keys costs one seek. A chunk whose entries
    are all hidden makes the finder read on past it."""
    def reading(inner: Finder, jump: Jump | None, edge: int) -> Finder:
        """The finder over ``inner``; ``edge``: the end of a chunk the
        next read goes on from (-1, its last key, for the after finder)."""
        def read(key: bytes | None, inclusive: bool) -> Chunk:
            while True:
                if jump is not None:
                    to = jump(key, inclusive)
                    if to is None:
                        return EMPTY
                    key, inclusive = to
                chunk = inner(key, inclusive)
                if not chunk[0]:
                    return EMPTY
                left = kept(chunk)
                if left[0]:
                    return left
                key, inclusive = chunk[0][edge], False
        return read

    return reading(finders[0], jump_after, -1), reading(finders[1], jump_before, 0)


# -- the merging cursor ------------------------------------------------------------------------

class Cursor:
    """A cursor over a point-in-time view (see the module docstring)."""

    __slots__ = ("_sources", "_lower", "_upper", "_forward", "_key", "_value", "_positioned", "_closed",
                 "_check", "_pinned", "_finalizer", "_alive", "__weakref__")

    def __init__(self, sources: list[SourceCursor], lower_bound: object = None, upper_bound: object = None, *,
                 check: Callable[[], None] = lambda: None, pinned: object = None,
                 on_close: Callable[[], None] | None = None, alive: list[bool] | None = None) -> None:
        self._lower = as_optional_key(lower_bound, "lower_bound")
        self._upper = as_optional_key(upper_bound, "upper_bound")
        #: Newest source first.
        self._sources = sources
        self._forward = True
        self._key: bytes | None = None
        self._value: bytes | None = None
        #: Set by the first seek: from then on "not on an entry" means the
        #: cursor went past an end, and iterating it yields nothing.
        self._positioned = False
        self._closed = False
        #: Raises if the database (or snapshot) behind the cursor was closed.
        self._check = check
        #: A one-item list the database sets to [False] when it closes:
        #: streams look at it before every entry they yield.
        self._alive = alive if alive is not None else [True]
        #: What keeps the view alive (the read state) while the cursor lives.
        self._pinned = pinned
        #: Runs once, at close() or when the cursor is garbage-collected
        #: (a btree cursor's own snapshot is closed so).
        self._finalizer = weakref.finalize(self, on_close) if on_close is not None else None

    # -- positioning ----------------------------------------------------------------------

    def seek_to_first(self) -> None:
        self._begin()
        for s in self._sources:
            s.seek(self._lower)
        self._settle_forward()

    def seek_to_last(self) -> None:
        self._begin()
        for s in self._sources:
            s.seek_for_prev(self._upper, False)
        self._settle_backward()

    def seek(self, key: object) -> None:
        """To the first key >= ``key`` (within the bounds)."""
        k = as_key(key)
        self._begin()
        if self._lower is not None and k < self._lower:
            k = self._lower
        for s in self._sources:
            s.seek(k)
        self._settle_forward()

    def seek_for_prev(self, key: object) -> None:
        """To the last key <= ``key`` (within the bounds)."""
        k = as_key(key)
        self._begin()
        upper = self._upper
        for s in self._sources:
            if upper is not None and k >= upper:
                s.seek_for_prev(upper, False)
            else:
                s.seek_for_prev(k)
        self._settle_backward()

    def next(self) -> None:
        key = self._current()
        if self._forward:
            self._settle_forward(key)
        else:
            self._turn(key, True)

    def prev(self) -> None:
        key = self._current()
        if not self._forward:
            self._settle_backward(key)
        else:
            self._turn(key, False)

    def _turn(self, key: bytes, forward: bool) -> None:
        """A change of direction at ``key``: every source to its first key
        past it the new way (a few binary searches), then settle."""
        for s in self._sources:
            if forward:
                s.seek(key, False)
            else:
                s.seek_for_prev(key, False)
        if forward:
            self._settle_forward()
        else:
            self._settle_backward()

    # -- the current entry ------------------------------------------------------------------

    def valid(self) -> bool:
        self._check_open()
        return self._key is not None

    def key(self) -> bytes:
        return self._current()

    def value(self) -> bytes:
        self._current()
        return self._value

    def _current(self) -> bytes:
        self._check_open()
        if self._key is None:
            raise ValueError("the cursor is not positioned on an entry (valid() is False)")
        return self._key

    # -- merging ----------------------------------------------------------------------------

    def _begin(self) -> None:
        """Before a seek: the cursor is positioned from now on, and on no
        entry until the seek settles (a seek that raises leaves it so)."""
        self._check_open()
        self._forward = True
        self._positioned = True
        self._key = self._value = None

    def _settle_forward(self, past: bytes | None = None) -> None:
        """Show the smallest key among the sources (the newest source's
        version of it) above ``past`` (the sources on it move on first);
        step over tombstones; stop at the upper bound."""
        self._forward = True
        sources = self._sources
        upper = self._upper
        while True:
            if past is not None:
                for s in sources:
                    if s.cur == past:
                        s.next()
            best = None
            winner = None
            for s in sources:
                k = s.cur
                if k is not None and (best is None or k < best):
                    best, winner = k, s
            if best is None or (upper is not None and best >= upper):
                self._key = self._value = None
                return
            if winner.kinds[winner.pos] != TOMBSTONE:
                self._key, self._value = best, winner.values[winner.pos]
                return
            past = best

    def _settle_backward(self, past: bytes | None = None) -> None:
        """_settle_forward's mirror: the largest key below ``past``, down to the lower bound."""
        self._forward = False
        sources = self._sources
        lower = self._lower
        while True:
            if past is not None:
                for s in sources:
                    if s.cur == past:
                        s.prev()
            best = None
            winner = None
            for s in sources:
                k = s.cur
                if k is not None and (best is None or k > best):
                    best, winner = k, s
            if best is None or (lower is not None and best < lower):
                self._key = self._value = None
                return
            if winner.kinds[winner.pos] != TOMBSTONE:
                self._key, self._value = best, winner.values[winner.pos]
                return
            past = best

    # -- iteration and lifetime --------------------------------------------------------------

    def __iter__(self) -> TypingIterator[tuple[bytes, bytes]]:
        """(key, value) from the current entry to the end of the range,
        ascending; nothing when the cursor was positioned and is on no entry
        (past either end); from the first entry when it was never
        positioned. The iteration reads on its own: the cursor stays where
        it is."""
        self._check_open()
        if self._key is not None:
            return self.stream(self._key)
        if self._positioned:
            return iter(())
        return self.stream(self._lower)

    def stream(self, start: bytes | None = None, reverse: bool = False) -> TypingIterator[tuple[bytes, bytes]]:
        """(key, value) of every live key in the bounds from ``start`` on
        (inclusive; None: from the first, or with ``reverse`` from the
        last), ascending or descending (:func:`stream_view`)."""
        return stream_view([(s.after, s.before) for s in self._sources], self._lower, self._upper, start, reverse,
                           self._check_open, self._alive, self._pinned)

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the cursor is closed")
        self._check()

    def close(self) -> None:
        """Let go of the view (the cursor is unusable afterwards)."""
        self._closed = True
        self._sources = []
        self._pinned = None
        self._key = self._value = None
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> "Cursor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- streaming (iteration and scans) -----------------------------------------------------------

def stream_view(finders: list[tuple[Finder, Finder]], lower: bytes | None, upper: bytes | None,
                start: bytes | None, reverse: bool, check: Callable[[], None], alive: list[bool],
                pinned: object) -> TypingIterator[tuple[bytes, bytes]]:
    """(key, value) of every live key in [lower, upper) from ``start`` on
    (inclusive; None: from the first, or with ``reverse`` from the last),
    ascending or descending, over the sources whose (after, before)
    finders are given (newest first): a chunk at a time, at C speed where
    one source is left and a chunk holds no tombstone. DB.scan() is this,
    with no cursor objects; ``pinned`` (the read state) is held by the
    stream so that it outlives anything dropped early; ``check`` raises
    if the database was closed, looked at once ``alive[0]`` is False.
    Nothing is read until the first entry is asked for."""
    if reverse:
        if start is None or (upper is not None and start >= upper):
            edge, inclusive = upper, upper is None
        else:
            edge, inclusive = start, True
        way = [before for _, before in finders]
    else:
        if start is None or (lower is not None and start < lower):
            start = lower
        edge, inclusive = start, True
        way = [after for after, _ in finders]
    bound = lower if reverse else upper
    if len(way) == 1:
        return _live_chunks(way[0], edge, inclusive, bound, reverse, check, alive, pinned)
    return _live_merged(way, edge, inclusive, bound, reverse, check, alive, pinned)


def _following(finder: Finder, keys: list[bytes], reverse: bool) -> Chunk:
    """The chunk beside the one holding ``keys``, from the finder that gave
    it: the next one up (the one below with ``reverse``); empty at the end."""
    if reverse:
        first = keys[0]
        return _descending_before(finder(first, False), first)
    last = keys[-1]
    return _ascending_after(finder(last, False), last)


def _chunks(finder: Finder, edge: bytes | None, inclusive: bool, reverse: bool) -> TypingIterator[Chunk]:
    """One source's chunks from ``finder(edge, inclusive)`` on: ascending
    through its after finder, or with ``reverse`` the highest first
    through its before finder (each chunk ascending)."""
    chunk = finder(edge, inclusive)
    while chunk[0]:
        yield chunk
        chunk = _following(finder, chunk[0], reverse)


def visible_entries(source: SourceCursor, start: bytes | None = None, end: bytes | None = None,
                    reverse: bool = False) -> TypingIterator[tuple[bytes, int, bytes]]:
    """(key, kind, value) of one source's visible versions with keys in
    [start, end), tombstones included, ascending or descending."""
    if reverse:
        for key, kind, value in _entries(_chunks(source.before, end, end is None, True), True):
            if start is not None and key < start:
                return
            yield key, kind, value
    else:
        for key, kind, value in _entries(_chunks(source.after, start, True, False), False):
            if end is not None and key >= end:
                return
            yield key, kind, value


def _live_chunks(finder: Finder, edge: bytes | None, inclusive: bool, bound: bytes | None, reverse: bool,
                 check: Callable[[], None], alive: list[bool], pinned: object) -> TypingIterator[tuple[bytes, bytes]]:
    """The live entries of one source up to ``bound`` (the upper bound,
    exclusive; with reverse the lower, inclusive), read a chunk at a time
    through ``finder`` (its after finder, or with reverse its before),
    from ``finder(edge, inclusive)`` on."""
    chunk = finder(edge, inclusive)
    while chunk[0]:
        check()
        keys, kinds, values = chunk
        cut = False
        if bound is not None:
            if reverse:
                if keys[0] < bound:
                    i = bisect_left(keys, bound)
                    keys, kinds, values, cut = keys[i:], kinds[i:], values[i:], True
            elif keys[-1] >= bound:
                j = bisect_left(keys, bound)
                keys, kinds, values, cut = keys[:j], kinds[:j], values[:j], True
        pairs = zip(reversed(keys), reversed(values)) if reverse else zip(keys, values)
        if TOMBSTONE in kinds:
            pairs = compress(pairs, reversed(kinds) if reverse else kinds)  # kinds: 1 value, 0 tombstone
        for pair in pairs:
            if not alive[0]:
                check()
            yield pair
        if cut:
            return
        chunk = _following(finder, chunk[0], reverse)


def _entries(chunks: TypingIterator[Chunk], reverse: bool) -> TypingIterator[tuple[bytes, int, bytes]]:
    for keys, kinds, values in chunks:
        if reverse:
            yield from zip(reversed(keys), reversed(kinds), reversed(values))
        else:
            yield from zip(keys, kinds, values)


@cython.locals(heap=list, top=list, at=cython.Py_ssize_t, step=cython.Py_ssize_t, n=cython.Py_ssize_t)
def _live_merged(finders: list[Finder], edge: bytes | None, inclusive: bool, bound: bytes | None, reverse: bool,
                 check: Callable[[], None], alive: list[bool], pinned: object) -> TypingIterator[tuple[bytes, bytes]]:
    """The live entries of several sources (newest first) merged: for a
    key in several, the newest source's version; tombstones dropped; up to
    ``bound`` (the upper bound, exclusive; with reverse the lower,
    inclusive). Each source is read a chunk at a time through its finder
    (after, or with reverse before), from ``finder(edge, inclusive)`` on.

    One heap of the sources' current entries, walked in place: each heap
    item is ``[key, rank, at, keys, kinds, values, stop, finder]``, the
    source's current chunk, the position in it and the position past its
    end (-1 with reverse), so that moving on costs an index step and a
    C-level heapreplace, with no generator per source (each would cost
    its making, a resume per chunk and, when a short read stops early, a
    close: 6% of a compiled seek of 10 over two sources). ``rank`` (the
    source's index, negated with reverse so that a max-heap also pops the
    newest source first) orders equal keys newest first; the items never
    compare beyond it. A source whose chunk runs out asks its finder for
    the chunk beside it."""
    if reverse:
        heapify, replace, pop, step = _heapify_max, _heapreplace_max, _heappop_max, -1
    else:
        heapify, replace, pop, step = heapify_min, heapreplace_min, heappop_min, 1
    heap = []
    for rank, finder in enumerate(finders):
        chunk = finder(edge, inclusive)
        keys = chunk[0]
        if keys:
            at = len(keys) - 1 if reverse else 0
            stop = -1 if reverse else len(keys)
            heap.append([keys[at], -rank if reverse else rank, at, keys, chunk[1], chunk[2], stop, finder])
    heapify(heap)
    prev = None
    while heap:
        top = heap[0]
        key = top[0]
        if key != prev:
            prev = key
            if bound is not None and (key < bound if reverse else key >= bound):
                return
            if not alive[0]:
                check()
            at = top[2]
            if top[4][at] != TOMBSTONE:
                yield key, top[5][at]
        # Move this source on: the next entry of its chunk, or the chunk beside it.
        at = top[2] + step
        if at != top[6]:
            key = top[3][at]
            top[0] = key
            top[2] = at
            # Its next key still comes first (the usual case in a short read:
            # one source serves a run of keys): the heap stays as it is, with
            # no call to re-sift it. A tie goes to the sift, which weighs ranks.
            n = len(heap)
            if n == 1:
                continue
            if reverse:
                if key > heap[1][0] and (n == 2 or key > heap[2][0]):
                    continue
            elif key < heap[1][0] and (n == 2 or key < heap[2][0]):
                continue
            replace(heap, top)
            continue
        chunk = _following(top[7], top[3], reverse)
        keys = chunk[0]
        if not keys:
            pop(heap)
            continue
        top[3], top[4], top[5] = keys, chunk[1], chunk[2]
        at = len(keys) - 1 if reverse else 0
        top[6] = -1 if reverse else len(keys)
        top[0] = keys[at]
        top[2] = at
        replace(heap, top)
