"""InstanceSettings: every knob of one loader instance, as ``lsmkv kafka
load`` takes them, its default, and the rules between them.

Kafka Streams builds an application instance from one ``StreamsConfig``;
lsmkv builds one (:class:`~lsmkv.kafka.runtime.instance.ServingInstance`)
from one of these: the topics and the group, the store (``db``,
``engine``, ``store_options``), the loader's knobs (the ones of
:class:`~lsmkv.kafka.settings.LoaderSettings`, derived by
:meth:`InstanceSettings.loader_settings`), partitioned state
(``partitioned``, ``changelog``, ``partitioner``) and serving it
(``serve``, ``advertise``, standbys and the lag-aware assignment). Each
knob is named and measured as the command line's flag of the same name
(``linger_ms`` is ``--linger-ms``, in milliseconds): the command line only
parses its arguments into these.

The defaults of the scale-out knobs are defined here, once (assignor.py
and coordination.py take theirs from here); the loader's are
LoaderSettings'. A lag-aware knob left None is not set: it takes its
default, and only a serving instance may set it.

Checked when the settings are made (:meth:`InstanceSettings.validate`),
before anything is opened or created: a bad value raises
:class:`~lsmkv.kafka.errors.SettingError`, a knob used where the instance
cannot take it (without the knob it needs, beside one it does not go
with, a count or an interval out of its range)
:class:`~lsmkv.kafka.errors.SettingUsageError`; each message names the
knobs as ``{knob}``, so a command line can word them as its flags. A
processor given as ``module:function`` text is imported then. This module
never connects to anything.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Callable, Mapping

from ..errors import SettingError, SettingUsageError
from ..settings import LoaderSettings, load_processor
from .group_member import kafka_python_security
from .serve import parse_address

_text = SettingError.literal

#: Records a copy may be behind a partition's end and still count as caught
#: up (may take the partition active): Kafka Streams' default
#: acceptable.recovery.lag.
DEFAULT_ACCEPTABLE_RECOVERY_LAG = 10_000
#: Warm-up copies the whole group keeps at once for partitions waiting to
#: move: Kafka Streams' default max.warmup.replicas.
DEFAULT_MAX_WARMUP_REPLICAS = 2
#: Seconds between probing rebalances while warm-ups exist. Kafka Streams
#: waits 10 minutes; a rebalance here costs about 3 s of the embedded
#: broker's join window and moves no data (shards are local), and a
#: warm-up of a million records catches up in well under a minute, so a
#: minute keeps the wait for the move short without rebalancing often.
DEFAULT_PROBING_INTERVAL = 60.0

ENGINES = ("lsm", "btree")
#: The knobs of the lag-aware assignment a serving group runs (None: not set).
LAG_AWARE = ("acceptable_recovery_lag", "max_warmup_replicas", "probing_rebalance_interval")


@dataclass(frozen=True)
class InstanceSettings:
    """How one instance loads (and, with ``serve``, serves) a topic."""

    #: Topics to load (a name, or several: all into the one store; partitioned state takes one).
    topics: tuple[str, ...]
    #: The consumer group: partitions are shared among the instances of a group.
    group: str
    #: The store's directory (created if missing); with partitioned state, the shard directory.
    db: str
    #: HOST:PORT[,HOST:PORT...] of the cluster (or the embedded broker).
    bootstrap_servers: str
    #: Engine of a new store, "lsm" or "btree" (an existing one keeps its own).
    engine: str = "lsm"
    #: Options the store is opened with ({name: value}).
    store_options: Mapping[str, object] = field(default_factory=dict)
    #: librdkafka settings passed through (security, tuning); not shown by repr (secrets).
    client_config: Mapping[str, object] = field(default_factory=dict, repr=False)
    #: Stop once every assigned partition reached the end it had when assigned.
    until_caught_up: bool = LoaderSettings.until_caught_up
    #: Seconds to wait for the servers and topics before giving up (LoaderSettings.startup_timeout).
    startup_timeout: float | None = LoaderSettings.startup_timeout
    #: What each record becomes before it is stored: a callable, or
    #: ``module:function`` text naming one (imported when the settings are
    #: made; the settings then hold the callable). None: stored as it is.
    processor: Callable | str | None = None
    concurrency: int = LoaderSettings.concurrency
    max_pending: int = LoaderSettings.max_pending
    batch_records: int = LoaderSettings.batch_records
    batch_bytes: int = LoaderSettings.batch_bytes
    #: Milliseconds a store write batch waits to fill.
    linger_ms: float = LoaderSettings.linger * 1000
    #: Seconds between Kafka commits of the stored offsets.
    commit_interval: float = LoaderSettings.commit_interval
    max_retries: int = LoaderSettings.max_retries
    #: Milliseconds of the first retry delay (doubled per retry up to LoaderSettings.retry_backoff_max).
    retry_backoff_ms: float = LoaderSettings.retry_backoff * 1000
    #: Dead-letter topic (None: ``<topic>.dlq``).
    dlq_topic: str | None = LoaderSettings.dlq_topic
    #: Seconds in-flight records may take when partitions are revoked.
    revoke_timeout: float = LoaderSettings.revoke_timeout
    session_timeout_ms: int = LoaderSettings.session_timeout_ms
    heartbeat_interval_ms: int = LoaderSettings.heartbeat_interval_ms
    #: Partitioned state: ``db`` is a shard directory, one store per partition (implied by ``serve``).
    partitioned: bool = False
    #: HOST:PORT to serve the partitions held on over HTTP (port 0: a free
    #: one), announcing the instance on ``<group>-members``; None: no serving.
    serve: str | None = None
    #: The URL clients reach ``serve`` at (None: http://HOST:PORT).
    advertise: str | None = None
    #: Partitioned state: write what each shard applies to the changelog topic and restore from it.
    changelog: bool = LoaderSettings.changelog
    #: Partitioned state: the partitioner the topic's producers use (librdkafka's name), for routing reads.
    partitioner: str | None = LoaderSettings.partitioner
    #: Serving: warm copies of up to this many other instances' partitions.
    standby_replicas: int = 0
    #: Serving: records behind a partition's end a copy may be to take it
    #: active (None: DEFAULT_ACCEPTABLE_RECOVERY_LAG).
    acceptable_recovery_lag: int | None = None
    #: Serving: warm-up copies the group keeps at once (None: DEFAULT_MAX_WARMUP_REPLICAS).
    max_warmup_replicas: int | None = None
    #: Serving: seconds between probing rebalances while warm-ups exist (None: DEFAULT_PROBING_INTERVAL).
    probing_rebalance_interval: float | None = None

    def __post_init__(self) -> None:
        topics = (self.topics,) if isinstance(self.topics, str) else self.topics
        if isinstance(topics, (list, tuple)):
            object.__setattr__(self, "topics", tuple(topics))
        if isinstance(self.db, os.PathLike):
            object.__setattr__(self, "db", os.fspath(self.db))
        for name in ("store_options", "client_config"):
            value = getattr(self, name)
            if isinstance(value, Mapping):
                object.__setattr__(self, name, MappingProxyType(dict(value)))
        self.validate()
        if isinstance(self.processor, str):
            object.__setattr__(self, "processor", load_processor(self.processor))

    # -- what the instance reads ----------------------------------------------------------------------

    @property
    def partitioned_state(self) -> bool:
        """Whether ``db`` is a shard directory (``partitioned``, or implied by ``serve``)."""
        return self.partitioned or self.serve is not None

    def address(self) -> tuple[str, int] | None:
        """(host, port) of ``serve`` (None: not serving)."""
        return None if self.serve is None else parse_address(self.serve)

    def lag_aware(self) -> dict:
        """The lag-aware assignment's knobs, each its default if not set
        (coordination.LagAwareCoordination's keyword arguments)."""
        return {"standby_replicas": self.standby_replicas,
                "acceptable_recovery_lag": _or(self.acceptable_recovery_lag, DEFAULT_ACCEPTABLE_RECOVERY_LAG),
                "max_warmup_replicas": _or(self.max_warmup_replicas, DEFAULT_MAX_WARMUP_REPLICAS),
                "probing_interval": _or(self.probing_rebalance_interval, DEFAULT_PROBING_INTERVAL)}

    def loader_settings(self) -> LoaderSettings:
        """The loader's settings (a new LoaderSettings each call)."""
        processor = self.processor
        if isinstance(processor, str):   # (while the settings are checked, before it is replaced)
            processor = load_processor(processor)
        return LoaderSettings(
            bootstrap_servers=self.bootstrap_servers, topics=list(self.topics), group=self.group,
            concurrency=self.concurrency, max_pending=self.max_pending, batch_records=self.batch_records,
            batch_bytes=self.batch_bytes, linger=self.linger_ms / 1000, commit_interval=self.commit_interval,
            max_retries=self.max_retries, retry_backoff=self.retry_backoff_ms / 1000, dlq_topic=self.dlq_topic,
            until_caught_up=self.until_caught_up, startup_timeout=self.startup_timeout,
            revoke_timeout=self.revoke_timeout, session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms, processor=processor, changelog=self.changelog,
            client_config=dict(self.client_config), partitioner=self.partitioner)

    # -- the checks --------------------------------------------------------------------------------------

    def validate(self) -> None:
        """Check every knob and the rules between them (SettingError,
        SettingUsageError naming the knobs); nothing is opened or created."""
        self._check_own_values()
        self._check_scale_out()
        if self.serve is not None:
            kafka_python_security(dict(self.client_config))
            parse_address(self.serve)
        self._check_milliseconds()
        if isinstance(self.processor, str):
            load_processor(self.processor)
        elif self.processor is not None and not callable(self.processor):
            raise SettingError(f"{{processor}} must be a callable or module:function text, not "
                               f"{type(self.processor).__name__}")
        try:
            self.loader_settings()
        except SettingError as exc:   # its knobs named as these settings name them
            raise exc.renamed({"linger": "linger_ms", "retry_backoff": "retry_backoff_ms"}) from None
        if self.partitioned_state and len(self.topics) != 1:
            raise SettingError(f"{{topics}}: partitioned state holds one topic (a shard is one of its partitions), "
                               f"not {len(self.topics)}: {_text(repr(list(self.topics)))}")

    def _check_own_values(self) -> None:
        """The knobs LoaderSettings does not check (the loader's own it does, in validate)."""
        if not isinstance(self.topics, tuple):
            raise SettingError(f"{{topics}} must be a topic name or a list of them, not {_text(repr(self.topics))}")
        if not isinstance(self.db, str) or not self.db:
            raise SettingError(f"{{db}} must be a directory path, not {_text(repr(self.db))}")
        if self.engine not in ENGINES:
            raise SettingError(f"{{engine}} must be one of {', '.join(ENGINES)}, not {_text(repr(self.engine))}")
        for name in ("store_options", "client_config"):
            value = getattr(self, name)
            if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
                raise SettingError(f"{{{name}}} must be a mapping of setting names to values, not "
                                   f"{_text(type(value).__name__)}")
        for name in ("until_caught_up", "partitioned", "changelog"):
            if not isinstance(getattr(self, name), bool):
                raise SettingError(f"{{{name}}} must be True or False, not {_text(repr(getattr(self, name)))}")
        for name in ("serve", "advertise"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise SettingError(f"{{{name}}} must be text or None, not {_text(repr(value))}")

    def _check_scale_out(self) -> None:
        """The rules of partitioned state and serving, in the order a command line reports them."""
        if self.changelog and not self.partitioned_state:
            raise SettingUsageError("{changelog} needs partitioned state ({partitioned} or {serve}): the changelog "
                                    "holds what each partition's shard applied")
        if self.partitioner and not self.partitioned_state:
            raise SettingUsageError("{partitioner} needs partitioned state ({partitioned} or {serve}): it routes "
                                    "reads of a shard directory")
        if type(self.standby_replicas) is not int or self.standby_replicas < 0:
            raise SettingUsageError(f"{{standby_replicas}} must be 0 or more, not {_text(repr(self.standby_replicas))}")
        if self.standby_replicas and self.serve is None:
            raise SettingUsageError("{standby_replicas} needs {serve} (standbys belong to a serving group's "
                                    "assignment)")
        if self.standby_replicas and self.processor:
            raise SettingUsageError(
                "{standby_replicas} does not go with {processor}: a standby copy applies the topic's records as "
                "they are, while the active shard stores what the processor makes of them, so a standby taking "
                "over would serve a different table (run without standbys, or without the processor)")
        for name in LAG_AWARE:
            value = getattr(self, name)
            if value is None:
                continue
            if self.serve is None:
                raise SettingUsageError(f"{{{name}}} needs {{serve}} (the lag-aware assignment is that of a "
                                        "serving group)")
            if name == "probing_rebalance_interval":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                    raise SettingUsageError(f"{{{name}}} must be a positive number of seconds, not "
                                            f"{_text(_number(value))}")
            elif type(value) is not int or value < 0:
                raise SettingUsageError(f"{{{name}}} must be 0 or more, not {_text(repr(value))}")

    def _check_milliseconds(self) -> None:
        """The knobs measured in milliseconds here and in seconds by LoaderSettings."""
        for name in ("linger_ms", "retry_backoff_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise SettingError(f"{{{name}}} must be a number of milliseconds of at least 0, not "
                                   f"{_text(repr(value))}")
        longest = LoaderSettings.retry_backoff_max * 1000
        if self.retry_backoff_ms > longest:
            raise SettingError(f"{{retry_backoff_ms}} must be at most {longest:g} (the longest retry delay), not "
                               f"{self.retry_backoff_ms:g}")

    @classmethod
    def knobs(cls) -> list[str]:
        """The knobs' names, in order."""
        return [f.name for f in fields(cls)]


def _or(value, default):
    return default if value is None else value


def _number(value: object) -> str:
    """``value`` as a message shows it: a number as %g, anything else as repr."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    return repr(value)
