"""FaultInjectionFS: a file system that fails on purpose, for tests.

It wraps the real file system (every byte still goes to real files) and can:

* raise EIO or ENOSPC at the Nth matching call, or with a probability
  (``fail(...)``), for any of: open, write, sync, rename, remove, read,
  dirsync;
* tear a write: only a prefix of it lands, then EIO;
* flip a bit in data read back (``flip_bits(...)``);
* simulate a power loss (``power_loss()``): every file loses what was
  written to it since its last fsync, and creations, renames and removals
  whose directory was not fsynced since are undone. Call it after abandoning
  the database objects (as a crash would) and before reopening.

Used by tests and by the crash-test driver through the ``fs=`` option of
both engines. With no rule installed each call costs one extra Python call
over OsFileSystem; the engines' default is OsFileSystem itself, which this
module does not touch.
"""

from __future__ import annotations

import errno
import os
import random
import threading
from dataclasses import dataclass, field

from .fs import FileLock, FileSystem, OsFileSystem, PagedFile, ReadableFile, WritableFile

OPERATIONS = ("open", "write", "sync", "rename", "remove", "read", "dirsync")


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
    injected: dict = field(default_factory=dict)
    bit_flips: int = 0
    power_losses: int = 0

    def record(self, kind: str) -> None:
        self.injected[kind] = self.injected.get(kind, 0) + 1


class _FileState:
    """What a power loss would do to one file."""

    __slots__ = ("synced_size", "undo")

    def __init__(self, synced_size: int) -> None:
        self.synced_size = synced_size
        #: For paged files: (offset, bytes before the write) since the last sync.
        self.undo: list[tuple[int, bytes]] = []


class FaultInjectionFS(FileSystem):
    def __init__(self, base: FileSystem | None = None, seed: int = 0) -> None:
        self.base = base or OsFileSystem()
        self.rules: list[FaultRule] = []
        self.counters = FaultCounters()
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._flip_probability = 0.0
        self._flip_nth: int | None = None
        self._reads = 0
        self._files: dict[str, _FileState] = {}
        #: Directory operations since each directory's last fsync, newest last:
        #: ("create", path) / ("rename", src, dst, displaced_content) / ("remove", path, content).
        self._dir_ops: dict[str, list[tuple]] = {}

    # -- configuring ----------------------------------------------------------

    def fail(self, operation: str, *, error: int = errno.EIO, nth: int | None = None, probability: float = 0.0,
             path_contains: str = "", torn_prefix: int | None = None, sticky: bool = False) -> FaultRule:
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}; one of {OPERATIONS}")
        rule = FaultRule(operation, error, nth, probability, path_contains, torn_prefix, sticky)
        with self._lock:
            self.rules.append(rule)
        return rule

    def flip_bits(self, *, probability: float = 0.0, nth: int | None = None) -> None:
        """Flip one random bit in data read back: each read with
        ``probability``, or the ``nth`` read from now."""
        self._flip_probability = probability
        self._flip_nth = None if nth is None else self._reads + nth

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()
        self._flip_probability = 0.0
        self._flip_nth = None

    # -- the injection point --------------------------------------------------

    def _check(self, operation: str, path: str) -> FaultRule | None:
        """Count the call; raise (or, for a torn write, return the rule) if a rule fires."""
        with self._lock:
            self.counters.calls[operation] += 1
            for rule in self.rules:
                if rule.operation != operation or rule.path_contains not in path:
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

    def _maybe_flip(self, data: bytes) -> bytes:
        self._reads += 1
        flip = (self._flip_nth is not None and self._reads == self._flip_nth) or \
            (self._flip_probability and self._rng.random() < self._flip_probability)
        if not flip or not data:
            return data
        with self._lock:
            self.counters.bit_flips += 1
            i = self._rng.randrange(len(data))
            bit = 1 << self._rng.randrange(8)
        flipped = bytearray(data)
        flipped[i] ^= bit
        return bytes(flipped)

    def _note_dir_op(self, path: str, op: tuple) -> None:
        with self._lock:
            self._dir_ops.setdefault(os.path.dirname(os.path.abspath(path)), []).append(op)

    # -- FileSystem -------------------------------------------------------------

    def create(self, path: str) -> WritableFile:
        self._check("open", path)
        existed = self.base.exists(path)
        f = self.base.create(path)
        with self._lock:
            self._files[os.path.abspath(path)] = _FileState(0)
        if not existed:
            self._note_dir_op(path, ("create", os.path.abspath(path)))
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
        self._check("open", path)
        existed = self.base.exists(path)
        f = self.base.open_paged(path, create)
        with self._lock:
            self._files.setdefault(os.path.abspath(path), _FileState(f.size()))
        if not existed:
            self._note_dir_op(path, ("create", os.path.abspath(path)))
        return _FaultyPagedFile(self, f)

    def rename(self, src: str, dst: str) -> None:
        self._check("rename", dst)
        displaced = self.base.read_file(dst) if self.base.exists(dst) else None
        self.base.rename(src, dst)
        with self._lock:
            state = self._files.pop(os.path.abspath(src), None)
            if state is not None:
                self._files[os.path.abspath(dst)] = state
        self._note_dir_op(dst, ("rename", os.path.abspath(src), os.path.abspath(dst), displaced))

    def remove(self, path: str) -> None:
        self._check("remove", path)
        content = self.base.read_file(path) if self.base.exists(path) else None
        self.base.remove(path)
        with self._lock:
            self._files.pop(os.path.abspath(path), None)
        self._note_dir_op(path, ("remove", os.path.abspath(path), content))

    def listdir(self, path: str) -> list[str]:
        return self.base.listdir(path)

    def makedirs(self, path: str) -> None:
        self.base.makedirs(path)

    def exists(self, path: str) -> bool:
        return self.base.exists(path)

    def isdir(self, path: str) -> bool:
        return self.base.isdir(path)

    def file_size(self, path: str) -> int:
        return self.base.file_size(path)

    def sync_dir(self, path: str) -> None:
        self._check("dirsync", path)
        self.base.sync_dir(path)
        with self._lock:
            self._dir_ops.pop(os.path.abspath(path), None)

    def lock(self, path: str) -> FileLock:
        return self.base.lock(path)

    # -- power loss ---------------------------------------------------------------

    def power_loss(self) -> None:
        """Drop every unsynced write and undo every unsynced directory change.

        The database objects using this file system must have been abandoned
        (not closed) first, as a crash would leave them."""
        with self._lock:
            self.counters.power_losses += 1
            # File contents first, by the names the files have now.
            for path, state in self._files.items():
                if not os.path.exists(path):
                    continue
                for offset, before in reversed(state.undo):
                    with open(path, "r+b") as f:
                        f.seek(offset)
                        f.write(before)
                state.undo.clear()
                if os.path.getsize(path) > state.synced_size:
                    os.truncate(path, state.synced_size)
            # Then the directory entries, newest change first.
            for directory, ops in self._dir_ops.items():
                for op in reversed(ops):
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
            self._files = {p: _FileState(os.path.getsize(p)) for p in self._files if os.path.exists(p)}


class _FaultyWritableFile(WritableFile):
    __slots__ = ("_fs", "_inner")

    def __init__(self, fs: FaultInjectionFS, inner: WritableFile) -> None:
        super().__init__(inner.path, -1, inner.size)
        self._fs = fs
        self._inner = inner

    def append(self, data) -> None:
        rule = self._fs._check("write", self.path)
        if rule is not None:
            prefix = bytes(data)[: rule.torn_prefix]
            self._inner.append(prefix)
            self.size = self._inner.size
            raise OSError(rule.error, "injected torn write", self.path)
        self._inner.append(data)
        self.size = self._inner.size

    def sync(self) -> None:
        self._fs._check("sync", self.path)
        self._inner.sync()
        with self._fs._lock:
            state = self._fs._files.get(os.path.abspath(self.path))
            if state is not None:
                state.synced_size = self._inner.size

    def close(self) -> None:
        self._inner.close()

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
        self._fs._check("read", self.path)
        return self._fs._maybe_flip(self._inner.read_at(offset, length))

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
        return self._fs._maybe_flip(self._inner.read_at(offset, length))

    def write_at(self, offset: int, data) -> None:
        rule = self._fs._check("write", self.path)
        before = self._inner.read_at(offset, len(data))
        with self._fs._lock:
            state = self._fs._files.get(os.path.abspath(self.path))
            if state is not None:
                state.undo.append((offset, before))
        if rule is not None:
            self._inner.write_at(offset, bytes(data)[: rule.torn_prefix])
            raise OSError(rule.error, "injected torn write", self.path)
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
        self._fs._check("write", self.path)
        self._inner.truncate(size)

    def size(self) -> int:
        return self._inner.size()

    def close(self) -> None:
        self._inner.close()
