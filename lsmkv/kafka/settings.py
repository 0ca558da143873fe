"""LoaderSettings: every knob of the loader, its default, its check, and the
librdkafka configuration derived from it; and :func:`load_processor`, the
processor a ``module:function`` text names.

The defaults are the documented configuration (docs/kafka.md says why
each one is what it is). ``client_config`` is passed to librdkafka as it
is, after the loader's own tuning, so it can carry a real cluster's
security settings (``security.protocol``, ``sasl.mechanism``,
``sasl.username``, ``ssl.ca.location``, ...) or override any tuned value.
The settings the loader's guarantees rest on (manual commits of offsets
the store already holds) cannot be overridden.

A bad setting raises :class:`~.errors.SettingError`, its message naming
the knob as ``{knob}`` (the CLI words it as its flag). This module
validates and derives; it never connects to anything.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from typing import Callable

from .client_log import CLIENT_LOG, ClientLog
from .errors import SettingError

_text = SettingError.literal

#: librdkafka settings the loader tunes (measured on the embedded broker
#: and on loopback; docs/kafka.md has the figures), before client_config.
TUNED_CONSUMER = {
    # Cooperative rebalancing: a partition that stays with this loader is
    # not stopped while others move (incremental assign/revoke).
    "partition.assignment.strategy": "cooperative-sticky",
    # At most 1 MiB fetched per partition and request (librdkafka's default):
    # with the 10 ms refetch below, 8 MiB was no faster and held more memory
    # (docs/kafka.md "Performance").
    "max.partition.fetch.bytes": 1024 * 1024,
    # A fetch waits at most this long for data: the tail of a load is not
    # held back by the broker's default 500 ms.
    "fetch.wait.max.ms": 100,
    # Records fetched ahead of the loader: at most 20,000 per partition
    # (librdkafka's default is 100,000), at most 64 MiB in all: the load's
    # peak memory follows this queue (docs/kafka.md "Performance").
    "queued.min.messages": 20_000,
    "queued.max.messages.kbytes": 65536,
    # A partition whose queue is at those limits is fetched again 10 ms
    # after the loader took from it, not librdkafka's default 1000 ms,
    # which left the loader waiting in consume() for the next fetch.
    "fetch.queue.backoff.ms": 10,
    "client.id": "lsmkv-loader",
}
#: What the loader's guarantees rest on: offsets are committed by the loader
#: only once the store holds them, never automatically.
FIXED_CONSUMER = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    # The loader assigns every partition an explicit offset (the store's,
    # else the group's, else the beginning). An offset the broker no longer
    # has is an error the loader handles (it seeks there again), never a
    # silent jump to another place in the partition.
    "auto.offset.reset": "error",
}

#: Seconds an until_caught_up load waits for the servers and its topics
#: before it gives up (a long-running load waits for them indefinitely).
#: Time enough for a broker that is restarting; a typo'd topic or a wrong
#: address is reported within it, before any store is created.
DEFAULT_STARTUP_TIMEOUT = 20.0


def with_logger(config: dict) -> dict:
    """``config`` with librdkafka's logging routed to Python logging
    (CLIENT_LOG), each kind of line once with a count of its repeats
    (client_log.py)."""
    return {**config, "logger": ClientLog(CLIENT_LOG)}


def _positive_int(name: str, value: object, minimum: int = 1) -> None:
    if type(value) is not int or value < minimum:
        raise SettingError(f"{{{name}}} must be an int of at least {minimum}, not {_text(repr(value))}")


def _seconds(name: str, value: object, minimum: float = 0.0) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not minimum <= value < math.inf:
        raise SettingError(f"{{{name}}} must be a number of seconds of at least {minimum}, not {_text(repr(value))}")


def load_processor(spec: str) -> Callable:
    """The function named ``module:function`` (imported now); SettingError
    naming ``{processor}`` if there is none."""
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise SettingError(f"{{processor}} must be given as module:function, not {_text(repr(spec))}")
    module_name, func_name = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SettingError(f"{{processor}} module {_text(repr(module_name))} cannot be imported: "
                           f"{_text(exc)}") from None
    func = module
    for part in func_name.split("."):
        func = getattr(func, part, None)
        if func is None:
            raise SettingError(f"{{processor}} {_text(repr(spec))}: module {_text(repr(module_name))} has no "
                               f"{_text(repr(func_name))}")
    if not callable(func):
        raise SettingError(f"{{processor}} {_text(repr(spec))} is not callable")
    return func


@dataclass
class LoaderSettings:
    """How a :class:`~lsmkv.kafka.Loader` consumes, processes and stores."""

    #: HOST:PORT[,HOST:PORT...] of the cluster (or the embedded broker).
    bootstrap_servers: str
    #: Topics to load (all into the one store).
    topics: list[str]
    #: Consumer group: partitions are shared among the loaders of a group.
    group: str
    #: Processor units per assigned partition (records of one key go to one unit).
    concurrency: int = 4
    #: Records fetched and not yet stored, per partition; at this the
    #: partition is paused until half of them are stored.
    max_pending: int = 20_000
    #: An engine write batch holds at most this many records ...
    batch_records: int = 8192
    #: ... or this many bytes of keys and values ...
    batch_bytes: int = 8 * 1024 * 1024
    #: ... and waits at most this long (seconds) for more to arrive.
    linger: float = 0.005
    #: Seconds between commits of the stored offsets to Kafka (lag tools read them).
    commit_interval: float = 5.0
    #: Retries of a record whose processor raised, before it is dead-lettered.
    max_retries: int = 3
    #: First retry delay (seconds), doubled per retry up to retry_backoff_max.
    retry_backoff: float = 0.1
    retry_backoff_max: float = 10.0
    #: Dead-letter topic; None: ``<source topic>.dlq``.
    dlq_topic: str | None = None
    #: Stop once every assigned partition reaches the end it had at assignment
    #: (and, while other members hold partitions, the assignment has stood
    #: still for two session timeouts: a dead member's partitions move first).
    until_caught_up: bool = False
    #: Seconds the loader waits, before it opens or creates the store, for
    #: the servers to answer and every topic to exist; past that it raises
    #: StartupError (admin.wait_for_topics). None: DEFAULT_STARTUP_TIMEOUT
    #: for an until_caught_up load; no check for a long-running one, which
    #: waits (logging what it sees) for the servers and topics to appear.
    startup_timeout: float | None = None
    #: On revoke: how long records in flight may take to finish (seconds).
    revoke_timeout: float = 10.0
    #: On stop (SIGTERM, Ctrl-C): how long the drain may take (seconds).
    drain_timeout: float = 30.0
    #: Group membership timing (the embedded broker joins in ~3 s with these,
    #: ~23 s with librdkafka's defaults of 45000/3000).
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 500
    #: Records asked of the consumer per poll.
    poll_records: int = 10_000
    #: The user processor (None: store records as they are).
    processor: Callable | None = None
    #: Partitioned state only: write what each active shard applies to the
    #: changelog topic ``<group>-<topic>-changelog`` and restore shards
    #: from it (changelog.py, restore.py).
    changelog: bool = False
    #: Extra librdkafka settings, passed through (security, tuning).
    client_config: dict = field(default_factory=dict)
    #: Partitioned state: the partitioner the topic's producers use
    #: (librdkafka's name: partitioners.NAMES), declared for reads' routing;
    #: None: found from the keys alone (placement.py).
    partitioner: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.bootstrap_servers, str) or not self.bootstrap_servers.strip():
            raise SettingError(f"{{bootstrap_servers}} must be HOST:PORT[,...], not "
                               f"{_text(repr(self.bootstrap_servers))}")
        if isinstance(self.topics, str):
            self.topics = [self.topics]
        if not self.topics or not all(isinstance(t, str) and t and ":" not in t for t in self.topics):
            raise SettingError(f"{{topics}} must be a non-empty list of topic names, not {_text(repr(self.topics))}")
        if len(set(self.topics)) != len(self.topics):
            raise SettingError(f"{{topics}} are listed twice: {_text(repr(self.topics))}")
        if not isinstance(self.group, str) or not self.group:
            raise SettingError(f"{{group}} must be a non-empty consumer group id, not {_text(repr(self.group))}")
        for name in ("concurrency", "max_pending", "batch_records", "batch_bytes", "poll_records"):
            _positive_int(name, getattr(self, name))
        _positive_int("max_retries", self.max_retries, 0)
        for name in ("linger", "retry_backoff", "retry_backoff_max"):
            _seconds(name, getattr(self, name))
        for name in ("commit_interval", "revoke_timeout", "drain_timeout"):
            _seconds(name, getattr(self, name), 0.001)
        if self.startup_timeout is not None:
            _seconds("startup_timeout", self.startup_timeout, 0.001)
        if self.retry_backoff_max < self.retry_backoff:
            raise SettingError(f"{{retry_backoff_max}} ({self.retry_backoff_max}) is below {{retry_backoff}} "
                               f"({self.retry_backoff})")
        if self.dlq_topic is not None and (not isinstance(self.dlq_topic, str) or not self.dlq_topic
                                           or self.dlq_topic in self.topics):
            raise SettingError(f"{{dlq_topic}} must be a topic name other than the source topics, not "
                               f"{_text(repr(self.dlq_topic))}")
        _positive_int("session_timeout_ms", self.session_timeout_ms, 1000)
        _positive_int("heartbeat_interval_ms", self.heartbeat_interval_ms, 10)
        if self.heartbeat_interval_ms * 3 > self.session_timeout_ms:
            raise SettingError(f"{{heartbeat_interval_ms}} ({self.heartbeat_interval_ms}) must be at most a third "
                               f"of {{session_timeout_ms}} ({self.session_timeout_ms})")
        if not isinstance(self.changelog, bool):
            raise SettingError(f"{{changelog}} must be True or False, not {_text(repr(self.changelog))}")
        if self.processor is not None and not callable(self.processor):
            raise SettingError(f"{{processor}} must be callable, not {type(self.processor).__name__}")
        if self.partitioner is not None:
            from .partitioners import NAMES
            if self.partitioner not in NAMES:
                raise SettingError(f"{{partitioner}} must be one of librdkafka's {', '.join(NAMES)}, not "
                                   f"{_text(repr(self.partitioner))}")
        if not isinstance(self.client_config, dict) or not all(isinstance(k, str) for k in self.client_config):
            raise SettingError(f"{{client_config}} must be a dict of librdkafka settings, not "
                               f"{_text(repr(self.client_config))}")
        fixed = [k for k in self.client_config if k in FIXED_CONSUMER or k in ("group.id", "bootstrap.servers")]
        if fixed:
            raise SettingError(f"{{client_config}} may not set {_text(', '.join(sorted(fixed)))}: the loader's "
                               "guarantees depend on them (use the loader's own settings for the group and servers)")

    @property
    def startup_wait(self) -> float | None:
        """Seconds the start-up check waits (None: no check)."""
        if self.startup_timeout is not None:
            return self.startup_timeout
        return DEFAULT_STARTUP_TIMEOUT if self.until_caught_up else None

    def dlq_for(self, topic: str) -> str:
        """The dead-letter topic of records from ``topic``."""
        return self.dlq_topic if self.dlq_topic is not None else f"{topic}.dlq"

    @property
    def cooperative(self) -> bool:
        """Whether the group uses incremental (cooperative) rebalancing."""
        return self.consumer_config()["partition.assignment.strategy"] == "cooperative-sticky"

    def consumer_config(self) -> dict:
        """The librdkafka configuration of the loader's consumer."""
        return with_logger({
            **TUNED_CONSUMER,
            "session.timeout.ms": self.session_timeout_ms,
            "heartbeat.interval.ms": self.heartbeat_interval_ms,
            **self.client_config,
            **FIXED_CONSUMER,
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.group,
        })

    def producer_config(self) -> dict:
        """The librdkafka configuration of the dead-letter producer: the
        client settings (security) shared, consumer-only ones left out."""
        shared = {k: v for k, v in self.client_config.items()
                  if k.startswith(("security.", "sasl.", "ssl.", "client.", "socket.", "broker.", "api."))}
        return with_logger({**shared, "bootstrap.servers": self.bootstrap_servers, "enable.idempotence": True,
                            "linger.ms": 5})
