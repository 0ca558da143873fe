"""The one file-system layer all of both engines' I/O goes through.

Nothing in lsmkv or btree calls ``open``/``os.write``/``os.fsync``/``os.rename``
directly: they ask a :class:`FileSystem` for files. Tests swap in a file system
that injects faults (I/O errors, a full disk, torn writes, power loss, bit
flips); the default :class:`OsFileSystem` is a thin veneer over ``os`` with no
buffering of its own, so a write has reached the OS when ``append`` returns.

Files:
* :class:`WritableFile`: append-only (tables being built, manifests, logs).
* :class:`MappedAppendFile`: the write-ahead log's append-only file on the
  real OS, written through a shared memory mapping of preallocated space.
* :class:`ReadableFile`: positional reads (tables, logs being replayed).
* :class:`PagedFile`: positional reads and writes (the B-tree's page file).
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import threading

try:
    import cython
except ImportError:  # pragma: no cover - the pure build without Cython installed
    from .compile_hints import cython

from .errors import LockError

_fsync = getattr(os, "fdatasync", os.fsync)


class WritableFile:
    """An append-only file. ``append`` hands bytes to the OS; ``sync`` makes
    them durable (fdatasync)."""

    __slots__ = ("path", "_fd", "size")

    def __init__(self, path: str, fd: int, size: int = 0) -> None:
        self.path = path
        self._fd = fd
        #: Bytes in the file (including everything appended so far).
        self.size = size

    def append(self, data: bytes | bytearray | memoryview, commit_at: int | None = None) -> None:
        """Hand ``data`` to the OS at the end of the file. ``commit_at``: the
        byte that must land last (see MappedAppendFile.append); write()
        leaves at most a prefix of its bytes behind a crash, so it needs
        nothing here."""
        fd = self._fd
        n = os.write(fd, data)
        if n != len(data):
            view = memoryview(data)
            while n < len(view):
                n += os.write(fd, view[n:])
        self.size += n

    def sync(self) -> None:
        _fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def abandon(self) -> None:
        """Release the file without any further I/O, as a crashed process
        leaves it (used to simulate crashes; ``close`` may still write)."""
        WritableFile.close(self)

    @property
    def closed(self) -> bool:
        return self._fd < 0


#: Appends shorter than this are split into pieces by slicing them as they
#: are (copies); longer ones through a memoryview (MappedAppendFile.append).
_SLICE_AS_BYTES = 4096


class MappedAppendFile(WritableFile):
    """An append-only file written through a shared memory mapping.

    The file's space is allocated up front (``posix_fallocate``, so a full
    disk fails here with ENOSPC, never later as SIGBUS) and mapped
    MAP_SHARED; ``append`` is a memory copy into the OS page cache. That hands
    the bytes to the OS exactly as ``write(2)`` does (they survive the
    process being killed) without a system call per append. ``sync``
    writes the pages back and fdatasyncs; it may run on another thread
    while appends go on (the log syncer's), and never while an append is
    moving the mapping to grow it. The unwritten rest of the file
    reads as zeros, which the log reader takes as the log's end; ``close``
    trims the file to the bytes appended.
    """

    __slots__ = ("_map", "_capacity", "_remap", "_view")

    def __init__(self, path: str, fd: int, capacity: int) -> None:
        super().__init__(path, fd, 0)
        capacity = max(mmap.PAGESIZE, -(-capacity // mmap.PAGESIZE) * mmap.PAGESIZE)
        os.posix_fallocate(fd, 0, capacity)
        self._map = mmap.mmap(fd, capacity)
        self._capacity = capacity
        #: The compiled build's typed view of the mapping (append copies
        #: through it); released before the mapping is moved or closed.
        self._view = self._map if cython.compiled else None
        #: Held while the mapping is flushed or moved: a sync on the log
        #: syncer's thread never flushes a mapping an append is resizing.
        self._remap = threading.Lock()

    def append(self, data: bytes | bytearray | memoryview, commit_at: int | None = None) -> None:
        start = self.size  # (C integers in the compiled build: typed locals, see fs.pxd)
        end = start + len(data)
        if end > self._capacity:
            self._grow(end)
        if commit_at is None:
            self._map[start:end] = data
            self.size = end
            return
        # A copy into the mapping is not ordered: a process killed in the
        # middle of it can leave any subset of the bytes written. So the
        # byte at ``commit_at`` (a log's first header type byte, zero until
        # written) goes in last, by itself, through the mapping's own
        # item assignment (a call the C compiler cannot move the copy past):
        # until it does, the reader sees unwritten space there and stops.
        commit = commit_at
        if (cython.compiled and (type(data) is bytes or type(data) is bytearray) and 0 <= commit < end - start
                and self._view is not None):
            # Compiled: the rest is a C loop from the bytes' (or bytearray's)
            # buffer into the mapping's (a view of it, taken when it was mapped).
            src = data
            dst = cython.address(self._view[start])
            for i in range(commit):
                dst[i] = src[i]
            for i in range(commit + 1, end - start):
                dst[i] = src[i]
            self._map[start + commit] = src[commit]
        else:
            # As Python: a short append (a put's record) is sliced as bytes,
            # which costs less than making memoryviews; a long one through
            # a view, which copies nothing.
            piece = data if len(data) < _SLICE_AS_BYTES else memoryview(data)
            self._map[start + commit + 1:end] = piece[commit + 1:]
            self._map[start:start + commit] = piece[:commit]
            self._map[start + commit] = piece[commit]
        self.size = end

    @property
    def capacity(self) -> int:
        """Bytes allocated (and mapped) so far; an append past them grows the file."""
        return self._capacity

    def _grow(self, needed: int) -> None:
        capacity = max(needed, 2 * self._capacity)
        capacity = -(-capacity // mmap.PAGESIZE) * mmap.PAGESIZE
        with self._remap:
            os.posix_fallocate(self._fd, self._capacity, capacity - self._capacity)
            self._view = None  # (a mapping with a view taken cannot move)
            try:
                self._map.resize(capacity)
                self._capacity = capacity
            finally:
                self._view = self._map if cython.compiled else None

    def sync(self) -> None:
        with self._remap:
            self._map.flush()
        _fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                with self._remap:
                    self._view = None
                    self._map.close()
                os.ftruncate(self._fd, self.size)
            finally:
                super().close()

    def abandon(self) -> None:
        if self._fd >= 0:
            try:
                with self._remap:
                    self._view = None
                    self._map.close()
            finally:
                WritableFile.close(self)


class ReadableFile:
    """A file read at explicit offsets (``pread``); safe to share between threads."""

    __slots__ = ("path", "_fd", "size")

    def __init__(self, path: str, fd: int, size: int) -> None:
        self.path = path
        self._fd = fd
        self.size = size

    def read_at(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``offset`` (fewer only at end of file)."""
        data = os.pread(self._fd, length, offset)
        if len(data) < length and offset + len(data) < self.size:
            # A short read before the end of file: keep reading.
            parts = [data]
            got = len(data)
            while got < length:
                chunk = os.pread(self._fd, length - got, offset + got)
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
            data = b"".join(parts)
        return data

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


class PagedFile:
    """A file read and written at explicit offsets (the B-tree's page file)."""

    __slots__ = ("path", "_fd")

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd = fd

    def read_at(self, offset: int, length: int) -> bytes:
        return os.pread(self._fd, length, offset)

    def write_at(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        n = os.pwrite(self._fd, data, offset)
        while n < len(data):
            n += os.pwrite(self._fd, memoryview(data)[n:], offset + n)

    def sync(self) -> None:
        _fsync(self._fd)

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def identity(self) -> tuple[int, int]:
        """(device, inode) of the open file: a file renamed over its path
        since it was opened has another."""
        st = os.fstat(self._fd)
        return st.st_dev, st.st_ino

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


class FileLock:
    """An exclusive advisory lock (flock) held for the lifetime of a DB.

    flock refuses a second lock on a file whether the holder is another
    process or this one (each open of the file is a lock of its own), so the
    lock files this process holds are listed here, by (device, inode) -- the
    lock belongs to the file, not its name (btree's vacuum renames a locked
    file over the page file) -- to tell the two apart in the error. The list
    is the process's, as the locks are (LevelDB's Env keeps such a table)."""

    __slots__ = ("path", "_fd", "_ident")

    #: (device, inode) of every lock file this process holds, and the lock
    #: that makes taking or releasing a lock and listing it one step.
    _held: set[tuple[int, int]] = set()
    _held_lock = threading.Lock()

    def __init__(self, path: str, fd: int, ident: tuple[int, int] | None = None) -> None:
        self.path = path
        self._fd = fd
        self._ident = ident

    @classmethod
    def take(cls, path: str) -> "FileLock":
        """Lock ``path`` (created if missing) or raise LockError naming who holds it."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            st = os.fstat(fd)
            ident = (st.st_dev, st.st_ino)
            with cls._held_lock:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise
                    directory = os.path.dirname(path) or "."
                    if ident in cls._held:
                        raise LockError(
                            f"{directory} is already open for writing in this process (lock file {path}); "
                            f"use that handle, close it first, or open with read_only=True") from None
                    raise LockError(
                        f"{directory} is open for writing in another process (lock file {path}); close it "
                        f"there, or open with read_only=True") from None
                cls._held.add(ident)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, ident)

    def release(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            with self._held_lock:
                self._held.discard(self._ident)
                try:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                finally:
                    os.close(fd)


class FileSystem:
    """Interface of the file-system layer. :class:`OsFileSystem` implements it
    on the real OS; fault-injecting file systems override single methods."""

    def create(self, path: str) -> WritableFile:
        """Create (or truncate) ``path`` for appending."""
        raise NotImplementedError

    def open_appendable(self, path: str) -> WritableFile:
        """Open an existing file for appending at its end."""
        raise NotImplementedError

    def create_log(self, path: str, capacity: int) -> WritableFile:
        """Create a write-ahead log expected to grow to about ``capacity``
        bytes. Same contract as ``create``: ``append`` hands bytes to the OS,
        ``sync`` makes them durable. Unwritten space, if any, reads as zeros."""
        return self.create(path)

    def open_readable(self, path: str) -> ReadableFile:
        raise NotImplementedError

    def open_paged(self, path: str, create: bool = False) -> PagedFile:
        raise NotImplementedError

    def rename(self, src: str, dst: str) -> None:
        raise NotImplementedError

    def remove(self, path: str) -> None:
        raise NotImplementedError

    def listdir(self, path: str) -> list[str]:
        raise NotImplementedError

    def makedirs(self, path: str) -> None:
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        raise NotImplementedError

    def isdir(self, path: str) -> bool:
        raise NotImplementedError

    def file_size(self, path: str) -> int:
        raise NotImplementedError

    def sync_dir(self, path: str) -> None:
        """Make the directory's entries (creations, renames, removals) durable."""
        raise NotImplementedError

    def lock(self, path: str) -> FileLock:
        """Take an exclusive, non-blocking lock on ``path`` or raise LockError."""
        raise NotImplementedError

    def link(self, src: str, dst: str) -> None:
        """Make ``dst`` a hard link to ``src`` (OSError where the file system
        cannot: another device, no link support)."""
        raise NotImplementedError

    # Helpers built on the primitives above, so fault injection covers them too.

    def read_file(self, path: str) -> bytes:
        f = self.open_readable(path)
        try:
            return f.read_at(0, f.size)
        finally:
            f.close()

    def link_or_copy(self, src: str, dst: str) -> None:
        """Give ``dst`` the bytes of ``src``: a hard link where possible,
        else a copy, fsynced. ``dst`` must not exist. The caller fsyncs
        ``dst``'s directory."""
        try:
            self.link(src, dst)
            return
        except FileExistsError:
            raise
        except (NotImplementedError, OSError):
            pass  # another device, or no hard links here: copy
        f = self.open_readable(src)
        try:
            self.copy_readable(f, dst)
        finally:
            f.close()

    def copy_readable(self, f: "ReadableFile", dst: str) -> None:
        """Write the whole of the open file ``f`` to a new file ``dst`` and
        fsync it (a file another process deleted stays readable through ``f``)."""
        out = self.create(dst)
        try:
            size, offset, chunk = f.size, 0, 8 * 1024 * 1024
            while offset < size:
                data = f.read_at(offset, min(chunk, size - offset))
                if not data:
                    raise OSError(f"{dst}: source ended at {offset} of {size} bytes while copying")
                out.append(data)
                offset += len(data)
            out.sync()
        except BaseException:
            out.close()
            try:
                self.remove(dst)
            except OSError:
                pass
            raise
        out.close()

    def discard_directory(self, path: str) -> None:
        """Remove a directory this process was filling and its files, as far
        as possible (cleaning up after a failure: errors are ignored)."""
        try:
            names = self.listdir(path)
        except OSError:
            return
        for name in names:
            try:
                self.remove(os.path.join(path, name))
            except OSError:
                pass
        try:
            os.rmdir(path)
        except OSError:
            pass

    def write_file_atomically(self, path: str, data: bytes) -> None:
        """Replace ``path`` with ``data``: temp file, fsync, rename, fsync dir."""
        tmp = path + ".tmp"
        f = self.create(tmp)
        try:
            f.append(data)
            f.sync()
        finally:
            f.close()
        self.rename(tmp, path)
        self.sync_dir(os.path.dirname(path) or ".")


class OsFileSystem(FileSystem):
    """The real file system, straight through to ``os``."""

    def create(self, path: str) -> WritableFile:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        return WritableFile(path, fd, 0)

    def create_log(self, path: str, capacity: int) -> WritableFile:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            return MappedAppendFile(path, fd, capacity)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENODEV):
                os.close(fd)
                raise
        # No preallocation or mapping on this file system: plain appends.
        return WritableFile(path, fd, 0)

    def open_appendable(self, path: str) -> WritableFile:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        return WritableFile(path, fd, os.fstat(fd).st_size)

    def open_readable(self, path: str) -> ReadableFile:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        return ReadableFile(path, fd, os.fstat(fd).st_size)

    def open_paged(self, path: str, create: bool = False) -> PagedFile:
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        return PagedFile(path, os.open(path, flags, 0o644))

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        os.remove(path)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def file_size(self, path: str) -> int:
        return os.stat(path).st_size

    def sync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def link(self, src: str, dst: str) -> None:
        os.link(src, dst)

    def lock(self, path: str) -> FileLock:
        return FileLock.take(path)


#: The file system used when a DB is opened without ``fs=``.
DEFAULT_FS: FileSystem = OsFileSystem()
