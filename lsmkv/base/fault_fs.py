"""FaultInjectionFS: a file system that fails on purpose, for tests.

It wraps the real file system (every byte still goes to real files) and can:

* raise EIO or ENOSPC at the Nth matching call, or with a probability
  (``fail(...)``), for any of: open, write, sync, rename, remove, read,
  dirsync, fallocate (a preallocated write-ahead log taking or growing its
  space); a sticky rule keeps failing, as a full disk stays full;
* tear a write: only a prefix of it lands, then EIO;
* flip a bit in data read back (``flip_bits(...)``; each flip is recorded
  in ``flips`` with the file and offset it hit);
* stall a call (``stall(...)``): matching calls block before they reach
  the disk, for ``seconds`` or until ``release()`` -- a disk that stops
  answering (a slow fsync, say) -- then go ahead;
* cut the power at the Nth file-system call (``cut_power(...)``): that call
  fails (a write may land a prefix) and so does every call after it, so the
  database objects stop where a crash would stop them;
* simulate a power loss (``power_loss()``): every file loses what was
  written to it since its last fsync (a preallocated log keeps its length,
  the lost bytes read as zeros), and creations, renames and removals whose
  directory was not fsynced since are undone. With ``partial=True`` a random
  prefix of the unsynced writes and directory changes survives instead, the
  first lost page write torn. ``power_on()`` instead models a process crash:
  everything handed to the OS survives. Call either after abandoning the
  database objects (``DB._simulate_crash()``), before reopening.

Used by the tests and the fault campaign (lsmkv/faults/) through the ``fs=`` option of
both engines. With no rule installed each call costs one extra Python call
(and a lock) over OsFileSystem; the engines' default is OsFileSystem
itself, which this module does not touch (docs/reliability.md has the
measured cost).
"""

from __future__ import annotations

import errno
import os
import random
import threading
from dataclasses import dataclass, field

from .fs import FileLock, FileSystem, MappedAppendFile, OsFileSystem, PagedFile, ReadableFile, WritableFile

OPERATIONS = ("open", "write", "sync", "rename", "remove", "read", "dirsync", "fallocate")


@dataclass
class FaultRule:
    """Fail the ``nth`` matching call (1-based), or each with ``probability``."""

    operation: str
    error: int = errno.EIO
    nth: int | None = None
    probability: float = 0.0
    #: Only calls on paths containing this substring match.
    path_contains: str = ""
    #: For writes: let this many bytes land before failing (a torn write).
    torn_prefix: int | None = None
    #: Keep failing after the first injection (a full disk stays full).
    sticky: bool = False
    seen: int = 0
    fired: int = 0


@dataclass
class FaultCounters:
    calls: dict = field(default_factory=lambda: {op: 0 for op in OPERATIONS})
    #: The "open" calls that created a file (what ENOSPC on "open" can hit).
    creations: int = 0
    injected: dict = field(default_factory=dict)
    bit_flips: int = 0
    power_losses: int = 0
    power_cuts: int = 0

    def record(self, kind: str) -> None:
        self.injected[kind] = self.injected.get(kind, 0) + 1


@dataclass
class BitFlip:
    """One injected bit flip: the file, the byte offset in it and the bit,
    and the read it happened in (its offset and length)."""

    path: str
    offset: int
    bit: int
    read_offset: int = 0
    read_length: int = 0


class Stall:
    """Matching calls block (before reaching the disk) until ``release()``,
    or for ``seconds`` each if that was given; then they proceed."""

    def __init__(self, operation: str, seconds: float | None, path_contains: str) -> None:
        self.operation = operation
        self.seconds = seconds
        self.path_contains = path_contains
        self._released = threading.Event()
        self._cond = threading.Condition()
        #: Calls that reached the stall, and those blocked in it now.
        self.entered = 0
        self.waiting = 0

    def matches(self, operation: str, path: str) -> bool:
        return operation == self.operation and self.path_contains in path and not self._released.is_set()

    def block(self) -> None:
        with self._cond:
            self.entered += 1
            self.waiting += 1
            self._cond.notify_all()
        try:
            self._released.wait(self.seconds)
        finally:
            with self._cond:
                self.waiting -= 1

    def wait_entered(self, calls: int = 1, timeout: float = 30.0) -> bool:
        """Wait until ``calls`` calls have reached the stall (False on timeout)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.entered >= calls, timeout)

    def release(self) -> None:
        """Let every blocked call (and every later one) through."""
        self._released.set()


class PowerOff(OSError):
    """Raised by every call after the power was cut (an EIO)."""


class _FileState:
    """What a power loss would do to one file."""

    __slots__ = ("synced_size", "undo", "preallocated", "paged")

    def __init__(self, synced_size: int, preallocated: bool = False, paged: bool = False) -> None:
        self.synced_size = synced_size
        #: For paged files: (offset, bytes before the write) since the last sync,
        #: oldest first (zeros where the write extended the file).
        self.undo: list[tuple[int, bytes]] = []
        #: A preallocated log: the file keeps its length, lost bytes read as zeros.
        self.preallocated = preallocated
        #: Written in place (not appended).
        self.paged = paged


class FaultInjectionFS(FileSystem):
    def __init__(self, base: FileSystem | None = None, seed: int = 0) -> None:
        self.base = base or OsFileSystem()
        self.rules: list[FaultRule] = []
        self.counters = FaultCounters()
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._flip_probability = 0.0
        self._flip_nth: int | None = None
        self._flip_path = ""
        self._flip_within: tuple[int, int] | None = None
        #: Reads of files flip_bits() applies to, since it was called.
        self.matching_reads = 0
        #: Every bit flip injected, in order.
        self.flips: list[BitFlip] = []
        self._files: dict[str, _FileState] = {}
        #: Directory operations since each directory's last fsync, oldest first:
        #: ("create", path) / ("rename", src, dst, displaced_content) / ("remove", path, content).
        self._dir_ops: dict[str, list[tuple]] = {}
        #: Power: calls left before the cut (None: no cut planned), and whether it is off.
        self._cut_in: int | None = None
        self._cut_torn: int | None = None
        self._off = False
        self._stalls: list[Stall] = []
        #: Nothing to inject (no rule, no stall, no power cut planned or done): the fast path.
        self._quiet = True

    # -- configuring ----------------------------------------------------------

    def fail(self, operation: str, *, error: int = errno.EIO, nth: int | None = None, probability: float = 0.0,
             path_contains: str = "", torn_prefix: int | None = None, sticky: bool = False) -> FaultRule:
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}; one of {OPERATIONS}")
        rule = FaultRule(operation, error, nth, probability, path_contains, torn_prefix, sticky)
        with self._lock:
            self.rules.append(rule)
            self._update_quiet()
        return rule

    def flip_bits(self, *, probability: float = 0.0, nth: int | None = None, path_contains: str = "",
                  within: tuple[int, int] | None = None) -> None:
        """Flip one random bit in data read back: each read with
        ``probability``, or the ``nth`` read from now. Only reads of paths
        containing ``path_contains`` count, and with ``within=(start, end)``
        only reads of those file offsets, where the flip then lands."""
        with self._lock:
            self._flip_probability = probability
            self._flip_path = path_contains
            self._flip_within = within
            self.matching_reads = 0
            self._flip_nth = nth

    def stall(self, operation: str, *, seconds: float | None = None, path_contains: str = "") -> Stall:
        """Make matching calls block before they reach the disk: for
        ``seconds`` each, or (None) until the returned stall's ``release()``."""
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}; one of {OPERATIONS}")
        stall = Stall(operation, seconds, path_contains)
        with self._lock:
            self._stalls.append(stall)
            self._update_quiet()
        return stall

    def clear(self) -> None:
        """Remove every rule, release every stall and stop flipping bits (a
        full disk got space again, a stalled one answers again)."""
        with self._lock:
            for stall in self._stalls:
                stall.release()
            self._stalls.clear()
            self.rules.clear()
            self._flip_probability = 0.0
            self._flip_nth = None
            self._update_quiet()

    def cut_power(self, at_call: int, torn_prefix: int | None = None) -> None:
        """The ``at_call``-th file-system call from now (counting every
        operation of OPERATIONS) fails, and so does every call after it until
        ``power_loss()`` or ``power_on()``. If that call is a write,
        ``torn_prefix`` bytes of it land first."""
        if at_call < 1:
            raise ValueError("at_call counts from 1")
        with self._lock:
            self._cut_in = at_call
            self._cut_torn = torn_prefix
            self._update_quiet()

    @property
    def powered(self) -> bool:
        return not self._off

    # -- the injection point --------------------------------------------------

    def _update_quiet(self) -> None:
        self._quiet = not self.rules and not self._stalls and self._cut_in is None and not self._off

    def _power_check(self, path: str) -> None:
        if self._off:
            raise PowerOff(errno.EIO, "power is off", path)

    def _check(self, operation: str, path: str, creating: bool = False) -> FaultRule | int | None:
        """Count the call; raise if a rule fires or the power is off. For a
        write that is to be torn, return the rule (or the number of bytes
        that land, when the power is cut in the middle of it). ENOSPC rules
        on "open" only match opens that create a file (``creating``): a full
        disk still lets existing files be opened."""
        if creating:
            self.counters.creations += 1
        if self._quiet:
            self.counters.calls[operation] += 1  # nothing to inject: no lock on the common path
            return None
        if self._stalls:
            for stall in list(self._stalls):
                if stall.matches(operation, path):
                    stall.block()  # never under the lock: other calls go on meanwhile
        with self._lock:
            self._power_check(path)
            self.counters.calls[operation] += 1
            if self._cut_in is not None:
                self._cut_in -= 1
                if self._cut_in == 0:
                    self._cut_in = None
                    self._off = True
                    self._quiet = False
                    self.counters.power_cuts += 1
                    if operation == "write" and self._cut_torn:
                        return self._cut_torn
                    raise PowerOff(errno.EIO, f"power cut during {operation}", path)
            for rule in self.rules:
                if rule.operation != operation or rule.path_contains not in path:
                    continue
                if rule.error == errno.ENOSPC and operation == "open" and not creating:
                    continue
                rule.seen += 1
                fire = (rule.sticky and rule.fired > 0) or (rule.nth is not None and rule.seen == rule.nth) \
                    or (rule.probability and self._rng.random() < rule.probability)
                if not fire:
                    continue
                rule.fired += 1
                name = "ENOSPC" if rule.error == errno.ENOSPC else errno.errorcode.get(rule.error, str(rule.error))
                self.counters.record(f"{operation}:{name}" + (":torn" if rule.torn_prefix is not None else ""))
                if operation == "write" and rule.torn_prefix is not None:
                    return rule
                raise OSError(rule.error, f"injected {name} on {operation}", path)
        return None

    def _maybe_flip(self, path: str, offset: int, data: bytes) -> bytes:
        if not data or (self._flip_nth is None and not self._flip_probability) or self._flip_path not in path:
            return data
        lo, hi = 0, len(data)
        if self._flip_within is not None:
            lo = max(lo, self._flip_within[0] - offset)
            hi = min(hi, self._flip_within[1] - offset)
            if lo >= hi:
                return data
        with self._lock:
            self.matching_reads += 1
            flip = (self._flip_nth is not None and self.matching_reads == self._flip_nth) or \
                (self._flip_probability and self._rng.random() < self._flip_probability)
            if not flip:
                return data
            self.counters.bit_flips += 1
            i = self._rng.randrange(lo, hi)
            bit = self._rng.randrange(8)
            self.flips.append(BitFlip(path, offset + i, bit, offset, len(data)))
        flipped = bytearray(data)
        flipped[i] ^= 1 << bit
        return bytes(flipped)

    def _note_dir_op(self, path: str, op: tuple) -> None:
        with self._lock:
            self._dir_ops.setdefault(os.path.dirname(os.path.abspath(path)), []).append(op)

    def _durable_content(self, path: str) -> bytes:
        """What of ``path`` would survive a power loss now (its synced bytes)."""
        data = bytearray(self.base.read_file(path))
        state = self._files.get(os.path.abspath(path))
        if state is not None:
            for offset, before in reversed(state.undo):
                data[offset: offset + len(before)] = before
            if len(data) > state.synced_size:
                if state.preallocated:
                    data[state.synced_size:] = bytes(len(data) - state.synced_size)
                else:
                    del data[state.synced_size:]
        return bytes(data)

    # -- FileSystem -------------------------------------------------------------

    def create(self, path: str) -> WritableFile:
        self._check("open", path, creating=True)
        existed = self.base.exists(path)
        f = self.base.create(path)
        with self._lock:
            self._files[os.path.abspath(path)] = _FileState(0)
        if not existed:
            self._note_dir_op(path, ("create", os.path.abspath(path)))
        return _FaultyWritableFile(self, f)

    def create_log(self, path: str, capacity: int) -> WritableFile:
        self._check("open", path, creating=True)
        existed = self.base.exists(path)
        f = self.base.create_log(path, capacity)
        preallocated = isinstance(f, MappedAppendFile)
        with self._lock:
            self._files[os.path.abspath(path)] = _FileState(0, preallocated)
        if not existed:
            self._note_dir_op(path, ("create", os.path.abspath(path)))
        if preallocated:
            try:
                self._check("fallocate", path)
            except OSError:
                f.close()  # as a failed posix_fallocate leaves it: created, empty
                raise
        return _FaultyWritableFile(self, f)

    def open_appendable(self, path: str) -> WritableFile:
        self._check("open", path)
        f = self.base.open_appendable(path)
        with self._lock:
            self._files.setdefault(os.path.abspath(path), _FileState(f.size))
        return _FaultyWritableFile(self, f)

    def open_readable(self, path: str) -> ReadableFile:
        self._check("open", path)
        return _FaultyReadableFile(self, self.base.open_readable(path))

    def open_paged(self, path: str, create: bool = False) -> PagedFile:
        existed = self.base.exists(path)
        self._check("open", path, creating=create and not existed)
        f = self.base.open_paged(path, create)
        with self._lock:
            self._files.setdefault(os.path.abspath(path), _FileState(f.size(), paged=True))
        if not existed:
            self._note_dir_op(path, ("create", os.path.abspath(path)))
        return _FaultyPagedFile(self, f)

    def rename(self, src: str, dst: str) -> None:
        self._check("rename", dst)
        with self._lock:
            displaced = self._durable_content(dst) if self.base.exists(dst) else None
            self.base.rename(src, dst)
            state = self._files.pop(os.path.abspath(src), None)
            if state is not None:
                self._files[os.path.abspath(dst)] = state
            else:
                self._files.pop(os.path.abspath(dst), None)
        self._note_dir_op(dst, ("rename", os.path.abspath(src), os.path.abspath(dst), displaced))

    def remove(self, path: str) -> None:
        self._check("remove", path)
        with self._lock:
            content = self._durable_content(path) if self.base.exists(path) else None
            self.base.remove(path)
            self._files.pop(os.path.abspath(path), None)
        self._note_dir_op(path, ("remove", os.path.abspath(path), content))

    def listdir(self, path: str) -> list[str]:
        self._power_check(path)
        return self.base.listdir(path)

    def makedirs(self, path: str) -> None:
        self._power_check(path)
        self.base.makedirs(path)

    def exists(self, path: str) -> bool:
        self._power_check(path)
        return self.base.exists(path)

    def isdir(self, path: str) -> bool:
        self._power_check(path)
        return self.base.isdir(path)

    def file_size(self, path: str) -> int:
        self._power_check(path)
        return self.base.file_size(path)

    def sync_dir(self, path: str) -> None:
        self._check("dirsync", path)
        self.base.sync_dir(path)
        with self._lock:
            self._dir_ops.pop(os.path.abspath(path), None)

    def lock(self, path: str) -> FileLock:
        self._power_check(path)
        return self.base.lock(path)

    # -- power ------------------------------------------------------------------

    def power_on(self) -> None:
        """Turn the power back on after ``cut_power`` without losing anything:
        the model of a process crash (the OS kept every byte handed to it)."""
        with self._lock:
            self._off = False
            self._cut_in = None
            self._update_quiet()

    def power_loss(self, partial: bool = False) -> None:
        """Drop every unsynced write and undo every unsynced directory change
        (with ``partial``, keep a random prefix of each), then turn the power
        back on.

        The database objects using this file system must have been abandoned
        (not closed) first, as a crash would leave them."""
        rng = self._rng
        with self._lock:
            self.counters.power_losses += 1
            # File contents first, by the names the files have now.
            for path, state in self._files.items():
                if not os.path.exists(path):
                    continue
                undo = state.undo
                keep = rng.randint(0, len(undo)) if partial else 0
                with open(path, "r+b") as f:
                    for k in range(len(undo) - 1, keep - 1, -1):
                        offset, before = undo[k]
                        # The first lost write may be torn: a prefix of it landed.
                        landed = rng.randrange(len(before) + 1) if partial and k == keep else 0
                        f.seek(offset + landed)
                        f.write(before[landed:])
                kept_end = max((offset + len(before) for offset, before in undo[:keep]), default=0)
                undo.clear()
                size = os.path.getsize(path)
                if size > state.synced_size:
                    if state.paged:
                        end = max(state.synced_size, kept_end)
                    else:
                        end = rng.randint(state.synced_size, size) if partial else state.synced_size
                    if state.preallocated:
                        with open(path, "r+b") as f:
                            f.seek(end)
                            f.write(bytes(size - end))
                    else:
                        os.truncate(path, end)
            # Then the directory entries, newest change first.
            for directory, ops in self._dir_ops.items():
                keep = rng.randint(0, len(ops)) if partial else 0
                for op in reversed(ops[keep:]):
                    if op[0] == "create":
                        if os.path.exists(op[1]):
                            os.remove(op[1])
                    elif op[0] == "rename":
                        _, src, dst, displaced = op
                        if os.path.exists(dst):
                            os.replace(dst, src)
                        if displaced is not None:
                            with open(dst, "wb") as f:
                                f.write(displaced)
                    elif op[0] == "remove":
                        _, path, content = op
                        if content is not None and not os.path.exists(path):
                            with open(path, "wb") as f:
                                f.write(content)
            self._dir_ops.clear()
            self._files = {p: _FileState(os.path.getsize(p), s.preallocated, s.paged)
                           for p, s in self._files.items() if os.path.exists(p)}
            self._off = False
            self._cut_in = None
            self._update_quiet()


class _FaultyWritableFile(WritableFile):
    __slots__ = ("_fs", "_inner", "_preallocated")

    def __init__(self, fs: FaultInjectionFS, inner: WritableFile) -> None:
        super().__init__(inner.path, -1, inner.size)
        self._fs = fs
        self._inner = inner
        self._preallocated = isinstance(inner, MappedAppendFile)

    def append(self, data, commit_at: int | None = None) -> None:
        fs = self._fs
        inner = self._inner
        if self._preallocated and inner.size + len(data) > inner.capacity:
            fs._check("fallocate", self.path)
        elif fs._quiet:
            fs.counters.calls["write"] += 1
            inner.append(data, commit_at)
            self.size = inner.size
            return
        cut = fs._check("write", self.path)
        if cut is not None:
            prefix = cut if type(cut) is int else cut.torn_prefix
            error = errno.EIO if type(cut) is int else cut.error
            if prefix:
                inner.append(bytes(data)[:prefix])
                self.size = inner.size
            raise OSError(error, "injected torn write", self.path)
        inner.append(data, commit_at)
        self.size = inner.size

    def sync(self) -> None:
        self._fs._check("sync", self.path)
        self._inner.sync()
        with self._fs._lock:
            state = self._fs._files.get(os.path.abspath(self.path))
            if state is not None:
                state.synced_size = self._inner.size

    def close(self) -> None:
        if self._fs._off:
            self._inner.abandon()  # no I/O once the power is off
        else:
            self._inner.close()

    def abandon(self) -> None:
        self._inner.abandon()

    @property
    def closed(self) -> bool:
        return self._inner.closed


class _FaultyReadableFile(ReadableFile):
    __slots__ = ("_fs", "_inner")

    def __init__(self, fs: FaultInjectionFS, inner: ReadableFile) -> None:
        super().__init__(inner.path, -1, inner.size)
        self._fs = fs
        self._inner = inner

    def read_at(self, offset: int, length: int) -> bytes:
        fs = self._fs
        fs._check("read", self.path)
        if fs._flip_nth is None and not fs._flip_probability:
            return self._inner.read_at(offset, length)
        return fs._maybe_flip(self.path, offset, self._inner.read_at(offset, length))

    def close(self) -> None:
        self._inner.close()


class _FaultyPagedFile(PagedFile):
    __slots__ = ("_fs", "_inner")

    def __init__(self, fs: FaultInjectionFS, inner: PagedFile) -> None:
        super().__init__(inner.path, -1)
        self._fs = fs
        self._inner = inner

    def read_at(self, offset: int, length: int) -> bytes:
        self._fs._check("read", self.path)
        return self._fs._maybe_flip(self.path, offset, self._inner.read_at(offset, length))

    def write_at(self, offset: int, data) -> None:
        cut = self._fs._check("write", self.path)
        before = self._inner.read_at(offset, len(data))
        if len(before) < len(data):  # past the end: "before" is what a lost write leaves, zeros
            before += bytes(len(data) - len(before))
        with self._fs._lock:
            state = self._fs._files.get(os.path.abspath(self.path))
            if state is not None:
                state.undo.append((offset, before))
        if cut is not None:
            prefix = cut if type(cut) is int else cut.torn_prefix
            error = errno.EIO if type(cut) is int else cut.error
            if prefix:
                self._inner.write_at(offset, bytes(data)[:prefix])
            raise OSError(error, "injected torn write", self.path)
        self._inner.write_at(offset, data)

    def sync(self) -> None:
        self._fs._check("sync", self.path)
        self._inner.sync()
        with self._fs._lock:
            state = self._fs._files.get(os.path.abspath(self.path))
            if state is not None:
                state.undo.clear()
                state.synced_size = self._inner.size()

    def truncate(self, size: int) -> None:
        if self._fs._check("write", self.path) is not None:  # a torn "write" here: nothing lands
            raise OSError(errno.EIO, "injected failure of a truncation", self.path)
        self._inner.truncate(size)

    def identity(self) -> tuple[int, int]:
        return self._inner.identity()

    def size(self) -> int:
        self._fs._power_check(self.path)
        return self._inner.size()

    def close(self) -> None:
        self._inner.close()
