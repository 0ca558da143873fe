"""WriteController: how fast writers may go while level 0 is backed up.

At ``l0_slowdown_trigger`` level-0 tables, writers are held to a delayed
write rate, so that compaction catches up before level 0 reaches
``l0_stop_trigger``, where writes stop altogether. A fixed rate either
holds writers back more than needed or too little to prevent the stop when
compaction is slower than the rate. So the rate adapts, as RocksDB's
WriteController does: each time a new Version shows level 0 still growing,
it drops to 0.8 (0.6 within two tables of the stop trigger) of the lower of
itself and the rate writers actually reached since level 0 last grew
(a rate above what writers manage would not slow them at all); each time
level 0 shrank, it rises by 1.25. It never exceeds ``delayed_write_rate``,
where each slowdown starts. Out of the slowdown zone writers run freely; a
rate is not carried to the next slowdown (level 0 grows one flush at a time
but shrinks in one step, so a carried rate would only ratchet down).

Writers pay for their bytes in sleep: the delay owed accumulates and is
slept once it reaches a millisecond, so most writes do not sleep at all.
The counters are approximate under concurrent writers (no lock: a lost
update only shifts a sleep by one write).
"""

from __future__ import annotations

import time

#: Rate multipliers when level 0 grows, grows near the stop, and shrinks.
GROWING = 0.8
NEAR_STOP = 0.6
SHRINKING = 1.25
#: Writers are never slowed below this many bytes per second.
MIN_RATE = 16 * 1024
#: The delay owed is slept once it reaches this many seconds.
SLEEP_QUANTUM = 0.001


class WriteController:
    """Decides, from the level-0 table count of each new Version, whether
    writers run, slow down (and to what rate) or stop."""

    __slots__ = ("max_rate", "slowdown_trigger", "stop_trigger", "rate", "slowdown", "stop",
                 "_level0", "_debt", "slowdowns", "slowdown_seconds", "max_level0", "_last_bytes", "_last_time")

    def __init__(self, max_rate: int, slowdown_trigger: int, stop_trigger: int) -> None:
        self.max_rate = max_rate
        self.slowdown_trigger = slowdown_trigger
        self.stop_trigger = stop_trigger
        #: Bytes per second writers are held to while slowed down.
        self.rate = float(max_rate)
        #: Whether writers are slowed down / stopped now.
        self.slowdown = False
        self.stop = False
        self._level0 = 0
        self._debt = 0.0
        #: Sleeps taken and their total length.
        self.slowdowns = 0
        self.slowdown_seconds = 0.0
        #: The most level-0 tables any Version had.
        self.max_level0 = 0
        #: Bytes written and the time when level 0 last grew.
        self._last_bytes = 0
        self._last_time: float | None = None

    def update(self, level0: int, bytes_written: int = 0, now: float | None = None) -> None:
        """A new Version with ``level0`` tables in level 0 was installed;
        ``bytes_written`` is the writers' byte count so far, ``now`` a
        monotonic clock reading (both optional: without them the rate
        adapts from delayed_write_rate alone)."""
        previous, self._level0 = self._level0, level0
        reached = None
        if now is not None and level0 > previous:
            # Measured from one new level-0 table (a flush) to the next: a
            # memtable's worth of writes.
            if self._last_time is not None and now > self._last_time:
                reached = (bytes_written - self._last_bytes) / (now - self._last_time)
            self._last_bytes, self._last_time = bytes_written, now
        self.max_level0 = max(self.max_level0, level0)
        self.stop = level0 >= self.stop_trigger
        if level0 < self.slowdown_trigger:
            self.slowdown = False
            self.rate = float(self.max_rate)
            return
        if self.slowdown:
            if level0 > previous:
                factor = NEAR_STOP if level0 >= self.stop_trigger - 2 else GROWING
                base = self.rate if reached is None else min(self.rate, reached)
                self.rate = max(MIN_RATE, base * factor)
            elif level0 < previous:
                self.rate = min(self.max_rate, self.rate * SHRINKING)
        self.slowdown = True

    def delay(self, nbytes: int) -> None:
        """Charge a write of ``nbytes`` while slowed down: sleep once the
        delay owed reaches SLEEP_QUANTUM."""
        self._debt += nbytes / self.rate
        if self._debt >= SLEEP_QUANTUM:
            owed, self._debt = self._debt, 0.0
            time.sleep(owed)
            self.slowdowns += 1
            self.slowdown_seconds += owed
