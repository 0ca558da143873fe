"""The anomalies snapshot isolation lets through and serializable
transactions must refuse -- write skew, and a phantom in a scanned range --
each played on anything with ``put``, ``get`` and ``transaction()`` (an
engine, or the transaction tests' in-memory stand-in for one), with the
checks that the second commit was refused."""

from __future__ import annotations

import pytest

from lsmkv.base.errors import ConflictError


def check_write_skew_is_refused(db, **transaction_options):
    """Two on-call doctors each see the other on call and go off call: under
    snapshot isolation both commit and nobody is on call. The second commit
    must fail on the key it read; nothing of it is written. Returns the
    refused transaction."""
    db.put(b"alice", b"on")
    db.put(b"bob", b"on")
    t1, t2 = db.transaction(**transaction_options), db.transaction(**transaction_options)
    for txn, me, other in ((t1, b"alice", b"bob"), (t2, b"bob", b"alice")):
        if txn.get(other) == b"on":
            txn.put(me, b"off")
    t1.commit()
    with pytest.raises(ConflictError) as raised:
        t2.commit()
    assert raised.value.key == b"alice" and raised.value.access == "read"
    assert t2.state == "failed"
    assert (db.get(b"alice"), db.get(b"bob")) == (b"off", b"on")  # nothing of t2 was written
    return t2


def check_a_phantom_in_a_scanned_range_is_refused(db) -> None:
    """Two transactions each count the members of a team (the keys under
    b"team:") and add one if it has fewer than two: the second commit must
    fail on the member the first added, in the range it scanned."""
    t1, t2 = db.transaction(), db.transaction()
    for txn, member in ((t1, b"team:x"), (t2, b"team:y")):
        if len(list(txn.scan(prefix=b"team:"))) < 2:
            txn.put(member, b"1")
    t1.commit()
    with pytest.raises(ConflictError) as raised:
        t2.commit()
    assert raised.value.key == b"team:x" and raised.value.access == "scanned"
    assert raised.value.range == (b"team:", b"team;")
