"""Topic administration the loader, the producer and the tests need.

Creating a topic (if it does not exist) and learning how many partitions a
topic has, through confluent-kafka's AdminClient. ``client_config`` is
passed through to librdkafka as it is (security settings for a real
cluster: ``security.protocol``, ``sasl.*``, ``ssl.*``). This module never
consumes or produces records.
"""

from __future__ import annotations

import logging
import time

from .errors import KafkaIntegrationError
from .settings import with_logger

log = logging.getLogger(__name__)


def _admin(bootstrap_servers: str, client_config: dict | None):
    from confluent_kafka.admin import AdminClient
    return AdminClient(with_logger({**(client_config or {}), "bootstrap.servers": bootstrap_servers}))


def ensure_topic(bootstrap_servers: str, topic: str, partitions: int, *, client_config: dict | None = None,
                 timeout: float = 30.0, config: dict | None = None) -> int:
    """Create ``topic`` with ``partitions`` partitions (and the topic
    ``config``, e.g. ``{"cleanup.policy": "compact"}``) unless it exists;
    return its partition count (the existing one if it existed)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic
    if type(partitions) is not int or partitions < 1:
        raise ValueError(f"partitions must be a positive int, not {partitions!r}")
    admin = _admin(bootstrap_servers, client_config)
    existing = partition_count(bootstrap_servers, topic, client_config=client_config, timeout=timeout,
                               admin=admin)
    if existing:
        return existing
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                            config=dict(config or {}))], request_timeout=timeout)
    try:
        futures[topic].result(timeout)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise KafkaIntegrationError(f"could not create topic {topic!r}: {exc.args[0].str()}") from None
    deadline = time.monotonic() + timeout
    while True:
        count = partition_count(bootstrap_servers, topic, client_config=client_config, timeout=timeout, admin=admin)
        if count:
            return count
        if time.monotonic() > deadline:
            raise KafkaIntegrationError(f"topic {topic!r} was created but its metadata did not appear within "
                                        f"{timeout:.0f} s")
        time.sleep(0.05)


def partition_count(bootstrap_servers: str, topic: str, *, client_config: dict | None = None,
                    timeout: float = 30.0, admin=None) -> int:
    """Partitions of ``topic`` (0 if the broker does not know it)."""
    from confluent_kafka import KafkaException
    admin = admin or _admin(bootstrap_servers, client_config)
    try:
        # All topics, not just this one: a metadata request naming a topic
        # makes a broker that auto-creates topics create it (the embedded
        # broker does, with 4 partitions), which is not what asking means.
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise KafkaIntegrationError(f"could not read the metadata of {bootstrap_servers}: "
                                    f"{exc.args[0].str()}") from None
    info = metadata.topics.get(topic)
    if info is None or info.error is not None:
        return 0
    return len(info.partitions)


def delete_topic(bootstrap_servers: str, topic: str, *, client_config: dict | None = None,
                 timeout: float = 30.0) -> None:
    """Delete ``topic`` (not an error if it does not exist)."""
    from confluent_kafka import KafkaException
    admin = _admin(bootstrap_servers, client_config)
    futures = admin.delete_topics([topic], request_timeout=timeout)
    try:
        futures[topic].result(timeout)
    except KafkaException as exc:
        log.debug("deleting topic %s: %s", topic, exc.args[0].str())
