"""Topic administration the loader, the producer and the tests need.

Creating a topic (if it does not exist), learning how many partitions a
topic has, and the start-up check of a load (:func:`wait_for_topics`: the
servers answer and every topic exists, within a timeout, or one error
that names what is missing), through confluent-kafka's AdminClient. ``client_config`` is
passed through to librdkafka as it is (security settings for a real
cluster: ``security.protocol``, ``sasl.*``, ``ssl.*``). This module never
consumes or produces records.
"""

from __future__ import annotations

import difflib
import logging
import time

from .errors import KafkaIntegrationError, ServersUnreachableError, TopicNotFoundError
from .settings import DEFAULT_STARTUP_TIMEOUT, with_logger

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


class _CheckLog:
    """The log lines and errors of the start-up check's client: at DEBUG
    only (the check's outcome is its error, not a stream of reconnection
    lines), the last one kept for that error."""

    def __init__(self) -> None:
        self.last_error: str | None = None
        self.last_line: str | None = None

    def log(self, level: int, msg: str, *args) -> None:   # confluent-kafka's ``logger``
        text = msg % args if args else msg
        log.debug("start-up check: %s", text)
        if level >= logging.WARNING:
            self.last_line = args[2].split("]: ", 1)[-1] if len(args) == 3 else text

    def error(self, err) -> None:   # ``error_cb``
        log.debug("start-up check: %s", err.str())
        self.last_error = err.str()

    @property
    def last(self) -> str | None:
        return self.last_error or self.last_line


def wait_for_topics(bootstrap_servers: str, topics: list[str], *, client_config: dict | None = None,
                    timeout: float = DEFAULT_STARTUP_TIMEOUT) -> dict[str, int]:
    """Wait up to ``timeout`` seconds for the servers to answer and every
    topic of ``topics`` to exist; return {topic: partition count}.

    Raises :class:`ServersUnreachableError` (naming the servers and the
    last error the client saw) when no metadata came within ``timeout``,
    and :class:`TopicNotFoundError` (naming the missing topics) when the
    servers answered but a topic was still missing at the end. Creates
    nothing: the metadata request asks for all topics, because naming one
    makes a broker that auto-creates topics create it."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    if not topics:
        raise ValueError("wait_for_topics needs at least one topic")
    check_log = _CheckLog()
    admin = AdminClient({**(client_config or {}), "bootstrap.servers": bootstrap_servers, "logger": check_log,
                         "error_cb": check_log.error})
    deadline = time.monotonic() + timeout
    known: dict[str, int] | None = None
    while True:
        try:
            metadata = admin.list_topics(timeout=max(deadline - time.monotonic(), 0.001))
        except KafkaException as exc:
            check_log.last_line = check_log.last_line or exc.args[0].str()
        else:
            known = {name: len(info.partitions) for name, info in metadata.topics.items()
                     if info.error is None and info.partitions}
            if all(t in known for t in topics):
                return {t: known[t] for t in topics}
        admin.poll(0)   # serves the error and log callbacks
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(0.5, left))
    if known is None:
        raise ServersUnreachableError(f"the Kafka servers {bootstrap_servers} did not answer within {timeout:g} s "
                                      f"({check_log.last or 'no answer'})", servers=bootstrap_servers)
    missing = [t for t in topics if t not in known]
    names = ", ".join(repr(t) for t in missing)
    hints = [f"{t!r}: did you mean {close[0]!r}?" for t in missing
             for close in [difflib.get_close_matches(t, [k for k in known if not k.startswith("__")], 1)] if close]
    raise TopicNotFoundError(f"{'topic' if len(missing) == 1 else 'topics'} {names} "
                             f"{'does' if len(missing) == 1 else 'do'} not exist on {bootstrap_servers} (waited "
                             f"{timeout:g} s{'; ' + ' '.join(hints) if hints else ''})",
                             servers=bootstrap_servers, topics=missing)
