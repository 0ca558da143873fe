"""PlacementTally: which partitioners agree with where a partition's keys are.

A read routed by a partitioner is exact only if the topic's producers used
that partitioner for every record: a store answering "absent" for a key it
holds in another partition is wrong. So a shard checks every key it
applies: for each partitioner family (partitioners.py) still in question,
does it put this key on this partition? One key it does not rules the
family out for this partition, for good. What the shard holds then decides
routing (routing.py): a family that no partition's keys ruled out puts
every key the group holds where it is.

Counters, not keys: ``keys`` applied (puts and deletes, as the shard stores
them: a processor's keys, not the source record's), and per family the keys
that did not fit (only counted until it is ruled out: from then on it is
not computed; a declared partitioner is always computed, its misfits are
the ``contradicting`` count). Under ``consistent`` the empty key has no one
partition (``consistent_random`` places it at random): it is not evidence
and routing asks every owner for it.

The tally lives in the shard's metadata, entry ``placement:T:P``,
written in the same write batch as the shard's offset (``through``: the
offset it covers), so it always describes exactly what the shard holds,
across crashes. Loading it (:meth:`load`) trusts it only if ``through``
equals the shard's stored offset (then it covers every record the shard
applied); a shard without an offset starts a fresh, complete tally; any
other shard (written by a writer that kept no tally) gets an *incomplete*
one, which routes nothing except a declared partitioner nobody
contradicted. A tally made for another partition count (partitions were
added: keys placed before stay where they were) is incomplete too.

Declaring a partitioner (``--partitioner NAME``) does not skip the check:
a key that contradicts it is counted (``contradicting``), logged once per
partition per run, and routing then goes by what the keys leave (often:
ask every owner). A declaration is trusted alone only for a shard whose
tally is incomplete. ``random`` declares that keys can be on any partition:
nothing is routed.

This module owns the counting and its encoding; writers (applier.py,
restore.py, standby.py) call :meth:`observe` with what they write and
:meth:`persist` into the same batch. It never talks to Kafka.
"""

from __future__ import annotations

import json
import logging

from lsmkv.base.errors import CorruptionError
from lsmkv.base.meta import MAX_META_NAME

from ..partitioners import FAMILIES, NAMES, partitions_of

log = logging.getLogger(__name__)

PREFIX = "placement:"
FORMAT = 1


def placement_meta_name(topic: str, partition: int) -> str | None:
    """The metadata entry holding ``topic``/``partition``'s tally (not under
    ``kafka:``, which names offsets: offsets.py); None if the name would be
    too long (a topic name near Kafka's limit: such a shard keeps no tally)."""
    name = f"{PREFIX}{topic}:{partition}"
    return name if len(name.encode()) <= MAX_META_NAME else None


class PlacementTally:
    """Counts, for partition ``partition`` of a topic of ``partitions``
    partitions, which partitioner families fit the keys its shard applied."""

    __slots__ = ("topic", "partition", "partitions", "declared", "complete", "keys", "misfits", "empty",
                 "contradicting", "meta_name", "_warned")

    def __init__(self, topic: str, partition: int, partitions: int | None, *, declared: str | None = None,
                 complete: bool = True) -> None:
        if declared is not None and declared not in NAMES:
            raise ValueError(f"unknown partitioner {declared!r}; librdkafka's are {', '.join(NAMES)}")
        self.topic = topic
        self.partition = partition
        #: The partition count the keys are checked against (None: unknown, nothing is checked).
        self.partitions = partitions
        #: The partitioner declared for the topic (librdkafka's name), or None.
        self.declared = declared
        #: Whether the tally covers every key the shard holds.
        self.complete = complete and partitions is not None
        #: Keys applied (puts and deletes).
        self.keys = 0
        #: {family: keys it did not put on this partition} (> 0: ruled out;
        #: counting stops at the first, except for the declared family).
        self.misfits = {f: 0 for f in FAMILIES}
        #: Empty keys (no evidence under ``consistent``).
        self.empty = 0
        #: Keys the declared partitioner puts elsewhere.
        self.contradicting = 0
        self.meta_name = placement_meta_name(topic, partition)
        self._warned = False

    # -- loading ---------------------------------------------------------------------------------

    @classmethod
    def load(cls, db, topic: str, partition: int, partitions: int | None, stored: int | None, *,
             declared: str | None = None, report: bool = True) -> "PlacementTally":
        """The tally of ``db`` (partition ``partition``'s shard, whose stored
        offset is ``stored``), as its metadata holds it if that covers the
        shard exactly, else fresh (a shard without offset) or incomplete
        (logged, with ``report``)."""
        tally = cls(topic, partition, partitions, declared=declared)
        if stored is None:
            return tally
        name = tally.meta_name
        raw = None if name is None else db.get_meta(name)
        try:
            doc = None if raw is None else _decode(raw, name)
        except CorruptionError as exc:
            log.error("%s[%d]: %s; counting it as no tally", topic, partition, exc)
            doc = None
        if doc is None or doc["through"] != stored or doc["partitions"] != partitions:
            tally.complete = False
            why = ("no tally" if doc is None else f"a tally of {doc['partitions']} partitions"
                   if doc["partitions"] != partitions else f"a tally through offset {doc['through']}")
            log.log(logging.INFO if report else logging.DEBUG, "%s[%d]: the shard (offset %d) has %s: which "
                    "partitioner placed its keys is not known (reads of this partition ask every owner%s)", topic,
                    partition, stored, why, f", or go by the declared {declared}" if declared else "")
        else:
            tally.complete = bool(doc["complete"])
        if doc is not None:
            tally.keys = doc["keys"]
            tally.empty = doc.get("empty", 0)
            for f in FAMILIES:
                tally.misfits[f] = doc["misfits"].get(f, 0)
        return tally

    def reset(self) -> None:
        """Forget everything counted (the shard was emptied)."""
        self.keys = self.empty = self.contradicting = 0
        self.misfits = {f: 0 for f in FAMILIES}
        self.complete = self.partitions is not None

    # -- counting --------------------------------------------------------------------------------

    def observe(self, ops_lists) -> None:
        """Count the keys of ``ops_lists`` (lists of (key, value) store
        operations) as applied to this partition's shard."""
        keys = [key for ops in ops_lists for key, _ in ops]
        self.observe_keys(keys)

    def observe_keys(self, keys: list[bytes]) -> None:
        if not keys:
            return
        self.keys += len(keys)
        n = self.partitions
        if n is None:
            return
        declared = NAMES.get(self.declared) if self.declared else None
        for family in FAMILIES:
            if self.misfits[family] and family != declared:
                continue          # ruled out already: not computed again
            placed = partitions_of(family, keys, n)
            if family == "consistent":
                evidence = placed >= 0
                self.empty += len(keys) - int(evidence.sum())
                misfits = int(((placed != self.partition) & evidence).sum())
            else:
                misfits = int((placed != self.partition).sum())
            self.misfits[family] += misfits
            if family == declared and misfits:
                self.contradicting += misfits
                if not self._warned:
                    self._warned = True
                    log.warning("%s[%d]: %d of %d keys applied are not where the declared partitioner %s puts "
                                "them (explicit partitions, or another partitioner?); reads of this partition go "
                                "by the keys, not the declaration", self.topic, self.partition, misfits,
                                len(keys), self.declared)

    # -- what routing reads ----------------------------------------------------------------------

    def fitting(self) -> list[str]:
        """Families that put every key counted on this partition."""
        return [f for f in FAMILIES if not self.misfits[f]]

    def summary(self) -> dict:
        """What an instance announces for this partition (routing.py reads it)."""
        return {"partitions": self.partitions, "complete": self.complete, "keys": self.keys,
                "fitting": self.fitting(), "declared": self.declared, "contradicting": self.contradicting,
                "empty": self.empty}

    # -- persisting --------------------------------------------------------------------------------

    def persist(self, batch, through: int) -> None:
        """Put the tally, covering the shard up to offset ``through``, into
        ``batch`` (the write batch that sets the shard's offset to it)."""
        if self.meta_name is None:
            return
        doc = {"format": FORMAT, "through": through, "partitions": self.partitions, "complete": self.complete,
               "keys": self.keys, "empty": self.empty, "misfits": self.misfits}
        batch.set_meta(self.meta_name, json.dumps(doc, separators=(",", ":")).encode())


def _decode(raw: bytes, name: str) -> dict:
    try:
        doc = json.loads(raw)
        if doc.get("format") != FORMAT:
            raise ValueError(f"format {doc.get('format')!r}")
        if not isinstance(doc["through"], int) or not isinstance(doc["keys"], int) \
                or not isinstance(doc["misfits"], dict) or not isinstance(doc["complete"], bool) \
                or not all(type(v) is int for v in doc["misfits"].values()):
            raise ValueError("a field of the wrong type")
        return doc
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptionError(f"metadata entry {name!r} holds {raw[:80]!r}, not a placement tally ({exc})") \
            from None
