"""The lag-aware task assignor: who holds which partition active, standby or
warming up, from every instance's local shard offsets (pure; no Kafka).

Kafka Streams' high-availability assignor (KIP-441) in lsmkv's terms. A
partition is a task; an instance's copy of it is a local shard with an
applied offset (its active shard, a standby copy, or a shard left on disk
from before). An instance is *caught up* on a partition when its copy is
at most ``acceptable_recovery_lag`` records behind the partition's end (no
copy counts as offset 0: on a partition shorter than the acceptable lag
everyone is caught up). :func:`assign` decides, deterministically:

1. A balanced, sticky *target*: every instance gets ``P // N`` or
   ``P // N + 1`` partitions (the extra ones go to the instances that held
   most before); a partition stays with the instance that held it active
   while that instance has room; the others go, partition by partition, to
   the instance with room whose copy is least behind (then the least
   loaded, then the first by name).
2. The *active* owner: the target when it is caught up. Otherwise a caught
   up instance keeps the partition active -- the previous owner if it is
   one, else the least behind -- and the target warms up (below). If
   nobody is caught up, the least behind instance takes it (the previous
   owner, then the target on ties): waiting helps no one; a target that
   is not that instance warms up all the same.

How far behind a copy is: the partition's end (``ends``) minus the copy's
offset, or, for a copy its instance is consuming, the end that instance
saw when it reported the offset (``seen_ends``) minus the offset -- the
two are taken at the same moment, while an instance's report can be
seconds older than ``ends`` (the broker's join window), which under load
would make every copy, the active one included, look behind.
3. ``standby_replicas`` standbys per partition, never on its active owner,
   one per instance: a target that is not the active owner yet is a
   standby first (it is warming up anyway); then the instances with the
   fewest standbys so far, ties broken by ring distance after the active
   owner (the ring of instances by name); then standbys move from the
   most to the least loaded instances that may hold them until the spread
   is even (taken partition by partition, an instance that owns a later
   partition active was passed over for the earlier ones' standbys).
4. *Warm-ups*: a target that did not get its partition active and is not
   a standby of it gets a warm-up copy, at most ``max_warmup_replicas`` in
   the whole group. A warm-up is kept like a standby; a later (probing)
   rebalance gives the partition to the target once its copy is caught up.
   ``waiting`` lists, per instance, the partitions it is the target of but
   did not get: while any exist, the group needs probing rebalances.

Instances are ordered by ``name`` (their serving URL), then member id: the
same input gives the same output on any leader.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .instance_settings import DEFAULT_ACCEPTABLE_RECOVERY_LAG, DEFAULT_MAX_WARMUP_REPLICAS


@dataclass(frozen=True)
class MemberInfo:
    """What one instance reports: its name (serving URL), the offset of
    every local copy (partition -> applied offset, None: empty), the
    partitions it holds active now, and, for the copies it is consuming,
    the end of the partition its consumer saw when it took those offsets
    (partition -> end offset)."""

    name: str
    offsets: dict = field(default_factory=dict)
    active: frozenset = frozenset()
    seen_ends: dict = field(default_factory=dict)


@dataclass
class TaskAssignment:
    """One instance's share: partitions active, standby and warming up."""

    active: list = field(default_factory=list)
    standby: list = field(default_factory=list)
    warmup: list = field(default_factory=list)
    #: Partitions this instance is the balanced target of but does not get
    #: active yet (its copy is not caught up): it warms them up as a standby
    #: or a warm-up, or, warm-ups exhausted, waits for a later rebalance.
    waiting: list = field(default_factory=list)
    #: {partition: how far behind this instance's copy was} of its active partitions.
    lags: dict = field(default_factory=dict)


def _check(name: str, value, minimum: int = 0) -> None:
    if type(value) is not int or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, not {value!r}")


def assign(members: dict[str, MemberInfo], ends: dict[int, int], *, standby_replicas: int = 0,
           acceptable_recovery_lag: int = DEFAULT_ACCEPTABLE_RECOVERY_LAG,
           max_warmup_replicas: int = DEFAULT_MAX_WARMUP_REPLICAS) -> dict[str, TaskAssignment]:
    """{member id: TaskAssignment} for the partitions of ``ends``
    ({partition: end offset}) over ``members`` ({member id: MemberInfo})."""
    _check("standby_replicas", standby_replicas)
    _check("acceptable_recovery_lag", acceptable_recovery_lag)
    _check("max_warmup_replicas", max_warmup_replicas)
    out = {m: TaskAssignment() for m in members}
    if not members:
        return out
    ids = sorted(members, key=lambda m: (members[m].name, m))
    index = {m: i for i, m in enumerate(ids)}
    parts = sorted(ends)
    n = len(ids)

    def lag(m: str, p: int) -> int:
        # Against the end this instance saw with its offset, if it is
        # consuming the partition: its offset and that end were taken at
        # the same moment, while ``ends`` may be newer than its report.
        info = members[m]
        end = info.seen_ends.get(p)
        return max(0, (ends[p] if end is None else min(end, ends[p])) - (info.offsets.get(p) or 0))

    def caught_up(m: str, p: int) -> bool:
        return lag(m, p) <= acceptable_recovery_lag

    # The previous owner: a partition two instances claim (one has not
    # released it yet) belongs to the copy further ahead, then the first.
    previous: dict[int, str] = {}
    for p in parts:
        claimants = [m for m in ids if p in members[m].active]
        if claimants:
            previous[p] = min(claimants, key=lambda m: (lag(m, p), index[m]))

    # 1. The balanced, sticky target.
    held_before = {m: sum(1 for o in previous.values() if o == m) for m in ids}
    base, extra = divmod(len(parts), n)
    quota = {m: base + (1 if i < extra else 0)
             for i, m in enumerate(sorted(ids, key=lambda m: (-held_before[m], index[m])))}
    target: dict[int, str] = {}
    load = dict.fromkeys(ids, 0)
    for p in parts:
        o = previous.get(p)
        if o is not None and load[o] < quota[o]:
            target[p] = o
            load[o] += 1
    for p in parts:
        if p in target:
            continue
        m = min((m for m in ids if load[m] < quota[m]), key=lambda m: (lag(m, p), load[m], index[m]))
        target[p] = m
        load[m] += 1

    # 2. The active owner: the target if caught up, else a caught-up copy.
    active: dict[int, str] = {}
    active_load = dict.fromkeys(ids, 0)
    moving: list[int] = []
    for p in parts:
        t = target[p]
        if caught_up(t, p):
            a = t
        else:
            ready = [m for m in ids if caught_up(m, p)]
            if ready:
                o = previous.get(p)
                a = o if o in ready else min(ready, key=lambda m: (lag(m, p), active_load[m], index[m]))
                moving.append(p)
                out[t].waiting.append(p)
            else:
                a = min(ids, key=lambda m: (lag(m, p), m != previous.get(p), m != t, index[m]))
                if a != t:
                    moving.append(p)
                    out[t].waiting.append(p)
        active[p] = a
        active_load[a] += 1
        out[a].active.append(p)
        out[a].lags[p] = lag(a, p)

    # 3. Standbys: never on the active owner, spread evenly.
    standbys: dict[int, list[str]] = {}
    standby_load = dict.fromkeys(ids, 0)
    want = min(standby_replicas, n - 1)
    for p in parts:
        a = active[p]
        chosen: list[str] = []
        for _ in range(want):
            m = min((m for m in ids if m != a and m not in chosen),
                    key=lambda m: (not (m == target[p] and target[p] != a), standby_load[m],
                                   (index[m] - index[a]) % n, index[m]))
            chosen.append(m)
            standby_load[m] += 1
            out[m].standby.append(p)
        standbys[p] = chosen
    # The pass above goes partition by partition, so it can leave the
    # spread uneven (an instance that owns a later partition active cannot
    # take that partition's standby, and was passed over for the earlier
    # ones): move standbys from the most to the least loaded instances that
    # may hold them (not the active owner, not already a copy; a waiting
    # target keeps its copy) until no move narrows the spread.
    moved = True
    while moved:
        moved = False
        for most in sorted(ids, key=lambda m: (-standby_load[m], index[m])):
            for least in sorted(ids, key=lambda m: (standby_load[m], index[m])):
                if standby_load[most] - standby_load[least] <= 1:
                    break
                p = next((p for p in sorted(out[most].standby)
                          if least != active[p] and least not in standbys[p]
                          and not (most == target[p] and target[p] != active[p])), None)
                if p is None:
                    continue
                standbys[p][standbys[p].index(most)] = least
                out[most].standby.remove(p)
                out[least].standby.append(p)
                standby_load[most] -= 1
                standby_load[least] += 1
                moved = True
                break
            if moved:
                break

    # 4. Warm-ups for targets still catching up (bounded in the group).
    warmups = 0
    for p in moving:
        t = target[p]
        if t in standbys[p] or warmups >= max_warmup_replicas:
            continue
        out[t].warmup.append(p)
        warmups += 1
    for a in out.values():
        a.active.sort()
        a.standby.sort()
        a.warmup.sort()
        a.waiting.sort()
    return out
