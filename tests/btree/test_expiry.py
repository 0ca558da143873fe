"""btree.expiry.ExpiredCount against a plain list of deadlines: random
adds, removes and times (forward, and back, where it asks to be rebuilt),
enough removes that its heap is rebuilt many times over."""

from __future__ import annotations

import random

from btree.expiry import ExpiredCount


def test_expired_count_agrees_with_a_list_of_deadlines():
    rng = random.Random(5)
    deadlines = [rng.randrange(1000, 1400) for _ in range(300)]
    now = 1000
    count = ExpiredCount(deadlines, now)
    rebuilt = 0
    for _ in range(50_000):
        roll = rng.random()
        if roll < 0.4:
            d = rng.randrange(now - 50, now + 400)
            deadlines.append(d)
            count.add(d)
        elif roll < 0.8 and deadlines:
            d = deadlines.pop(rng.randrange(len(deadlines)))
            count.remove(d)
        elif roll < 0.98:
            now += rng.randrange(0, 5)
        else:
            now -= rng.randrange(1, 30)  # the clock set back
        expired = count.expired(now)
        if expired is None:
            rebuilt += 1
            count = ExpiredCount(deadlines, now)
            expired = count.expired(now)
        assert expired == sum(1 for d in deadlines if d <= now)
    assert rebuilt > 100
