"""Columns: table entries as numpy arrays over byte buffers, for bulk rewriting.

Compaction reads, merges, filters and rewrites millions of entries. Held as
Python objects, every entry would cost several allocations at every step;
held as columns it costs a few vectorized numpy operations per step for a
whole chunk of entries. A :class:`Columns` is a run of entries: a byte buffer
(the decoded blocks the entries came from) and parallel arrays of key
offset, key length, value offset, value length and seq_kind. Merging
concatenates runs and sorts them; filtering takes a subset; writing gathers
the bytes of each output block back out (block.py's layout) in one pass.

Key order is byte order (memcmp). numpy sorts fixed-width byte strings that
way; keys of varying length are padded with zeros to the run's longest and
ties broken by length (shorter first), which is byte order too. Keys longer
than ``MAX_SORT_WIDTH`` make padding too costly; such runs are sorted as
Python bytes instead.

Nothing here knows about versions or snapshots: compaction_job.py decides
what to keep; this module moves bytes.
"""

from __future__ import annotations

import struct

import numpy as np

from lsmkv.base.errors import CorruptionError

from .block import CODEC_LENGTHS, CODEC_OFFSETS

_COUNT = struct.Struct("<I")
#: Widest key for which sorting pads keys into a numpy array.
MAX_SORT_WIDTH = 256
#: Fixed-width pieces up to this size are gathered with one numpy indexing.
_NUMPY_GATHER_WIDTH = 32
_I64 = np.int64
#: Pieces of varying length are gathered one length at a time while there
#: are at most this many entries per distinct length; else slice by slice.
_ENTRIES_PER_LENGTH = 16


def pieces(data: bytes | np.ndarray, width: int, kind: str = "V") -> np.ndarray:
    """Every ``width``-byte piece of ``data``, one starting at each byte: a
    1-D array of ``width``-byte items (void, or "S" byte strings) laid over
    the same memory, items overlapping. Indexing it with offsets copies
    each piece whole (one memcpy per item), the cheapest gather numpy has
    for short pieces. Writable when ``data`` is a writable array."""
    count = len(data) - width + 1
    if width == 0 or count <= 0:
        return np.zeros(0, dtype=f"{kind}{max(width, 1)}")
    return np.ndarray((count,), dtype=f"{kind}{width}", buffer=data, strides=(1,))


def _slices(data: bytes, starts: np.ndarray, ends: np.ndarray) -> bytes:
    """The concatenation of data[starts[i]: ends[i]], sliced in C."""
    return b"".join(map(data.__getitem__, map(slice, starts.tolist(), ends.tolist())))


class Columns:
    __slots__ = ("data", "koff", "klen", "voff", "vlen", "seq_kinds", "_padded")

    def __init__(self, data: bytes, koff: np.ndarray, klen: np.ndarray, voff: np.ndarray, vlen: np.ndarray,
                 seq_kinds: np.ndarray, padded: np.ndarray | None = None) -> None:
        #: The bytes every offset points into.
        self.data = data
        self.koff = koff
        self.klen = klen
        self.voff = voff
        self.vlen = vlen
        self.seq_kinds = seq_kinds
        #: The keys as a padded byte-string array, once computed (_padded_keys).
        self._padded = padded

    @classmethod
    def empty(cls) -> "Columns":
        z = np.zeros(0, dtype=_I64)
        return cls(b"", z, z, z, z, np.zeros(0, dtype=np.uint64))

    @classmethod
    def from_blocks(cls, raws: list[bytes], path: str = "", offsets: list[int] | None = None,
                    codec: int = CODEC_OFFSETS) -> "Columns":
        """Decode raw (uncompressed) blocks of one table, in order, into one
        run; ``codec`` is the table's block codec (block.py).

        All blocks are decoded together: their entry counts are read with one
        gather, then their offset (or length) and seq_kind columns are copied
        side by side into one buffer, where block b's columns start at byte
        16 * (entries before b), so every column is read with one aligned
        numpy indexing."""
        if not raws:
            return cls.empty()
        data = b"".join(raws)
        sizes = np.fromiter(map(len, raws), dtype=_I64, count=len(raws))
        ends = np.cumsum(sizes)
        starts = ends - sizes

        def corrupt(bad: np.ndarray, message) -> CorruptionError:
            b = int(np.flatnonzero(bad)[0])
            text = message(b) if callable(message) else message
            return CorruptionError(text, path=path, offset=offsets[b] if offsets else 0)

        if (sizes < 4).any():
            raise corrupt(sizes < 4, "block too short")
        count = np.frombuffer(_slices(data, ends - 4, ends), dtype="<u4").astype(_I64)
        bases = ends - 4 - 16 * count  # where each block's length columns start
        if (bases < starts).any():
            raise corrupt(bases < starts, lambda b: f"block claims {int(count[b])} entries in {int(sizes[b])} bytes")
        meta = _slices(data, bases, ends - 4)
        first = np.cumsum(count) - count  # index of each block's first entry
        n = int(count.sum())
        # Entry e is entry j = e - first[b] of its block b. In ``meta`` its
        # key length is u32 number 4 * first[b] + j, its value length
        # count[b] further, its seq_kind u64 number 2 * first[b] + count[b] + j.
        e = np.arange(n, dtype=_I64)
        first_of = np.repeat(first, count)
        count_of = np.repeat(count, count)
        columns = np.frombuffer(meta, dtype="<u4")
        first_col = columns[e + 3 * first_of].astype(_I64)
        second_col = columns[e + 3 * first_of + count_of].astype(_I64)
        seq_kinds = np.frombuffer(meta, dtype="<u8")[e + first_of + count_of].astype(np.uint64)
        nonempty = count > 0
        if codec == CODEC_LENGTHS:
            klen, vlen = first_col, second_col
        else:
            # End offsets: an entry's length is its end less the previous
            # end in its block (keys start at 0, values at the last key's end).
            is_first = np.zeros(n, dtype=bool)
            is_first[first[nonempty]] = True
            last_key_end = np.zeros(len(raws), dtype=_I64)
            if n:
                last_key_end[nonempty] = first_col[first[nonempty] + count[nonempty] - 1]
            key_prev = np.where(is_first, 0, np.roll(first_col, 1))
            value_prev = np.where(is_first, np.repeat(last_key_end, count), np.roll(second_col, 1))
            klen = first_col - key_prev
            vlen = second_col - value_prev
            bad = np.zeros(len(raws), dtype=bool)
            if n:
                negative = (klen < 0) | (vlen < 0)
                bad[np.repeat(np.arange(len(raws)), count)[negative]] = True
            if bad.any():
                raise corrupt(bad, "block offsets are out of order")
        # Offsets within each block: keys from 0, values after the block's keys.
        kcum = np.cumsum(klen) - klen
        vcum = np.cumsum(vlen) - vlen
        block_keys = np.zeros(len(raws), dtype=_I64)
        block_values = np.zeros(len(raws), dtype=_I64)
        if n:
            block_keys[nonempty] = np.add.reduceat(klen, first[nonempty])
            block_values[nonempty] = np.add.reduceat(vlen, first[nonempty])
        bad = starts + block_keys + block_values != bases
        if bad.any():
            raise corrupt(bad, "block lengths do not add up to its size")
        koff = np.repeat(starts, count) + kcum - kcum[first_of]
        voff = np.repeat(starts + block_keys, count) + vcum - vcum[first_of]
        return cls(data, koff, klen, voff, vlen, seq_kinds)

    @classmethod
    def concat(cls, parts: list["Columns"]) -> "Columns":
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        shift = np.cumsum([0] + [len(p.data) for p in parts[:-1]])
        return cls(b"".join(p.data for p in parts),
                   np.concatenate([p.koff + s for p, s in zip(parts, shift)]),
                   np.concatenate([p.klen for p in parts]),
                   np.concatenate([p.voff + s for p, s in zip(parts, shift)]),
                   np.concatenate([p.vlen for p in parts]),
                   np.concatenate([p.seq_kinds for p in parts]))

    def take(self, index) -> "Columns":
        """The entries selected by an index array or boolean mask, same buffer."""
        padded = self._padded
        return Columns(self.data, self.koff[index], self.klen[index], self.voff[index], self.vlen[index],
                       self.seq_kinds[index], None if padded is None else padded[index])

    def slice(self, start: int, stop: int) -> "Columns":
        padded = self._padded
        return Columns(self.data, self.koff[start:stop], self.klen[start:stop], self.voff[start:stop],
                       self.vlen[start:stop], self.seq_kinds[start:stop],
                       None if padded is None else padded[start:stop])

    def with_seq_kinds(self, seq_kinds: np.ndarray) -> "Columns":
        return Columns(self.data, self.koff, self.klen, self.voff, self.vlen, seq_kinds, self._padded)

    def __len__(self) -> int:
        return len(self.klen)

    def key(self, i: int) -> bytes:
        o = int(self.koff[i])
        return self.data[o: o + int(self.klen[i])]

    def keys(self) -> list[bytes]:
        data = self.data
        return [data[o: o + n] for o, n in zip(self.koff.tolist(), self.klen.tolist())]

    def bisect_left(self, key: bytes, lo: int = 0) -> int:
        """First index whose key is >= ``key`` (the run must be sorted)."""
        hi = len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.key(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def bisect_right(self, key: bytes, lo: int = 0) -> int:
        """First index whose key is > ``key`` (the run must be sorted)."""
        hi = len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.key(mid) <= key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def compacted(self) -> "Columns":
        """The same entries over a buffer of just their own bytes (so that a
        few leftover entries do not keep a whole chunk's buffer alive)."""
        n = len(self)
        if not n:
            return Columns.empty()
        keys = self.gather(self.koff, self.klen)
        values = self.gather(self.voff, self.vlen)
        koff = np.cumsum(self.klen) - self.klen
        voff = len(keys) + np.cumsum(self.vlen) - self.vlen
        return Columns(keys + values, koff, self.klen.copy(), voff, self.vlen.copy(), self.seq_kinds.copy())

    # -- ordering ---------------------------------------------------------------

    def _padded_keys(self) -> np.ndarray | None:
        """Keys as a numpy byte-string array padded to the longest, or None
        when keys are too long to pad."""
        if self._padded is not None:
            return self._padded
        n = len(self)
        width = int(self.klen.max()) if n else 0
        if width > MAX_SORT_WIDTH:
            return None
        width = max(width, 1)
        buf = np.frombuffer(self.data, dtype=np.uint8)
        if n and int(self.klen.min()) == width:
            self._padded = pieces(self.data, width, "S")[self.koff]
            return self._padded
        elif not len(buf):  # no bytes at all: every key (and value) is empty
            grid = np.zeros((n, width), dtype=np.uint8)
        else:
            cols = np.arange(width)
            inside = cols[None, :] < self.klen[:, None]
            idx = np.where(inside, self.koff[:, None] + cols[None, :], 0)
            grid = np.where(inside, buf[idx], 0).astype(np.uint8)
        self._padded = np.ascontiguousarray(grid).view(f"S{width}").ravel()
        return self._padded

    def stable_order(self) -> np.ndarray:
        """Indices that sort the run by key, equal keys keeping their order."""
        if len(self) < 2:
            return np.arange(len(self), dtype=_I64)
        padded = self._padded_keys()
        if padded is None:
            keys = self.keys()
            return np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=_I64)
        if int(self.klen.min()) == int(self.klen.max()):
            return np.argsort(padded, kind="stable")
        return np.lexsort((self.klen, padded))

    def same_as_previous(self) -> np.ndarray:
        """Boolean array: entry i has the same key as entry i - 1 (False at 0)."""
        n = len(self)
        out = np.zeros(n, dtype=bool)
        if n < 2:
            return out
        padded = self._padded_keys()
        if padded is None:
            keys = self.keys()
            out[1:] = [a == b for a, b in zip(keys[1:], keys[:-1])]
            return out
        out[1:] = (padded[1:] == padded[:-1]) & (self.klen[1:] == self.klen[:-1])
        return out

    def is_sorted(self) -> bool:
        """Whether keys never decrease (equal keys allowed)."""
        return self._ascending(False)

    def is_strictly_ascending(self) -> bool:
        """Whether every key is greater than the one before (no repeats)."""
        return self._ascending(True)

    def _ascending(self, strict: bool) -> bool:
        """Whether each key is above (``strict``) or at least the one before."""
        n = len(self)
        if n < 2:
            return True
        padded = self._padded_keys()
        if padded is None:
            keys = self.keys()
            after = bytes.__lt__ if strict else bytes.__le__
            return all(map(after, keys, keys[1:]))
        a, b = padded[:-1], padded[1:]
        shorter = self.klen[:-1] < self.klen[1:] if strict else self.klen[:-1] <= self.klen[1:]
        return bool(np.all((a < b) | ((a == b) & shorter)))

    # -- writing ------------------------------------------------------------------

    def gather(self, offsets: np.ndarray, lengths: np.ndarray) -> bytes:
        """The concatenation of data[offsets[i]: offsets[i] + lengths[i]].

        Neighbours that are contiguous in the buffer are copied as one run;
        pieces of one length (keys, typically, and often values) are copied
        by numpy as rows of a sliding window, a few lengths one length at a
        time, and anything else slice by slice in C (map, join)."""
        n = len(offsets)
        if not n:
            return b""
        ends = offsets + lengths
        breaks = np.flatnonzero(offsets[1:] != ends[:-1]) + 1
        data = self.data
        if len(breaks) <= n // 4 or n == 1:
            run_starts = np.concatenate(([0], breaks))
            run_ends = np.concatenate((breaks, [n]))
            return b"".join(map(data.__getitem__, map(slice, offsets[run_starts].tolist(),
                                                      ends[run_ends - 1].tolist())))
        shortest, longest = int(lengths.min()), int(lengths.max())
        if shortest == longest:
            return pieces(data, shortest)[offsets].tobytes() if shortest else b""
        distinct = np.unique(lengths)
        if len(distinct) * _ENTRIES_PER_LENGTH > n:
            return b"".join(map(data.__getitem__, map(slice, offsets.tolist(), ends.tolist())))
        total = int(lengths.sum())
        out = np.empty(total, dtype=np.uint8)
        starts = np.cumsum(lengths) - lengths
        for width in distinct.tolist():
            if not width:
                continue
            pick = np.flatnonzero(lengths == width)
            # The pieces written to ``out`` never overlap one another.
            pieces(out, width)[starts[pick]] = pieces(data, width)[offsets[pick]]
        return out.tobytes()

    def encode_blocks(self, cuts: list[int]) -> list[bytes]:
        """Raw blocks (block.py's current codec) for entries [cuts[i], cuts[i+1])."""
        keys = self.gather(self.koff, self.klen)
        values = self.gather(self.voff, self.vlen)
        at = np.array(cuts, dtype=_I64)
        kcum = np.concatenate(([0], np.cumsum(self.klen)))
        vcum = np.concatenate(([0], np.cumsum(self.vlen)))
        kend = kcum[at].tolist()
        vend = vcum[at].tolist()
        # Each entry's end offsets within its own block: its keys start at
        # 0, its values right after its keys.
        sizes = np.diff(at)
        block_of = np.repeat(np.arange(len(sizes)), sizes)
        key_base = kcum[at[:-1]][block_of]
        value_base = vcum[at[:-1]][block_of] - (kcum[at[1:]] - kcum[at[:-1]])[block_of]
        span = slice(cuts[0], cuts[-1])
        kl = (kcum[1:][span] - key_base).astype("<u4").tobytes()
        vl = (vcum[1:][span] - value_base).astype("<u4").tobytes()
        sk = self.seq_kinds[span].astype("<u8").tobytes()
        first = cuts[0]
        cuts = [c - first for c in cuts]
        pack = _COUNT.pack
        return [b"".join((keys[k0:k1], values[v0:v1], kl[4 * a:4 * b], vl[4 * a:4 * b], sk[8 * a:8 * b], pack(b - a)))
                for a, b, k0, k1, v0, v1 in zip(cuts, cuts[1:], kend, kend[1:], vend, vend[1:])]

    def keys_at(self, index: np.ndarray) -> list[bytes]:
        """The keys of the entries at ``index``, as bytes."""
        data = self.data
        return [data[o: o + n] for o, n in zip(self.koff[index].tolist(), self.klen[index].tolist())]
