"""The crash test's key space: which keys exist, who writes them, and what
their values look like.

Keys are numbered ``0 .. size-1``. The number decides everything about a
key, in the child that writes it and in the driver that verifies it:

* its *kind* (``index % 20``): most are short keys with small values, some
  are counters (8-byte values that merges add to, with ``UInt64Add``), some
  carry medium values, some large values (several blocks in an SSTable,
  overflow chains in the B+tree), some are long keys; the kinds sort apart
  (their first byte differs), so one batch spanning several kinds spans
  several key ranges and tables;
* its *owner*, the one child thread that writes it (blocks of 20
  consecutive numbers per thread, so each thread owns keys of every kind).
  Disjoint owners make the expected value of a key that thread's program
  order, whatever the interleaving of threads.

Within one kind, keys sort by number, so the keys of one kind in one block
(a *run*, :meth:`KeySpace.run_of`) are contiguous in key order and all
belong to one thread: a range delete over a stretch of a run
(:meth:`KeySpace.range_bounds`) covers that thread's keys and no other's.

A value is a pure function of (operation id, key number, length): it starts
with ``<op id>:k<index>|`` and goes on with seeded filler, so a value read
back names the operation that wrote it, and the oracle records only the
length. A counter's value is its number, 8 bytes (``UInt64Add``), and the
oracle records the number (:func:`content` covers both). This module never
touches a database or a file.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from lsmkv.base.merge_operators import UInt64Add

#: Key kinds by ``index % 20``: (prefix byte, smallest value, largest value, long key).
_KIND_OF_SLOT = "s" * 9 + "c" * 3 + "m" * 5 + "L" * 2 + "x"
_KINDS = {
    "s": (b"s", 0, 48, False),        # short key, small value (empty now and then)
    "c": (b"c", 0, 1_000_000, False),  # counter: the "length" is the number it holds
    "m": (b"m", 50, 600, False),      # short key, medium value
    "L": (b"L", 1500, 6000, False),   # short key, large value (several blocks, an overflow chain)
    "x": (b"x", 0, 200, True),        # long key (up to 96 bytes), small value
}
BLOCK = len(_KIND_OF_SLOT)
#: Longest key the key space produces (within the B+tree's limit for 512-byte pages).
MAX_KEY_LEN = 96


@dataclass(frozen=True)
class KeySpace:
    """``size`` keys shared among ``threads`` writer threads."""

    size: int
    threads: int

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError(f"threads must be at least 1, not {self.threads}")
        if self.size < BLOCK * self.threads:
            raise ValueError(f"a key space for {self.threads} threads needs at least {BLOCK * self.threads} keys "
                             f"({BLOCK} per thread), not {self.size}")

    def key(self, index: int) -> bytes:
        prefix, _, _, long_key = _KINDS[_KIND_OF_SLOT[index % BLOCK]]
        key = b"%s:%07d" % (prefix, index)
        if long_key:
            key += b"/" + (b"%d-" % index) * 48
            key = key[:40 + index % (MAX_KEY_LEN - 40 + 1)]
        return key

    def kind(self, index: int) -> str:
        return _KIND_OF_SLOT[index % BLOCK]

    def run_of(self, index: int) -> tuple[int, int]:
        """The first and last key number of the same kind in ``index``'s
        block: contiguous in key order, one owner."""
        kind = _KIND_OF_SLOT[index % BLOCK]
        first = last = index
        while first % BLOCK and _KIND_OF_SLOT[(first - 1) % BLOCK] == kind:
            first -= 1
        while (last + 1) % BLOCK and last + 1 < self.size and _KIND_OF_SLOT[(last + 1) % BLOCK] == kind:
            last += 1
        return first, last

    def range_bounds(self, first: int, last: int) -> tuple[bytes, bytes]:
        """``(start, end)`` for a range delete of key numbers ``first`` to
        ``last`` (one run's stretch): every key of the key space with
        start <= key < end is one of them."""
        run = self.run_of(first)
        if not run[0] <= first <= last <= run[1]:
            raise ValueError(f"keys {first}-{last} are not a stretch of one run ({run[0]}-{run[1]})")
        prefix = _KINDS[_KIND_OF_SLOT[first % BLOCK]][0]
        # Numbers are zero-padded, and a long key extends its "x:<number>" prefix.
        return b"%s:%07d" % (prefix, first), b"%s:%07d" % (prefix, last + 1)

    def owner(self, index: int) -> int:
        """The thread that writes this key."""
        return (index // BLOCK) % self.threads

    def owned_by(self, thread: int) -> list[int]:
        """Every key number that ``thread`` writes, ascending."""
        return [i for i in range(self.size) if self.owner(i) == thread]

    def index_of(self) -> dict[bytes, int]:
        """Key bytes -> key number, for reading a database back."""
        return {self.key(i): i for i in range(self.size)}

    def value_length(self, index: int, rng: random.Random) -> int:
        """A length for a value of key ``index`` (a counter's number for a counter)."""
        _, low, high, _ = _KINDS[_KIND_OF_SLOT[index % BLOCK]]
        if is_counter(index):
            return rng.randint(low, high)
        if low == 0 and rng.random() < 0.05:
            return 0  # an empty value is a value: present, not deleted
        return rng.randint(max(low, 1), high)


def is_counter(index: int) -> bool:
    """Whether key ``index`` is a counter (merged with ``UInt64Add``)."""
    return _KIND_OF_SLOT[index % BLOCK] == "c"


def content(op_id: str, index: int, length: int) -> bytes:
    """What a put of operation ``op_id`` with ``length`` writes to key
    ``index``: the counter ``length`` on a counter key, else :func:`value`."""
    return UInt64Add.operand(length) if is_counter(index) else value(op_id, index, length)


def value(op_id: str, index: int, length: int) -> bytes:
    """The value operation ``op_id`` writes to key ``index``: ``length`` bytes
    that start with the op id (cut short if ``length`` is smaller)."""
    header = b"%s:k%d|" % (op_id.encode(), index)
    if length <= len(header):
        return header[:length]
    rest = length - len(header)
    # A quarter random, repeated: compressible roughly 4:1, like real data.
    seed = random.Random(f"{op_id}/{index}").randbytes(max(1, rest // 4))
    return header + (seed * (rest // len(seed) + 1))[:rest]


def describe(data: bytes | None, index: int | None = None) -> str:
    """A short human description of a value read back (for failure reports);
    ``index`` is the key it was read from, named if the value was written to
    another key."""
    if data is None:
        return "absent"
    if index is not None and is_counter(index) and len(data) == 8:
        return f"counter {UInt64Add.decode(data)}"
    head, sep, _ = data.partition(b"|")
    op, colon, key = head.partition(b":k")
    if sep and colon and op[:1] == b"c" and key.isdigit():
        elsewhere = "" if index is None or int(key) == index else f" written to key {int(key)}"
        return f"value of {op.decode('ascii', 'backslashreplace')}{elsewhere} ({len(data)} bytes)"
    return f"{len(data)} bytes {data[:24].hex()}{'...' if len(data) > 24 else ''}"
