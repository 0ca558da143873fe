"""The oracle: what each key of the crash test must hold after a crash.

It has three parts, all plain files that survive the kill they describe:

* **Operation logs** (one per child thread and cycle, written by the child
  through :class:`OpLog`): a thread appends an *intent* line before it calls
  the engine and an *ack* line after the call returned, each with one
  unbuffered ``os.write``, so both are in the OS before the thread goes on.
  A line cut short by the kill (no newline, or not JSON) is ignored: a lost
  intent means the operation never started, a lost ack only makes an
  acknowledged operation look in flight, which the check tolerates.
* **The expected state** (:class:`ExpectedState`, saved by the driver with
  write-temp, fsync, rename): for every key number the operation that last
  set it and the value's length, or that it deleted it. It is the database's
  content as verified after the previous cycle.
* **The check** (:func:`verify`): every acknowledged operation must be there
  (a SIGKILL loses nothing handed to the OS, synced or not); each thread has
  at most one operation in flight, which may be wholly present or wholly
  absent and never partly; every other key of the key space must be exactly
  as expected (no lost write, no extra key, no resurrected delete). It
  returns how each in-flight operation went and the state resolved
  accordingly, from which the next cycle continues.

Each key is written by exactly one thread (:mod:`.keyspace`), so a key's
expected value follows that thread's program order whatever the interleaving
of threads, and in-flight operations of different threads touch disjoint keys.

Operation kinds: ``put``, ``delete``, ``merge``, ``delete_range``,
``batch`` and ``txn`` (a committed transaction) change keys (all of an
operation's items or none, in order, a later item winning); ``flush``,
``compact`` and ``checkpoint`` change no key and are logged so that a kill
during them is known. ``ingest`` is a table file of distinct keys written
with lsmkv.TableWriter and taken in by ``db.ingest``: its items are applied
like a batch's, all or none. ``rollback`` is a transaction that wrote its
items and was rolled back: it must change nothing, acknowledged or in
flight. A transaction whose commit raised ``ConflictError`` (which another
thread's ingest may cause: an ingest conflicts over its files' whole key
ranges) is acknowledged as *refused* and must change nothing either. A new
atomic write kind needs only its name in :data:`WRITE_KINDS`.

Items: ``(key, length)`` puts a value, ``(key, length, ttl)`` puts one with
a ttl, ``(key, None)`` deletes, ``(key, "merge", n)`` adds ``n`` to a
counter (``UInt64Add``; an absent counter counts as 0; a put of a counter
key sets its number, a delete makes it absent), and ``(key, "range", last)``
deletes keys ``key`` to ``last``, a stretch contiguous in key order
(:meth:`KeySpace.range_bounds`), applied to every key number in it.

Reads inside transactions: a child thread checks what its transactions read
against the state it knows it wrote (the state this cycle started from,
plus its own acknowledged operations) and logs a read that differs; each
such line is a mismatch of the cycle.

Metadata: every batch also sets the metadata entry of its thread
(``meta_name(thread)``) to its own operation id, in the same write batch.
After a crash that entry must name exactly the last batch of the thread
whose data is there: the last acknowledged one, or the in-flight one if it
was applied (an entry that runs ahead of its data, or behind it, means data
and metadata came apart).

Values with a ttl: an item may carry a ttl (ms). The engine dates it when
the call runs, so the oracle knows its deadline only within a window: from
the intent's wall-clock time plus the ttl to the ack's (or, for a write in
flight, the verification's) plus the ttl. A key whose window lies before
the verification must be absent, one whose window lies after it must hold
its value, and one whose window the verification overlaps may be either.
A write in flight that reads the same either way but differs in its
deadline keeps both outcomes in the state (:func:`either_entry`).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field, replace

from .keyspace import KeySpace, content, describe

#: Operations that change keys; each one's items apply atomically.
WRITE_KINDS = frozenset({"put", "delete", "batch", "ingest", "merge", "delete_range", "txn"})
#: Operations that change no key (a kill during one is counted by kind).
MAINTENANCE_KINDS = frozenset({"flush", "compact", "checkpoint"})
#: Operations that write items and then discard them: they must change nothing.
VOID_KINDS = frozenset({"rollback"})
#: The second field of a merge item and of a range-delete item.
MERGE, RANGE = "merge", "range"


def item_keys(item: tuple) -> range:
    """The key numbers an item changes (a range delete: its whole stretch)."""
    if item[1] == RANGE:
        return range(item[0], item[2] + 1)
    return range(item[0], item[0] + 1)


def has_ttl(item: tuple) -> bool:
    """Whether an item is a put with a ttl."""
    return len(item) > 2 and isinstance(item[1], int)


class OracleError(Exception):
    """The oracle itself is inconsistent (a bug in the crash test, not in an engine)."""


def op_id(cycle: int, thread: int, n: int) -> str:
    """The id of a thread's ``n``-th operation in a cycle, as values carry it."""
    return f"c{cycle}.t{thread}.n{n}"


def meta_name(thread: int) -> str:
    """The metadata entry a thread's batches set to their operation id."""
    return f"crashtest/t{thread}"


def thread_of(op: str) -> int:
    """The thread number in an operation id."""
    return int(op.split(".")[1][1:])


#: Slack on each side of a deadline window, in ms (the engines round to ms).
DEADLINE_SLACK_MS = 2
#: The end of a deadline window that may never come: a value that either
#: expires in a window or keeps no ttl (see :func:`either_entry`).
NEVER_MS = 2**63 - 1


@dataclass(frozen=True)
class Intent:
    """One logged operation: ``items`` as the module docstring lists them
    (puts, deletes, merges, range deletes); maintenance operations have
    none. ``at_ms`` is the wall-clock time just before the call, ``acked_ms``
    just after it returned (None while in flight); ``refused`` marks a
    transaction whose commit raised ConflictError (it wrote nothing)."""

    op: str
    kind: str
    items: tuple[tuple, ...] = ()
    sync: bool = False
    at_ms: int = 0
    acked_ms: int | None = None
    refused: bool = False


@dataclass(frozen=True)
class BadRead:
    """A read in a transaction that found what its thread did not write."""

    op: str
    index: int
    expected: str
    found: str


class OpLog:
    """One child thread's operation log for one cycle (append only, unbuffered)."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def intent(self, intent: Intent) -> None:
        line = {"op": intent.op, "kind": intent.kind, "sync": intent.sync, "t": intent.at_ms}
        if intent.items:
            line["items"] = [list(item) for item in intent.items]
        self._write(line)

    def ack(self, op: str, at_ms: int = 0, refused: bool = False) -> None:
        """``op`` returned; ``refused``: a commit that raised ConflictError."""
        line = {"ack": op, "t": at_ms}
        if refused:
            line["refused"] = True
        self._write(line)

    def bad_read(self, read: BadRead) -> None:
        self._write({"bad_read": read.op, "key": read.index, "expected": read.expected, "found": read.found})

    def _write(self, line: dict) -> None:
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
        written = os.write(self._fd, data)
        if written != len(data):  # a regular file takes it whole; anything else is an error here
            raise OSError(f"short write to the operation log ({written} of {len(data)} bytes)")

    def close(self) -> None:
        os.close(self._fd)


@dataclass
class ThreadHistory:
    """What one thread's log says: operations acknowledged (in order) and the
    one in flight at the kill, if any."""

    thread: int
    acked: list[Intent] = field(default_factory=list)
    in_flight: Intent | None = None
    torn_lines: int = 0
    bad_reads: list[BadRead] = field(default_factory=list)


def read_op_log(path: str, thread: int) -> ThreadHistory:
    """Parse a thread's log; a missing file is a thread that logged nothing."""
    history = ThreadHistory(thread)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return history
    pending: Intent | None = None
    for raw in data.split(b"\n")[:-1] + [None]:
        if raw is None:
            if data and not data.endswith(b"\n"):
                history.torn_lines += 1  # the last line, cut by the kill
            break
        try:
            line = json.loads(raw)
        except ValueError:
            history.torn_lines += 1
            continue
        if "bad_read" in line:
            history.bad_reads.append(BadRead(line["bad_read"], int(line["key"]), line["expected"], line["found"]))
        elif "ack" in line:
            if pending is None or line["ack"] != pending.op:
                raise OracleError(f"{path}: ack of {line['ack']} does not follow its intent")
            history.acked.append(replace(pending, acked_ms=int(line.get("t", 0)), refused=bool(line.get("refused"))))
            pending = None
        else:
            if pending is not None:
                raise OracleError(f"{path}: {line['op']} started before {pending.op} was acknowledged")
            pending = Intent(line["op"], line["kind"], tuple(tuple(item) for item in line.get("items", ())),
                             bool(line.get("sync")), int(line.get("t", 0)))
            if pending.kind not in WRITE_KINDS | MAINTENANCE_KINDS | VOID_KINDS:
                raise OracleError(f"{path}: unknown operation kind {pending.kind!r}")
    history.in_flight = pending
    return history


#: Per key number: (op id, value length, deadline window) for a value --
#: the window (earliest, latest) in ms since the epoch, or None without a
#: ttl -- and (op id, None, None) after a delete. A counter's "length" is
#: its number, and its op id the operation that last changed it.
Entry = tuple[str, "int | None", "tuple[int, int] | None"]


@dataclass
class ExpectedState:
    """The content every key must have (keys absent from ``keys`` were never written)."""

    keys: dict[int, Entry] = field(default_factory=dict)
    cycle: int = 0
    #: Thread number -> the operation id of its last batch (the metadata entry).
    meta: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # (op, length) entries, as written before ttls existed, have no window.
        self.keys = {i: e if len(e) > 2 else (e[0], e[1], None) for i, e in self.keys.items()}

    def copy(self) -> "ExpectedState":
        return ExpectedState(dict(self.keys), self.cycle, dict(self.meta))

    def apply(self, intent: Intent, done_by_ms: int | None = None) -> None:
        """The effect of ``intent``, which ran between its ``at_ms`` and
        ``done_by_ms`` (its ack, by default)."""
        if intent.kind not in WRITE_KINDS or intent.refused:
            return
        done_by = intent.acked_ms if done_by_ms is None else done_by_ms
        for item in intent.items:
            index, length = item[0], item[1]
            if length == RANGE:
                for i in item_keys(item):
                    self.keys[i] = (intent.op, None, None)
                continue
            if length == MERGE:
                old = self.keys.get(index)
                if old is not None and old[2] is not None:
                    raise OracleError(f"{intent.op} merges into key {index}, which has a ttl")
                base = 0 if old is None or old[1] is None else old[1]
                self.keys[index] = (intent.op, base + item[2], None)
                continue
            window = None
            if has_ttl(item):
                ttl = item[2]
                window = (intent.at_ms + ttl - DEADLINE_SLACK_MS, (done_by or intent.at_ms) + ttl + DEADLINE_SLACK_MS)
            self.keys[index] = (intent.op, length, window)
        if intent.kind == "batch":
            self.meta[thread_of(intent.op)] = intent.op

    def candidates(self, index: int, lo_ms: int, hi_ms: int) -> tuple[bytes | None, ...]:
        """What a read between ``lo_ms`` and ``hi_ms`` may find for ``index``:
        one value, or, for a value whose deadline window overlaps that time,
        the value or nothing."""
        entry = self.keys.get(index)
        if entry is None or entry[1] is None:
            return (None,)
        data = content(entry[0], index, entry[1])
        window = entry[2]
        if window is None or hi_ms < window[0]:
            return (data,)
        if lo_ms >= window[1]:
            return (None,)
        return (data, None)

    def expected_value(self, index: int) -> bytes | None:
        """What ``index`` holds before any deadline passes."""
        return self.candidates(index, 0, 0)[0]

    def explain(self, index: int) -> str:
        entry = self.keys.get(index)
        if entry is None:
            return "absent (never written)"
        if entry[1] is None:
            return f"absent (deleted by {entry[0]})"
        text = describe(content(entry[0], index, entry[1]), index)
        text = f"{text} (last set by {entry[0]})" if text.startswith("counter") else text
        if entry[2] is not None and entry[2][1] == NEVER_MS:
            text += (f", expiring from {entry[2][0]} ms on or never (a write in flight at an earlier kill left it "
                     "the same content and may have changed its ttl)")
        elif entry[2] is not None:
            text += f", expiring between {entry[2][0]} and {entry[2][1]} ms"
        return text

    def live_keys(self, now_ms: int | None = None) -> int:
        return sum(1 for _, length, window in self.keys.values()
                   if length is not None and (window is None or now_ms is None or window[0] > now_ms))

    def forget_expired(self, now_ms: int) -> None:
        """Entries whose value is surely gone at ``now_ms`` become absences."""
        for index, (op, length, window) in list(self.keys.items()):
            if window is not None and length is not None and window[1] <= now_ms:
                self.keys[index] = (op, None, None)

    def save(self, path: str) -> None:
        """Write atomically (temp file, fsync, rename, fsync the directory)."""
        tmp = path + ".tmp"
        data = json.dumps({"cycle": self.cycle, "keys": {str(i): list(e) for i, e in sorted(self.keys.items())},
                           "meta": {str(t): op for t, op in sorted(self.meta.items())}})
        with open(tmp, "w") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @classmethod
    def load(cls, path: str) -> "ExpectedState":
        with open(path) as f:
            data = json.load(f)
        return cls({int(i): (e[0], e[1], tuple(e[2]) if len(e) > 2 and e[2] else None)
                    for i, e in data["keys"].items()}, data["cycle"],
                   {int(t): op for t, op in data.get("meta", {}).items()})


@dataclass
class Mismatch:
    """One key that holds what the oracle does not allow."""

    key: bytes
    problem: str
    expected: str
    found: str

    def __str__(self) -> str:
        return f"{self.key!r}: {self.problem}: expected {self.expected}, found {self.found}"


@dataclass
class InFlightOutcome:
    """How an operation in flight at the kill turned out."""

    op: str
    kind: str
    #: "applied", "not applied", "no visible effect" (both ways give the same
    #: content), "partly applied" (a failure), "rolled back" (a transaction
    #: being rolled back: its keys must be as if it never ran) or
    #: "maintenance" (no keys).
    outcome: str


@dataclass
class Verdict:
    """The result of checking one recovered database against the oracle."""

    mismatches: list[Mismatch]
    in_flight: list[InFlightOutcome]
    #: The expected state with every in-flight operation resolved the way it went.
    state: ExpectedState
    acked_writes: int = 0
    acked_synced: int = 0
    #: Items (puts) with a ttl among the acknowledged writes.
    acked_ttl: int = 0
    acked_maintenance: int = 0
    keys_checked: int = 0
    torn_lines: int = 0
    #: Acknowledged operations by kind ("txn refused": a commit that conflicted).
    acked_kinds: Counter = field(default_factory=Counter)
    #: Items of the acknowledged writes by kind ("merge", "range delete").
    acked_items: Counter = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def verify(space: KeySpace, base: ExpectedState, histories: list[ThreadHistory],
           scanned: dict[bytes, bytes], looked_up: dict[bytes, bytes | None],
           read_from_ms: int = 0, read_until_ms: int = 0, meta: dict[str, bytes] | None = None) -> Verdict:
    """Check a recovered database against the oracle.

    ``base`` is the state before this cycle, ``histories`` the threads' logs
    of this cycle, ``scanned`` everything a full scan returned, ``looked_up``
    what ``get`` returned for every key of the key space; the reads ran
    between ``read_from_ms`` and ``read_until_ms`` (wall clock), which
    decides what values with a ttl may still be there. ``meta``, if given, is
    the database's metadata entries (db.meta()), checked against the batches.
    """
    lo, hi = read_from_ms, read_until_ms
    expected = base.copy()
    verdict = Verdict([], [], expected)
    for history in histories:
        verdict.torn_lines += history.torn_lines
        for intent in history.acked + ([history.in_flight] if history.in_flight else []):
            for item in intent.items:
                if item[1] == RANGE and space.run_of(item[0]) != space.run_of(item[2]):
                    raise OracleError(f"{intent.op} deletes keys {item[0]}-{item[2]}, not a stretch of one run")
                for index in item_keys(item):
                    if not 0 <= index < space.size or space.owner(index) != history.thread:
                        raise OracleError(f"{intent.op} writes key {index}, which thread {history.thread} "
                                          "does not own")
        for intent in history.acked:
            verdict.acked_kinds[intent.kind + (" refused" if intent.refused else "")] += 1
            if intent.kind in WRITE_KINDS and not intent.refused:
                expected.apply(intent)
                verdict.acked_writes += 1
                verdict.acked_synced += intent.sync
                verdict.acked_ttl += sum(1 for item in intent.items if has_ttl(item))
                verdict.acked_items.update({MERGE: "merge", RANGE: "range delete"}[item[1]] for item in intent.items
                                           if item[1] in (MERGE, RANGE))
            elif intent.kind in MAINTENANCE_KINDS:
                verdict.acked_maintenance += 1
        for bad in history.bad_reads:
            verdict.mismatches.append(Mismatch(space.key(bad.index), f"transaction {bad.op} read a wrong value",
                                               bad.expected, bad.found))

    index_of = space.index_of()
    mismatches = verdict.mismatches
    for key in sorted(set(scanned) - set(index_of)):
        mismatches.append(Mismatch(key, "key outside the key space", "absent", describe(scanned[key])))

    # Keys an in-flight write touches may hold either of two contents.
    undecided: set[int] = set()
    #: For those keys, the state had their in-flight write been applied.
    after_of: dict[int, ExpectedState] = {}
    resolutions: list[Intent] = []
    #: In-flight writes whose two outcomes read the same: (intent, the state
    #: had it been applied, what each of its keys read).
    unseen: list[tuple[Intent, ExpectedState, dict[int, bytes | None]]] = []
    for history in histories:
        intent = history.in_flight
        if intent is None:
            continue
        if intent.kind in VOID_KINDS:  # its keys are checked as if it had not run
            verdict.in_flight.append(InFlightOutcome(intent.op, intent.kind, "rolled back"))
            continue
        if intent.kind not in WRITE_KINDS:
            verdict.in_flight.append(InFlightOutcome(intent.op, intent.kind, "maintenance"))
            continue
        after = ExpectedState({i: e for i, e in expected.keys.items()})
        after.apply(intent, done_by_ms=hi)
        touched = sorted({i for item in intent.items for i in item_keys(item)})
        undecided.update(touched)
        after_of.update((i, after) for i in touched)
        found = {i: scanned.get(space.key(i)) for i in touched}
        is_before = all(found[i] in expected.candidates(i, lo, hi) for i in touched)
        is_after = all(found[i] in after.candidates(i, lo, hi) for i in touched)
        if is_before and is_after:
            outcome = "no visible effect"
            unseen.append((intent, after, found))
        elif is_after:
            outcome = "applied"
            resolutions.append(intent)
        elif is_before:
            outcome = "not applied"
        else:
            outcome = "partly applied"
            for i in touched:
                mismatches.append(Mismatch(space.key(i), f"in-flight {intent.kind} {intent.op} partly applied",
                                           f"{after.explain(i)} if applied, {expected.explain(i)} if not",
                                           describe(found[i], i)))
        verdict.in_flight.append(InFlightOutcome(intent.op, intent.kind, outcome))

    for index in range(space.size):
        key = space.key(index)
        got = scanned.get(key)
        allowed = expected.candidates(index, lo, hi) if index not in undecided else None
        if key in looked_up and looked_up[key] != got:
            # Only a value whose deadline may fall between the scan and the
            # get may be found by the one and missed by the other.
            states = [expected] + ([after_of[index]] if index in after_of else [])
            if not (looked_up[key] is None and any(
                    got in c and None in c for c in (st.candidates(index, lo, hi) for st in states))):
                mismatches.append(Mismatch(key, "get and scan disagree", f"get to return {describe(got, index)} "
                                           "as the scan did", describe(looked_up[key], index)))
        if allowed is None or got in allowed:
            continue
        want = allowed[0]
        entry = expected.keys.get(index)
        if want is not None and got is None:
            problem = "acknowledged write lost"
        elif want is not None:
            problem = "wrong value"
        elif entry is not None and entry[1] is not None:
            problem = "expired key is back"
        elif entry is not None:
            problem = "deleted key is back"
        else:
            problem = "key never written is present"
        mismatches.append(Mismatch(key, problem, expected.explain(index), describe(got, index)))
    verdict.keys_checked = space.size

    #: In-flight batches with no visible effect that their metadata entry decided.
    settled: list[Intent] = []
    if meta is not None:
        _check_meta(histories, verdict, expected, resolutions, settled, meta)
    for intent in resolutions:
        expected.apply(intent, done_by_ms=hi)
    for intent, after, found in unseen:
        if intent in settled:
            continue
        for i, got in found.items():
            entry = either_entry(expected.keys.get(i), after.keys.get(i), got)
            if entry is not None:
                expected.keys[i] = entry
    expected.forget_expired(lo)
    return verdict


def either_entry(before: Entry | None, after: Entry | None, found: bytes | None) -> Entry | None:
    """The entry of a key that a write in flight at the kill may or may not
    have changed, when the read found what either outcome gives (``before``
    and ``after`` are its entries without and with the write; None: never
    written).

    The two may still differ in what comes later: an empty value put again
    without a ttl over one with a ttl reads the same until the deadline,
    and differently after it. So the entry must allow both: a key read as
    absent stays absent whichever ran (a value read as expired stays
    expired); a key read with a value holds that value (the same content in
    both) until the earlier deadline, and from then on may be gone -- until
    the later one, or for good if either has no ttl (its window then ends
    at :data:`NEVER_MS`). The next write of the key decides it again."""
    if before == after:
        return before
    if after is None:
        raise OracleError("an in-flight write's state lost a key it touched")
    if found is None or after[1] is None or before is None or before[1] is None:
        # Read as absent: it stays so. (A value in one outcome and an absence in
        # the other can only both match a read that found the key absent.)
        return (after[0], None, None)
    windows = [w if w is not None else (NEVER_MS, NEVER_MS) for w in (before[2], after[2])]
    start, end = min(w[0] for w in windows), max(w[1] for w in windows)
    return (after[0], after[1], None if start == NEVER_MS else (start, end))


def _check_meta(histories: list[ThreadHistory], verdict: Verdict, expected: ExpectedState,
                resolutions: list[Intent], settled: list[Intent], meta: dict[str, bytes]) -> None:
    """Each thread's metadata entry names the last batch whose data is
    there; an in-flight batch with no visible effect is decided by it
    (added to ``settled``, and to ``resolutions`` if it was applied)."""
    outcome = {o.op: o.outcome for o in verdict.in_flight}
    for history in histories:
        t = history.thread
        name = meta_name(t)
        got = meta[name].decode() if name in meta else None
        before = expected.meta.get(t)
        allowed = {before}
        intent = history.in_flight
        if intent is not None and intent.kind == "batch":
            how = outcome.get(intent.op)
            if how == "applied":
                allowed = {intent.op}
            elif how == "no visible effect":
                allowed = {before, intent.op}
                if got == intent.op:
                    resolutions.append(intent)
                if got in allowed:
                    settled.append(intent)
        if got not in allowed:
            verdict.mismatches.append(Mismatch(name.encode(), "metadata and data came apart",
                                               " or ".join(str(a) for a in sorted(allowed, key=str)), str(got)))
