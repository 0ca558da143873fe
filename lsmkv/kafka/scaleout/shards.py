"""ShardedStore: a directory of engine stores, one per input partition.

With partitioned state (``lsmkv kafka load --partitioned``, implied by
``--serve``) the loader keeps one store per partition of its topic -- a
task's state store in Kafka Streams' terms -- so a partition's state can
move, be copied, dropped and rebuilt on its own. The layout of ``--db``:

    <db>/LSMKV-SHARDS          the layout marker: one JSON object,
                               {"layout": "lsmkv-kafka-shards", "format": 1,
                                "engine": "lsm"|"btree", "topic": T,
                                "partitions": N or null}
    <db>/<T>-<P>/              partition P's store: an ordinary lsmkv or
                               btree database (lsmkv.open / btree.open
                               opens it), holding exactly that partition's
                               table and, in its metadata, the offset it
                               has applied (``kafka:<T>:<P>``, offsets.py)

``partitions`` is the topic's partition count, which key routing needs
(routing.py); the loader records it when it learns it. A shard that is
missing is rebuilt from the source topic by whoever is assigned its
partition; a shard that is present resumes from its own offset.

Reads: :meth:`get` routes a key to its partition's shard when one
partitioner fits the keys of every shard here (their placement tallies,
placement.py; routing.py decides), else looks in every shard;
:meth:`scan` merges the shards' scans in key order (``heapq.merge``: every
shard is sorted), a key held by several shards listed once, with the value
:meth:`get` answers. This module never talks to Kafka.
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import threading

from lsmkv.base.keys import MAX_KEY_SIZE
from lsmkv.base.errors import InvalidDatabaseError
from lsmkv.stores import open_store as open_engine_store, which_engine

from ..errors import LoaderError
from ..offsets import stored_offset
from ..partitioners import FAMILIES
from .placement import PlacementTally
from .routing import Route, choose_route
from ..store import MARKER, open_store

LAYOUT = "lsmkv-kafka-shards"
FORMAT = 1


def shard_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class ShardedStore:
    """The shard directory at ``path`` (created if missing, unless
    ``read_only``). ``engine`` is that of new shards ("lsm"/"btree"; None:
    the marker's); ``topic`` must match the marker's when both are known."""

    def __init__(self, path: str | os.PathLike, engine: str | None = "lsm", *, topic: str | None = None,
                 read_only: bool = False, options: dict | None = None) -> None:
        self.path = os.fspath(path)
        self.read_only = read_only
        self._options = dict(options or {})
        self._lock = threading.Lock()
        #: Serializes the marker's updates: the loader's store role, its
        #: coordination and the standby replicator each note the partition
        #: count from their own threads, and two writes through the one
        #: temporary file would race (the second rename finds it gone).
        self._marker_lock = threading.Lock()
        self._shards: dict[int, object] = {}
        self._closed = False
        #: Who writes a shard: the loader claims the partitions it holds
        #: active; a standby replicator (standby.py) writes only shards no
        #: one claimed, and gives a partition up (``on_claim``) before the
        #: claim returns. Both decide under ``ownership``.
        self.ownership = threading.RLock()
        self._claimed: set[int] = set()
        self.on_claim = None
        if engine not in (None, "lsm", "btree"):
            raise LoaderError(f"engine must be 'lsm' or 'btree', not {engine!r}")
        marker = self._read_marker()
        if marker is None:
            if read_only:
                raise LoaderError(f"{self.path} is not a shard directory (no {MARKER} file)")
            if topic is None:
                raise LoaderError("a new shard directory needs the topic it holds")
            self._check_new_directory()
            os.makedirs(self.path, exist_ok=True)
            marker = {"layout": LAYOUT, "format": FORMAT, "engine": engine or "lsm", "topic": topic,
                      "partitions": None}
            self._write_marker(marker)
        if engine is not None and marker["engine"] != engine:
            raise LoaderError(f"{self.path} holds {marker['engine']} shards, not {engine}")
        if topic is not None and marker["topic"] != topic:
            raise LoaderError(f"{self.path} holds shards of topic {marker['topic']!r}, not {topic!r}")
        self.engine: str = marker["engine"]
        self.topic: str = marker["topic"]
        self.partitions: int | None = marker["partitions"]

    # -- the marker -----------------------------------------------------------------------------

    def _read_marker(self) -> dict | None:
        path = os.path.join(self.path, MARKER)
        if not os.path.exists(path):
            return None
        try:
            with open(path) as f:
                marker = json.load(f)
        except (OSError, ValueError) as exc:
            raise LoaderError(f"{path} is not a readable shard layout marker: {exc}") from None
        if (not isinstance(marker, dict) or marker.get("layout") != LAYOUT or marker.get("format") != FORMAT
                or marker.get("engine") not in ("lsm", "btree") or not isinstance(marker.get("topic"), str)
                or not (marker.get("partitions") is None or type(marker.get("partitions")) is int)):
            raise LoaderError(f"{path} is not a shard layout marker this version understands: {marker!r:.200}")
        return marker

    def _write_marker(self, marker: dict) -> None:
        path = os.path.join(self.path, MARKER)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(marker, f)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def _check_new_directory(self) -> None:
        if not os.path.exists(self.path):
            return
        if not os.path.isdir(self.path):
            raise LoaderError(f"{self.path} is a file, not a shard directory")
        try:
            found = which_engine(self.path)
        except InvalidDatabaseError:
            found = None
        if found is not None:
            raise LoaderError(f"{self.path} holds a single {found} store, not a shard directory (load it without "
                              "--partitioned, or choose another --db)")
        if os.listdir(self.path):
            raise LoaderError(f"{self.path} is a non-empty directory without a {MARKER} marker; choose an empty or "
                              "new directory for the shards")

    def note_partitions(self, partitions: int) -> None:
        """Record the topic's partition count (key routing needs it)."""
        if type(partitions) is not int or partitions < 1:
            raise ValueError(f"partitions must be a positive int, not {partitions!r}")
        with self._marker_lock:
            if partitions == self.partitions or self.read_only:
                return
            marker = self._read_marker() or {}
            marker["partitions"] = partitions
            self._write_marker(marker)
            self.partitions = partitions

    # -- shards ---------------------------------------------------------------------------------

    def shard_path(self, partition: int) -> str:
        return os.path.join(self.path, shard_name(self.topic, partition))

    def present(self) -> list[int]:
        """Partitions that have a shard directory here."""
        prefix = self.topic + "-"
        out = []
        for name in os.listdir(self.path):
            if name.startswith(prefix) and name[len(prefix):].isdigit() and os.path.isdir(
                    os.path.join(self.path, name)):
                out.append(int(name[len(prefix):]))
        return sorted(out)

    def shard(self, partition: int, create: bool = True):
        """Partition ``partition``'s open store (opened on first use; None if
        it has no shard and ``create`` is false or the store is read-only)."""
        with self._lock:
            if self._closed:
                raise LoaderError(f"{self.path}: the shard directory is closed")
            db = self._shards.get(partition)
            if db is not None:
                return db
            path = self.shard_path(partition)
            if not os.path.isdir(path) and (self.read_only or not create):
                return None
            if self.read_only:
                db = open_engine_store(path, engine=self.engine, read_only=True)
            else:
                db = open_store(path, self.engine, self._options)
            self._shards[partition] = db
            return db

    def offsets(self) -> dict[int, int | None]:
        """{partition: the offset its shard has applied (None: nothing yet)}."""
        out = {}
        for p in self.present():
            db = self.shard(p, create=False)
            out[p] = None if db is None else stored_offset(db, self.topic, p)
        return out

    def stats(self) -> dict:
        with self._lock:
            open_dbs = list(self._shards.values())
        sizes = [db.stats().get("max_key_size", MAX_KEY_SIZE) for db in open_dbs]
        return {"layout": LAYOUT, "engine": self.engine, "topic": self.topic, "partitions": self.partitions,
                "max_key_size": min(sizes) if sizes else MAX_KEY_SIZE}

    def claim(self, partition: int) -> None:
        """The loader takes ``partition`` active: a standby writing its shard
        stops first (``on_claim``), so the loader reads a settled offset."""
        with self.ownership:
            self._claimed.add(partition)
            callback = self.on_claim
            if callback is not None:
                callback(partition)

    def unclaim(self, partition: int) -> None:
        with self.ownership:
            self._claimed.discard(partition)

    def claimed(self, partition: int) -> bool:
        return partition in self._claimed

    # -- reads ----------------------------------------------------------------------------------

    def route(self) -> Route:
        """How reads of these shards go (routing.py), from each shard's
        placement tally (a partition without a shard here holds nothing here)."""
        if self.partitions is None:
            raise LoaderError(f"{self.path}: the topic's partition count is not known yet (no load has run)")
        nothing = {"partitions": self.partitions, "complete": True, "keys": 0, "fitting": list(FAMILIES)}
        summaries = {}
        for p in range(self.partitions):
            db = self.shard(p, create=False)
            summaries[p] = nothing if db is None else PlacementTally.load(
                db, self.topic, p, self.partitions, stored_offset(db, self.topic, p), report=False).summary()
        return choose_route(self.partitions, summaries)

    def get(self, key: bytes, default: bytes | None = None) -> bytes | None:
        """The value of ``key``: from the one shard the partitioner fitting
        every shard's keys names, else from the shard holding it
        (Route.prefer picks among several)."""
        route = self.route()
        partition = route.partition_of(key)
        if partition is not None:
            db = self.shard(partition, create=False)
            return default if db is None else db.get(key, default)
        found = {}
        for p in self.present():
            db = self.shard(p, create=False)
            value = None if db is None else db.get(key)
            if value is not None:
                found[p] = value
        return found[route.prefer(key, found)] if found else default

    def scan(self, start: bytes | None = None, end: bytes | None = None):
        """(key, value) with start <= key < end over every shard, in key order."""
        present = [p for p in self.present() if self.shard(p, create=False) is not None]
        route = self.route() if self.partitions is not None else None
        scans = [_tagged(self.shard(p, create=False).scan(start, end), p) for p in present]
        for key, group in itertools.groupby(heapq.merge(*scans, key=lambda kpv: kpv[0]), key=lambda kpv: kpv[0]):
            holders = {p: v for _, p, v in group}
            yield key, holders[route.prefer(key, holders) if route is not None else min(holders)]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            dbs, self._shards = list(self._shards.values()), {}
        for db in dbs:
            db.close()

    def __enter__(self) -> "ShardedStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ShardedStore {self.path} {self.engine} {self.topic!r} partitions={self.partitions}>"


def _tagged(items, partition: int):
    """(key, partition, value) of a shard's (key, value) scan."""
    for key, value in items:
        yield key, partition, value
