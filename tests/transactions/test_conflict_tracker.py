"""ConflictTracker (lsmkv/base/conflicts.py): which commits since a
transaction's ticket conflict with what it read, wrote, scanned and
deleted -- point, write-write, range and phantom cases, other commits'
deleted ranges, the batches ahead in a group -- checked also against a
brute-force model over random histories (both ways validation can go:
looking up the transaction's keys, or walking the log); that it holds
nothing once no transaction is open, and only the writes since the oldest
open one otherwise; and that begin/end from many threads leave it
consistent, end() never blocking."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings, strategies as st

from lsmkv.base.conflicts import ConflictTracker, PendingWrites
from lsmkv.base.errors import ConflictError, LsmkvError


def begun_then_written(*keys: bytes, ranges=()):
    """A tracker with one transaction begun, then one commit of ``keys``."""
    tracker = ConflictTracker()
    ticket = tracker.begin()
    tracker.record(keys, ranges)
    return tracker, ticket


# -- points --------------------------------------------------------------------------------------

def test_a_key_read_and_written_since_the_ticket_conflicts():
    tracker, ticket = begun_then_written(b"acct:1")
    conflict = tracker.validate(ticket, {b"acct:1"}, set())
    assert (conflict.access, conflict.key) == ("read", b"acct:1")
    error = conflict.error()
    assert isinstance(error, ConflictError) and isinstance(error, LsmkvError)
    assert error.key == b"acct:1" and error.access == "read"
    assert "b'acct:1'" in str(error) and "read" in str(error) and "nothing of the transaction was written" in str(error)


def test_conflict_error_is_one_class_for_both_engines():
    import btree
    import lsmkv

    assert lsmkv.ConflictError is btree.ConflictError is ConflictError
    assert "ConflictError" in lsmkv.__all__ and "ConflictError" in btree.__all__


def test_a_blind_write_to_a_key_another_commit_wrote_conflicts():
    tracker, ticket = begun_then_written(b"k")
    conflict = tracker.validate(ticket, set(), {b"k"})
    assert (conflict.access, conflict.key) == ("written", b"k")
    assert "also wrote" in str(conflict)


def test_writes_before_the_ticket_and_to_other_keys_do_not_conflict():
    tracker = ConflictTracker()
    other = tracker.begin()  # keeps the tracker recording
    tracker.record([b"a", b"b"])
    ticket = tracker.begin()
    tracker.record([b"c"])
    assert tracker.validate(ticket, {b"a", b"b"}, {b"a", b"d"}) is None
    assert tracker.validate(other, {b"a"}, set()).key == b"a"


def test_long_keys_are_shortened_and_escaped_in_the_message():
    key = b"\x00\xff" + b"x" * 500
    tracker, ticket = begun_then_written(key)
    message = str(tracker.validate(ticket, {key}, set()).error())
    assert "(502 bytes)" in message and "\\x00\\xff" in message and len(message) < 400


# -- ranges and phantoms ---------------------------------------------------------------------------

def test_a_key_written_inside_a_scanned_range_is_a_phantom_conflict():
    tracker, ticket = begun_then_written(b"user:7")  # a key the scan never saw: it did not exist
    conflict = tracker.validate(ticket, set(), {b"count"}, [(b"user:", b"user;")])
    assert (conflict.access, conflict.key, conflict.range) == ("scanned", b"user:7", (b"user:", b"user;"))
    assert conflict.error().range == (b"user:", b"user;")
    assert "inside the range [b'user:', b'user;')" in str(conflict)


@pytest.mark.parametrize("written, scanned, conflicts", [
    (b"b", (b"b", b"d"), True),        # the low end is inclusive
    (b"d", (b"b", b"d"), False),       # the high end is exclusive
    (b"a", (b"b", b"d"), False),
    (b"a", (None, b"b"), True),        # open low
    (b"zzz", (b"x", None), True),      # open high
    (b"", (None, None), True),         # the whole key space
    (b"c", (b"d", b"b"), False),       # an empty range reads nothing
])
def test_range_ends(written, scanned, conflicts):
    tracker, ticket = begun_then_written(written)
    assert (tracker.validate(ticket, set(), set(), [scanned]) is not None) == conflicts


def test_a_range_another_commit_deleted_conflicts_with_keys_and_ranges_inside_it():
    tracker, ticket = begun_then_written(ranges=[(b"m", b"p")])
    read = tracker.validate(ticket, {b"n"}, set())
    assert (read.access, read.key, read.by_range) == ("read", b"n", (b"m", b"p"))
    assert "deleted the range [b'm', b'p')" in str(read)
    assert tracker.validate(ticket, set(), {b"o"}).access == "written"
    scanned = tracker.validate(ticket, set(), set(), [(b"a", b"mm")])
    assert (scanned.access, scanned.range, scanned.by_range) == ("scanned", (b"a", b"mm"), (b"m", b"p"))
    deleted = tracker.validate(ticket, set(), set(), written_ranges=[(b"o", None)])
    assert deleted.access == "deleted"
    assert tracker.validate(ticket, {b"p", b"a"}, {b"l"}, [(b"p", None)], written_ranges=[(None, b"m")]) is None


def test_a_range_the_transaction_deletes_conflicts_with_keys_written_inside_it():
    tracker, ticket = begun_then_written(b"log:5")
    conflict = tracker.validate(ticket, set(), set(), written_ranges=[(b"log:", b"log;")])
    assert (conflict.access, conflict.key) == ("deleted", b"log:5")
    assert "this transaction deletes" in str(conflict)


# -- the batches ahead in a group ----------------------------------------------------------------

def test_batches_ahead_in_the_same_group_conflict_though_not_recorded_yet():
    tracker = ConflictTracker()
    ticket = tracker.begin()
    pending = PendingWrites()
    assert tracker.validate(ticket, {b"a"}, {b"b"}, [(b"c", b"e")], pending=pending) is None
    pending.add([b"x"])
    assert tracker.validate(ticket, {b"a"}, {b"b"}, [(b"c", b"e")], pending=pending) is None
    pending.add([b"d"])
    assert tracker.validate(ticket, {b"a"}, {b"b"}, [(b"c", b"e")], pending=pending).access == "scanned"
    ahead = PendingWrites()
    ahead.add([], [(b"a", b"b")])
    assert tracker.validate(ticket, {b"a"}, set(), pending=ahead).by_range == (b"a", b"b")


# -- validation against a brute-force model ----------------------------------------------------------

KEYS = [b"%c" % c for c in b"abcdefghijkl"]
key_strategy = st.sampled_from(KEYS)
range_strategy = st.tuples(st.none() | key_strategy, st.none() | key_strategy)
# Small commits, and long ones of a few keys repeated: the log since a
# ticket is at times longer than what the transaction touched (its keys
# are looked up), at times shorter (the log is walked).
history = st.lists(st.one_of(
    st.tuples(st.just("begin")),
    st.tuples(st.just("begin")),
    st.tuples(st.just("end"), st.integers(0, 20)),
    st.tuples(st.just("record"), st.lists(key_strategy, max_size=2), st.lists(range_strategy, max_size=1)),
    st.tuples(st.just("record"), st.lists(st.sampled_from(KEYS[:3]), min_size=4, max_size=16), st.just([])),
), max_size=30)
footprint = st.tuples(st.sets(key_strategy, max_size=4), st.sets(key_strategy, max_size=2),
                      st.lists(range_strategy, max_size=2), st.lists(range_strategy, max_size=1))


def _inside(key, rng):
    lo, hi = rng
    return (lo is None or key >= lo) and (hi is None or key < hi)


def _overlap(a, b):
    (alo, ahi), (blo, bhi) = a, b
    lo = max(x for x in (alo, blo, b"") if x is not None)
    his = [x for x in (ahi, bhi) if x is not None]
    return not his or lo < min(his)


def model_conflicts(commits, reads, writes, scanned, deleted) -> bool:
    """Brute force: does any of ``commits`` (keys, ranges) touch the footprint?"""
    for keys, ranges in commits:
        for key in keys:
            if key in reads or key in writes or any(_inside(key, r) for r in [*scanned, *deleted]):
                return True
        for rng in ranges:
            if any(_inside(k, rng) for k in [*reads, *writes]) or any(_overlap(rng, r) for r in [*scanned, *deleted]):
                return True
    return False


def genuine(conflict, commits) -> bool:
    """The conflict names a key some commit wrote, or a range overlapping one some commit deleted."""
    if conflict.by_range is not None:
        return any(_overlap(conflict.by_range, rng) for _, ranges in commits for rng in ranges)
    return any(conflict.key in keys for keys, _ in commits)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)
@given(steps=history, final=footprint)
def test_validation_agrees_with_a_brute_force_model(steps, final):
    """After each step, every open ticket is validated against the model."""
    tracker = ConflictTracker()
    tickets = []   # [ticket, index into `recorded` when it began]
    recorded = []  # every commit recorded while a transaction was open
    reads, writes, scanned, deleted = final
    for step in steps:
        if step[0] == "begin":
            tickets.append([tracker.begin(), len(recorded)])
        elif step[0] == "end" and tickets:
            tracker.end(tickets.pop(step[1] % len(tickets))[0])
        elif step[0] == "record":
            if tracker.active:
                tracker.record(step[1], step[2])
                recorded.append((step[1], step[2]))
        for ticket, since in tickets:
            commits = recorded[since:]
            conflict = tracker.validate(ticket, reads, writes, scanned, written_ranges=deleted)
            assert (conflict is not None) == model_conflicts(commits, reads, writes, scanned, deleted)
            if conflict is not None:
                assert genuine(conflict, commits), conflict


def test_both_ways_of_validating_find_the_conflict():
    """Few keys touched and many written since (each key looked up), and
    many touched and few written since (the log walked)."""
    tracker = ConflictTracker()
    few = tracker.begin()
    many = tracker.begin()
    tracker.record([b"k%05d" % i for i in range(2000)])
    reads = {b"r%05d" % i for i in range(5000)}
    assert tracker.validate(few, {b"k01234"}, set()).key == b"k01234"
    assert tracker.validate(few, set(), set(), [(b"k01000", b"k01001")]).key == b"k01000"
    assert tracker.validate(many, reads | {b"k00007"}, set()).key == b"k00007"
    assert tracker.validate(many, reads, set()) is None
    late = tracker.begin()
    tracker.record([b"r00042"])
    assert tracker.validate(late, reads, set()).key == b"r00042"
    assert tracker.validate(late, set(), set(), [(b"r", b"s")]).key == b"r00042"


def test_the_commit_just_before_a_ticket_is_not_after_it_either_way():
    """Kept for an older open transaction, the commit numbered as the
    ticket's start came before it; the ends of a range hold in both ways."""
    tracker = ConflictTracker()
    tracker.begin()  # older: keeps the commit below in the tracker
    tracker.record([b"a", b"m"])
    ticket = tracker.begin()
    tracker.record([b"b"])  # short log since: walked
    assert tracker.validate(ticket, {b"a", b"x"}, {b"m"}, [(b"a", b"b"), (b"l", b"n")]) is None
    tracker.record([b"c"] * 50)  # long log since: each key and range looked up
    assert tracker.validate(ticket, {b"a", b"x"}, {b"m"}, [(b"a", b"b"), (b"l", b"n")]) is None
    assert tracker.validate(ticket, set(), set(), [(b"b", b"c")]).key == b"b"  # the low end, looked up
    assert tracker.validate(ticket, set(), set(), [(b"a", b"b")]) is None      # the high end
    late = tracker.begin()
    tracker.record([b"k"])
    assert tracker.validate(late, set(), set(), [(b"k", b"l")]).key == b"k"   # the low end, walked
    assert tracker.validate(late, set(), set(), [(b"j", b"k")]) is None


# -- what it holds ---------------------------------------------------------------------------------

def test_it_holds_nothing_without_open_transactions():
    tracker = ConflictTracker()
    assert not tracker.active
    tracker.record([b"a"])  # no transaction open: nothing to keep
    assert tracker.tracked_keys == 0 and tracker.tracked_commits == 0
    first, second = tracker.begin(), tracker.begin()
    assert tracker.active and tracker.open_transactions == 2
    for i in range(100):
        tracker.record([b"k%d" % i], [(b"x", b"y")])
    assert tracker.tracked_keys == 100 and tracker.tracked_commits == 200
    tracker.end(first)
    tracker.end(first)  # ending twice changes nothing
    assert tracker.active and tracker.open_transactions == 1 and tracker.tracked_keys == 100
    tracker.end(second)
    assert not tracker.active and tracker.open_transactions == 0
    assert tracker.tracked_keys == 0 and tracker.tracked_commits == 0
    with pytest.raises(ValueError, match="already ended"):
        tracker.validate(second, set(), set())


def test_it_forgets_the_writes_older_than_the_oldest_open_transaction():
    tracker = ConflictTracker()
    old = tracker.begin()
    tracker.record([b"a", b"b"])
    middle = tracker.begin()
    tracker.record([b"b", b"c"], [(b"p", b"q")])
    young = tracker.begin()
    tracker.record([b"d"])
    assert tracker.tracked_keys == 4
    tracker.end(old)  # b"a" was written before every open ticket; b"b" again after `middle` began
    assert tracker.tracked_keys == 3 and tracker.tracked_commits == 3
    assert tracker.validate(middle, {b"a", b"b"}, set()).key == b"b"
    tracker.end(middle)
    assert tracker.tracked_keys == 1 and tracker.tracked_commits == 1
    assert tracker.validate(young, {b"a", b"b", b"c", b"n"}, set(), [(b"p", b"q")]) is None
    assert tracker.validate(young, {b"d"}, set()).key == b"d"
    tracker.end(young)
    assert tracker.tracked_keys == 0


def test_begin_and_end_from_many_threads_while_commits_are_recorded():
    tracker = ConflictTracker()
    keeper = tracker.begin()
    problems = []
    go = threading.Barrier(5)

    def transactions(n):
        go.wait()
        for i in range(400):
            ticket = tracker.begin()
            if i % 7 == 0:
                try:
                    tracker.validate(ticket, {b"k%d" % n}, set())
                except BaseException as exc:  # pragma: no cover - reported below
                    problems.append(exc)
            tracker.end(ticket)

    def writer():
        go.wait()
        for i in range(2000):
            if tracker.active:
                tracker.record([b"k%d" % (i % 9)])

    threads = [threading.Thread(target=transactions, args=(n,)) for n in range(4)] + [threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not problems
    assert tracker.open_transactions == 1 and tracker.active
    tracker.end(keeper)
    assert tracker.open_transactions == 0 and not tracker.active and tracker.tracked_keys == 0


def test_end_inside_the_tracker_on_the_same_thread_does_not_block():
    """A transaction dropped while its thread is inside the tracker (a
    garbage collector's finalizer runs wherever it runs) is ended as the
    tracker lets go, not by waiting for it."""
    tracker = ConflictTracker()
    dropped = tracker.begin()
    ticket = tracker.begin()
    tracker.record([b"a"])

    class ReadsThatDropATransaction(set):
        def __contains__(self, key):
            tracker.end(dropped)  # the finalizer, inside validate()'s locked work
            return super().__contains__(key)

    assert tracker.validate(ticket, ReadsThatDropATransaction({b"z"}), set()) is None
    assert tracker.open_transactions == 1 and not dropped.open
    tracker.end(ticket)
    assert not tracker.active and tracker.tracked_keys == 0
