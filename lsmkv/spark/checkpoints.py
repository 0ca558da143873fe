"""Read checkpoints: the consistent copies of a store that a Spark read
goes through, when one is shared, and when it is removed.

A consistent read of more than one partition plans on the driver: it
takes a checkpoint of the store (``lsmkv.checkpoint`` / ``btree.checkpoint``)
into ``<checkpoint dir>/ckpt-...`` and every partition reads that copy, so
all partitions see one version of the store even while another process
writes to it. An lsmkv checkpoint hard-links the store's tables; a btree
checkpoint copies every live byte.

**One checkpoint per store version.** Planning first fingerprints the
store's files (name, inode, size and modification time of each, read
through an open file so an NFS client revalidates them, and of the
directory). Any write another process can see changes the
fingerprint: it appends to a log or replaces a file. A checkpoint taken
while the fingerprint stays the same is named after it
(``ckpt-v<fingerprint>``) and every later read that finds the same
fingerprint reads it instead of taking another: N reads of an unchanged
store make one copy. A store written to in the last second (``SETTLED_S``:
a file's time stamp may not move for writes that close together) and a
store that changes while the checkpoint is taken get a checkpoint of their
own (``ckpt-u<id>``) that no other read uses.

**When a checkpoint is removed.** Spark gives a Python reader no
end-of-query hook, and it plans a DataFrame's read once and reuses the
plan for all of the DataFrame's actions, so a checkpoint cannot be removed
when a query's partitions are done (the DataFrame's next action reads it
again). Instead each read planned in a checkpoint directory tidies it:

* a checkpoint a partition is reading is never removed (the partition
  holds a shared ``flock`` on ``ckpt-....lock`` beside it);
* of the others, the ``maxCheckpoints`` (default 2) used most recently
  stay, unless they were last used (taken or shared by a planned read)
  more than ``checkpointRetention`` ago (default an hour); the rest are
  removed. Taking a new checkpoint first makes room for it, so a read
  leaves at most ``maxCheckpoints`` checkpoints that no partition reads.

So the space the checkpoints of one directory take is bounded by
(``maxCheckpoints`` + the reads running at that moment) x the size of the
store for btree (lsmkv's share the store's tables; they keep tables the
store has since compacted away). :func:`remove_checkpoints` removes them
on demand. A read whose checkpoint was removed before its tasks started
(pushed out by newer ones, or past the retention) fails with an error
saying so and never reads another version.

A checkpoint being taken lives in ``.taking-<id>`` with an ``owner.json``
(owners.py) until it is renamed into place; one whose planner died is
removed by the next tidy.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import time
import uuid

from lsmkv.base.dbdir import NO_DATA_FILES

from .owners import Owner, this_process
from .store import engine_module

PREFIX = "ckpt-"
TAKING = ".taking-"
LOCK = ".lock"
DEFAULT_RETENTION_S = 3600.0
DEFAULT_KEEP = 2
#: A store whose newest file changed less than this long ago (seconds) is
#: not fingerprinted: a write that close to the last may leave every file's
#: time stamp as it was.
SETTLED_S = 1.0
#: A lock file without its checkpoint is removed once this old (seconds):
#: a younger one may belong to a checkpoint being renamed into place.
ORPHAN_LOCK_S = 60.0


def default_dir(store: str) -> str:
    store = os.path.abspath(os.fsdecode(store)).rstrip(os.sep)
    parent, name = os.path.split(store)
    return os.path.join(parent, f".{name}.spark-checkpoints")


def _lock_path(checkpoint: str) -> str:
    return checkpoint.rstrip(os.sep) + LOCK


def fingerprint(store: str) -> str | None:
    """A name for the version of the store at ``store`` as its files show
    it, or None when it cannot be told (a file changed in the last
    ``SETTLED_S`` or vanished while it was listed)."""
    try:
        top = os.stat(store)
        entries = [("", top.st_ino, top.st_mtime_ns)]
        newest = top.st_mtime_ns
        for name in sorted(os.listdir(store)):
            if name in NO_DATA_FILES:
                continue  # (btree's reader table changes whenever a reader takes a snapshot)
            st = _fresh_stat(os.path.join(store, name))
            entries.append((name, st.st_ino, st.st_size, st.st_mtime_ns))
            newest = max(newest, st.st_mtime_ns)
    except FileNotFoundError:
        return None
    if time.time_ns() - newest < SETTLED_S * 1e9:
        return None
    return hashlib.sha256(repr(entries).encode()).hexdigest()[:32]


def _fresh_stat(path: str) -> os.stat_result:
    """The file's attributes as of now: read through an open file, which
    makes an NFS client revalidate what it cached (close-to-open)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        return os.lstat(path)  # a directory opened elsewhere, a socket, no permission: its cached attributes
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def take(store: str, engine: str, directory: str, retention_s: float = DEFAULT_RETENTION_S,
         keep: int = DEFAULT_KEEP) -> str:
    """The path of a checkpoint of ``store`` as it is now in ``directory``:
    the existing one of this version, else a new one (see the module
    docstring); tidies the directory either way."""
    version = fingerprint(store)
    if version is not None:
        shared = os.path.join(directory, f"{PREFIX}v{version}")
        if _reuse(shared):
            tidy(directory, retention_s, keep, planned=shared)
            return shared
    tidy(directory, retention_s, keep - 1)  # room for the new one
    os.makedirs(directory, exist_ok=True)
    taking = os.path.join(directory, f"{TAKING}{uuid.uuid4().hex[:12]}")
    os.mkdir(taking)
    try:
        this_process().write(taking)
        copy = os.path.join(taking, "checkpoint")
        engine_module(engine).checkpoint(store, copy)
        same = version is not None and fingerprint(store) == version
        final = os.path.join(directory, f"{PREFIX}v{version}" if same else f"{PREFIX}u{uuid.uuid4().hex[:16]}")
        with open(_lock_path(final), "a"):
            pass
        os.utime(_lock_path(final))
        try:
            os.rename(copy, final)
        except OSError as exc:
            # Another read of the same version renamed its copy there first: share it.
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not _reuse(final):
                raise
    finally:
        shutil.rmtree(taking, ignore_errors=True)
    return final


def _reuse(checkpoint: str) -> bool:
    """Mark ``checkpoint`` used now if it exists (under a shared lock, so a
    tidy that is removing it either finishes first or sees the new time)."""
    try:
        fd = os.open(_lock_path(checkpoint), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        if not os.path.isdir(checkpoint):
            return False
        os.utime(fd)
        return True
    finally:
        os.close(fd)


class Lease:
    """A partition's shared hold on a checkpoint while it reads it."""

    def __init__(self, checkpoint: str) -> None:
        self._fd = None
        try:
            self._fd = os.open(_lock_path(checkpoint), os.O_RDWR)
        except FileNotFoundError:
            pass
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_SH)
        if self._fd is None or not os.path.isdir(checkpoint):
            self.release()
            raise FileNotFoundError(
                f"the read checkpoint {checkpoint} is gone: its query started reading after it was removed "
                f"(more than checkpointRetention after it was planned, or pushed out by newer checkpoints: "
                f"option maxCheckpoints) or by hand; load the DataFrame again and run the query again")

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the lock
            self._fd = None

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def checkpoints(directory: str) -> list[tuple[float, str]]:
    """The checkpoints in ``directory`` with the time each was last used
    (taken, or shared by a planned read), most recently used first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    paths = [os.path.join(directory, n) for n in names if n.startswith(PREFIX) and not n.endswith(LOCK)]
    return sorted(((_last_used(p), p) for p in paths if os.path.isdir(p)), reverse=True)


def tidy(directory: str, retention_s: float, keep: int, planned: str | None = None) -> list[str]:
    """Remove what no read needs from ``directory``: checkpoints no
    partition is reading beyond the ``keep`` used most recently within
    ``retention_s`` (``planned``, the one a read is being planned on, is
    always kept and counts among them), checkpoints being taken by a
    planner that died, lock files without a checkpoint. The checkpoints
    removed."""
    now = time.time()
    _remove_debris(directory, now)
    removed = []
    kept = 0
    for used, path in checkpoints(directory):
        if path == planned or (kept < keep and now - used < retention_s):
            kept += 1
            continue
        if _remove_unread(path, used):
            removed.append(path)
    _remove_if_empty(directory)
    return removed


def remove_checkpoints(directory: str, older_than: float = 0.0) -> list[str]:
    """Remove the checkpoints in ``directory`` last used more than
    ``older_than`` seconds ago that no partition is reading; the paths
    removed. A missing directory has none."""
    now = time.time()
    _remove_debris(directory, now)
    removed = [p for used, p in checkpoints(directory) if now - used >= older_than and _remove_unread(p, used)]
    _remove_if_empty(directory)
    return removed


def _last_used(checkpoint: str) -> float:
    for path in (_lock_path(checkpoint), checkpoint):
        try:
            return os.stat(path).st_mtime
        except FileNotFoundError:
            continue
    return 0.0


def _remove_unread(checkpoint: str, seen: float) -> bool:
    """Remove ``checkpoint`` unless a partition is reading it or a read
    shared it since it was last used at ``seen``."""
    lock = _lock_path(checkpoint)
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        fd = None
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # a partition is reading it
            if _last_used(checkpoint) != seen:
                return False  # a read just planned to use it
        shutil.rmtree(checkpoint, ignore_errors=True)
        if fd is not None:
            os.remove(lock)
        return True
    finally:
        if fd is not None:
            os.close(fd)


def _remove_debris(directory: str, now: float) -> None:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        path = os.path.join(directory, name)
        if name.startswith(TAKING):
            owner = Owner.read(path)
            if (owner.alive() is False) if owner is not None else _age(path, now) > ORPHAN_LOCK_S:
                shutil.rmtree(path, ignore_errors=True)
        elif name.startswith(PREFIX) and name.endswith(LOCK):
            if not os.path.exists(path[:-len(LOCK)]) and _age(path, now) > ORPHAN_LOCK_S:
                try:
                    os.remove(path)
                except OSError:
                    pass


def _age(path: str, now: float) -> float:
    try:
        return now - os.stat(path).st_mtime
    except OSError:
        return 0.0


def _remove_if_empty(directory: str) -> None:
    try:
        os.rmdir(directory)
    except OSError:
        pass
