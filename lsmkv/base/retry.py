"""run_in_transaction: run a function in a transaction, again on conflict.

An optimistic transaction that conflicts (ConflictError) has written
nothing and is simply run again from the start, on a fresh snapshot. This
is the loop every user of optimistic transactions writes (RocksDB's
OptimisticTransactionDB users by hand; Cloud Spanner's and Datastore's
clients as ``run_in_transaction``), with the backoff of tenacity-style
helpers::

    def transfer(txn):
        a = int(txn.get(b"acct:a", b"0"))
        txn.put(b"acct:a", b"%d" % (a - 10))
        txn.put(b"acct:b", b"%d" % (int(txn.get(b"acct:b", b"0")) + 10))

    run_in_transaction(db, transfer)

``fn(txn)`` runs in ``db.transaction(sync=sync)``; if the commit succeeds,
its return value is returned. On ConflictError it sleeps a jittered
exponential backoff (:func:`backoff_delay`: "full jitter", a random time
up to a cap that doubles each attempt) and runs ``fn`` again, at most
``attempts`` times in all; the last ConflictError is raised. A
SnapshotEndedError is run again the same way: on btree, a write that
failed while changing the tree (rebuilt from the disk) ends every open
snapshot, a transaction's too, and such a transaction has written nothing
either. Any
other exception propagates at once (the transaction is rolled back). ``fn`` may
run several times, so it should have no effects outside the transaction.

It works with any database whose ``transaction(sync=...)`` returns a
transaction usable as a context manager (both engines).
"""

from __future__ import annotations

import random
import time
from typing import Callable, TypeVar

from .errors import ConflictError, InvalidArgumentError, SnapshotEndedError

T = TypeVar("T")

#: Defaults: up to 10 runs; the first backoff up to 2 ms, doubling, at most 0.5 s.
ATTEMPTS = 10
BACKOFF = 0.002
MAX_BACKOFF = 0.5


def backoff_delay(attempt: int, backoff: float, max_backoff: float,
                  rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the
    first): uniformly random in [0, min(max_backoff, backoff * 2 ** (attempt - 1)))."""
    cap = min(max_backoff, backoff * 2.0 ** min(attempt - 1, 64))
    return rng() * cap


def _check_number(name: str, value: object, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if not value >= minimum:  # also refuses NaN
        raise InvalidArgumentError(f"{name} must be at least {minimum}, not {value!r}")
    return float(value)


def run_in_transaction(db, fn: Callable[..., T], *, attempts: int = ATTEMPTS, backoff: float = BACKOFF,
                       max_backoff: float = MAX_BACKOFF, sync: bool = False) -> T:
    """Call ``fn(txn)`` in a fresh transaction of ``db`` until its commit
    succeeds, at most ``attempts`` times (see the module docstring);
    return what ``fn`` returned."""
    if isinstance(attempts, bool) or not isinstance(attempts, int):
        raise TypeError(f"attempts must be an int, not {type(attempts).__name__}")
    if attempts < 1:
        raise InvalidArgumentError(f"attempts must be at least 1, not {attempts}")
    backoff = _check_number("backoff", backoff, 0.0)
    max_backoff = _check_number("max_backoff", max_backoff, 0.0)
    if not callable(fn):
        raise TypeError(f"fn must be callable, not {type(fn).__name__}")
    attempt = 1
    while True:
        try:
            with db.transaction(sync=sync) as txn:
                result = fn(txn)
            return result
        except (ConflictError, SnapshotEndedError):
            if attempt >= attempts:
                raise
        delay = backoff_delay(attempt, backoff, max_backoff)
        if delay > 0:
            time.sleep(delay)
        attempt += 1
