"""StoreClient: reads of a loader group's partitioned state from anywhere.

    from lsmkv.kafka import StoreClient
    client = StoreClient(bootstrap_servers="localhost:9092", group="orders-table")
    client.get(b"k42")                 # the value, or None, from the partition that holds the key
    client.lookup(b"k42")              # the same, with who answered, how far its shard is applied, and how
                                       # the key was routed (by which partitioner, or every owner asked)
    list(client.scan(b"k1", b"k2"))    # (key, value) over every partition, in key order
    client.owners()                    # {partition: Owner(url, stored offset, ...)}
    client.route()                     # Route: the partitioner reads go by now, or None, and why

It finds the owners in the group's member announcements (members.py),
routes a key by the partitioner every partition's keys fit, as the owners'
placement tallies announce it (routing.py, placement.py), or, when no
partitioner is known to fit, asks every partition's owner (in parallel)
and answers from the one holding the key; it asks an owner over HTTP
(serve.py). Announcements are hints: a server answers only for partitions
it holds active, so a client turned away (421), or unable to connect (an
instance killed a moment ago), reads the announcements again and retries
until ``timeout``; then QueryError names the partition nobody served. A
key is reported absent only once every partition that may hold it
answered.
"""

from __future__ import annotations

import heapq
import http.client
import itertools
import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlencode

from ..errors import KafkaIntegrationError
from .members import Member, claims, read_members, standby_claims
from .routing import Route, choose_route

#: Seconds the member map is reused before it is read again.
MEMBERS_TTL = 2.0
#: Seconds between attempts while no instance answers for a partition.
RETRY_PAUSE = 0.25
#: Partitions asked at once when every owner is asked.
FAN_OUT = 8
#: Answer roles, least stale first.
_ROLES = ("active", "restoring", "standby")


def route_of(members: list[Member], partitions: int) -> Route:
    """How reads of a topic of ``partitions`` partitions go, given the
    instances' announcements ``members``: by each partition's newest
    claimant's tally, a partition it lists as restoring never preferred for
    a key several hold (routing.py's choose_route)."""
    newest = {p: ms[0] for p, ms in claims(members).items() if p < partitions}
    return choose_route(partitions, {p: m.placement.get(p) for p, m in newest.items()},
                        {p for p, m in newest.items() if p in m.restoring})


class QueryError(KafkaIntegrationError):
    """No instance served the request within the client's timeout."""


@dataclass(frozen=True)
class Owner:
    partition: int
    url: str
    #: The owner's shard had applied every record below this when it announced.
    stored: int | None
    #: Being rebuilt from the source topic (its answers may be old values).
    restoring: bool


@dataclass(frozen=True)
class Lookup:
    key: bytes
    value: bytes | None
    #: The partition answered from (None: the key was absent from every
    #: partition asked, ``routed_by`` None).
    partition: int | None
    #: The instance that answered, and in what role: "active" (a caught-up
    #: owner: the current value), "restoring" (an owner still rebuilding
    #: the partition's shard from the topic) or "standby" (a warm copy on
    #: another instance, asked when no owner answered): possibly older.
    #: Every owner asked and the key absent: the stalest role among the
    #: answers, ``url`` None (``asked`` names them).
    url: str | None
    role: str
    #: The answering shard had applied every record below this offset.
    stored: int | None
    #: Records the answer may be behind (0: current; None: not known yet).
    behind: int | None
    #: The partitioner family the key was routed by ("consistent",
    #: "murmur2", "fnv1a"), or None: every partition's owner was asked.
    routed_by: str | None = None
    #: Why it went that way (routing.py's Route.reason).
    route: str = ""
    #: Partitions found holding the key (several only with every owner
    #: asked, when producers put one key on several partitions).
    found_in: tuple[int, ...] = ()
    #: The instances asked.
    asked: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        return self.value is not None

    @property
    def stale(self) -> bool:
        return self.role != "active"


class _Refused(Exception):
    pass


class StoreClient:
    """Reads of the partitioned state of ``group`` (the loaders' consumer group)."""

    def __init__(self, bootstrap_servers: str, group: str, *, timeout: float = 15.0,
                 client_config: dict | None = None, members_topic: str | None = None,
                 http_timeout: float = 5.0) -> None:
        if not isinstance(group, str) or not group:
            raise ValueError(f"group must be a non-empty consumer group id, not {group!r}")
        self.bootstrap_servers = bootstrap_servers
        self.group = group
        self.timeout = timeout
        self._client_config = client_config
        self._members_topic = members_topic
        self._http_timeout = http_timeout
        self._members: list[Member] = []
        self._read_at = 0.0
        self._members_lock = threading.Lock()

    # -- the member map ---------------------------------------------------------------------------

    def members(self, refresh: bool = False) -> list[Member]:
        """Every instance's latest announcement (cached for MEMBERS_TTL s)."""
        with self._members_lock:
            if refresh or time.monotonic() - self._read_at > MEMBERS_TTL:
                self._members = read_members(self.bootstrap_servers, self.group, topic=self._members_topic,
                                             client_config=self._client_config, timeout=self.timeout)
                self._read_at = time.monotonic()
            return self._members

    def partitions(self, refresh: bool = False) -> int:
        """The topic's partition count, as the instances announce it."""
        deadline = time.monotonic() + self.timeout
        while True:
            counts = [m.partitions for m in self.members(refresh) if m.partitions]
            if counts:
                return counts[-1]
            if time.monotonic() > deadline:
                raise QueryError(f"no instance of group {self.group!r} has announced itself (is a loader running "
                                 "with --serve?)")
            time.sleep(RETRY_PAUSE)
            refresh = True

    def owners(self, refresh: bool = False) -> dict[int, Owner]:
        """{partition: its active owner as last announced} (a partition no
        live announcement claims is missing)."""
        out = {}
        for p, ms in sorted(claims(self.members(refresh)).items()):
            m = ms[0]
            out[p] = Owner(p, m.url, m.active.get(p), p in m.restoring)
        return out

    def route(self, refresh: bool = False) -> Route:
        """How reads go now: by the partitioner every partition's keys fit,
        as each partition's newest claimant announces its shard's placement
        tally, or to every owner (``partitioner`` None); ``reason`` says
        why."""
        count = self.partitions(refresh)
        return route_of(self.members(), count)

    # -- reads -------------------------------------------------------------------------------------

    def _ask(self, partition: int, path: str, params: dict, standby: bool = False) -> tuple[str, dict]:
        """GET ``path`` from an instance holding ``partition`` active,
        newest claim first (then, with ``standby``, from its standby copies,
        most applied first), reading the announcements again until one
        answers or the timeout passes."""
        deadline = time.monotonic() + self.timeout
        refresh = False
        tried: list[str] = []
        while True:
            members = self.members(refresh)
            candidates = [(m, params) for m in claims(members).get(partition, [])]
            if standby:
                candidates += [(m, {**params, "stale": 1}) for m in standby_claims(members).get(partition, [])]
            for m, query in candidates:
                try:
                    return m.url, self._http(m.url + path + "?" + urlencode(query))
                except _Refused as exc:
                    tried.append(f"{m.url}: {exc}")
            if time.monotonic() > deadline:
                seen = "; ".join(tried[-3:]) or "no instance claims it"
                raise QueryError(f"no instance of group {self.group!r} served partition {partition} within "
                                 f"{self.timeout:g} s ({seen})")
            time.sleep(RETRY_PAUSE)
            refresh = True

    def _http(self, url: str) -> dict:
        try:
            with urllib.request.urlopen(url, timeout=self._http_timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            try:
                body = json.loads(exc.read())
            except ValueError:
                body = {}
            if exc.code == 421 or exc.code >= 500:
                raise _Refused(body.get("error", f"HTTP {exc.code}")) from None
            raise QueryError(f"{url}: HTTP {exc.code}: {body.get('error', exc.reason)}") from None
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            # HTTPException: the instance went away in the middle of its
            # answer (IncompleteRead, a bad status line): the next owner
            # is asked, as for one that does not answer at all.
            raise _Refused(f"unreachable ({getattr(exc, 'reason', exc)})") from None

    def lookup(self, key: bytes) -> Lookup:
        """``key``'s value from the partition holding it, with who answered
        and how the key was routed; when no owner of a partition answers,
        from a standby copy of it (``role`` "standby", ``behind``: how many
        offsets it may be behind)."""
        return self._lookup(key, standby=True)

    def get(self, key: bytes) -> bytes | None:
        """``key``'s value (None if absent) from the active owner of the
        partition holding it (waiting, up to ``timeout``, for owners to
        answer)."""
        return self._lookup(key, standby=False).value

    def _lookup(self, key, standby: bool) -> Lookup:
        key = _as_key(key)
        route = self.route()
        partition = route.partition_of(key)
        if partition is not None:
            url, body = self._ask(partition, "/v1/get", {"key": key.hex(), "partition": partition}, standby=standby)
            return self._answer(key, route, [(partition, url, body)])
        # Every partition's owner is asked: none may hold the key unseen.
        with ThreadPoolExecutor(max_workers=min(FAN_OUT, route.partitions),
                                thread_name_prefix="lsmkv-query") as pool:
            answers = list(pool.map(lambda p: (p, *self._ask(p, "/v1/get", {"key": key.hex(), "partition": p},
                                                               standby=standby)), range(route.partitions)))
        return self._answer(key, route, answers)

    def _answer(self, key: bytes, route: Route, answers: list) -> Lookup:
        """The Lookup of ``answers`` ([(partition, url, body)]): the value
        from the partition route.prefer picks among those holding the key."""
        asked = tuple(dict.fromkeys(url for _, url, _ in answers))
        found = {p: (url, body) for p, url, body in answers if body["value"] is not None}
        if found:
            p = route.prefer(key, found)
            url, body = found[p]
            role, behind = self._staleness(p, body)
            return Lookup(key, bytes.fromhex(body["value"]), p, url, role, body.get("stored"), behind,
                          route.partitioner, route.reason, tuple(sorted(found)), asked)
        rated = [(p, url, body, *self._staleness(p, body)) for p, url, body in answers]
        if len(rated) == 1:
            p, url, body, role, behind = rated[0]
            return Lookup(key, None, p, url, role, body.get("stored"), behind, route.partitioner, route.reason,
                          (), asked)
        # Absent everywhere: as stale as the stalest answer.
        worst = max(rated, key=lambda r: _ROLES.index(r[3]) if r[3] in _ROLES else len(_ROLES))
        stale = [r[4] for r in rated if r[3] != "active"]
        behind = 0 if not stale else (None if any(b is None for b in stale) else max(stale))
        return Lookup(key, None, None, None, worst[3], None, behind, route.partitioner, route.reason, (), asked)

    def _staleness(self, partition: int, body: dict) -> tuple[str, int | None]:
        """(role, records it may be behind) of one answer."""
        role = body.get("role", "active")
        behind = 0 if role == "active" else body.get("behind")
        if role == "standby":
            # How far the copy may be behind: the owner's last announced
            # offset minus the copy's (a dead owner's is a lower bound).
            owners = claims(self._members).get(partition, [])
            owned = owners[0].active.get(partition) if owners else None
            stored = body.get("stored")
            behind = None if owned is None or stored is None else max(0, owned - stored)
        return role, behind

    def scan(self, start: bytes | None = None, end: bytes | None = None):
        """(key, value) with start <= key < end over every partition, in key
        order (each partition paged from its owner; pages are read as the
        owner holds them then). A key held by several partitions is listed
        once, with the value ``lookup`` answers (route.prefer)."""
        start = None if start is None else _as_key(start)
        end = None if end is None else _as_key(end)
        route = self.route()
        merged = heapq.merge(*(self._scan_partition(p, start, end) for p in range(route.partitions)),
                             key=lambda kpv: kpv[0])
        for key, group in itertools.groupby(merged, key=lambda kpv: kpv[0]):
            holders = {p: value for _, p, value in group}
            yield key, holders[route.prefer(key, holders) if len(holders) > 1 else next(iter(holders))]

    def _scan_partition(self, partition: int, start: bytes | None, end: bytes | None):
        cursor = start
        while True:
            params = {"partition": partition, "limit": 1000}
            if cursor is not None:
                params["start"] = cursor.hex()
            if end is not None:
                params["end"] = end.hex()
            _, body = self._ask(partition, "/v1/scan", params)
            for k, v in body["items"]:
                yield bytes.fromhex(k), partition, bytes.fromhex(v)
            if body["next"] is None:
                return
            cursor = bytes.fromhex(body["next"])


def _as_key(key) -> bytes:
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    raise TypeError(f"a key is bytes (or str, encoded as UTF-8), not {type(key).__name__}")
