"""The crash-test child's rule for a transaction's ConflictError: only an
ingest that overlapped the transaction in time, and whose file's key range
holds what the error names, explains it (any other conflict fails the cycle)."""

from __future__ import annotations

from lsmkv import ConflictError
from lsmkv.crashtest.child import _Ingests


def test_only_an_overlapping_ingest_over_the_conflicting_key_explains_a_conflict():
    ingests = _Ingests()
    done = ingests.start(b"m:0000100", b"s:0000900")
    ingests.finish(done)  # finished before the transaction began: explains nothing
    running = ingests.start(b"c:0000010", b"m:0000050")
    mark = ingests.mark()
    later = ingests.start(b"x:0000500", b"x:0000700")
    ingests.finish(running)
    ingests.finish(later)

    def conflict(key=None, span=None):
        return ConflictError("conflict", key=key, range=span, access="read" if key else "deleted")

    assert ingests.explain(mark, conflict(b"c:0000011"))  # running at the begin
    assert ingests.explain(mark, conflict(b"x:0000600"))  # started after it
    assert not ingests.explain(mark, conflict(b"s:0000200"))  # only in the finished one's range
    assert not ingests.explain(mark, conflict(b"a:0000001"))  # in no range
    assert ingests.explain(mark, conflict(span=(b"m:0000040", b"m:0000060")))
    assert not ingests.explain(mark, conflict(span=(b"s:0000100", b"s:0000200")))
