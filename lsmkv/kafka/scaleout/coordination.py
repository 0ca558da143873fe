"""Lag-aware assignment of a serving loader group: the glue between the
coordination member (group_member.py), the assignor (assignor.py), the
loader's manually assigned consumer and the standby replicator.

Every instance of ``lsmkv kafka load --serve`` runs one
:class:`LagAwareCoordination`. It

* announces, in its JoinGroup user data (JSON), its serving URL, the
  partitions it holds active, the applied offset of every local shard
  copy (active shards, standby and warm-up copies, shards left on disk)
  and, for the copies it consumes, the partition's end its consumer saw
  then, plus a join counter (the embedded broker starts no new generation
  for a rejoin whose user data did not change: docs/kafka.md);
* as group leader, runs :func:`assignor.assign` over all members'
  metadata (a partition's end: the furthest any member saw) and sends
  each member its active, standby and warm-up partitions (and how many
  partitions in the group wait for their target);
* hands its own active partitions to the loader (``set_assignment``: the
  loader's consumer assigns them manually) and its standby and warm-up
  partitions to the standby replicator;
* as leader, while partitions wait for their balanced target to catch up
  (warming up as a warm-up or a standby copy), rejoins every
  ``probing_interval`` seconds (a probing rebalance): a copy that caught
  up then becomes active on its target.
"""

from __future__ import annotations

import json
import logging
import threading
import time

from ..settings import with_logger
from .assignor import MemberInfo, assign
from .group_member import GroupMember, coordination_group
from .instance_settings import DEFAULT_ACCEPTABLE_RECOVERY_LAG, DEFAULT_MAX_WARMUP_REPLICAS, DEFAULT_PROBING_INTERVAL

log = logging.getLogger(__name__)

FORMAT = 1
#: Seconds between snapshots of the local copies' offsets (the JoinGroup
#: user data is the latest one).
SNAPSHOT_INTERVAL = 0.2


class LagAwareCoordination:
    """Assigns ``loader``'s partitions (manual assignment) through the
    coordination group, with standby/warm-up copies kept by ``standby``
    (a StandbyReplicator whose ``wanted`` is :meth:`copies`)."""

    def __init__(self, loader, url: str, *, standby_replicas: int = 0,
                 acceptable_recovery_lag: int = DEFAULT_ACCEPTABLE_RECOVERY_LAG,
                 max_warmup_replicas: int = DEFAULT_MAX_WARMUP_REPLICAS,
                 probing_interval: float = DEFAULT_PROBING_INTERVAL) -> None:
        from confluent_kafka import Consumer
        for name, value in (("standby_replicas", standby_replicas),
                            ("acceptable_recovery_lag", acceptable_recovery_lag),
                            ("max_warmup_replicas", max_warmup_replicas)):
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} must be an int >= 0, not {value!r}")
        if not isinstance(probing_interval, (int, float)) or not probing_interval > 0:
            raise ValueError(f"probing_interval must be a positive number of seconds, not {probing_interval!r}")
        self._loader = loader
        self._shards = loader.shards
        self.url = url
        self.standby_replicas = standby_replicas
        self.acceptable_recovery_lag = acceptable_recovery_lag
        self.max_warmup_replicas = max_warmup_replicas
        self.probing_interval = float(probing_interval)
        #: The StandbyReplicator keeping this instance's standby and warm-up copies (set by the caller).
        self.standby = None
        s = loader.settings
        self._topic = self._shards.topic
        shared = {k: v for k, v in s.client_config.items()
                  if k.startswith(("security.", "sasl.", "ssl.", "client.", "socket.", "broker.", "api."))}
        self._ends_consumer = Consumer(with_logger({
            **shared, "bootstrap.servers": s.bootstrap_servers, "group.id": f"{s.group}-ends",
            "enable.auto.commit": False, "client.id": "lsmkv-assignor-ends"}))
        self._lock = threading.Lock()
        self._seq = 0
        self._snapshot: dict = {"offsets": {}, "active": [], "seen_ends": {}}
        self._copies: frozenset[int] = frozenset()
        #: This instance's latest assignment: {"generation", "leader", "active", "standby", "warmup",
        #: "warmups_in_group"} (None before the first).
        self.plan: dict | None = None
        self._next_probe: float | None = None
        self.probes = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        loader.use_manual_assignment(self)
        self._refresh()
        self.member = GroupMember(s.bootstrap_servers, coordination_group(s.group), metadata=self._metadata,
                                  assign=self._assign, on_assignment=self._on_assignment,
                                  session_timeout_ms=s.session_timeout_ms,
                                  heartbeat_interval_ms=s.heartbeat_interval_ms, client_config=s.client_config)
        self._thread = threading.Thread(target=self._run, name="lsmkv-kafka-probing", daemon=True)
        self._thread.start()

    # -- what the standby replicator and the server read ------------------------------------------------

    def copies(self) -> frozenset[int]:
        """Partitions to keep standby or warm-up copies of."""
        return self._copies

    def status(self) -> dict | None:
        with self._lock:
            plan = None if self.plan is None else dict(self.plan)
        if plan is not None:
            plan["probes"] = self.probes
            plan["rebalance_seconds"] = [round(t, 3) for _, t in self.member.joins[-5:]]
        return plan

    # -- the group protocol (kafka-python's IO thread) -----------------------------------------------------

    def local_offsets(self) -> tuple[dict[int, int | None], list[int], dict[int, int]]:
        """({partition: applied offset} of every local copy, [partitions held
        active], {partition: end seen} of the copies being consumed)."""
        offsets: dict[int, int | None] = dict(self._shards.offsets())
        active = []
        seen: dict[int, int] = {}
        if self.standby is not None:
            seen.update(self.standby.seen_ends())
            offsets.update(self.standby.held())
        metrics = self._loader.metrics.partitions
        for (t, p), (state, stored) in self._loader.held().items():
            if state == "active":
                offsets[p] = stored
                active.append(p)
                pm = metrics.get((t, p))
                if pm is not None and pm.end:
                    seen[p] = max(pm.end, stored or 0)
        # A copy's end is taken after its offset: never below it.
        seen = {p: max(e, offsets.get(p) or 0) for p, e in seen.items() if p in offsets}
        return offsets, sorted(active), seen

    def _refresh(self) -> None:
        """Take a new snapshot of the local copies for the next JoinGroup."""
        started = time.monotonic()
        offsets, active, seen = self.local_offsets()
        took = time.monotonic() - started
        if took > 0.5:
            log.info("reading the local copies' offsets took %.1f s", took)
        snapshot = {"offsets": {str(p): o for p, o in sorted(offsets.items())}, "active": active,
                    "seen_ends": {str(p): e for p, e in sorted(seen.items())}}
        with self._lock:
            self._snapshot = snapshot

    def _metadata(self) -> bytes:
        # On kafka-python's IO thread, which also heartbeats: nothing here
        # may block (reading the shards can wait on a standby's write
        # batch), so the snapshot comes from the probing thread, at most
        # SNAPSHOT_INTERVAL old.
        with self._lock:
            self._seq += 1
            doc = {"format": FORMAT, "url": self.url, "topic": self._topic, **self._snapshot, "seq": self._seq}
        return json.dumps(doc).encode()

    def _ends(self, members: dict[str, MemberInfo]) -> dict[int, int]:
        """{partition: end offset}: the furthest any member saw (an end its
        consumer saw in a fetch response, or a copy's offset). Not the
        broker's ListOffsets answer: measured, the embedded broker answered 1
        for partitions of thousands of records, and an end read now would be
        seconds newer than the members' reports (the broker's join window).
        A partition nobody consumes or holds a copy of ends at 0 for the
        assignor: every instance is as far from it as any other."""
        count = self._shards.partitions
        if count is None:
            info = self._ends_consumer.list_topics(timeout=10).topics.get(self._topic)
            count = len(info.partitions) if info is not None and info.error is None else 0
            if count:
                self._shards.note_partitions(count)
        return {p: max([0] + [m.offsets.get(p) or 0 for m in members.values()]
                       + [m.seen_ends.get(p, 0) for m in members.values()]) for p in range(count)}

    def _assign(self, raw: dict[str, bytes]) -> dict[str, bytes]:
        members = {}
        for member_id, data in raw.items():
            try:
                doc = json.loads(data)
                if doc.get("format") != FORMAT or doc.get("topic") != self._topic:
                    raise ValueError(f"format {doc.get('format')!r}, topic {doc.get('topic')!r}")
                members[member_id] = MemberInfo(str(doc["url"]), {int(p): o for p, o in doc["offsets"].items()},
                                                frozenset(int(p) for p in doc["active"]),
                                                {int(p): int(e) for p, e in doc.get("seen_ends", {}).items()})
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                # A member of another version or topic: it gets nothing (and says so in its log).
                log.error("member %s of %s sent metadata this version cannot use (%s); it gets no partitions",
                          member_id, self.member.group, exc)
        ends = self._ends(members)
        plan = assign(members, ends, standby_replicas=self.standby_replicas,
                      acceptable_recovery_lag=self.acceptable_recovery_lag,
                      max_warmup_replicas=self.max_warmup_replicas)
        warmups = sum(len(a.warmup) for a in plan.values())
        waiting = sum(len(a.waiting) for a in plan.values())
        log.info("assignment of %s over %d members (ends %s): %s", self._topic, len(members), ends,
                 {members[m].name: (a.active, a.standby, a.warmup) for m, a in plan.items()})
        out = {}
        for member_id in raw:
            a = plan.get(member_id)
            out[member_id] = json.dumps({
                "format": FORMAT, "active": a.active if a else [], "standby": a.standby if a else [],
                "warmup": a.warmup if a else [], "waiting": a.waiting if a else [],
                "lags": {str(p): n for p, n in (a.lags if a else {}).items()}, "warmups_in_group": warmups,
                "waiting_in_group": waiting, "ends": {str(p): e for p, e in ends.items()}}).encode()
        return out

    def _on_assignment(self, generation: int, member_id: str, data: bytes) -> None:
        doc = json.loads(data) if data else {"active": [], "standby": [], "warmup": [], "warmups_in_group": 0}
        active = [int(p) for p in doc.get("active", [])]
        copies = frozenset(int(p) for p in doc.get("standby", []) + doc.get("warmup", []))
        leader = self.member.leader
        with self._lock:
            self.plan = {"generation": generation, "leader": leader, "active": active,
                         "standby": doc.get("standby", []), "warmup": doc.get("warmup", []),
                         "waiting": doc.get("waiting", []), "warmups_in_group": doc.get("warmups_in_group", 0),
                         "waiting_in_group": doc.get("waiting_in_group", 0),
                         "ends": {int(p): e for p, e in doc.get("ends", {}).items()},
                         "lags": {int(p): n for p, n in doc.get("lags", {}).items()}}
            self._next_probe = (time.monotonic() + self.probing_interval
                                if leader and doc.get("waiting_in_group") else None)
        log.info("generation %d: active %s, standby %s, warm-up %s%s", generation, active, doc.get("standby"),
                 doc.get("warmup"), " (leader)" if leader else "")
        self._copies = copies
        self._loader.set_assignment(active)

    # -- probing rebalances ---------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(SNAPSHOT_INTERVAL):
            if self.member.error is not None and self.error is None:
                self.error = self.member.error
            try:
                self._refresh()
            except Exception as exc:  # noqa: BLE001 - the next round tries again
                log.warning("reading the local copies' offsets: %r", exc)
            with self._lock:
                due = self._next_probe is not None and time.monotonic() >= self._next_probe
                if due:
                    self._next_probe = None
            if due:
                self.probes += 1
                log.info("probing rebalance %d: partitions wait for their target to catch up", self.probes)
                self.member.request_rejoin()

    def close(self) -> None:
        """Leave the coordination group (the others rebalance at once)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        self.member.close()
        try:
            self._ends_consumer.close()
        except Exception as exc:  # noqa: BLE001 - closing
            log.debug("closing the end-offsets consumer: %r", exc)
