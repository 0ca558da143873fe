"""The lag-aware assignor (lsmkv/kafka/assignor.py), pure: actives go to
caught-up copies, the balanced target warms up first, standbys never sit
on the active owner and spread evenly, warm-ups are bounded; plus
hypothesis invariants over random groups."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsmkv.kafka.scaleout.assignor import MemberInfo, assign


def _m(name, offsets=None, active=(), seen=None):
    return MemberInfo(name, dict(offsets or {}), frozenset(active), dict(seen or {}))


def _active_of(result):
    return {p: m for m, a in result.items() for p in a.active}


def test_all_caught_up_is_balanced_and_sticky():
    ends = {p: 1000 for p in range(6)}
    full = {p: 1000 for p in range(6)}
    members = {"a": _m("http://a", full, [0, 1, 2]), "b": _m("http://b", full, [3, 4, 5]),
               "c": _m("http://c", full)}
    got = assign(members, ends, acceptable_recovery_lag=10)
    assert sorted(len(a.active) for a in got.values()) == [2, 2, 2]
    owner = _active_of(got)
    assert sum(owner[p] == "a" for p in (0, 1, 2)) == 2 and sum(owner[p] == "b" for p in (3, 4, 5)) == 2
    assert not any(a.warmup for a in got.values())


def test_a_new_instance_warms_up_before_it_gets_partitions():
    ends = {p: 5000 for p in range(4)}
    full = {p: 5000 for p in range(4)}
    members = {"a": _m("http://a", full, [0, 1]), "b": _m("http://b", full, [2, 3]), "new": _m("http://c")}
    got = assign(members, ends, acceptable_recovery_lag=100, max_warmup_replicas=2)
    assert got["new"].active == [] and len(got["new"].warmup) == 1          # its one balanced partition
    assert set(_active_of(got).values()) == {"a", "b"}
    p = got["new"].warmup[0]
    # Its warm-up caught up: the next (probing) rebalance hands the partition over.
    caught = dict(members, new=_m("http://c", {p: 4950}))
    again = assign(caught, ends, acceptable_recovery_lag=100)
    assert again["new"].active == [p] and not any(a.warmup for a in again.values())


def test_warm_ups_are_bounded_in_the_group():
    ends = {p: 5000 for p in range(12)}
    full = {p: 5000 for p in range(12)}
    members = {"a": _m("http://a", full, range(12)), "x": _m("http://x"), "y": _m("http://y"),
               "z": _m("http://z")}
    got = assign(members, ends, acceptable_recovery_lag=100, max_warmup_replicas=2)
    assert sum(len(a.warmup) for a in got.values()) == 2
    assert got["a"].active == list(range(12))
    assert assign(members, ends, acceptable_recovery_lag=100, max_warmup_replicas=0)["x"].warmup == []


def test_a_dead_owners_partition_goes_to_its_standby_not_a_cold_instance():
    ends = {0: 9000, 1: 9000, 2: 9000}
    # "c" owned partition 2 and died; "b" kept a standby copy of it; "a" has none.
    members = {"a": _m("http://a", {0: 9000}, [0]), "b": _m("http://b", {1: 9000, 2: 8990}, [1])}
    got = assign(members, ends, standby_replicas=1, acceptable_recovery_lag=100)
    assert 2 in got["b"].active


def test_nobody_caught_up_the_most_caught_up_takes_it_and_the_target_warms_up():
    ends = {0: 100_000}
    members = {"a": _m("http://a", {0: 10}), "b": _m("http://b", {0: 50_000}), "c": _m("http://c")}
    got = assign(members, ends, acceptable_recovery_lag=100)
    assert got["b"].active == [0] and got["a"].warmup == [0] == got["a"].waiting


def test_a_copy_is_measured_against_the_end_it_saw():
    # Records keep arriving: the newcomer's warm-up is 20 behind the end it
    # saw when it reported, but 300 behind the end the owner reported a
    # moment later. Measured against its own end it is caught up.
    ends = {0: 5000, 1: 5000}
    owner = _m("http://a", {0: 4990, 1: 4990}, [0, 1], seen={0: 5000, 1: 5000})
    members = {"a": owner, "b": _m("http://b", {1: 4700}, seen={1: 4720})}
    assert assign(members, ends, acceptable_recovery_lag=100)["b"].active == [1]
    # Without the end it saw, it would look 300 behind and keep warming up.
    members = {"a": owner, "b": _m("http://b", {1: 4700})}
    got = assign(members, ends, acceptable_recovery_lag=100)
    assert got["b"].active == [] and got["b"].warmup == [1]


def test_standbys_prefer_the_target_and_never_sit_on_the_owner():
    ends = {p: 1000 for p in range(3)}
    full = {p: 1000 for p in range(3)}
    members = {"a": _m("http://a", full, [0, 1, 2]), "b": _m("http://b")}
    got = assign(members, ends, standby_replicas=1, acceptable_recovery_lag=10)
    moving = [p for p in range(3) if p not in got["b"].active]
    # "b" is the target of one partition: a standby of it (no warm-up needed), and of the rest.
    assert got["b"].standby == sorted(got["a"].active) and got["b"].warmup == []
    assert moving and got["a"].standby == []


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="acceptable_recovery_lag"):
        assign({}, {}, acceptable_recovery_lag=-1)
    with pytest.raises(ValueError, match="standby_replicas"):
        assign({}, {}, standby_replicas=1.5)


@st.composite
def groups(draw):
    partitions = draw(st.integers(1, 12))
    ends = {p: draw(st.integers(0, 2000)) for p in range(partitions)}
    n = draw(st.integers(1, 6))
    members = {}
    claimed = set()
    for i in range(n):
        offsets = {}
        for p in range(partitions):
            if draw(st.booleans()):
                offsets[p] = draw(st.integers(0, ends[p]))
        active = {p for p in offsets if p not in claimed and draw(st.booleans())}
        claimed |= active
        seen = {p: draw(st.integers(offsets[p], ends[p])) for p in offsets if draw(st.booleans())}
        members[f"m{i}"] = _m(f"http://i{draw(st.integers(0, 3))}-{i}", offsets, active, seen)
    return members, ends


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(groups(), st.integers(0, 3), st.integers(0, 500), st.integers(0, 3))
def test_invariants(group, replicas, acceptable, warmups):
    members, ends = group
    got = assign(members, ends, standby_replicas=replicas, acceptable_recovery_lag=acceptable,
                 max_warmup_replicas=warmups)
    assert got == assign(dict(reversed(list(members.items()))), ends, standby_replicas=replicas,
                         acceptable_recovery_lag=acceptable, max_warmup_replicas=warmups)   # deterministic
    assert sum(len(a.active) for a in got.values()) == len(ends)
    active = _active_of(got)
    assert set(active) == set(ends)                                      # every partition exactly one active
    n = len(members)
    for p in ends:
        copies = [m for m, a in got.items() if p in a.standby]
        assert active[p] not in copies and len(copies) == len(set(copies)) == min(replicas, n - 1)
        warm = [m for m, a in got.items() if p in a.warmup]
        assert active[p] not in warm and not set(warm) & set(copies)
        waiting = [m for m, x in got.items() if p in x.waiting]
        assert len(waiting) <= 1 and active[p] not in waiting and set(warm) <= set(waiting)
    assert sum(len(a.warmup) for a in got.values()) <= warmups

    def lag(m, p):
        seen = members[m].seen_ends.get(p)
        return max(0, (ends[p] if seen is None else min(seen, ends[p])) - (members[m].offsets.get(p) or 0))
    for p, m in active.items():
        assert got[m].lags[p] == lag(m, p)
        best = min(lag(x, p) for x in members)
        assert lag(m, p) <= acceptable or lag(m, p) == best                # caught up, or the most caught up
    if all(lag(m, p) <= acceptable for m in members for p in ends):
        loads = [len(a.active) for a in got.values()]
        assert max(loads) - min(loads) <= 1                              # balanced
        assert not any(a.warmup or a.waiting for a in got.values())
        spread = [len(a.standby) for a in got.values()]
        assert max(spread) - min(spread) <= 1 or replicas >= n - 1
