"""The result of a repair (``lsmkv repair DB``), shared by both engines.

A repair keeps everything that verifies and reports, as :class:`Loss`
records, exactly what it could not keep: which file and offset or page, why,
and which keys may have lost data. The CLI prints the report; ``data_lost``
decides its exit code.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Loss:
    """One piece of data a repair could not recover.

    Keys in the range from ``first`` to ``last`` (None: unbounded on that
    side; the ``*_inclusive`` flags say whether the bounds themselves are in
    it) may have lost their latest version: such a key may now be missing or
    hold an older value. Keys outside every loss are exactly as they were.
    ``keys_known`` is False when the damaged bytes do not say which keys they
    held (a damaged log record): then any key may be affected.
    """

    what: str
    first: bytes | None = None
    last: bytes | None = None
    first_inclusive: bool = True
    last_inclusive: bool = True
    #: Entries lost, when the damaged file still says how many it held.
    entries: int | None = None
    keys_known: bool = True

    def covers(self, key: bytes) -> bool:
        """Whether ``key`` may have lost data in this loss."""
        if not self.keys_known:
            return True
        if self.first is not None and (key < self.first or (key == self.first and not self.first_inclusive)):
            return False
        if self.last is not None and (key > self.last or (key == self.last and not self.last_inclusive)):
            return False
        return True

    def key_range(self) -> str:
        """The keys that may have lost data, as text (for the report)."""
        if not self.keys_known:
            return "keys unknown"
        lo = "-inf" if self.first is None else repr(self.first)
        hi = "+inf" if self.last is None else repr(self.last)
        return f"{'[' if self.first_inclusive and self.first is not None else '('}{lo}, " \
               f"{hi}{']' if self.last_inclusive and self.last is not None else ')'}"

    def __str__(self) -> str:
        count = "" if self.entries is None else f", {self.entries} entries"
        return f"{self.what} (keys {self.key_range()}{count})"


@dataclass
class RepairReport:
    """What a repair kept, what it lost, and where it put the damaged files.

    ``lost`` holds one :class:`Loss` per piece of data that could not be
    recovered; ``notes`` things the repair found that lost nothing (a torn
    log tail, a file left by a crash); ``details`` counts (tables or pages
    verified, entries kept...); ``set_aside`` is the directory holding copies
    of the damaged or replaced files (never deleted by lsmkv), or None.
    """

    engine: str
    path: str
    lost: list[Loss] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    set_aside: str | None = None

    @property
    def data_lost(self) -> bool:
        return bool(self.lost)

    def may_have_lost(self, key: bytes) -> bool:
        """Whether ``key`` lies in the range of any loss."""
        return any(loss.covers(key) for loss in self.lost)
