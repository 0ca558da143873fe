"""QueryServer: a running loader's shards served over HTTP (interactive queries).

``lsmkv kafka load ... --serve HOST:PORT`` runs one of these beside the
loader (partitioned state). It answers only for partitions the loader
holds *active* at that moment: a partition being revoked, lost or owned by
another instance is refused with 421 so the client asks the owner the
member announcements name (members.py). A partition still being rebuilt
from the source topic answers with role "restoring" and how many records
it is behind (null: its end not known yet): a stale answer, marked so.
With ``stale=1`` a standby copy (standby.py) answers for a partition this
instance does not own, with role "standby".
Bytes travel as lowercase hex.

    GET /v1/status                       {"url", "topic", "partitions", "active": {p: stored offset},
                                          "restoring": [p], "starts": {p: offset its assignment started at
                                          (null: rebuilt from the beginning)}, "restored_from_changelog":
                                          {p: records its shard got from the changelog}, "standby": {p: stored offset}
                                          (standby and warm-up copies), "assignment": {"generation", "leader",
                                          "active", "standby", "warmup", "waiting", "warmups_in_group",
                                          "waiting_in_group", "ends", "lags", "probes", "rebalance_seconds"} (the
                                          lag-aware assignment, coordination.py), "placement": {p: the
                                          placement tally of its shard (placement.py)}}
    GET /v1/get?key=HEX&partition=P[&stale=1]
                                         {"partition", "found", "value": HEX|null, "stored",
                                          "role": "active"|"restoring"|"standby", "behind": records|null}
    GET /v1/scan?partition=P[&start=HEX][&end=HEX][&limit=N]
                                         {"partition", "items": [[HEX, HEX], ...], "next": HEX|null, "stored"}

``get`` reads the key from the partition named: which one holds it is
the client's business (routing.py: by the partitioner the group's keys
fit, or every partition in turn). ``scan`` pages through one partition in key order (``limit``, default
1000, at most 10000, entries a page; ``next`` is the ``start`` of the next
page, null at the end). Errors are JSON ``{"error": "..."}``: 400 for bad
input (one message naming the problem), 404 for an unknown path, 421 for
a partition this instance does not hold active, 503 before the loader
knows its topic's partition count. ``ThreadingHTTPServer``: one thread a
request, reading the engines (which take concurrent readers) while the
loader writes.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from ..errors import LoaderError, SettingError

log = logging.getLogger(__name__)

DEFAULT_PAGE = 1000
MAX_PAGE = 10_000


class _BadRequest(Exception):
    def __init__(self, status: int, message: str, **extra) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); SettingError naming ``{serve}`` if it is not one."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise SettingError(f"{{serve}} needs HOST:PORT (e.g. 127.0.0.1:8080), not {SettingError.literal(repr(text))}")
    return host.strip("[]"), int(port)


def _hex_arg(query: dict, name: str, required: bool = False) -> bytes | None:
    values = query.get(name)
    if not values:
        if required:
            raise _BadRequest(400, f"missing query parameter {name!r} (hex bytes)")
        return None
    try:
        return bytes.fromhex(values[0])
    except ValueError:
        raise _BadRequest(400, f"query parameter {name!r} is not hex: {values[0][:60]!r}") from None


def _int_arg(query: dict, name: str, default: int | None = None) -> int:
    values = query.get(name)
    if not values:
        if default is None:
            raise _BadRequest(400, f"missing query parameter {name!r} (an integer)")
        return default
    if not values[0].isdigit():
        raise _BadRequest(400, f"query parameter {name!r} is not a non-negative integer: {values[0][:60]!r}")
    return int(values[0])


class QueryServer:
    """Serves ``loader``'s active shards on ``host:port`` (port 0: a free
    one; ``url`` says which) until :meth:`close`."""

    def __init__(self, loader, host: str, port: int, advertised: str | None = None) -> None:
        if loader.shards is None:
            raise LoaderError("serving queries needs partitioned state (--partitioned)")
        self._loader = loader
        #: The StandbyReplicator of this instance (None: no standbys): its
        #: copies answer gets that ask for ``stale=1``.
        self.standby = None
        #: The LagAwareCoordination of this instance (None: none): its
        #: latest assignment shows in the status.
        self.coordination = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                server._handle(self)

            def log_message(self, fmt, *args) -> None:  # requests are not logged to stderr
                log.debug("%s " + fmt, self.address_string(), *args)

        try:
            self._httpd = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise LoaderError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
        self._httpd.daemon_threads = True
        self.host, self.port = host, self._httpd.server_address[1]
        self.url = advertised or f"http://{host}:{self.port}"
        self.requests = 0
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="lsmkv-kafka-serve", daemon=True)
        self._thread.start()

    # -- requests -----------------------------------------------------------------------------------

    def _handle(self, req: BaseHTTPRequestHandler) -> None:
        self.requests += 1
        parts = urlsplit(req.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        try:
            if parts.path == "/v1/status":
                body = self.status()
            elif parts.path == "/v1/get":
                body = self._get(_hex_arg(query, "key", required=True), self._partition_arg(query),
                                 query.get("stale") == ["1"])
            elif parts.path == "/v1/scan":
                body = self._scan(query)
            else:
                raise _BadRequest(404, f"no such endpoint {parts.path!r} (try /v1/status, /v1/get, /v1/scan)")
            status = 200
        except _BadRequest as exc:
            status, body = exc.status, {"error": str(exc), **exc.extra}
        except Exception as exc:  # noqa: BLE001 - a failed read is the request's error, not the server's end
            log.warning("serving %s: %r", req.path, exc)
            status, body = 500, {"error": f"{type(exc).__name__}: {exc}"}
        data = json.dumps(body).encode()
        req.send_response(status)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        req.wfile.write(data)

    def status(self) -> dict:
        loader = self._loader
        held = loader.held()
        active = {str(p): stored for (_, p), (state, stored) in sorted(held.items()) if state == "active"}
        starts = {str(p): pm.start for (_, p), pm in list(loader.metrics.partitions.items()) if str(p) in active}
        restored = {str(p): pm.restored for (_, p), pm in list(loader.metrics.partitions.items())
                    if str(p) in active and pm.restored}
        return {"url": self.url, "topic": loader.shards.topic, "partitions": loader.shards.partitions,
                "active": active, "restoring": loader.restoring(), "starts": starts,
                "restored_from_changelog": restored,
                "standby": {} if self.standby is None else {str(p): o for p, o in
                                                            sorted(self.standby.held().items())},
                "assignment": None if self.coordination is None else self.coordination.status(),
                "placement": {str(p): t for p, t in sorted(loader.placements().items())}}

    def _owned(self, partition: int):
        db = self._loader.shard_of(partition)
        if db is None:
            raise _BadRequest(421, f"this instance ({self.url}) does not hold partition {partition} active",
                              partition=partition, active=sorted(int(p) for p in self.status()["active"]))
        return db

    def _still_owned(self, partition: int) -> int | None:
        """The partition's stored offset if still held active (a read that
        raced a revoke is refused: the new owner may hold newer values)."""
        state, stored = self._loader.held().get((self._loader.shards.topic, partition), (None, None))
        if state != "active":
            raise _BadRequest(421, f"partition {partition} moved away from {self.url} during the read",
                              partition=partition)
        return stored

    def _partitions(self) -> int:
        count = self._loader.shards.partitions
        if count is None:
            raise _BadRequest(503, "not serving yet: the loader has not joined its group")
        return count

    def _partition_arg(self, query: dict) -> int:
        count = self._partitions()
        if not query.get("partition"):
            raise _BadRequest(400, "missing query parameter 'partition' (the partition to read: StoreClient "
                                   "finds which, docs/kafka.md 'Routing')")
        partition = _int_arg(query, "partition")
        if partition >= count:
            raise _BadRequest(400, f"partition {partition} does not exist (the topic has {count})")
        return partition

    def _get(self, key: bytes, partition: int, stale_ok: bool = False) -> dict:
        if stale_ok and self._loader.shard_of(partition) is None and self.standby is not None:
            db = self.standby.shard_of(partition)
            if db is not None:
                value = db.get(key)
                stored = self.standby.held().get(partition, -1)
                if stored != -1:
                    return {"partition": partition, "found": value is not None,
                            "value": None if value is None else value.hex(), "stored": stored, "role": "standby",
                            "behind": None}
        db = self._owned(partition)
        # Restoring is asked before the read: a shard that had finished
        # restoring before the read answers with at least the values its
        # previous owner served; otherwise the answer is marked stale.
        behind = self._loader.restore_lag().get(partition, 0)
        value = db.get(key)
        stored = self._still_owned(partition)
        return {"partition": partition, "found": value is not None, "value": None if value is None else value.hex(),
                "stored": stored, "role": "active" if behind == 0 else "restoring", "behind": behind}

    def _scan(self, query: dict) -> dict:
        partition = self._partition_arg(query)
        start, end = _hex_arg(query, "start"), _hex_arg(query, "end")
        limit = _int_arg(query, "limit", DEFAULT_PAGE)
        if not 1 <= limit <= MAX_PAGE:
            raise _BadRequest(400, f"limit must be from 1 to {MAX_PAGE}, not {limit}")
        items = []
        nxt = None
        for key, value in self._owned(partition).scan(start, end):
            if len(items) == limit:
                nxt = key.hex()
                break
            items.append([key.hex(), value.hex()])
        stored = self._still_owned(partition)
        return {"partition": partition, "items": items, "next": nxt, "stored": stored}

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
