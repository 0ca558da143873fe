"""Time to live: the deadline of an expiring value, as both engines judge it.

``put(key, value, ttl=seconds)`` (and a write batch's ``put`` with a ttl)
gives the value a *deadline*: the wall-clock time of the call plus ``ttl``,
in whole milliseconds since the Unix epoch, rounded up so that a value
never expires early. From its deadline on, the key reads as absent -- in
get, scan and snapshots alike, as if a delete had been written at the
deadline -- and its space is reclaimed later (the LSM's compactions turn an
expired value into a tombstone; the B+tree sweeps expired keys on the
timing wheel).

The deadline is stored with the value, so expiry survives reopening and
crashes: it is judged against the wall clock of whoever reads, whenever
that is. (A clock set back makes values that had expired readable again
until their space is reclaimed; reclaimed space stays reclaimed.)

This module owns what both engines share: checking a ttl and the clock
arithmetic of deadlines. How each engine stores a deadline is its own:
the LSM in front of the value (lsmkv/lsm/ttl_value.py), the B+tree in the
leaf cell (btree/node.py).

This module must never read a clock itself: callers pass the time (their
``ttl_clock``), so tests and the crash driver can control it.
"""

from __future__ import annotations

import math

from .errors import InvalidArgumentError

#: Longest ttl accepted, in seconds (about 317 years).
MAX_TTL = 10_000_000_000.0


def check_ttl(ttl: object) -> float:
    """``ttl`` as float seconds; TypeError or InvalidArgumentError if it is not
    a positive, finite number of seconds up to MAX_TTL."""
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise TypeError(f"ttl must be a number of seconds, not {type(ttl).__name__}")
    if not 0 < ttl <= MAX_TTL:
        raise InvalidArgumentError(f"ttl must be a positive number of seconds up to {MAX_TTL:.0f}, not {ttl!r}")
    return float(ttl)


def deadline_ms(now: float, ttl: float) -> int:
    """The deadline of a value written at ``now`` (seconds since the epoch) with ``ttl``."""
    return math.ceil((now + ttl) * 1000.0)


def now_ms(now: float) -> int:
    """``now`` (seconds since the epoch) in the deadlines' unit."""
    return math.floor(now * 1000.0)
