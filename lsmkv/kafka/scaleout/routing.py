"""Key routing: which partitions a read of a key asks.

A serving group's instances announce, for each partition they hold, the
placement tally of its shard (placement.py: which partitioner families put
every key the shard applied on that partition). :func:`choose_route` turns
the announcements of all partitions into a :class:`Route`:

* **routed by a partitioner** when one family fits the keys of every
  partition: then every key the group holds is on the partition that
  family names, and a read asks that partition's owner alone. Several
  fitting (few keys, or none yet): the partitioner every instance declared
  (``--partitioner``) if it is among them, else the first of
  ``consistent`` (librdkafka's default), ``murmur2`` (Kafka's Java
  default), ``fnv1a``: any of them names the right partition of every key
  held;
* **every owner asked** otherwise: a partition whose keys fit no family
  (explicit partitions, a custom partitioner), families that fit some
  partitions but not all (instances disagree), a partition with no
  announced owner or tally yet, a tally for another partition count, a
  declared ``random``. A key found in several partitions (explicit
  partitions can put one key in two) is answered from the first, in
  partition order, that a family fitting that partition's keys puts it
  on; if there is none, from the lowest-numbered partition. A partition
  its owner announces as still being restored (rebuilt from the topic or
  a changelog, a kept shard or a standby copy caught up) is never that
  first: its tally covers only what was replayed so far, and a fresh one
  fits every family until the records come. Its tally still counts for
  the route, as a live partition's does for records not applied yet.

Under ``consistent`` the empty key has no one partition
(``consistent_random`` places it at random): it is always looked up on
every owner.

:func:`partition_for` is Kafka's default (murmur2) placement, kept for
callers that know their topic was produced with it. This module is pure:
no Kafka, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..partitioners import FAMILIES, NAMES, murmur2, partition_of, to_positive

__all__ = ["Route", "accepted", "choose_route", "murmur2", "partition_for", "to_positive"]


def partition_for(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner (murmur2: the Java client's,
    librdkafka's ``murmur2_random``) gives a record keyed ``key`` in a topic
    of ``partitions`` partitions."""
    return partition_of("murmur2", key, partitions)


def accepted(summary: dict | None, partitions: int) -> frozenset[str] | None:
    """The families a read may route by as far as one partition's announced
    tally (placement.py's ``summary()``) tells: None when it tells nothing
    (no tally, another partition count, keys no tally covers and nothing
    declared)."""
    if not isinstance(summary, dict) or summary.get("partitions") != partitions:
        return None
    declared = summary.get("declared")
    if declared is not None and declared in NAMES and NAMES[declared] is None:
        return frozenset()                   # ``random``: a key may be on any partition
    fitting = frozenset(f for f in summary.get("fitting", ()) if f in FAMILIES)
    if summary.get("complete"):
        return fitting
    family = NAMES.get(declared) if declared else None
    if family is not None and family in fitting:
        return frozenset({family})           # a declaration no key contradicted
    return None


@dataclass(frozen=True)
class Route:
    """How reads of a group's keys go now."""

    partitions: int
    #: The family reads are routed by (None: every partition's owner is asked).
    partitioner: str | None
    #: Why, in words (``lookup()`` reports it).
    reason: str
    #: {partition: families its tally accepts (None: unknown)}: picks among
    #: partitions that all hold a key.
    accepts: dict = field(default_factory=dict, repr=False, compare=False)
    #: Partitions announced as still being restored: never picked.
    restoring: frozenset = field(default_factory=frozenset, repr=False, compare=False)

    def partition_of(self, key: bytes) -> int | None:
        """The one partition to ask for ``key`` (None: ask every owner)."""
        if self.partitioner is None:
            return None
        return partition_of(self.partitioner, key, self.partitions)

    def prefer(self, key: bytes, holders) -> int:
        """Of ``holders`` (partitions that all hold ``key``), the one to
        answer from: the first a family fitting its keys puts ``key`` on
        (one being restored is not), else the lowest."""
        holders = sorted(holders)
        for p in holders:
            if p in self.restoring:
                continue
            for family in self.accepts.get(p) or ():
                if partition_of(family, key, self.partitions) == p:
                    return p
        return holders[0]


def choose_route(partitions: int, summaries: dict[int, dict | None], restoring=frozenset()) -> Route:
    """The route given each partition's announced tally (``summaries``: a
    partition missing has no announced owner; None: its owner announced no
    tally); ``restoring``: the partitions whose owner announces them as
    still being restored (never preferred for a key several hold)."""
    accepts: dict[int, frozenset[str] | None] = {}
    unknown = []
    for p in range(partitions):
        if p not in summaries:
            unknown.append(f"partition {p} has no announced owner")
            accepts[p] = None
            continue
        summary = summaries[p]
        got = accepted(summary, partitions)
        accepts[p] = got
        if got is None:
            if not isinstance(summary, dict):
                unknown.append(f"partition {p}'s owner announced no placement tally")
            elif summary.get("partitions") != partitions:
                unknown.append(f"partition {p}'s keys were checked against {summary.get('partitions')} "
                               f"partitions, the topic has {partitions}")
            else:
                unknown.append(f"partition {p}'s shard holds keys no tally covers")

    restoring = frozenset(restoring)

    def every(why: str) -> Route:
        return Route(partitions, None, f"asked every owner: {why}", accepts, restoring)

    if unknown:
        return every("; ".join(unknown[:3]) + (f" (and {len(unknown) - 3} more)" if len(unknown) > 3 else ""))
    sets = [accepts[p] for p in range(partitions)]
    none_fit = [p for p in range(partitions) if not accepts[p]]
    if none_fit:
        declared_random = [p for p in none_fit if NAMES.get((summaries[p] or {}).get("declared") or "", "") is None]
        if declared_random:
            return every("the declared partitioner is random")
        return every(f"the keys of partition{'s' if len(none_fit) > 1 else ''} "
                     f"{', '.join(map(str, none_fit[:5]))}{' ...' if len(none_fit) > 5 else ''} fit no partitioner "
                     "(explicit partitions, or a custom partitioner)")
    common = frozenset.intersection(*sets) if sets else frozenset(FAMILIES)
    if not common:
        seen = sorted({", ".join(sorted(s)) for s in sets})
        return every(f"no partitioner fits every partition's keys (partitions fit {' / '.join(seen[:4])})")
    declared = {(summaries[p] or {}).get("declared") for p in range(partitions)}
    order = list(FAMILIES)
    if len(declared) == 1:
        name = next(iter(declared))
        if name and NAMES.get(name) in common:
            order.insert(0, NAMES[name])
    family = next(f for f in order if f in common)
    keys = sum((summaries[p] or {}).get("keys", 0) for p in range(partitions))
    also = sorted(common - {family})
    return Route(partitions, family, f"routed by {family}: the keys of every partition fit it ({keys} keys checked"
                 + (f"; {', '.join(also)} fit too" if also else "") + ")", accepts, restoring)
