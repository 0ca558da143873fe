"""The coordination member: a Kafka group member that carries an instance's
metadata and, as leader, computes the group's assignment -- fetching nothing.

confluent-kafka (librdkafka) lets Python neither plug in a partition
assignor nor send member user data; kafka-python does both, but consumes
about 4x slower here. So a serving loader (``--serve``) runs two clients:
this member, on kafka-python, joins the *coordination group*
``<group>.assignment`` with its own protocol type (``lsmkv-shards``) and
protocol (``lsmkv-lag-aware-1``), its JoinGroup user data the instance's
metadata (serving URL, the offset of every local shard copy, the partitions
it holds active); the leader decodes every member's metadata, runs
:func:`assign` (assignor.py, lag-aware) and returns each member its
active, standby and warm-up partitions in SyncGroup. The loader's
confluent-kafka consumer then takes its active partitions by manual
``assign()`` and moves the data.

Why a separate group id: the loader's consumer commits its offsets to the
group ``<group>`` (so ``kafka-consumer-groups``-style lag tools see
progress). A consumer on manual assignment commits as a standalone member
(generation -1, no member id), which a broker refuses for a group that
has live members of its own (measured on the embedded broker: docs/kafka.md,
"Lag-aware assignment"). The coordination group has no offsets at all.

This module knows nothing of shards or lag: ``metadata()`` gives the bytes
to announce (called at every JoinGroup), ``assign(members)`` (the leader
only) maps {member id: metadata bytes} to {member id: assignment bytes},
``on_assignment(generation, member_id, assignment bytes)`` hands this
member's assignment over. :meth:`request_rejoin` starts a rebalance (a
probing rebalance, or a member whose metadata changed).

The loader's client settings are librdkafka's (``-X security.protocol=...``);
:func:`kafka_python_security` maps the security ones to kafka-python's
client arguments, so a serving group connects the way its consumers do,
and names the ones kafka-python has no equivalent for.
"""

from __future__ import annotations

import logging
import threading
import time

from ..errors import KafkaIntegrationError, SettingUsageError

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "lsmkv-shards"
PROTOCOL = "lsmkv-lag-aware-1"


#: librdkafka setting -> kafka-python client argument with the same value
#: (a SASL mechanism upper-cased, as both spell them).
SECURITY_SETTINGS = {
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
}
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: SASL mechanisms mapped: those that authenticate with sasl.username/password.
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def kafka_python_security(client_config: dict) -> dict:
    """kafka-python client arguments equivalent to the security settings
    (``security.*``, ``sasl.*``, ``ssl.*``) among librdkafka ``client_config``
    (the others are not the member's business); SettingUsageError naming every
    security setting that has no equivalent, or a value that has none."""
    out: dict = {}
    unmapped = []
    for name, value in sorted((client_config or {}).items()):
        if not name.startswith(("security.", "sasl.", "ssl.")):
            continue
        text = str(value).strip()
        if name in SECURITY_SETTINGS:
            if name.startswith("sasl.mechanism") and text.upper() not in MECHANISMS:
                unmapped.append(f"{name}={text}")
                continue
            out[SECURITY_SETTINGS[name]] = text.upper() if name.startswith("sasl.mechanism") else text
        elif name == "security.protocol" and text.upper() in PROTOCOLS:
            out["security_protocol"] = text.upper()
        elif name == "ssl.endpoint.identification.algorithm" and text.lower() in ("none", "https"):
            out["ssl_check_hostname"] = text.lower() == "https"
        else:
            # The value only where it is no secret (a protocol, an algorithm).
            known = name in ("security.protocol", "ssl.endpoint.identification.algorithm")
            unmapped.append(f"{name}={text}" if known else name)
    if unmapped:
        raise SettingUsageError(
            f"the lag-aware group member of {{serve}} (kafka-python) has no equivalent of "
            f"{SettingUsageError.literal(', '.join(unmapped))}; of the security settings among {{client_config}} "
            f"it maps security.protocol, sasl.mechanism(s) ({'/'.join(MECHANISMS)}), sasl.username, sasl.password, "
            "ssl.ca.location, ssl.certificate.location, ssl.key.location, ssl.key.password, ssl.crl.location and "
            "ssl.endpoint.identification.algorithm=none|https")
    return out


def coordination_group(group: str) -> str:
    """The coordination group of loader group ``group``."""
    return f"{group}.assignment"


class GroupMember:
    """A member of ``group`` (the coordination group) until :meth:`close`;
    runs its own thread (joins, heartbeats, rejoins when the group
    rebalances or :meth:`request_rejoin` asks)."""

    def __init__(self, bootstrap_servers: str, group: str, *, metadata, assign, on_assignment,
                 session_timeout_ms: int = 6000, heartbeat_interval_ms: int = 500,
                 rebalance_timeout_ms: int = 30000, client_id: str = "lsmkv-group-member",
                 client_config: dict | None = None) -> None:
        from kafka.coordinator.base import BaseCoordinator
        from kafka.net.compat import KafkaNetClient

        owner = self

        class _Coordinator(BaseCoordinator):
            def protocol_type(self):
                return PROTOCOL_TYPE

            def group_protocols(self):
                return [(PROTOCOL, owner._metadata())]

            def _perform_assignment(self, leader_id, protocol, members):
                if protocol != PROTOCOL:
                    raise KafkaIntegrationError(f"group {group} chose protocol {protocol!r}, not {PROTOCOL!r}")
                return owner._assign({m.member_id: bytes(m.metadata) for m in members})

            async def _on_join_complete_async(self, generation, member_id, protocol, assignment):
                owner._joined(generation, member_id, bytes(assignment))

        self.group = group
        self._metadata = metadata
        self._assign_fn = assign
        self._on_assignment = on_assignment
        # ``client_config``: the loader's librdkafka settings; their security
        # part, mapped (SettingUsageError for what has no equivalent).
        self._client = KafkaNetClient(bootstrap_servers=bootstrap_servers, client_id=client_id,
                                      **kafka_python_security(client_config or {}))
        self._client._net.start()
        manager = self._client._manager
        if manager.broker_version_data is None:
            try:
                manager.bootstrap(30000)
            except Exception as exc:  # noqa: BLE001 - kafka-python's own errors, reported as ours
                self._client.close()
                raise KafkaIntegrationError(f"the group member of {group} could not connect to {bootstrap_servers}: "
                                            f"{exc} (its log says why: the security settings?)") from exc
        self._coordinator = _Coordinator(
            self._client, group_id=group, session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms, max_poll_interval_ms=rebalance_timeout_ms,
            api_version=manager.broker_version)
        self._stop = threading.Event()
        self._rejoin = threading.Event()
        self.error: BaseException | None = None
        self.generation = -1
        self.member_id = ""
        self.leader = False
        #: (monotonic time a join started, seconds it took) of every completed join.
        self.joins: list[tuple[float, float]] = []
        self._join_started: float | None = None
        self._thread = threading.Thread(target=self._run, name="lsmkv-kafka-group-member", daemon=True)
        self._thread.start()

    # -- the coordinator's callbacks (on kafka-python's IO thread) ------------------------------------------

    def _assign(self, members: dict[str, bytes]) -> dict[str, bytes]:
        self.leader = True
        return self._assign_fn(members)

    def _joined(self, generation: int, member_id: str, assignment: bytes) -> None:
        if self._join_started is not None:
            self.joins.append((self._join_started, time.monotonic() - self._join_started))
            self._join_started = None
        self.generation, self.member_id = generation, member_id
        try:
            self._on_assignment(generation, member_id, assignment)
        except Exception as exc:  # noqa: BLE001 - reported; the loader stops on it
            log.error("applying the assignment of generation %d failed: %r", generation, exc)
            self.error = exc

    # -- the thread -----------------------------------------------------------------------------------

    def request_rejoin(self) -> None:
        """Rebalance the group (safe from any thread)."""
        self._rejoin.set()

    def _run(self) -> None:
        c = self._coordinator
        failures = 0
        while not self._stop.is_set():
            try:
                if self._rejoin.is_set():
                    self._rejoin.clear()
                    c.request_rejoin()
                if c.need_rejoin():
                    if self._join_started is None:
                        self._join_started = time.monotonic()
                    self.leader = False
                    c.ensure_active_group(timeout_ms=1000)
                else:
                    c.poll_heartbeat()
                    self._stop.wait(0.05)
                failures = 0
            except Exception as exc:  # noqa: BLE001 - kafka-python raises what the heartbeat saw; rejoin
                failures += 1
                if failures == 1 or failures % 50 == 0:
                    log.warning("group member of %s: %r (rejoining)", self.group, exc)
                self._stop.wait(min(1.0, 0.05 * failures))

    def close(self) -> None:
        """Leave the group (the others rebalance at once) and stop."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        try:
            self._coordinator.close(timeout_ms=5000)
        except Exception as exc:  # noqa: BLE001 - leaving is a courtesy; the session times out otherwise
            log.debug("leaving %s: %r", self.group, exc)
        quiet = logging.getLogger("kafka")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)   # its metadata refresher logs an error when its client goes away
        try:
            self._client.close()
        except Exception as exc:  # noqa: BLE001
            log.debug("closing the group member's client: %r", exc)
        finally:
            quiet.setLevel(level)
