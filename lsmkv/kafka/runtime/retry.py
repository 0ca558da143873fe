"""Retry scheduling: when a record whose processor raised is tried again.

:class:`RetryPolicy` is exponential backoff with jitter: the n-th retry
waits ``backoff * 2**(n-1)`` seconds, at most ``backoff_max``, times a
random factor from 0.8 to 1.2 (so a burst of failures does not come back
as one burst); after ``max_retries`` retries the record is dead-lettered.
:class:`RetryScheduler` runs the retries on lsmkv's timing wheel
(lsmkv/base/timer.py): a pending retry costs one timer, cancelled in O(1) when
its partition is revoked. This module never processes a record itself:
the callback hands it back to its processor unit.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Callable

from lsmkv.base.timer import Timer, TimerHandle


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff: float = 0.1
    backoff_max: float = 10.0

    def gives_up(self, attempt: int) -> bool:
        """Whether a record that failed its ``attempt``-th try (1 = the first) is dead-lettered now."""
        return attempt > self.max_retries

    def delay(self, attempt: int, rng: random.Random = random.Random()) -> float:
        """Seconds to wait after the ``attempt``-th failed try before the next one."""
        base = min(self.backoff * (2 ** (attempt - 1)), self.backoff_max)
        return base * rng.uniform(0.8, 1.2)


class RetryScheduler:
    """Retries waiting on the timing wheel, cancellable by owner (a partition)."""

    def __init__(self, policy: RetryPolicy, timer: Timer | None = None) -> None:
        self.policy = policy
        # (A Timer with nothing scheduled is falsy: it has a length.)
        self._timer = timer if timer is not None else Timer(tick=0.001, name="lsmkv-kafka-retry")
        self._owns_timer = timer is None
        self._lock = threading.Lock()
        self._handles: dict[object, set[TimerHandle]] = {}
        self._rng = random.Random()
        #: Retries scheduled so far.
        self.scheduled = 0

    def schedule(self, owner: object, attempt: int, callback: Callable[[], object]) -> float:
        """Run ``callback`` after the backoff of the ``attempt``-th failure;
        returns the delay. ``owner`` groups retries for :meth:`cancel`."""
        delay = self.policy.delay(attempt, self._rng)
        holder: list[TimerHandle] = []

        def fire() -> None:
            with self._lock:
                pending = self._handles.get(owner)
                if pending is not None and holder:
                    pending.discard(holder[0])
            callback()

        with self._lock:
            handle = self._timer.schedule(delay, fire)
            holder.append(handle)
            self._handles.setdefault(owner, set()).add(handle)
            self.scheduled += 1
        return delay

    def cancel(self, owner: object) -> int:
        """Cancel ``owner``'s pending retries; returns how many were pending."""
        with self._lock:
            handles = self._handles.pop(owner, set())
        return sum(1 for h in handles if h.cancel())

    def pending(self, owner: object) -> int:
        with self._lock:
            return len(self._handles.get(owner, ()))

    def close(self) -> None:
        with self._lock:
            owners = list(self._handles)
        for owner in owners:
            self.cancel(owner)
        if self._owns_timer:
            self._timer.close()
