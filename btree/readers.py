"""The reader table: which checkpoints of the page file live readers in
other processes still read, so that the writer never reuses their slots.

This module owns ``btree.readers``, a file beside the page file (LMDB's
lock file and its reader table, mdb_reader_check included). A read-only
handle that takes a snapshot (a cursor and a transaction read through one)
*registers* the checkpoint its view reads -- the epoch of the meta page it
loaded, and the page file's (device, inode) -- in a slot of the table, and
clears the slot when the last snapshot on that view closes. The writer
reads the table at every checkpoint (:meth:`ReaderTable.oldest`): the
slots a checkpoint frees stay *held* (btree/pagemap.py) until no live
reader reads an epoch older than the checkpoint that freed them.

On disk: a header (magic ``BTREADRS``, version u32, slot count u32, 16
bytes), then :data:`SLOTS` slots of :data:`SLOT.size` bytes: in use u32,
pid u32, the process's start time u64 (clock ticks since boot, Linux's
/proc/PID/stat field 22; 0 where unknown), a random nonce u64, device u64,
inode u64, epoch u64, registration time u64 (ms since the Unix epoch).

Liveness: a registered slot's first byte is write-locked by the reader
with an open-file-description lock (``F_OFD_SETLK``), which the kernel
drops when the reader's process dies, however it dies. A slot in use whose
byte nobody locks belongs to a dead reader: the writer (or the next reader
that needs a slot) clears it. A reused pid does not hold the dead
reader's lock, so it cannot keep the slot alive. Every change to the
table is made under an OFD lock on the header's first byte.

A reader registers an epoch only while it is the newest durable one (it
registers, then checks the meta page on disk; if the writer checkpointed
meanwhile it loads the newest view and tries again): the writer never
writes the slots of the newest durable checkpoint, and it reads the table
again after each checkpoint is durable, before the slots that checkpoint
freed can be taken, so no checkpoint escapes a reader that registered.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import struct
import threading
import time
from typing import NamedTuple

from lsmkv.base.dbdir import BTREE_READERS
from lsmkv.base.errors import CorruptionError, LsmkvError

log = logging.getLogger(__name__)

READERS_FILE = BTREE_READERS
MAGIC = b"BTREADRS"
VERSION = 1
#: magic 8s, version u32, slot count u32
HEADER = struct.Struct("<8sII")
HEADER_SIZE = 64
#: in use u32, pid u32, start time u64, nonce u64, device u64, inode u64, epoch u64, registered at (ms) u64
SLOT = struct.Struct("<IIQQQQQQ")
SLOT_SIZE = 64
#: Readers (process views with an open snapshot) the table holds at once.
SLOTS = 256
#: struct flock on Linux: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks).
_FLOCK = struct.Struct("hhqqi4x")


class Reader(NamedTuple):
    """One registered reader, as the writer sees it."""
    pid: int
    start_time: int
    epoch: int
    file: tuple[int, int]
    registered_ms: int


#: (pid, its start time) of this process, read once per process (a fork
#: child reads its own).
_own_start: tuple[int, int] = (-1, 0)


def _own_start_time(pid: int) -> int:
    """This process's start time (``pid`` is os.getpid()), read once."""
    global _own_start
    if _own_start[0] != pid:
        _own_start = (pid, _process_start_time(pid))
    return _own_start[1]


def _process_start_time(pid: int) -> int:
    """Clock ticks since boot at which ``pid`` started (0 where unknown)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


def _lock(fd: int, cmd: int, ltype: int, offset: int) -> bytes:
    return fcntl.fcntl(fd, cmd, _FLOCK.pack(ltype, os.SEEK_SET, offset, 1, 0))


def _slot_offset(i: int) -> int:
    return HEADER_SIZE + i * SLOT_SIZE


class ReaderTable:
    """The open reader table of one database directory (one file
    description: the locks taken through it are its own)."""

    def __init__(self, dirpath: str, *, create: bool) -> None:
        self.path = os.path.join(dirpath, READERS_FILE)
        # (A read-only handle of a directory whose writer never made the
        # table makes it too: an empty table is what a writer would make.
        # OSError if it cannot: a store on a read-only file system.)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC | os.O_CREAT, 0o644)
        self._writer = create
        #: Slots this table's file description holds: slot -> (epoch, file).
        self.mine: dict[int, tuple[int, tuple[int, int]]] = {}
        #: Dead readers cleared through this table (stats()).
        self.cleared = 0
        #: The slot this description took last: a register tries it first
        #: (one 64-byte read, not the whole table's).
        self._last_slot = 0
        #: Threads of this process wait here for the table lock; ``_depth``
        #: counts how deeply the holder has taken it.
        self._lock = threading.RLock()
        self._depth = 0
        try:
            with self._table_locked():
                self._initialize()
        except BaseException:
            os.close(self._fd)
            raise

    def _initialize(self) -> None:
        size = os.fstat(self._fd).st_size
        want = HEADER_SIZE + SLOTS * SLOT_SIZE
        if size == 0:
            os.pwrite(self._fd, HEADER.pack(MAGIC, VERSION, SLOTS).ljust(HEADER_SIZE, b"\0"), 0)
            os.ftruncate(self._fd, want)
            return
        head = os.pread(self._fd, HEADER.size, 0)
        problem = None
        if len(head) != HEADER.size or size < want:
            problem = "is cut short"
        elif HEADER.unpack(head) != (MAGIC, VERSION, SLOTS):
            problem = "has a wrong header"
        if problem is None:
            return
        if not self._writer:
            raise CorruptionError(f"reader table {problem}", path=self.path, offset=0)
        # It holds no durable state, and no reader can have registered in a
        # table without a valid header: the writer makes it afresh.
        log.warning("%s: the reader table %s; making it afresh", self.path, problem)
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, HEADER.pack(MAGIC, VERSION, SLOTS).ljust(HEADER_SIZE, b"\0"), 0)
        os.ftruncate(self._fd, want)

    def close(self) -> None:
        """Clear this description's slots and close the table."""
        if self._fd < 0:
            return
        for i in list(self.mine):
            self.unregister(i)
        fd, self._fd = self._fd, -1
        os.close(fd)  # (drops every OFD lock it still held)

    # ---- locking ------------------------------------------------------------------

    class _Locked:
        """The table lock, taken once however deeply nested: a snapshot
        closed by the garbage collector while this thread holds it must
        not release it early (an OFD lock is not counted)."""

        def __init__(self, table: "ReaderTable") -> None:
            self.table = table

        def __enter__(self) -> None:
            table = self.table
            table._lock.acquire()
            if table._depth == 0:
                try:
                    _lock(table._fd, fcntl.F_OFD_SETLKW, fcntl.F_WRLCK, 0)
                except BaseException:
                    table._lock.release()
                    raise
            table._depth += 1

        def __exit__(self, *exc) -> None:
            table = self.table
            table._depth -= 1
            try:
                if table._depth == 0:
                    _lock(table._fd, fcntl.F_OFD_SETLK, fcntl.F_UNLCK, 0)
            finally:
                table._lock.release()

    def _table_locked(self) -> "ReaderTable._Locked":
        return ReaderTable._Locked(self)

    def _alive(self, i: int) -> bool:
        """Whether some file description (of a live process) locks slot ``i``."""
        if i in self.mine:
            return True
        got = _lock(self._fd, fcntl.F_OFD_GETLK, fcntl.F_WRLCK, _slot_offset(i))
        return _FLOCK.unpack(got)[0] != fcntl.F_UNLCK

    def _used_slots(self) -> list[tuple[int, tuple]]:
        """(slot, its fields) of every slot in use."""
        data = os.pread(self._fd, SLOTS * SLOT_SIZE, HEADER_SIZE)
        flags = data[::SLOT_SIZE]  # (the low byte of each slot's in-use field)
        if not flags.strip(b"\0"):
            return []
        return [(i, SLOT.unpack_from(data, i * SLOT_SIZE)) for i, used in enumerate(flags) if used]

    def _clear(self, i: int) -> None:
        os.pwrite(self._fd, bytes(SLOT_SIZE), _slot_offset(i))

    # ---- readers ------------------------------------------------------------------

    def register(self, epoch: int, file: tuple[int, int]) -> int:
        """Take a slot for a reader of checkpoint ``epoch`` of the page file
        ``file`` (device, inode); returns the slot. LsmkvError if every slot
        holds a live reader."""
        pid = os.getpid()
        with self._table_locked():
            last = self._last_slot
            if last not in self.mine and not os.pread(self._fd, 1, _slot_offset(last))[0]:
                free = [last]  # (a slot not in use: its in-use field's low byte is 0)
            else:
                used = self._used_slots()
                taken = {i for i, _ in used}
                free = [i for i in range(SLOTS) if i not in taken][:1]
            if not free:
                for i, entry in used:
                    if not self._alive(i):
                        self.cleared += 1
                        log.info("%s: cleared the slot of reader pid %d, which is gone", self.path, entry[1])
                        free = [i]
                        break
            for i in free:
                _lock(self._fd, fcntl.F_OFD_SETLK, fcntl.F_WRLCK, _slot_offset(i))
                os.pwrite(self._fd, SLOT.pack(1, pid, _own_start_time(pid), secrets.randbits(64),
                                              file[0], file[1], epoch, int(time.time() * 1000)),
                          _slot_offset(i))
                self.mine[i] = (epoch, file)
                self._last_slot = i
                return i
        raise LsmkvError(f"{self.path}: all {SLOTS} reader slots hold live readers; close some snapshots, "
                         "cursors or transactions of read-only handles of this store")

    def unregister(self, i: int) -> None:
        """Clear slot ``i`` (one :meth:`register` returned)."""
        if self.mine.pop(i, None) is None or self._fd < 0:
            return
        with self._table_locked():
            self._clear(i)
            _lock(self._fd, fcntl.F_OFD_SETLK, fcntl.F_UNLCK, _slot_offset(i))

    def readers(self, file: tuple[int, int] | None = None) -> list[Reader]:
        """The live readers (of the page file ``file``, if given); the slots
        of dead readers are cleared on the way (mdb_reader_check)."""
        found = []
        with self._table_locked():
            for i, entry in self._used_slots():
                if not self._alive(i):
                    self._clear(i)
                    self.cleared += 1
                    log.info("%s: cleared the slot of reader pid %d (epoch %d), which is gone",
                             self.path, entry[1], entry[6])
                    continue
                _, pid, start, _nonce, dev, ino, epoch, at = entry
                if file is None or (dev, ino) == file:
                    found.append(Reader(pid, start, epoch, (dev, ino), at))
        return found

    def oldest(self, file: tuple[int, int]) -> int | None:
        """The oldest epoch a live reader of the page file ``file`` reads
        (None: no reader)."""
        return min((r.epoch for r in self.readers(file)), default=None)
