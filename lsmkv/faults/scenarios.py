"""One fault injection each, run on real files, and the verdict on what followed.

* :func:`io_error`: an I/O error (EIO) or a full disk (ENOSPC, optionally
  sticky) at the Nth call of one file-system operation during a workload.
  The failing call must raise BackgroundError carrying the errno; reads must
  return exactly the acknowledged writes (and, when the log syncer's fsync
  failed a sync write, possibly that write too: it was applied before the
  fsync); resume() (after the cause is
  cleared) or a reopen must bring writes back with nothing acknowledged
  lost; the engine's checker must find the database healthy.
* :func:`power_cut`: the power is cut at the Nth file-system call (the write
  it hits may land torn), then either lost (unsynced data dropped, wholly or
  partly) or the crash is a process kill (nothing handed to the OS lost).
  The reopened database must hold the state after some prefix of the
  workload that includes every write the model promises.
* :func:`bit_flip`: one bit flipped in the Nth read of a kind of file. The
  engine must report CorruptionError naming a file and an offset or page
  (and leave the files intact), or return exactly the right data.

Each returns an :class:`Outcome`; ``outcome.failed`` marks a broken promise.
"""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass

from lsmkv.base.errors import BackgroundError, CorruptionError
from lsmkv.base.fault_fs import BitFlip, FaultInjectionFS

from .workload import (Engine, Op, apply_to_model, first_matching_prefix, keys_of, oracle, read_state,
                       run_ops)

RECOVERED = "recovered"      # the fault surfaced as a clear error and the DB recovered with its data
TOLERATED = "tolerated"      # the fault fired but needed no error (e.g. an obsolete file not removed)
NOT_REACHED = "not reached"  # the workload made fewer calls than N
DETECTED = "detected"        # a bit flip reported as CorruptionError (file and offset or page)
HARMLESS = "harmless"        # a bit flip that changed nothing (verified data, healthy files)
FAILED = "FAILED"


@dataclass
class Outcome:
    scenario: str
    engine: str
    kind: str
    result: str
    detail: str = ""
    #: For bit flips: what the flipped byte belonged to (e.g. "table: index block").
    structure: str = ""

    @property
    def failed(self) -> bool:
        return self.result == FAILED


class Broken(AssertionError):
    """A scenario's check failed (turned into a FAILED outcome)."""


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise Broken(message)


def _errname(error: int) -> str:
    return errno.errorcode.get(error, str(error))


def _describe(state: dict, expected: dict) -> str:
    missing = sorted(set(expected) - set(state))[:3]
    extra = sorted(set(state) - set(expected))[:3]
    wrong = sorted(k for k in set(state) & set(expected) if state[k] != expected[k])[:3]
    return f"missing {missing}, unexpected {extra}, wrong values {wrong}"


def _close_quietly(db) -> None:
    if db is not None and not db.closed:
        try:
            db.close()
        except Exception:  # noqa: BLE001 - already judged
            db._simulate_crash()


def _verify_reopened(engine: Engine, path: str, allowed: list[dict], keys: list[bytes]) -> dict:
    """Reopen with the real file system: the state must be one of ``allowed``
    and the checker must find the database healthy."""
    db = engine.open(path)
    try:
        state = read_state(db, keys)
    finally:
        db.close()
    _expect(state in allowed, f"after reopening: {_describe(state, allowed[0])}")
    report = engine.check(path)
    _expect(report.ok, f"check: {report.problems[:3]}")
    return state


# -- I/O errors and a full disk ------------------------------------------------------------


def io_error(engine: Engine, workdir: str, ops: list[Op], operation: str, nth: int, error: int = errno.EIO,
             *, sticky: bool = False, resume: bool = True, torn: int | None = None, seed: int = 0) -> Outcome:
    """Fail the ``nth`` call of ``operation`` (after the database is open)
    with ``error``; ``sticky`` keeps failing until cleared (a full disk);
    ``torn`` (writes) lets that many bytes of the write land first. ENOSPC
    on "open" counts (and fails) only the opens that create a file."""
    kind = (f"{operation}:{_errname(error)}" + (":sticky" if sticky else "") + (":torn" if torn else "")
            + ("" if resume else ":reopen"))
    path = os.path.join(workdir, "db")
    states = oracle(ops)
    keys = keys_of(ops)
    fs = FaultInjectionFS(seed=seed)
    db = engine.open(path, fs)
    try:
        rule = fs.fail(operation, error=error, nth=nth, sticky=sticky, torn_prefix=torn)
        run = run_ops(db, ops)
        if run.error is None:
            fs.clear()
            result = TOLERATED if rule.fired else NOT_REACHED
            _expect(read_state(db, keys) == states[-1], "a tolerated fault changed the data")
            db.close()
            _verify_reopened(engine, path, [states[-1]], keys)
            return Outcome("io-error", engine.name, kind, result, f"N={nth}")
        exc = run.error
        _expect(isinstance(exc, BackgroundError) and exc.errno == error,
                f"op {run.acked} ({ops[run.acked].kind}) raised {type(exc).__name__}: {exc} "
                f"(expected BackgroundError with errno {_errname(error)})")
        acked = run.acked
        state = read_state(db, keys)
        allowed = [states[acked]]
        if operation == "sync" and ops[acked].sync and ops[acked].is_write:
            # With group commit a sync write is applied before the log
            # syncer's fsync: if that fsync fails, the write stays applied
            # (not known durable), as docs/reliability.md says.
            allowed.append(states[acked + 1])
        _expect(state in allowed, f"reads in the error state: {_describe(state, states[acked])}")
        base = state
        _expect(db.stats()["writes_stopped"], "stats() does not report the error state")
        try:
            db.put(b"write-while-stopped", b"x")
        except BackgroundError:
            pass
        else:
            raise Broken("a write succeeded while writes were stopped")
        if sticky:
            try:
                db.resume()
            except BackgroundError as again:
                _expect(again.errno == error, f"resume() with the cause still there raised: {again}")
                _expect(db.stats()["writes_stopped"], "a failed resume() left the error state")
            _expect(read_state(db, keys) == base, "reads changed after a failed resume()")
        fs.clear()
        if not resume:
            db.close()
            _verify_reopened(engine, path, [states[acked], states[min(acked + 1, len(ops))]], keys)
            return Outcome("io-error", engine.name, kind, RECOVERED, f"N={nth}, op {acked} failed; reopened")
        db.resume()
        _expect(read_state(db, keys) == base, "reads changed after resume()")
        model = dict(base)
        rest = ops[acked + 1:]
        again = run_ops(db, rest)
        _expect(again.error is None, f"after resume(): {again.error!r}")
        for op in rest:
            apply_to_model(model, op)
        _expect(read_state(db, keys) == model, "writes after resume() went wrong")
        db.close()
        _verify_reopened(engine, path, [model], keys)
        return Outcome("io-error", engine.name, kind, RECOVERED, f"N={nth}, op {acked} failed; resumed")
    except Broken as exc:
        return Outcome("io-error", engine.name, kind, FAILED, f"N={nth}: {exc}")
    except Exception as exc:  # noqa: BLE001 - e.g. resume() failing once the cause was cleared
        return Outcome("io-error", engine.name, kind, FAILED, f"N={nth}: {exc!r}")
    finally:
        _close_quietly(db)


# -- power loss ---------------------------------------------------------------------------------

POWER_MODES = ("power-loss", "partial-power-loss", "kill")


def power_cut(engine: Engine, workdir: str, ops: list[Op], at_call: int, *, torn: int | None = None,
              mode: str = "power-loss", seed: int = 0) -> Outcome:
    """Cut the power at file-system call ``at_call`` (counted from opening a
    new database), abandon the database, then lose the unsynced data
    (``mode`` "power-loss"), a random part of it ("partial-power-loss"), or
    nothing ("kill": a process crash). The reopened database must hold the
    state after a prefix of ``ops`` that includes every write acknowledged
    with sync=True (and everything before a flush), or for "kill" every
    acknowledged write."""
    kind = mode + (":torn" if torn else "")
    path = os.path.join(workdir, "db")
    states = oracle(ops)
    keys = keys_of(ops)
    fs = FaultInjectionFS(seed=seed)
    fs.cut_power(at_call, torn)
    db = None
    acked = durable = 0
    try:
        db = engine.open(path, fs)
        run = run_ops(db, ops)
        acked, durable = run.acked, run.durable
    except Exception:  # noqa: BLE001 - the cut hit the open itself
        pass
    if fs.powered:
        _close_quietly(db)
        return Outcome("power-loss", engine.name, kind, NOT_REACHED, f"N={at_call}")
    if db is not None:
        db._simulate_crash()
    if mode == "kill":
        fs.power_on()
    else:
        fs.power_loss(partial=mode == "partial-power-loss")
    low = acked if mode == "kill" else durable
    high = min(acked + 1, len(ops))
    where = f"N={at_call}: {acked} ops acknowledged, {durable} durable"
    db2 = None
    try:
        try:
            db2 = engine.open(path, fs)
        except Exception as exc:  # noqa: BLE001
            raise Broken(f"the database did not open: {exc!r}") from None
        state = read_state(db2, keys)
        p = first_matching_prefix(states, state, low, high)
        _expect(p is not None, f"no prefix in [{low}, {high}] matches: {_describe(state, states[high])}")
        db2.put(b"after-the-crash", b"1", sync=True)
        db2.close()
        state[b"after-the-crash"] = b"1"
        _verify_reopened(engine, path, [state], keys)
        return Outcome("power-loss", engine.name, kind, RECOVERED, f"{where}, prefix {p} recovered")
    except Broken as exc:
        return Outcome("power-loss", engine.name, kind, FAILED, f"{where}: {exc}")
    except Exception as exc:  # noqa: BLE001 - e.g. corruption met reading the recovered database
        return Outcome("power-loss", engine.name, kind, FAILED, f"{where}: {exc!r}")
    finally:
        _close_quietly(db2)


def count_calls(engine: Engine, workdir: str, ops: list[Op], *, with_open: bool = False) -> dict:
    """File-system calls per operation kind the workload makes (from opening
    a new database on, with ``with_open``; else from after it), their total
    under "all", and under "create" the opens that created a file."""
    fs = FaultInjectionFS()
    db = engine.open(os.path.join(workdir, "db"), fs)
    before = {} if with_open else dict(fs.counters.calls)
    created_before = 0 if with_open else fs.counters.creations
    run = run_ops(db, ops)
    calls = {op: n - before.get(op, 0) for op, n in fs.counters.calls.items()}
    created = fs.counters.creations - created_before
    db.close()
    if run.error is not None:
        raise run.error
    calls["all"] = sum(calls.values())
    calls["create"] = created
    return calls


# -- bit flips ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FlipTarget:
    """What a bit-flip run damages: reads of files whose names contain
    ``path_contains`` in a database left as ``pristine`` says (see
    make_pristine); ``records_only`` keeps flips inside a log's records
    (out of its preallocated, never-written space)."""

    label: str
    path_contains: str
    pristine: str
    records_only: bool = False


FLIP_TARGETS = {
    "lsm": [FlipTarget("table", ".sst", "closed"), FlipTarget("manifest", "MANIFEST-", "closed"),
            FlipTarget("CURRENT", "CURRENT", "closed"),
            FlipTarget("log records", ".log", "crashed", records_only=True),
            FlipTarget("log, whole file", ".log", "crashed")],
    # (btree format 4 writes no checkpoint journal; a format-3 file's journal
    # is fuzzed by tests/test_fuzz_decoders.py.)
    "btree": [FlipTarget("page file", "btree.pages", "closed"), FlipTarget("log", "btree.log", "crashed")],
}


def flip_range(pristine: str, target: FlipTarget) -> tuple[int, int] | None:
    """The file offsets flips of ``target`` may hit (None: anywhere)."""
    if not target.records_only:
        return None
    names = [n for n in os.listdir(pristine) if target.path_contains in n]
    if len(names) != 1:
        raise ValueError(f"{pristine} holds {names} for {target.label}")
    with open(os.path.join(pristine, names[0]), "rb") as f:
        data = f.read()
    return 0, len(data.rstrip(b"\0"))  # records end where the zeros of unwritten space begin


def make_pristine(engine: Engine, directory: str, ops: list[Op], state_kind: str) -> dict:
    """Build a database in ``directory`` from ``ops`` and leave it as
    ``state_kind`` says: "closed" (closed cleanly after a final flush, so
    that opening it reads only existing files), "crashed" (abandoned with
    writes only in its log). Returns the state it holds."""
    fs = FaultInjectionFS()
    db = engine.open(directory, fs)
    run = run_ops(db, ops)
    if run.error is not None:
        raise run.error
    states = oracle(ops)
    if state_kind == "closed":
        db.flush()
        db.close()
    elif state_kind == "crashed":
        tail = [Op("put", ((b"unflushed%02d" % i, b"in the log only %d" % i),), i % 3 == 0) for i in range(12)]
        run = run_ops(db, tail)
        if run.error is not None:
            raise run.error
        states = oracle(ops + tail)
        db._simulate_crash()
        fs.power_on()
    else:
        raise ValueError(state_kind)
    return states[-1]


def count_reads(engine: Engine, pristine: str, workdir: str, target: FlipTarget) -> int:
    """Reads of ``target`` one bit-flip run makes."""
    fs = FaultInjectionFS()
    fs.flip_bits(nth=1 << 62, path_contains=target.path_contains, within=flip_range(pristine, target))
    path = os.path.join(workdir, "db")
    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(pristine, path)
    _read_everything(engine, path, fs, [])
    shutil.rmtree(path)
    return fs.matching_reads


def _read_everything(engine: Engine, path: str, fs: FaultInjectionFS, keys: list[bytes]) -> list[dict]:
    db = engine.open(path, fs)
    try:
        states = [read_state(db, keys)]
        if engine.name == "lsm":
            db.compact_range()
            states.append(read_state(db, keys))
    finally:
        _close_quietly(db)
    return states


def _corruption_in(exc: BaseException) -> CorruptionError | None:
    while exc is not None:
        if isinstance(exc, CorruptionError):
            return exc
        exc = exc.__cause__
    return None


def bit_flip(engine: Engine, pristine: str, workdir: str, target: FlipTarget, nth: int, expected: dict,
             keys: list[bytes], seed: int = 0) -> Outcome:
    """Flip one bit in the ``nth`` read of ``target`` while opening a copy
    of ``pristine``, reading everything back (and, for lsmkv, compacting it
    all and reading again)."""
    path = os.path.join(workdir, "db")
    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(pristine, path)
    fs = FaultInjectionFS(seed=seed)
    fs.flip_bits(nth=nth, path_contains=target.path_contains, within=flip_range(pristine, target))
    kind = f"flip:{target.label}"
    try:
        try:
            states = _read_everything(engine, path, fs, keys)
            caught = None
        except Exception as exc:  # noqa: BLE001 - judged below
            states, caught = [], exc
        if not fs.flips:
            return Outcome("bit-flip", engine.name, kind, NOT_REACHED, f"read {nth}")
        flip = fs.flips[0]
        structure = classify_flip(engine.name, [pristine, path], flip)
        where = f"read {nth}: bit {flip.bit} of byte {flip.offset} of {os.path.basename(flip.path)} ({structure})"
        if caught is not None:
            corruption = _corruption_in(caught)
            _expect(corruption is not None, f"{where}: raised {type(caught).__name__}: {caught}")
            _expect(corruption.path is not None and (corruption.offset is not None or corruption.page is not None),
                    f"{where}: the CorruptionError names no file and offset or page: {corruption}")
            # A flip in data read back damages nothing on disk.
            _verify_reopened(engine, path, [expected], keys)
            named = os.path.basename(corruption.path) == os.path.basename(flip.path)
            return Outcome("bit-flip", engine.name, kind, DETECTED,
                           f"{where}: {corruption}" + ("" if named else " (reported in another file)"), structure)
        _expect(all(state == expected for state in states),
                f"{where}: UNDETECTED, wrong data: {_describe(states[0], expected)}")
        _verify_reopened(engine, path, [expected], keys)
        return Outcome("bit-flip", engine.name, kind, HARMLESS, where, structure)
    except Broken as exc:
        return Outcome("bit-flip", engine.name, kind, FAILED, str(exc))
    except Exception as exc:  # noqa: BLE001 - e.g. the database no longer opens without the flip
        return Outcome("bit-flip", engine.name, kind, FAILED, repr(exc))


def classify_flip(engine_name: str, directories: list[str], flip: BitFlip) -> str:
    """What the flipped byte belongs to, judged from the first of
    ``directories`` that holds the file."""
    name = os.path.basename(flip.path)
    for directory in directories:
        source = os.path.join(directory, name)
        if os.path.exists(source):
            break
    else:
        return f"{name} (removed since)"
    with open(source, "rb") as f:
        data = f.read()
    at = flip.offset
    if engine_name == "lsm":
        return _classify_lsm(name, data, at)
    if name == "btree.pages" and flip.read_offset == 0 and flip.read_length < 512:
        return "page: meta (the bytes read to learn the page size)"
    return _classify_btree(name, data, at)


def _classify_lsm(name: str, data: bytes, at: int) -> str:
    from lsmkv.lsm.table.format import FOOTER_SIZE, TRAILER_SIZE, Footer
    if name.endswith(".sst"):
        footer = Footer.decode(data[-FOOTER_SIZE:], name, len(data))
        if at >= len(data) - FOOTER_SIZE:
            return "table: footer"
        for label, (offset, size) in (("index block", footer.index), ("bloom filter", footer.filter),
                                      ("properties block", footer.properties)):
            if offset <= at < offset + size + TRAILER_SIZE:
                return f"table: {label}"
        return "table: data block"
    if name == "CURRENT":
        return "CURRENT"
    what = "manifest" if name.startswith("MANIFEST") else "log"
    end = len(data.rstrip(b"\0"))
    return f"{what}: record" if at < end else f"{what}: preallocated space past the end"


def _classify_btree(name: str, data: bytes, at: int) -> str:
    from btree.node import HEADER, HEADER_SIZE, PAGE_TYPE_NAMES
    from btree.pager import META_BODY
    if name == "btree.pages":
        page_size = META_BODY.unpack_from(data, HEADER_SIZE)[2]
        page = at // page_size
        if page < 2:
            epochs = [HEADER.unpack_from(data, slot * page_size)[7] for slot in (0, 1)]
            return "page: meta (the newest copy)" if epochs[page] == max(epochs) else "page: meta (the older copy)"
        start = page * page_size
        kind = data[start + 8] if start + 8 < len(data) else 0
        return f"page: {PAGE_TYPE_NAMES.get(kind, 'unused')}"
    if name == "btree.log":
        if at < 24:
            return "log: header"
        if at < 32:
            return "log: header checksum" if at < 28 else "log: header (reserved bytes)"
        return "log: record"
    return name
