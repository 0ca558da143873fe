"""The changelog's batch rules on their own (restore.Batches, no broker):
batch headers parsed or refused; in one writer's run a batch applies once
all its records are read or the run's next batch begins, and one cut short
is dropped; when runs interleave, finished batches apply in the order they
finish, one ending below the highest is skipped; what the resume check
reads from a tail never ends above what a full restore reads."""

from __future__ import annotations

import pytest

from lsmkv.kafka.scaleout.changelog import batch_header, parse_header
from lsmkv.kafka.scaleout.restore import Batches, NotAChangelog


def _feed(batches, records):
    """Batches.add over [(header, key, value), ...]: the records to apply, in order."""
    out = []
    for header, key, value in records:
        out.extend(batches.add(header, key, value))
    return out


def test_the_batch_rules():
    H = batch_header
    assert parse_header(H(5, 250, "r1", 3, 7)) == (5, 250, b"r1", 3, 7)
    for bad in (b"250", b"5 250 r1 3", b"x 250 r1 3 7", b"5 250 r1 0 7", b"5 250 r1 3 0", b"300 250 r1 3 7",
                b"5 250  3 7", b"-1 250 r 3 7", "5 250 r1 3 7", None):
        assert parse_header(bad) is None, bad
    with pytest.raises(NotAChangelog):
        Batches().add(b"15", b"k", b"v")

    # One run: a batch applies once all its records are read, or once the
    # run's next batch begins (compaction removed one of its records); a
    # batch cut short is dropped at the end.
    one = Batches()
    assert _feed(one, []) == [] and one.highest is None
    assert _feed(one, [(H(0, 5, "a", 1, 2), b"k1", b"1"), (H(0, 5, "a", 1, 2), b"k2", None)]) == [
        (b"k1", b"1"), (b"k2", None)]
    assert one.highest == 5
    got = _feed(one, [(H(5, 20, "a", 2, 3), b"k1", b"2"), (H(5, 20, "a", 2, 3), b"k3", b"2"),
                      (H(20, 30, "a", 3, 1), b"k4", b"3"), (H(30, 40, "a", 4, 4), b"k1", b"CUT")])
    assert got == [(b"k1", b"2"), (b"k3", b"2"), (b"k4", b"3")] and one.highest == 30
    one.close()
    assert (one.highest, one.skipped, one.incomplete) == (30, 1, 1)

    # Two runs interleave (n took the partition over at 100 while a still
    # wrote): finished batches apply in the order they finish, one ending
    # below the highest is skipped (n2), one cut short (a3) never applies;
    # n4 lost a record to compaction and is finished by m's first batch,
    # which starts at its end; q started lower, from a shard of its own.
    records = [(H(0, 100, "a", 1, 2), b"x", b"a1"), (H(0, 100, "a", 1, 2), b"y", b"a1"),
               (H(100, 200, "a", 2, 3), b"x", b"a2"), (H(100, 150, "n", 1, 1), b"x", b"n1"),
               (H(100, 200, "a", 2, 3), b"y", b"a2"), (H(100, 200, "a", 2, 3), b"z", b"a2"),
               (H(150, 180, "n", 2, 1), b"y", b"n2"), (H(200, 260, "a", 3, 4), b"x", b"a3"),
               (H(180, 260, "n", 3, 1), b"z", b"n3"), (H(260, 300, "n", 4, 2), b"y", b"n4"),
               (H(300, 320, "m", 1, 1), b"x", b"m1"), (H(250, 280, "q", 1, 1), b"x", b"q1"),
               (H(280, 330, "q", 2, 1), b"y", b"q2")]
    runs = Batches()
    assert _feed(runs, records) == [(b"x", b"a1"), (b"y", b"a1"), (b"x", b"n1"), (b"x", b"a2"), (b"y", b"a2"),
                                    (b"z", b"a2"), (b"z", b"n3"), (b"y", b"n4"), (b"x", b"m1"), (b"y", b"q2")]
    runs.close()
    assert (runs.highest, runs.skipped, runs.incomplete) == (330, 3, 1)


def test_the_end_read_from_a_tail_is_never_above_the_end_of_the_whole():
    # What the resume check reads (the last records) against a full restore,
    # after every prefix of the sequence above, from every place in it.
    H = batch_header
    headers = [H(0, 100, "a", 1, 2), H(0, 100, "a", 1, 2), H(100, 200, "a", 2, 3), H(100, 150, "n", 1, 1),
               H(100, 200, "a", 2, 3), H(100, 200, "a", 2, 3), H(150, 180, "n", 2, 1), H(200, 260, "a", 3, 4),
               H(180, 260, "n", 3, 1), H(260, 300, "n", 4, 2), H(300, 320, "m", 1, 1), H(250, 280, "q", 1, 1),
               H(280, 330, "q", 2, 1)]
    for end in range(1, len(headers) + 1):
        whole = Batches()
        for h in headers[:end]:
            whole.add(h, b"k", b"v")
        for begin in range(end):
            tail = Batches()
            for h in headers[begin:end]:
                tail.add(h, b"k", b"v")
            assert tail.highest is None or tail.highest <= whole.highest, (begin, end)
