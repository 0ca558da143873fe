"""PartitionContexts: the partitions a loader holds, and who owned what when.

One :class:`~.partition.PartitionState` per assigned partition, by
``(topic, partition)`` (Decaton's PartitionContexts). The consumer thread
adds and removes states -- under the applier's lock, so the applier
(which reads :attr:`by_key` under that lock) never writes a partition that
is half added or already removed; any thread may read them (the query
server, the member announcements, the coordination thread), through
copies of the map taken here, which never change under the reader.

It also keeps the ownership log (``ownership``: when this loader was
assigned, released or lost which partition) and answers the questions
asked of a loader's partitions as a whole: what it holds, which shards
are still restoring and how far behind they are, their placement tallies.

This module holds state and answers questions about it; it never talks
to Kafka or the store.
"""

from __future__ import annotations

from .partition import ACTIVE, PartitionState


class PartitionContexts:
    """The partition states of one loader and its ownership log."""

    def __init__(self) -> None:
        #: {(topic, partition): PartitionState}; changed under the applier's lock.
        self.by_key: dict[tuple[str, int], PartitionState] = {}
        #: (monotonic time, "assign" | "release" | "lost", topic, partition): who owned what when.
        self.ownership: list[tuple[float, str, str, int]] = []

    # -- changes (the consumer thread, under the applier's lock) -----------------------------------

    def add(self, states: list[PartitionState]) -> None:
        for ps in states:
            self.by_key[ps.key] = ps

    def remove(self, states: list[PartitionState]) -> None:
        for ps in states:
            self.by_key.pop(ps.key, None)

    def record(self, when: float, event: str, states: list[PartitionState]) -> None:
        """Log ``event`` ("assign", "release" or "lost") of ``states`` at ``when``."""
        self.ownership.extend((when, event, ps.topic, ps.partition) for ps in states)

    # -- reads (any thread) --------------------------------------------------------------------------

    def get(self, key: tuple[str, int]) -> PartitionState | None:
        return self.by_key.get(key)

    def all(self) -> list[PartitionState]:
        return list(self.by_key.values())

    def active(self) -> list[PartitionState]:
        """The states held active (not being revoked or released)."""
        return [ps for ps in list(self.by_key.values()) if ps.state == ACTIVE]

    def of(self, partitions) -> list[PartitionState]:
        """The states of ``partitions`` (TopicPartitions) this loader holds."""
        by_key = self.by_key
        return [by_key[(tp.topic, tp.partition)] for tp in partitions if (tp.topic, tp.partition) in by_key]

    def held(self) -> dict[tuple[str, int], tuple[str, int | None]]:
        """{(topic, partition): (state, stored offset)} of every partition held."""
        return {key: (ps.state, ps.stored) for key, ps in list(self.by_key.items())}

    def restore_lag(self) -> dict[int, int | None]:
        """{partition: records still to restore (None: its end not observed
        yet)} of the active partitions whose shard is catching up. A
        partition stops restoring once its shard holds the end observed
        when it was assigned (end_offsets.py), never earlier: a read it
        answers from then on is at least as new as any its previous owner
        answered."""
        out = {}
        for ps in self.all():
            if ps.restoring and ps.state == ACTIVE:
                target = ps.target
                # A changelog restore's progress counts before the shard
                # stores an offset (its last batch sets it).
                held = max(ps.stored or 0, ps.restore_position or 0)
                if target is not None and held >= target:
                    if not ps.restore_pending:   # (pending: it may yet go back to where the changelog ends)
                        ps.restoring = False
                else:
                    out[ps.partition] = None if target is None else target - held
        return out

    def placements(self) -> dict[int, dict]:
        """{partition: its shard's placement tally summary (placement.py)} of
        the partitions held active whose shard keeps one."""
        return {ps.partition: ps.placement.summary() for ps in self.active() if ps.placement is not None}

    def pending(self, states: list[PartitionState]) -> bool:
        """Whether any of ``states`` has records fetched and not yet stored."""
        return any(ps.window.pending for ps in states)
