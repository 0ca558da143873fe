"""What a running loader reports: counters, per-partition gauges, rates.

:class:`LoaderMetrics` is written by the loader's threads (plain integer
updates under the GIL: a reader may see one a moment stale, never torn)
and read as a plain dict by :meth:`LoaderMetrics.snapshot`, which the
CLI's live display polls and the final summary prints. Per partition:
the offset the store holds (``stored``), the next offset to fetch, the
end (the broker's watermark as fetches report it, or further if records
past it were fetched), ``lag`` = end - stored, the records in the
partition's window (``pending``) and the most it held (``peak_pending``),
whether it is paused and how often it was, retries, dead letters and
stale fetches dropped. Totals: records fetched and stored, store
writes, records/s over the last interval and overall, retries, dead
letters, pauses, Kafka commits and their latency, rebalances, stale
fetches dropped, and with ``--changelog`` the records written to the
changelog and restored from it (in all and per partition).

This module never prints and never talks to Kafka or the store.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class PartitionMetrics:
    topic: str
    partition: int
    #: Where fetching started after the assignment (the store's offset, else the group's).
    start: int | None = None
    #: Offset of the first record fetched after the assignment.
    first_fetched: int | None = None
    fetched: int = 0
    next_fetch: int | None = None
    stored: int | None = None
    end: int | None = None
    #: The end observed at assignment (``until_caught_up``).
    target: int | None = None
    pending: int = 0
    #: The most records the window held at once (flow control's high-water mark).
    peak_pending: int = 0
    paused: bool = False
    pauses: int = 0
    retries: int = 0
    dead_letters: int = 0
    caught_up: bool = False
    #: Records restored into its shard from the changelog (``--changelog``),
    #: and the seconds its last changelog check and restore took.
    restored: int = 0
    restore_seconds: float | None = None
    #: Records fetched from below the partition's position (a fetch from
    #: before a seek, or a record delivered again), dropped unregistered.
    stale: int = 0

    @property
    def lag(self) -> int | None:
        if self.end is None or self.stored is None:
            return None
        return max(0, self.end - self.stored)


@dataclass
class LoaderMetrics:
    started: float = field(default_factory=time.monotonic)
    #: When the first partitions were assigned (the group join is over).
    assigned_at: float | None = None
    #: When the run ended (None while it runs).
    ended: float | None = None
    fetched: int = 0
    stored: int = 0
    skipped: int = 0
    writes: int = 0
    retries: int = 0
    dead_letters: int = 0
    pauses: int = 0
    commits: int = 0
    commit_failures: int = 0
    commit_latency_ms_last: float = 0.0
    commit_latency_ms_total: float = 0.0
    rebalances: int = 0
    assigned: int = 0
    revoked: int = 0
    lost: int = 0
    consumer_errors: int = 0
    #: Records dropped as stale fetches (PartitionState.position), in all.
    stale: int = 0
    #: ``--changelog``: records written to the changelog; records applied
    #: to shards from it by restores, records restores read and did not
    #: apply (a stale writer's, or of batches cut short), restores that fell
    #: back to the source topic.
    changelog_produced: int = 0
    restored: int = 0
    changelog_records_skipped: int = 0
    changelog_restore_failures: int = 0
    partitions: dict[tuple[str, int], PartitionMetrics] = field(default_factory=dict)
    #: (time, records stored) at the last snapshot, for the interval rate.
    _last: tuple[float, int] = (0.0, 0)

    def partition(self, topic: str, partition: int) -> PartitionMetrics:
        key = (topic, partition)
        pm = self.partitions.get(key)
        if pm is None:
            pm = self.partitions[key] = PartitionMetrics(topic, partition)
        return pm

    def commit_done(self, latency_ms: float, ok: bool) -> None:
        if ok:
            self.commits += 1
            self.commit_latency_ms_last = latency_ms
            self.commit_latency_ms_total += latency_ms
        else:
            self.commit_failures += 1

    def snapshot(self) -> dict:
        """A plain dict of everything (rates computed now)."""
        now = time.monotonic()
        end = self.ended if self.ended is not None else now
        elapsed = end - self.started
        loading = end - self.assigned_at if self.assigned_at is not None else 0.0
        last_t, last_n = self._last
        stored = self.stored
        interval = now - last_t if last_t else elapsed
        rate_now = (stored - (last_n if last_t else 0)) / interval if interval > 0 else 0.0
        self._last = (now, stored)
        parts = []
        for (topic, partition), pm in sorted(self.partitions.items()):
            parts.append({"topic": topic, "partition": partition, "start": pm.start,
                          "first_fetched": pm.first_fetched, "fetched": pm.fetched, "next_fetch": pm.next_fetch,
                          "stored": pm.stored, "end": pm.end, "target": pm.target, "lag": pm.lag,
                          "pending": pm.pending, "peak_pending": pm.peak_pending, "paused": pm.paused,
                          "pauses": pm.pauses,
                          "retries": pm.retries, "dead_letters": pm.dead_letters, "caught_up": pm.caught_up,
                          "stale_dropped": pm.stale, "restored_from_changelog": pm.restored,
                          "restore_seconds": None if pm.restore_seconds is None else round(pm.restore_seconds, 3)})
        return {
            "elapsed_s": round(elapsed, 3),
            "records_fetched": self.fetched,
            "records_stored": stored,
            "records_skipped": self.skipped,
            "records_per_sec": round(stored / elapsed, 1) if elapsed > 0 else 0.0,
            "seconds_since_assignment": round(loading, 3),
            "records_per_sec_since_assignment": round(stored / loading, 1) if loading > 0 else 0.0,
            "records_per_sec_now": round(rate_now, 1),
            "store_writes": self.writes,
            "retries": self.retries,
            "dead_letters": self.dead_letters,
            "pauses": self.pauses,
            "commits": self.commits,
            "commit_failures": self.commit_failures,
            "commit_latency_ms_last": round(self.commit_latency_ms_last, 3),
            "commit_latency_ms_mean": round(self.commit_latency_ms_total / self.commits, 3) if self.commits else 0.0,
            "rebalances": self.rebalances,
            "partitions_assigned": self.assigned,
            "partitions_revoked": self.revoked,
            "partitions_lost": self.lost,
            "consumer_errors": self.consumer_errors,
            "stale_records_dropped": self.stale,
            "changelog_records_produced": self.changelog_produced,
            "records_restored_from_changelog": self.restored,
            "changelog_records_skipped": self.changelog_records_skipped,
            "changelog_restore_failures": self.changelog_restore_failures,
            "lag": sum(p["lag"] or 0 for p in parts),
            "partitions": parts,
        }
